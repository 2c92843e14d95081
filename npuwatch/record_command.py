"""Provides ``npuwatch record FILE``: sample on an interval and append each Snapshot to an NDJSON file."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, List, Optional

from npuwatch.errors import UsageError
from npuwatch.feed import ReplayControls
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.option_values import duration, megabytes
from npuwatch.poller import ENDED, Poller
from npuwatch.recording import RecordingError, RecordingExistsError, RecordingWriter
from npuwatch.recording_file import check_output
from npuwatch.termination import Termination, stop_on_termination

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed

MIB = 1024 * 1024


class RecordUsageError(UsageError):
    """A bad ``record`` option: the CLI's exit 64."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="where to write (gzip-compressed when it ends in .gz)")
    parser.add_argument(
        "--duration",
        type=duration,
        metavar="S",
        help="stop after S seconds (default: at Ctrl-C or SIGTERM)",
    )
    parser.add_argument(
        "--max-size",
        dest="max_size_mb",
        type=megabytes,
        metavar="MB",
        help="stop before the file grows past MB megabytes (MiB)",
    )
    parser.add_argument("--gzip", action="store_true", help="compress even when FILE does not end in .gz")
    parser.add_argument("--force", action="store_true", help="replace FILE when it already exists")
    parser.add_argument("--quiet", action="store_true", help="print nothing when done")


def run(args: argparse.Namespace) -> int:
    """Record until the duration, the size limit or a signal; exit 0 (1 when nothing could be written)."""
    replay = getattr(args, "replay", None)
    if replay is not None and _same_file(str(replay), args.file):
        raise RecordUsageError(f"record {args.file}: that is the file given to --replay {replay}")
    force = bool(getattr(args, "force", False))
    try:
        check_output(args.file, overwrite=force)  # a link, or a file without --force: before any start
    except RecordingExistsError as exc:
        raise RecordUsageError(f"record: {exc}") from None
    limit_bytes = None if args.max_size_mb is None else round(args.max_size_mb * MIB)
    # The source first: a bad --replay or --demo is a usage error before any file is made.
    with open_feed(FeedOptions.from_args(args)) as feed:
        try:
            writer = RecordingWriter(args.file, compress=True if args.gzip else None, overwrite=force)
        except RecordingExistsError as exc:  # made since the check above
            raise RecordUsageError(f"record: {exc}") from None
        except RecordingError as exc:
            print(f"npuwatch record: {exc}", file=sys.stderr)
            return 1
        stopped_by = "stopped"
        try:
            with stop_on_termination() as stop:
                stopped_by = _record(feed, writer, getattr(args, "duration", None), limit_bytes, stop)
        except RecordingError as exc:
            stopped_by = str(exc)
            return 1
        except KeyboardInterrupt:
            stopped_by = "interrupted"
        finally:
            writer.close()
            if not args.quiet:
                size_kib = writer.bytes_written / 1024
                kept = "; the file there was left as it was" if writer.kept_old_file else ""
                print(
                    f"npuwatch record: {writer.lines} snapshots, {size_kib:.1f} KiB in {writer.path} "
                    f"({stopped_by}{kept}). Replay: npuwatch --replay {writer.path}",
                    file=sys.stderr,
                )
    return 0


def _same_file(first: str, second: str) -> bool:
    """Whether two paths name one file (symlinks, hard links, ``./x`` and ``x`` alike)."""
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False  # one of them does not exist: they cannot be the same file


def _record(
    source: SnapshotFeed,
    writer: RecordingWriter,
    duration_s: Optional[float],
    limit_bytes: Optional[int],
    stop: Termination,
) -> str:
    """Sample and write until a limit, the end of a replayed recording or a stop signal; returns
    what stopped it."""
    ended_by: List[str] = []  # why the size limit or the replay's end stopped it, once one has
    replay = source if isinstance(source, ReplayControls) else None

    def tick() -> None:
        snapshot = source.sample()
        if stop.event.is_set():  # what a signal's kill cut short is no sample of the machine
            return
        data = writer.encode(snapshot)
        if limit_bytes is not None and writer.bytes_written + len(data) > limit_bytes:
            ended_by.append(f"--max-size {limit_bytes / MIB:.4g} MB reached")
            poller.stop()
            return
        writer.write_encoded(data)
        if replay is not None and replay.finished:  # its last sample is written: nothing more comes
            ended_by.append("end of the replayed recording")
            poller.stop()

    ends_at = None if duration_s is None else time.monotonic() + duration_s
    poller = Poller(tick, lambda: source.interval_s, ends_at=ends_at, stop_event=stop.event)
    ended = poller.run()
    if ended_by:
        return ended_by[0]
    if ended == ENDED:
        return f"duration {duration_s:g} s reached"
    return f"stopped by {stop.signal_name}"
