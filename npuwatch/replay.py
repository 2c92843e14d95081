"""Provides ReplaySampler: a recording played back with its original timing, a speed, pause and seek."""

from __future__ import annotations

import bisect
import math
import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, FrozenSet, List, Optional, Union

from npuwatch.chip_details import ChipDetails
from npuwatch.history import History
from npuwatch.judge.workload import WorkloadJudge
from npuwatch.model import Snapshot
from npuwatch.recording import Recording, read_recording

#: Speeds ``faster()``/``slower()`` step through.
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: The views refresh at least this often during a replay, however sparse the recording.
MAX_REFRESH_S = 1.0
MIN_REFRESH_S = 0.05


class ReplaySampler:
    """Plays a Recording as a SnapshotFeed: ``sample()`` returns the snapshot recorded at the
    replay's current position, and the History holds what was recorded up to it.

    Time runs at ``speed`` × the original pace from the first snapshot; ``pause()``,
    ``seek()`` and ``set_speed()`` move it.  At the end the last snapshot stays, marked.
    Nothing of the machine npuwatch runs on is read.
    """

    def __init__(
        self,
        recording: Recording,
        *,
        speed: float = 1.0,
        devices: Optional[FrozenSet[int]] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not math.isfinite(speed) or speed <= 0:
            raise ValueError(f"--speed must be a positive number, got {speed:g}")
        self.recording = recording
        self.devices = devices
        self._clock = clock
        first = recording.snapshots[0].taken_at
        self._offsets_s: List[float] = [(s.taken_at - first).total_seconds() for s in recording.snapshots]
        gaps = [b - a for a, b in zip(self._offsets_s, self._offsets_s[1:]) if b > a]
        self.recorded_interval_s = statistics.median(gaps) if gaps else 1.0
        self.history = History.for_span(self.recorded_interval_s)
        self._lock = threading.Lock()
        self._speed = speed
        self._origin = clock()  # the clock reading at which position 0 plays
        self._paused_at: Optional[float] = None
        self._shown = -1  # index of the newest snapshot added to the History
        # The recording judged in order by the judge a live feed runs, as far as it has played.
        self._workloads = WorkloadJudge()
        self._judged: List[Snapshot] = []
        self.interval_s = self._refresh_s()

    @classmethod
    def open(
        cls, path: Union[str, Path], *, speed: float = 1.0, devices: Optional[FrozenSet[int]] = None
    ) -> ReplaySampler:
        """Read a recording file (NDJSON, optionally gzip) and replay it."""
        return cls(read_recording(path), speed=speed, devices=devices)

    # --- SnapshotFeed ----------------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"replay:{self.recording.path.name}"

    def sample(self) -> Snapshot:
        """The snapshot at the current position (the History catches up to it)."""
        with self._lock:
            index = self._index_at(self._position_locked())
            self._catch_up(index)
            return self._shown_snapshot(index)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        return None  # a recording holds only the snapshots, not npu-smi's per-chip reports

    def close(self) -> None:
        """Nothing to release: the file was read whole."""

    def __enter__(self) -> ReplaySampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- controls --------------------------------------------------------------------------

    @property
    def duration_s(self) -> float:
        return self._offsets_s[-1]

    @property
    def speed(self) -> float:
        return self._speed

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    @property
    def position_s(self) -> float:
        """Seconds into the recording that play now."""
        with self._lock:
            return self._position_locked()

    @property
    def finished(self) -> bool:
        return self.position_s >= self.duration_s

    def pause(self) -> None:
        with self._lock:
            if self._paused_at is None:
                self._paused_at = self._position_locked()

    def resume(self) -> None:
        with self._lock:
            if self._paused_at is not None:
                self._move_to(self._paused_at)
                self._paused_at = None

    def toggle_pause(self) -> None:
        if self.paused:
            self.resume()
        else:
            self.pause()

    def seek(self, delta_s: float) -> None:
        """Move the position by ``delta_s`` recorded seconds (negative goes back), within bounds."""
        with self._lock:
            self._move_to(self._position_locked() + delta_s)

    def seek_to(self, position_s: float) -> None:
        with self._lock:
            self._move_to(position_s)

    def set_speed(self, speed: float) -> None:
        if not math.isfinite(speed) or speed <= 0:
            raise ValueError(f"speed must be a positive number, got {speed:g}")
        with self._lock:
            position = self._position_locked()
            self._speed = speed
            self._move_to(position)
            self.interval_s = self._refresh_s()

    def faster(self) -> None:
        self.set_speed(next((s for s in SPEEDS if s > self._speed), SPEEDS[-1]))

    def slower(self) -> None:
        self.set_speed(next((s for s in reversed(SPEEDS) if s < self._speed), SPEEDS[0]))

    # --- internals (hold the lock) ---------------------------------------------------------

    def _position_locked(self) -> float:
        if self._paused_at is not None:
            return self._paused_at
        elapsed = (self._clock() - self._origin) * self._speed
        return min(max(elapsed, 0.0), self.duration_s)

    def _move_to(self, position_s: float) -> None:
        position = min(max(position_s, 0.0), self.duration_s)
        if self._paused_at is not None:
            self._paused_at = position
        self._origin = self._clock() - position / self._speed

    def _index_at(self, position_s: float) -> int:
        return max(0, bisect.bisect_right(self._offsets_s, position_s + 1e-9) - 1)

    def _catch_up(self, index: int) -> None:
        """Add the snapshots up to ``index`` to the History; after a seek back, rebuild it."""
        if index == self._shown:
            return
        start = self._shown + 1
        if index < self._shown or index - start >= self.history.capacity:
            self.history.clear()  # in place: views hold this History
            start = max(0, index - self.history.capacity + 1)
        for i in range(start, index + 1):
            self.history.add(self._filtered(self._judged_at(i)))
        self._shown = index

    def _shown_snapshot(self, index: int) -> Snapshot:
        snapshot = self._filtered(self._judged_at(index))
        notes = list(self.recording.warnings)
        if index == len(self._offsets_s) - 1 and len(self._offsets_s) > 1:
            taken = f"{snapshot.taken_at:%Y-%m-%d %H:%M:%S %Z}"
            notes.append(f"end of recording: its last sample was taken at {taken}")
        return replace(snapshot, source=self.label, warnings=(*snapshot.warnings, *notes))

    def _judged_at(self, index: int) -> Snapshot:
        """The recorded snapshot ``index`` with its chips' workloads judged as a live feed would
        have (every snapshot before it judged first, once)."""
        snapshots = self.recording.snapshots
        while len(self._judged) <= index:
            self._judged.append(self._workloads.judge(snapshots[len(self._judged)]))
        return self._judged[index]

    def _filtered(self, snapshot: Snapshot) -> Snapshot:
        if self.devices is None:
            return snapshot
        wanted = self.devices
        return replace(
            snapshot,
            chips=tuple(c for c in snapshot.chips if c.identity.npu_id in wanted),
            processes=tuple(p for p in snapshot.processes if p.npu_id in wanted),
        )

    def _refresh_s(self) -> float:
        return min(MAX_REFRESH_S, max(MIN_REFRESH_S, self.recorded_interval_s / self._speed))
