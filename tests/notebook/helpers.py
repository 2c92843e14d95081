"""Helpers for the notebook tests: a fake feed (fixed snapshots, no npu-smi) and polling."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import timedelta
from typing import Callable, List, Optional, Sequence

import pytest

from npuwatch.history import History
from npuwatch.model import Snapshot

#: Generous: a loaded CI machine may take long to schedule a thread; no test asserts a duration.
DEADLINE_S = 30.0


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after a generous deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


class FakeFeed:
    """A SnapshotFeed over fixed snapshots: the n-th sample is taken n seconds after the first.

    ``gate`` (an Event) blocks every sample until set, as a hung npu-smi would.
    """

    def __init__(
        self,
        snapshots: Sequence[Snapshot],
        *,
        interval_s: float = 0.02,
        gate: Optional[threading.Event] = None,
    ) -> None:
        self.snapshots = list(snapshots)
        self.interval_s = interval_s
        self.history = History()
        self.gate = gate
        self.calls = 0
        self.closed = threading.Event()

    @property
    def label(self) -> str:
        return "fake"

    def sample(self) -> Snapshot:
        if self.gate is not None:
            self.gate.wait()
        self.calls += 1
        base = self.snapshots[min(self.calls, len(self.snapshots)) - 1]
        return replace(base, taken_at=base.taken_at + timedelta(seconds=self.calls - 1))

    def chip_details(self, npu_id: int, chip_id: int) -> None:
        return None

    def close(self) -> None:
        self.closed.set()

    def __enter__(self) -> FakeFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FeedMaker:
    """The hub's factory: records the options of every feed it builds."""

    def __init__(self, snapshots: Sequence[Snapshot], gate: Optional[threading.Event] = None) -> None:
        self.snapshots = snapshots
        self.gate = gate
        self.built: List[FakeFeed] = []
        self.options: List[dict] = []

    def __call__(self, **options: object) -> FakeFeed:
        self.options.append(options)
        interval = options.get("interval_s") or 0.02
        feed = FakeFeed(self.snapshots, interval_s=float(interval), gate=self.gate)  # type: ignore[arg-type]
        self.built.append(feed)
        return feed
