"""History: one point per chip and graphed metric per snapshot; a stale value is a gap."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Tuple

from npuwatch import metrics_table
from npuwatch.history import HISTORY_METRICS, History
from npuwatch.model import ChipIdentity, ChipSample, MetricNote, MetricStatus, Snapshot


def _chip(npu_id: int, power: float, temperature: int = 40, **notes: MetricNote) -> ChipSample:
    return ChipSample(
        identity=ChipIdentity(npu_id=npu_id, chip_id=0),
        power_w=power,
        temperature_c=temperature,
        notes=dict(notes),
    )


def _snapshot(t: float, *chips: ChipSample) -> Snapshot:
    return Snapshot(taken_at=datetime.fromtimestamp(t, tz=timezone.utc), source="test", chips=tuple(chips))


def test_every_graphed_metric_gets_a_point_per_snapshot_with_floats_and_gaps() -> None:
    history = History(10)
    history.add(_snapshot(100.0, _chip(0, 95.5, 41)))
    history.add(_snapshot(101.0, _chip(0, 96.0, 42)))
    assert history.series((0, 0), "power_w") == [(100.0, 95.5), (101.0, 96.0)]
    temperatures = history.values((0, 0), "temperature_c")
    assert temperatures == [41.0, 42.0] and all(isinstance(v, float) for v in temperatures)
    for metric in HISTORY_METRICS:  # a driver-only metric the chip never reported keeps no gaps
        assert len(history.series((0, 0), metric)) == (0 if metrics_table.metric(metric).extra else 2)
    assert history.values((0, 0), "hbm_used_mib") == [None, None]  # absent: a gap


def test_a_stale_value_is_a_gap_and_other_notes_keep_the_value() -> None:
    history = History(10)
    stale = MetricNote(MetricStatus.STALE, "npu-smi timed out; showing the value from 2 s ago")
    error = MetricNote(MetricStatus.ERROR, "something")
    history.add(_snapshot(100.0, _chip(0, 95.5, power_w=stale, temperature_c=error)))
    assert history.values((0, 0), "power_w") == [None]
    assert history.values((0, 0), "temperature_c") == [40.0]


def test_a_chip_that_appears_later_and_one_that_leaves() -> None:
    history = History(3)
    history.add(_snapshot(1.0, _chip(0, 1.0)))
    history.add(_snapshot(2.0, _chip(0, 2.0), _chip(1, 20.0)))
    history.add(_snapshot(3.0, _chip(1, 30.0)))
    history.add(_snapshot(4.0, _chip(0, 4.0), _chip(1, 40.0)))
    assert history.chips() == [(0, 0), (1, 0)]
    assert history.series((0, 0), "power_w") == [(1.0, 1.0), (2.0, 2.0), (4.0, 4.0)]
    assert history.values((1, 0), "power_w") == [20.0, 30.0, 40.0]
    history.add(_snapshot(5.0, _chip(1, 50.0)))
    assert history.values((1, 0), "power_w") == [30.0, 40.0, 50.0]  # capacity 3
    assert history.values((1, 0), "power_w", last=2) == [40.0, 50.0]


def test_after_clear_new_points_are_kept() -> None:
    history = History(10)
    history.add(_snapshot(1.0, _chip(0, 1.0)))
    history.clear()
    assert history.chips() == []
    history.add(_snapshot(2.0, _chip(0, 2.0)))
    assert history.series((0, 0), "power_w") == [(2.0, 2.0)]


def test_a_chip_with_metrics_set_aside_by_replace() -> None:
    history = History(10)
    chip = replace(_chip(0, 1.0), power_w=None)
    history.add(_snapshot(1.0, chip))
    points: Tuple[object, ...] = tuple(history.values((0, 0), "power_w"))
    assert points == (None,)
