"""Provides the post-mortem of a recording (``npuwatch snapshot --replay FILE --all``): every
recorded sample in order, judged as the live view judged it, with the alerts its alert line showed.

The samples come from ``ReplaySampler.every_sample`` (the workload judge a replay runs, over the
recording up to each sample) and the alerts from one ``AlertTracker`` fed every sample, as the
dashboard's is: one judge, whether a user watches the replay or reads its post-mortem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, Tuple

from npuwatch import snapshot_json
from npuwatch.alerts import Alert, AlertTracker
from npuwatch.errors import UsageError
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.model import Snapshot
from npuwatch.replay import ReplaySampler


@dataclass(frozen=True)
class JudgedSample:
    """One recorded sample as judged live, and the alerts shown at it (most severe first)."""

    snapshot: Snapshot
    alerts: Tuple[Alert, ...]


def open_recording(options: FeedOptions) -> ReplaySampler:
    """The replay ``options.replay`` names; ``UsageError`` when there is none or it is not a
    recording (a captured ``npu-smi info`` text is one sample: ``snapshot --replay`` shows it)."""
    if options.replay is None:
        raise UsageError("--all reviews a recording: give it with --replay FILE (made by `npuwatch record`)")
    options.validate()  # a missing file or a directory says so first
    if not options.replays_recording:
        raise UsageError(
            f"--all needs a recording made by `npuwatch record` (NDJSON, or gzip): {options.replay} "
            "is not one (a saved `npu-smi info` output is one sample: drop --all)"
        )
    feed = open_feed(options)
    if not isinstance(feed, ReplaySampler):  # open_feed replays a recording with a ReplaySampler
        feed.close()
        raise UsageError(f"--all could not open {options.replay} as a recording")
    return feed


def judged_samples(replay: ReplaySampler) -> Iterator[JudgedSample]:
    """Every sample of ``replay`` in order with the alerts the alert line showed at it."""
    tracker = AlertTracker()
    for snapshot in replay.every_sample():
        yield JudgedSample(snapshot, tracker.update(snapshot))


def sample_dict(sample: JudgedSample) -> Dict[str, Any]:
    """One NDJSON object of ``--all --json``: the ``npuwatch/snapshot/v1`` document of the sample
    (with its judgement) plus ``alerts``, what the alert line showed (``snapshot-v1.schema.json``)."""
    document = snapshot_json.to_dict(sample.snapshot)
    document["alerts"] = [alert_dict(alert) for alert in sample.alerts]
    return document


def alert_dict(alert: Alert) -> Dict[str, Any]:
    """An alert as JSON: ``npu_id``/``chip_id`` are null for a machine-wide one (the chip source)."""
    chip = alert.chip
    return {
        "kind": alert.kind.value,
        "severity": alert.severity.value,
        "npu_id": None if chip is None else chip[0],
        "chip_id": None if chip is None else chip[1],
        "message": alert.message,
        "detail": alert.detail,
    }
