"""Provides ReplaySampler: a recording played back with its original timing, a speed, pause and seek.

A recording file is not held: ``ReplaySampler.open`` indexes its first lines (``RecordingIndex``),
the rest on a thread of its own, and each snapshot is read from the file when it is shown — a
few recent ones are kept, up to ``CACHE_BYTES`` of their text — so memory stays bounded whatever
the file's size, and opening a huge file costs no more than a small one.  What the views call
from their UI thread (position, seek, pause, speed) only takes a short lock, never the file.
"""

from __future__ import annotations

import json
import math
import statistics
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Callable, FrozenSet, Iterator, Optional, Protocol, Set, Tuple, Union

from npuwatch.chip_details import ChipDetails
from npuwatch.history import History
from npuwatch.judge.workload import WorkloadJudge
from npuwatch.model import Snapshot
from npuwatch.recording import Recording, RecordingError
from npuwatch.recording_index import RecordingIndex

#: Speeds ``faster()``/``slower()`` step through.
SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
#: The views refresh at least this often during a replay, however sparse the recording.
MAX_REFRESH_S = 1.0
MIN_REFRESH_S = 0.05
#: Lines indexed before a recording file opens (the rest is indexed on a thread).
OPENING_LINES = 64
#: The recorded interval is the median gap between the first this many lines.
INTERVAL_LINES = 200
#: Decoded snapshots kept for seeking back, up to this much of their text (~1.2× in memory).
CACHE_BYTES = 32 << 20
#: After a seek, the history graphs are refilled from at most this many lines before it.
REBUILD_LINES = 1800
#: A line that is not a snapshot is remembered (not read again) up to this many.
MAX_BAD_LINES = 4096


class _Store(Protocol):
    """What a replay reads: recorded snapshots by index, in play order, with their times."""

    path: Path

    @property
    def complete(self) -> bool: ...

    def count(self) -> int: ...

    def time_s(self, index: int) -> float: ...

    def index_at(self, time_s: float) -> int: ...

    def snapshot(self, index: int) -> Optional[Snapshot]: ...

    def line_bytes(self, index: int) -> int: ...

    def warnings(self) -> Tuple[str, ...]: ...

    def close(self) -> None: ...


class _MemoryStore:
    """A ``Recording`` already read (tests, small files)."""

    complete = True

    def __init__(self, recording: Recording) -> None:
        self.path = recording.path
        self._snapshots = recording.snapshots
        self._times = [s.taken_at.timestamp() for s in recording.snapshots]
        self._warnings = recording.warnings

    def count(self) -> int:
        return len(self._snapshots)

    def time_s(self, index: int) -> float:
        return self._times[index]

    def index_at(self, time_s: float) -> int:
        import bisect

        return max(0, bisect.bisect_right(self._times, time_s) - 1)

    def snapshot(self, index: int) -> Optional[Snapshot]:
        return self._snapshots[index]

    def line_bytes(self, index: int) -> int:
        return 0  # held already: nothing to cache

    def warnings(self) -> Tuple[str, ...]:
        return self._warnings

    def close(self) -> None:
        """Nothing to release."""


class _FileStore:
    """A recording file read through its index: a line is parsed when asked for."""

    def __init__(self, index: RecordingIndex) -> None:
        self.index = index
        self.path = index.path

    @property
    def complete(self) -> bool:
        return self.index.complete

    def count(self) -> int:
        return self.index.count()

    def time_s(self, index: int) -> float:
        return self.index.time_s(index)

    def index_at(self, time_s: float) -> int:
        return self.index.index_at(time_s)

    def snapshot(self, index: int) -> Optional[Snapshot]:
        from npuwatch import snapshot_json

        line = self.index.line(index)
        try:
            return snapshot_json.from_dict(json.loads(line.decode("utf-8", errors="replace")))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
            text = f"{type(exc).__name__}: {exc}"
            short = text if len(text) <= 80 else text[:77] + "..."
            self.index.warn(
                f"{self.path.name}: line {self.index.number(index)} is not a snapshot ({short}); skipped"
            )
            return None

    def line_bytes(self, index: int) -> int:
        return self.index.length(index)

    def warnings(self) -> Tuple[str, ...]:
        return self.index.warnings()

    def close(self) -> None:
        self.index.close()


class ReplaySampler:
    """Plays a recording as a SnapshotFeed: ``sample()`` returns the snapshot recorded at the
    replay's current position, and the History holds what was recorded up to it.

    Time runs at ``speed`` × the original pace from the first snapshot; ``pause()``,
    ``seek()`` and ``set_speed()`` move it.  At the end the last snapshot stays, marked.
    Nothing of the machine npuwatch runs on is read.  ``recording``: a ``Recording`` read
    already, or a file's ``RecordingIndex`` (``open``).
    """

    def __init__(
        self,
        recording: Union[Recording, RecordingIndex],
        *,
        speed: float = 1.0,
        devices: Optional[FrozenSet[int]] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not math.isfinite(speed) or speed <= 0:
            raise ValueError(f"--speed must be a positive number, got {speed:g}")
        self._store: _Store = (
            _MemoryStore(recording) if isinstance(recording, Recording) else _FileStore(recording)
        )
        if self._store.count() == 0:
            raise RecordingError(f"{self._store.path} holds no complete snapshot")
        self.path = self._store.path
        self.devices = devices
        self._clock = clock
        self._t0 = self._store.time_s(0)
        first = [self._store.time_s(i) for i in range(min(self._store.count(), INTERVAL_LINES))]
        gaps = [b - a for a, b in zip(first, first[1:]) if b > a]
        self.recorded_interval_s = statistics.median(gaps) if gaps else 1.0
        self.history = History.for_span(self.recorded_interval_s)
        self._lock = threading.Lock()  # the position: short, never around the file
        self._sample_lock = threading.Lock()  # what sample() reads and judges
        self._speed = speed
        self._origin = clock()  # the clock reading at which position 0 plays
        self._paused_at: Optional[float] = None
        self._shown = -1  # index of the newest line added to the History
        # The recording judged in order by the judge a live feed runs, as far as it has played.
        self._workloads = WorkloadJudge()
        self._current: Optional[Snapshot] = None  # the newest judged snapshot up to _shown
        self._cache: OrderedDict[int, Optional[Snapshot]] = OrderedDict()
        self._cache_bytes = 0
        self._bad: Set[int] = set()
        self._indexer: Optional[threading.Thread] = None
        self.interval_s = self._refresh_s()

    @classmethod
    def open(
        cls, path: Union[str, Path], *, speed: float = 1.0, devices: Optional[FrozenSet[int]] = None
    ) -> ReplaySampler:
        """Open a recording file (NDJSON, optionally gzip): its first lines are indexed now, the
        rest on a thread; ``RecordingError`` when it holds no snapshot."""
        index = RecordingIndex(path)
        try:
            index.build_until(OPENING_LINES)
            first = _first_snapshot(index)
            if first is None:
                warnings = index.warnings()
                raise RecordingError(
                    f"{index.path} holds no complete snapshot" + (f": {warnings[0]}" if warnings else "")
                )
            sampler = cls(index, speed=speed, devices=devices)
        except BaseException:
            index.close()
            raise
        if not index.complete:
            sampler._indexer = threading.Thread(target=index.build, name="npuwatch-replay-index", daemon=True)
            sampler._indexer.start()
        return sampler

    # --- SnapshotFeed ----------------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"replay:{self.path.name}"

    def sample(self) -> Snapshot:
        """The snapshot at the current position (the History catches up to it)."""
        position = self.position_s
        with self._sample_lock:
            index = self._store.index_at(self._t0 + position)
            self._catch_up(index)
            return self._shown_snapshot(index)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        return None  # a recording holds only the snapshots, not npu-smi's per-chip reports

    def every_sample(self) -> Iterator[Snapshot]:
        """Every recorded sample in file order, each judged with the recording up to it by the
        judge ``sample()`` runs (a post-mortem, ``snapshot --replay FILE --all``), whatever the
        position.  A line that is not a snapshot is skipped with a warning (``warnings()``).
        One snapshot at a time: memory stays bounded as in a replay; the index grows on its thread."""
        with self._sample_lock:  # from the first line, wherever the replay stood
            self.history.clear()
            self._workloads.reset()
            self._current, self._shown = None, -1
        index = 0
        while self._line_indexed(index):
            with self._sample_lock:
                before = self._current
                self._catch_up(index)
                judged = self._current
                self._cache.clear()  # never read again: a post-mortem keeps no line
                self._cache_bytes = 0
            index += 1
            if judged is not None and judged is not before:  # the line was a snapshot: judged
                yield replace(judged, source=self.label)

    def warnings(self) -> Tuple[str, ...]:
        """What reading the file found so far: lines skipped, lines going back in time, limits."""
        return self._store.warnings()

    def _line_indexed(self, index: int) -> bool:
        """Whether line ``index`` exists, waiting for the indexing thread to reach it."""
        while index >= self._store.count():
            indexer = self._indexer
            if self._store.complete or indexer is None or not indexer.is_alive():
                return index < self._store.count()
            indexer.join(0.05)
        return True

    def close(self) -> None:
        """Stop indexing and close the file."""
        self._store.close()

    def __enter__(self) -> ReplaySampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- controls --------------------------------------------------------------------------

    @property
    def duration_s(self) -> float:
        """Seconds from the first snapshot to the last indexed so far."""
        return self._store.time_s(self._store.count() - 1) - self._t0

    @property
    def indexed(self) -> bool:
        """True once the whole file is indexed (``duration_s`` is final)."""
        return self._store.complete

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
        return self._store.complete and self.position_s >= self.duration_s

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

    # --- internals --------------------------------------------------------------------------

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

    def _catch_up(self, index: int) -> None:
        """Add the lines up to ``index`` to the History and the judge; after a seek back (or far
        ahead), start both afresh from up to ``REBUILD_LINES`` lines before it."""
        if index == self._shown:
            return
        start = self._shown + 1
        if index < self._shown or index - start >= min(self.history.capacity, REBUILD_LINES):
            self.history.clear()  # in place: views hold this History
            self._workloads.reset()
            self._current = None
            start = max(0, index - min(self.history.capacity, REBUILD_LINES) + 1)
        for i in range(start, index + 1):
            snapshot = self._decoded(i)
            if snapshot is None:
                continue
            self._current = self._filtered(self._workloads.judge(snapshot))
            self.history.add(self._current)
        self._shown = index

    def _decoded(self, index: int) -> Optional[Snapshot]:
        """Line ``index`` as a Snapshot (``None`` when it is not one), from the cache or the file."""
        if index in self._cache:
            self._cache.move_to_end(index)
            return self._cache[index]
        if index in self._bad:
            return None
        snapshot = self._store.snapshot(index)
        if snapshot is None:
            if len(self._bad) < MAX_BAD_LINES:
                self._bad.add(index)
            return None
        size = self._store.line_bytes(index)
        if size:
            self._cache[index] = snapshot
            self._cache_bytes += size
            while self._cache_bytes > CACHE_BYTES and len(self._cache) > 1:
                old, _ = self._cache.popitem(last=False)
                self._cache_bytes -= self._store.line_bytes(old)
        return snapshot

    def _shown_snapshot(self, index: int) -> Snapshot:
        snapshot = self._current
        if snapshot is None:  # no line up to here is a snapshot: the first one that is
            first = self._first_valid()
            snapshot = self._filtered(self._workloads.judge(first))
            self._current = snapshot
        notes = list(self._store.warnings())
        count = self._store.count()
        if self._store.complete and index == count - 1 and count > 1:
            taken = f"{snapshot.taken_at:%Y-%m-%d %H:%M:%S %Z}"
            notes.append(f"end of recording: its last sample was taken at {taken}")
        return replace(snapshot, source=self.label, warnings=(*snapshot.warnings, *notes))

    def _first_valid(self) -> Snapshot:
        for i in range(self._store.count()):
            snapshot = self._decoded(i)
            if snapshot is not None:
                return snapshot
        raise RecordingError(f"{self.path} holds no complete snapshot")

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


def _first_snapshot(index: RecordingIndex) -> Optional[Snapshot]:
    """The first line of ``index`` that is a snapshot, indexing further as needed."""
    store = _FileStore(index)
    i = 0
    while True:
        if i >= index.count():
            index.build_until(i + OPENING_LINES)
            if i >= index.count():
                return None
        snapshot = store.snapshot(i)
        if snapshot is not None:
            return snapshot
        i += 1
