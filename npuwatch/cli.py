"""Provides main(): the ``npuwatch`` command line; each sub-command imports what it needs lazily."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import sys
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from npuwatch import __version__
from npuwatch.errors import UsageError
from npuwatch.feeds import FeedOptions, one_shot_deadline, scenario_listing, shared_options
from npuwatch.probes.simulator import DEFAULT_SCENARIO
from npuwatch.termination import raise_on_termination
from npuwatch.text_safety import can_encode, guard_streams, inert

EXIT_USAGE = 64  # BSD sysexits EX_USAGE (docs/design.md §2.1)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        raise UsageError(message)


#: Sub-commands whose options live beside their code: (module, help, description).  Only the
#: chosen command's module is imported, so `npuwatch check` does not load the doctor.
_LAZY_COMMANDS: Dict[str, Tuple[str, str, str]] = {
    "doctor": (
        "npuwatch.doctor.command",
        "find what is wrong with the Ascend environment and say how to fix it",
        "Diagnose the machine from the PCI bus up: driver, device nodes, npu-smi, chip health, "
        "CANN, libraries, versions, frameworks and container mounts. "
        "Exit 0 all pass, 1 warnings, 2 failures.",
    ),
    "selftest": (
        "npuwatch.selftest.command",
        "prove the runtime works: init, memory, copies, a real kernel, events",
        "Run the Ascend runtime on each chip in a child process with a hard timeout. "
        "Exit 0 pass, 1 skipped or warnings, 2 fail.",
    ),
    "check": (
        "npuwatch.check_command",
        "a fast one-line health verdict for container HEALTHCHECKs and Kubernetes probes",
        "Device nodes present, npu-smi answers, every chip OK, temperatures under the limit. "
        "Exit 0 healthy, 1 unhealthy (never 2: Docker reserves it).",
    ),
    "serve": (
        "npuwatch.exporter.command",
        "serve Prometheus /metrics, /healthz and /snapshot (npu-exporter metric names)",
        "Sample in the background and answer scrapes from the latest snapshot: a scrape never "
        "runs npu-smi. Listens on 127.0.0.1:9492 unless --listen says otherwise. Read-only.",
    ),
    "fleet": (
        "npuwatch.fleet.command",
        "many nodes' NPUs at once: through Prometheus, each node's npuwatch serve, or a recording",
        "One row per node (worst first): chips OK, level and reason, AI Core, HBM, power, the hottest "
        "chip, workload classes, data age; nodes that stopped reporting are shown stale. --json prints "
        "one npuwatch/fleet/v1 snapshot (exit 1 when a node is stale or the source fails). Read-only.",
    ),
    "record": (
        "npuwatch.record_command",
        "record snapshots to an NDJSON file (gzip when it ends in .gz) for --replay",
        "Write one npuwatch/snapshot/v1 JSON object per line, flushed line by line, so a "
        "recorder killed at any moment leaves a file whose complete lines all replay. Exit 0.",
    ),
}


def build_parser(words: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The full command-line parser; ``words`` (argv) says which lazy command needs its options."""
    shared = _Parser(add_help=False, parents=[shared_options()])  # a _Parser, as sub-commands want
    # selftest's own --backend (acl|torch) names the runtime: its shared options leave the chip one out.
    runtime_shared = _Parser(add_help=False, parents=[shared_options(chip_backend=False)])
    parser = _Parser(
        prog="npuwatch",
        description="Watch, diagnose and health-check Huawei Ascend NPUs. "
        "Without a sub-command: the live view.",
        parents=[shared],
    )
    parser.add_argument("--version", action="version", version=f"npuwatch {__version__}")
    parser.add_argument(
        "--plain", action="store_true", help="a plain refreshing text view instead of the dashboard"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    snap = commands.add_parser(
        "snapshot",
        parents=[shared],
        help="print one sample as a table or JSON",
        description="Print one sample of every chip, process and the host. "
        "Exit 0, or 1 when no NPU could be read.",
    )
    snap.add_argument("--json", action="store_true", help="print npuwatch/snapshot/v1 JSON")
    snap.add_argument(
        "--all",
        action="store_true",
        help="with --replay of a recording: every recorded sample in order, each judged as the live "
        "view judged it, with the alerts shown at it (NDJSON with --json)",
    )
    chosen = next((word for word in words if word in _LAZY_COMMANDS), None)
    for name, (module, help_text, description) in _LAZY_COMMANDS.items():
        # fleet reads other machines: none of the local machine's options apply to it.
        parents = [] if name == "fleet" else [runtime_shared if name == "selftest" else shared]
        sub = commands.add_parser(name, parents=parents, help=help_text, description=description)
        if name == chosen:
            importlib.import_module(module).add_arguments(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit code."""
    words = _demo_before_subcommand(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser(words)
    verbose = "--verbose" in words
    raise_on_termination()  # SIGTERM/SIGHUP unwind like Ctrl-C: the demo's tree is removed
    guard_streams()  # an ASCII stdout (C locale) prints stand-ins for ✔ ° ·, never UnicodeEncodeError
    try:
        args = parser.parse_args(words)
        if getattr(args, "demo", None) in ("list", "help"):
            sys.stdout.write(scenario_listing())
            return 0
        if args.command in _LAZY_COMMANDS:
            return int(importlib.import_module(_LAZY_COMMANDS[args.command][0]).run(args))
        handler = _COMMANDS.get(args.command or "", _cmd_live)
        return handler(args)
    except UsageError as exc:  # every command's, the options' and the feed's (npuwatch.errors)
        print(f"npuwatch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`npuwatch | head`): stop quietly, and keep Python's own
        # flush at exit from raising the same error again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if verbose:
            raise
        return _internal_error(exc, words)


def _internal_error(exc: Exception, words: Sequence[str]) -> int:
    """A bug, never a success: one line naming the traceback file, exit 70 (EX_SOFTWARE)."""
    from npuwatch.crash import EXIT_INTERNAL, crash_line

    command = next((w for w in words if w in _COMMANDS or w in _LAZY_COMMANDS), None)
    where = f"`npuwatch {command}`" if command else "`npuwatch`"
    print(crash_line(exc, where), file=sys.stderr)
    return EXIT_INTERNAL


def _demo_before_subcommand(words: List[str]) -> List[str]:
    """``npuwatch --demo snapshot``: a bare ``--demo`` must not swallow the sub-command as its scenario."""
    for i, word in enumerate(words[:-1]):
        if word == "--demo" and (words[i + 1] in _COMMANDS or words[i + 1] in _LAZY_COMMANDS):
            return [*words[: i + 1], DEFAULT_SCENARIO, *words[i + 1 :]]
    return words


def _cmd_snapshot(args: argparse.Namespace) -> int:
    from npuwatch import snapshot_json
    from npuwatch.availability import no_data_reason
    from npuwatch.feeds import open_feed
    from npuwatch.widgets.text import render_snapshot

    options = FeedOptions.from_args(args)
    if getattr(args, "all", False):
        return _snapshot_every_sample(options, as_json=getattr(args, "json", False))
    # One budget for the command (README ``--timeout``): no npu-smi call runs past it.
    with open_feed(options, deadline=one_shot_deadline(options.timeout())) as sampler:
        snapshot = sampler.sample()
    if getattr(args, "json", False):
        print(snapshot_json.dumps(snapshot, ensure_ascii=not can_encode(sys.stdout)))
    else:
        sys.stdout.write(render_snapshot(snapshot))
    reason = no_data_reason(snapshot)
    if reason is None:
        return 0
    print(f"npuwatch: {inert(reason)}", file=sys.stderr)  # quotes npu-smi's words
    return 1


def _snapshot_every_sample(options: FeedOptions, as_json: bool) -> int:
    """``snapshot --replay FILE --all``: a post-mortem of a recording, one sample at a time."""
    from npuwatch import snapshot_json
    from npuwatch.availability import no_data_reason
    from npuwatch.postmortem import judged_samples, open_recording, sample_dict
    from npuwatch.widgets.postmortem_text import render_judged_sample

    ascii_only = not can_encode(sys.stdout)
    read_any, reason = False, None
    with open_recording(options) as replay:
        for sample in judged_samples(replay):
            if as_json:
                print(snapshot_json.strict_dumps(sample_dict(sample), indent=None, ensure_ascii=ascii_only))
            else:
                sys.stdout.write(render_judged_sample(sample.snapshot, sample.alerts))
            reason = no_data_reason(sample.snapshot)
            read_any = read_any or reason is None
        warnings = replay.warnings()
    sys.stdout.flush()
    for warning in warnings:  # lines skipped, time going back: stdout stays one object a line
        print(f"npuwatch: {inert(warning)}", file=sys.stderr)
    if read_any:
        return 0
    print(f"npuwatch: {inert(reason or 'the recording holds no sample')}", file=sys.stderr)
    return 1


def _cmd_live(args: argparse.Namespace) -> int:
    """The dashboard in a terminal; a plain refreshing text view when stdout is not one."""
    options = FeedOptions.from_args(args)
    if getattr(args, "plain", False) or not sys.stdout.isatty():
        from npuwatch.live_text import run_live

        return run_live(options)
    from npuwatch.feeds import OpeningFeed

    opening: Optional[OpeningFeed] = None
    try:
        with _collector_off():
            opening = OpeningFeed(options)  # the demo's tree and DCMI's worker start while textual imports
            from npuwatch.widgets.tui.app import run_dashboard
        return run_dashboard(options, opening)
    finally:
        if opening is not None:
            opening.close()


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    """Python's cycle collector paused for the block: the dashboard's imports and its feed's
    opening create some 70,000 tracked objects and free almost none, and collecting as they grew
    (about a hundred times) cost 10–17 ms of the first screen."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_COMMANDS: Dict[str, Callable[[argparse.Namespace], int]] = {
    "snapshot": _cmd_snapshot,
}
