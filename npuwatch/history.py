"""Provides History: per-chip ring buffers of the metrics the views graph."""

from __future__ import annotations

import math
import threading
from collections import deque
from typing import Deque, Dict, List, Optional, Tuple

from npuwatch.metrics_table import METRICS
from npuwatch.model import MetricStatus, Snapshot

#: The metrics kept per chip: what the dashboard and notebook draw as graphs (``graphed`` rows of
#: the metric table).
HISTORY_METRICS: Tuple[str, ...] = tuple(row.name for row in METRICS if row.graphed)
#: Of those, the ones a chip may never report (shown only when reported: the driver-only metrics,
#: ``extra`` rows): their series start at the chip's first value, so a chip read through npu-smi
#: keeps no column of gaps for them.
_FROM_FIRST_VALUE = frozenset(row.name for row in METRICS if row.graphed and row.extra is not None)

#: A feed's History keeps at least this much (the issue asks for ≥ 10 minutes at 1 s) …
HISTORY_S = 900.0
#: … and never fewer points than this, however slow the interval.
MIN_POINTS = 900

ChipKey = Tuple[int, int]
Point = Tuple[float, Optional[float]]  # (seconds since the epoch, value or None when absent)


class History:
    """The last ``capacity`` samples of every chip's graphed metrics (thread-safe).

    At the default 1 s interval, 900 points keep the last 15 minutes; a gap (a failed
    sample) is stored as ``None`` so graphs show it instead of joining across it.
    """

    def __init__(self, capacity: int = 900) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._series: Dict[Tuple[ChipKey, str], Deque[Point]] = {}
        # Per chip, its series in HISTORY_METRICS order (what ``add`` appends to every tick), each
        # with whether it starts at the chip's first value.
        self._rows: Dict[ChipKey, List[Tuple[str, Deque[Point], bool]]] = {}

    @classmethod
    def for_span(cls, interval_s: float, span_s: float = HISTORY_S) -> History:
        """A History that holds ``span_s`` seconds of samples ``interval_s`` apart (at least 900 points)."""
        return cls(max(MIN_POINTS, math.ceil(span_s / max(interval_s, 0.001))))

    def add(self, snapshot: Snapshot) -> None:
        """Append one point per chip and metric from ``snapshot``."""
        t = snapshot.taken_at.timestamp()
        with self._lock:
            for chip in snapshot.chips:
                notes = chip.notes
                for metric, series, from_first in self._row(chip.identity.key):
                    # A stale value is a repeat, not a measurement: graph it as a gap.
                    note = notes.get(metric) if notes else None
                    if note is not None and note.status is MetricStatus.STALE:
                        value = None
                    else:
                        value = getattr(chip, metric)
                    if value is not None:
                        series.append((t, float(value)))
                    elif series or not from_first:
                        series.append((t, None))

    def _row(self, chip: ChipKey) -> List[Tuple[str, Deque[Point], bool]]:
        """The chip's series, created when it first appears (call with the lock held)."""
        row = self._rows.get(chip)
        if row is None:
            row = []
            for metric in HISTORY_METRICS:
                series = self._series.get((chip, metric))
                if series is None:
                    series = self._series[(chip, metric)] = deque(maxlen=self.capacity)
                row.append((metric, series, metric in _FROM_FIRST_VALUE))
            self._rows[chip] = row
        return row

    def clear(self) -> None:
        """Forget every point (a replay that seeks back rebuilds its history)."""
        with self._lock:
            self._series.clear()
            self._rows.clear()

    def series(self, chip: ChipKey, metric: str) -> List[Point]:
        """The stored points of one chip's metric, oldest first (empty when unknown)."""
        with self._lock:
            return list(self._series.get((chip, metric), ()))

    def values(self, chip: ChipKey, metric: str, last: Optional[int] = None) -> List[Optional[float]]:
        """Only the values of ``series``, the newest ``last`` of them when given.

        With ``last``, only those points are copied: views ask for a sparkline's worth every
        tick, and copying 15 minutes of points for 16 chips each second is not free.
        """
        with self._lock:
            series = self._series.get((chip, metric))
            if series is None:
                return []
            count = len(series) if last is None else min(last, len(series))
            start = len(series) - count
            return [series[i][1] for i in range(start, len(series))]

    def chips(self) -> List[ChipKey]:
        """Every chip that has history, in (npu_id, chip_id) order."""
        with self._lock:
            return sorted({key for key, _ in self._series})
