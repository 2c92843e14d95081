"""ReplaySampler: original timing under a controlled clock, speed, pause, seek, end and filters."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import List

import pytest

from npuwatch.model import Snapshot
from npuwatch.recording import Recording
from npuwatch.replay import ReplaySampler
from tests.widgets.fakes import capture_snapshot

BASE = capture_snapshot("001")  # 8 × 910B2
#: Recorded at 0, 1, 2, 4 and 8 s: uneven gaps, as a slow npu-smi leaves them.
OFFSETS_S = (0.0, 1.0, 2.0, 4.0, 8.0)


def recording(offsets: tuple = OFFSETS_S) -> Recording:
    snapshots: List[Snapshot] = []
    for i, offset in enumerate(offsets):
        chips = (replace(BASE.chips[0], power_w=100.0 + i), *BASE.chips[1:])
        snapshots.append(replace(BASE, taken_at=BASE.taken_at + timedelta(seconds=offset), chips=chips))
    return Recording(Path("/records/node7.ndjson"), tuple(snapshots))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def power(snapshot: Snapshot) -> float:
    value = snapshot.chips[0].power_w
    assert value is not None
    return value


def test_snapshots_follow_the_recorded_timing() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    seen = []
    for now in (0.0, 0.5, 1.0, 3.9, 4.0, 7.99, 8.0, 30.0):
        clock.now = 1000.0 + now
        seen.append(power(replay.sample()))
    assert seen == [100.0, 100.0, 101.0, 102.0, 103.0, 103.0, 104.0, 104.0]


def test_speed_factor_plays_faster() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), speed=4.0, clock=clock)
    clock.now += 1.0  # 4 recorded seconds
    assert power(replay.sample()) == 103.0
    assert replay.interval_s == pytest.approx(0.375)  # the median gap (1, 1, 2, 4 s → 1.5 s) at ×4


def test_history_holds_every_recorded_point_up_to_the_position() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    replay.sample()
    clock.now += 8.0  # one sample call jumps over three recorded snapshots
    replay.sample()
    assert replay.history.values((0, 0), "power_w") == [100.0, 101.0, 102.0, 103.0, 104.0]


def test_seek_back_rebuilds_the_history_in_place() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    history = replay.history
    clock.now += 8.0
    replay.sample()
    replay.seek(-6.0)  # to 2 s
    assert power(replay.sample()) == 102.0
    assert replay.history is history  # views keep their reference
    assert history.values((0, 0), "power_w") == [100.0, 101.0, 102.0]


def test_seek_is_bounded_by_the_recording() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    replay.seek(-50)
    assert replay.position_s == 0.0
    replay.seek(500)
    assert replay.position_s == 8.0 and replay.finished


def test_pause_holds_the_position_and_resume_continues_from_it() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    clock.now += 1.0
    replay.pause()
    clock.now += 100.0
    assert replay.paused and power(replay.sample()) == 101.0
    replay.seek(1.0)  # seeking while paused moves the paused position
    assert power(replay.sample()) == 102.0
    replay.resume()
    clock.now += 2.0
    assert power(replay.sample()) == 103.0


def test_changing_speed_keeps_the_position() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    clock.now += 2.0
    replay.faster()
    assert replay.speed == 2.0 and replay.position_s == pytest.approx(2.0)
    clock.now += 1.0
    assert replay.position_s == pytest.approx(4.0)
    replay.slower()
    replay.slower()
    assert replay.speed == 0.5


def test_the_end_keeps_the_last_snapshot_and_says_so() -> None:
    clock = Clock()
    replay = ReplaySampler(recording(), clock=clock)
    clock.now += 60.0
    last = replay.sample()
    assert power(last) == 104.0
    assert last.warnings[-1].startswith("end of recording: its last sample was taken at 2026-01-01 09:30:08")


def test_snapshots_name_the_replay_and_carry_the_reading_warnings() -> None:
    rec = replace(recording(), warnings=("node7.ndjson: line 9 is not a snapshot (x); skipped",))
    snapshot = ReplaySampler(rec, clock=Clock()).sample()
    assert snapshot.source == "replay:node7.ndjson"
    assert snapshot.warnings == ("node7.ndjson: line 9 is not a snapshot (x); skipped",)
    assert snapshot.host == BASE.host  # the recorded host, not this machine


def test_devices_filter_chips_processes_and_history() -> None:
    replay = ReplaySampler(recording(), devices=frozenset({2, 3}), clock=Clock())
    snapshot = replay.sample()
    assert sorted({c.identity.npu_id for c in snapshot.chips}) == [2, 3]
    assert {p.npu_id for p in snapshot.processes} <= {2, 3}
    assert replay.history.chips() == [(2, 0), (3, 0)]


def test_a_replay_has_no_chip_details() -> None:
    assert ReplaySampler(recording(), clock=Clock()).chip_details(0, 0) is None


@pytest.mark.parametrize("speed", [0.0, -1.0, float("nan"), float("inf")])
def test_speed_must_be_positive(speed: float) -> None:
    with pytest.raises(ValueError, match="must be a positive number"):
        ReplaySampler(recording(), speed=speed)


def test_a_single_snapshot_recording_replays() -> None:
    replay = ReplaySampler(recording((0.0,)), clock=Clock())
    snapshot = replay.sample()
    assert power(snapshot) == 100.0
    assert replay.duration_s == 0.0 and replay.interval_s == 1.0
    assert not any(w.startswith("end of recording") for w in snapshot.warnings)
