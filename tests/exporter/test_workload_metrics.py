"""``npuwatch_chip_workload{class}`` and ``npuwatch_chip_throttling{reason}``: the workload judge's
verdict on /metrics, one series per class / reason with 1 on the chip's, and nothing where the
judge said nothing (no workload, or a frequency the chip source does not read)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Dict, FrozenSet, Optional, Tuple

import pytest

from npuwatch.exporter.metrics import ExporterView, render
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    MetricStatus,
    ProbeReport,
    Snapshot,
    Throttling,
    Versions,
    Workload,
    WorkloadClass,
)
from tests.exporter.test_metrics import labels_of, series

Key = Tuple[str, FrozenSet[Tuple[str, str]]]
TAKEN = datetime(2026, 11, 24, 13, 0, tzinfo=timezone.utc)
CLASSES = [each.value for each in WorkloadClass]


def chip(
    npu_id: int,
    kind: Optional[WorkloadClass],
    throttling: Optional[Throttling] = None,
    needs_dcmi: Tuple[str, ...] = (),
    freq: Optional[int] = 1800,
) -> ChipSample:
    identity = ChipIdentity(npu_id, 0, name="910B3", bus_id=f"0000:C{npu_id}:00.0", logic_id=npu_id)
    workload = None
    if kind is not None:
        workload = Workload(kind, "summary", "next step", throttling=throttling, needs_dcmi=needs_dcmi)
    return ChipSample(
        identity,
        health=Health.OK,
        aicore_percent=90,
        aicore_freq_mhz=freq,
        aicore_rated_freq_mhz=None if freq is None else 1800,
        workload=workload,
    )


def render_chips(*chips: ChipSample) -> Dict[Key, float]:
    snapshot = Snapshot(
        TAKEN,
        "demo:test",
        Versions(npu_smi="24.1.rc1"),
        chips=chips,
        probes=(ProbeReport("dcmi", MetricStatus.OK, 0.01),),
    )
    return series(render(ExporterView(snapshot, 0.1)))


def labels(sample: ChipSample, **extra: str) -> FrozenSet[Tuple[str, str]]:
    return frozenset({**labels_of(sample), **extra}.items())


@pytest.mark.parametrize("kind", list(WorkloadClass))
def test_the_workload_class_is_one_series_per_class_with_1_on_the_chips(kind):
    sample = chip(0, kind)
    got = render_chips(sample)
    for each in CLASSES:
        key = ("npuwatch_chip_workload", labels(sample, **{"class": each}))
        assert got[key] == (1.0 if each == kind.value else 0.0), each
    assert len([k for k in got if k[0] == "npuwatch_chip_workload"]) == len(CLASSES)


@pytest.mark.parametrize("cause", list(Throttling))
def test_throttling_is_1_on_its_reason_and_0_on_the_other(cause):
    sample = chip(0, WorkloadClass.COMPUTE_BOUND, throttling=cause)
    got = render_chips(sample)
    for reason in ("thermal", "power"):
        key = ("npuwatch_chip_throttling", labels(sample, reason=reason))
        assert got[key] == (1.0 if reason == cause.value else 0.0), reason


def test_a_chip_read_at_its_rated_frequency_is_not_throttling_0_on_both():
    sample = chip(0, WorkloadClass.COMPUTE_BOUND)
    got = render_chips(sample)
    for reason in ("thermal", "power"):
        assert got[("npuwatch_chip_throttling", labels(sample, reason=reason))] == 0.0


def test_a_chip_without_a_workload_exports_neither_family_for_that_chip_only():
    judged, unjudged = chip(0, WorkloadClass.IDLE), chip(1, None)
    got = render_chips(judged, unjudged)
    assert ("npuwatch_chip_workload", labels(judged, **{"class": "idle"})) in got
    assert not [k for k in got if k[0].startswith("npuwatch_chip_w") and dict(k[1])["npu_id"] == "1"]
    assert not [k for k in got if k[0] == "npuwatch_chip_throttling" and dict(k[1])["npu_id"] == "1"]


def test_no_workload_anywhere_leaves_both_families_out_even_their_help_lines():
    body = render(
        ExporterView(
            Snapshot(TAKEN, "demo:test", Versions(), chips=(chip(0, None),), probes=()),
            0.1,
        )
    ).decode()
    assert "npuwatch_chip_workload" not in body
    assert "npuwatch_chip_throttling" not in body


def test_throttling_is_left_out_where_the_frequency_is_not_read_never_a_fake_0():
    npu_smi = chip(0, WorkloadClass.COMPUTE_BOUND, needs_dcmi=("throttling",), freq=None)
    no_freq = chip(1, WorkloadClass.COMPUTE_BOUND, freq=None)  # a DCMI chip that reads no frequency
    lost = chip(2, WorkloadClass.UNKNOWN)  # no current reading: throttling is not known either
    got = render_chips(npu_smi, no_freq, lost)
    assert not [k for k in got if k[0] == "npuwatch_chip_throttling"]
    assert got[("npuwatch_chip_workload", labels(npu_smi, **{"class": "compute-bound"}))] == 1.0
    assert got[("npuwatch_chip_workload", labels(lost, **{"class": "unknown"}))] == 1.0


def test_help_and_type_lines_name_both_families_as_gauges():
    body = render(
        ExporterView(
            Snapshot(TAKEN, "demo:test", Versions(), chips=(chip(0, WorkloadClass.IDLE),), probes=()),
            0.1,
        )
    ).decode()
    for name in ("npuwatch_chip_workload", "npuwatch_chip_throttling"):
        assert f"# HELP {name} " in body
        assert f"# TYPE {name} gauge" in body


@pytest.mark.parametrize("scenario", ["910b-training", "a3", "chip-alarm"])
def test_a_demo_feed_exports_every_chips_class_as_its_snapshot_says(scenario, monkeypatch):
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "120")
    with open_feed(FeedOptions(demo=scenario, interval_s=1.0)) as sampler:
        snapshot = sampler.sample()
    got = render_chips_of(snapshot)
    assert snapshot.chips
    for sample in snapshot.chips:
        assert sample.workload is not None, sample.identity.label
        ones = [
            dict(k[1])["class"]
            for k, v in got.items()
            if k[0] == "npuwatch_chip_workload"
            and dict(k[1])["npu_id"] == str(sample.identity.npu_id)
            and dict(k[1])["chip_id"] == str(sample.identity.chip_id)
            and v == 1.0
        ]
        assert ones == [sample.workload.kind.value], sample.identity.label


def render_chips_of(snapshot: Snapshot) -> Dict[Key, float]:
    return series(render(ExporterView(snapshot, 0.1)))
