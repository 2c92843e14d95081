"""The driver-only per-chip metrics (issue 16): one row each in the metric table, None with a reason
naming the DCMI backend wherever npu-smi read the chips, plausible bounds, and the history."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, Tuple

import pytest

from npuwatch.chip_source import SourceReading
from npuwatch.history import HISTORY_METRICS, History
from npuwatch.metrics_table import EXTRAS, METRICS, SHOWN_WHEN_REPORTED, Extra, Scale, metric
from npuwatch.model import (
    CHIP_METRICS,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    Snapshot,
    Versions,
)
from npuwatch.plausible import plausible
from npuwatch.probes.npu_smi.source import CaptureSource
from npuwatch.probes.npu_smi.table import NOT_IN_TABLE, TABLE_METRICS, parse_info

CAPTURES = Path(__file__).resolve().parent.parent / "data" / "npu_smi"

#: The names the issue fixes, with their Python type, unit and export name (npu-exporter's where it
#: has one: ``collector/metrics/collector_for_npu.go`` and ``collector_for_hbm.go`` in
#: Ascend/mind-cluster's npu-exporter; ``npuwatch_chip_`` otherwise).
NEW: Dict[str, Tuple[type, str, str]] = {
    "aicore_freq_mhz": (int, "MHz", "npu_chip_info_aicore_current_freq"),
    "aicore_rated_freq_mhz": (int, "MHz", "npuwatch_chip_aicore_rated_freq"),
    "vector_percent": (int, "%", "npu_chip_info_vector_utilization"),
    "cube_percent": (int, "%", "npu_chip_info_cube_utilization"),
    "aicpu_percent": (int, "%", "npuwatch_chip_aicpu_utilization"),
    "ctrlcpu_percent": (int, "%", "npuwatch_chip_ctrlcpu_utilization"),
    "hbm_bandwidth_percent": (int, "%", "npu_chip_info_hbm_bandwidth_utilization"),
    "hbm_temperature_c": (int, "°C", "npu_chip_info_hbm_temperature"),
    "voltage_v": (float, "V", "npu_chip_info_voltage"),
    "ecc_single_bit_errors": (int, "errors", "npu_chip_info_hbm_ecc_single_bit_error_cnt"),
    "ecc_double_bit_errors": (int, "errors", "npu_chip_info_hbm_ecc_double_bit_error_cnt"),
    "ecc_isolated_pages": (int, "pages", "npuwatch_chip_hbm_ecc_isolated_pages"),
}
OLD = (
    "power_w",
    "temperature_c",
    "aicore_percent",
    "npu_util_percent",
    "hbm_used_mib",
    "hbm_total_mib",
    "memory_used_mib",
    "memory_total_mib",
    "hugepages_used",
    "hugepages_total",
)


# --- the metric table ---------------------------------------------------------------------------


def test_the_json_order_is_the_old_metrics_then_the_new_ones():
    assert OLD + tuple(NEW) == CHIP_METRICS


@pytest.mark.parametrize("name", list(NEW))
def test_each_new_metric_is_a_field_and_a_row_with_its_unit_and_export_name(name):
    kind, unit, exported = NEW[name]
    field = next(f for f in fields(ChipSample) if f.name == name)
    assert field.default is None
    assert field.type == f"Optional[{kind.__name__}]"
    row = metric(name)
    assert (row.unit, row.exporter_name) == (unit, exported)
    assert row.cell is None  # no new card cell, no new text column: npu-smi views stay as they were
    assert row.label and row.title and row.tag and len(row.tag) <= 4
    assert row.exporter_help


def test_graphs_are_the_frequency_vector_hbm_bandwidth_and_hbm_temperature():
    graphed = {row.name for row in METRICS if row.graphed and row.name in NEW}
    assert graphed == {"aicore_freq_mhz", "vector_percent", "hbm_bandwidth_percent", "hbm_temperature_c"}
    assert graphed <= set(HISTORY_METRICS)


def test_how_each_new_metric_shows_where_it_is_reported():
    shown = {row.name: (row.extra, row.beside, row.rated) for row in EXTRAS}
    assert shown == {
        "aicore_freq_mhz": (Extra.BESIDE, "util", "aicore_rated_freq_mhz"),
        "vector_percent": (Extra.BAR, None, None),
        "hbm_bandwidth_percent": (Extra.BAR, None, None),
        **{
            name: (Extra.DETAIL, None, None)
            for name in (
                "cube_percent",
                "aicpu_percent",
                "ctrlcpu_percent",
                "hbm_temperature_c",
                "voltage_v",
                "ecc_single_bit_errors",
                "ecc_double_bit_errors",
                "ecc_isolated_pages",
            )
        },
    }
    assert set(NEW) == SHOWN_WHEN_REPORTED  # the rated frequency through the current one
    assert all(metric(row.name).scale is Scale.PERCENT for row in EXTRAS if row.extra is Extra.BAR)


@pytest.mark.parametrize(
    ("name", "impossible", "possible"),
    [
        ("vector_percent", 101, 100),
        ("hbm_bandwidth_percent", -1, 0),
        ("aicore_freq_mhz", 12000, 1800),
        ("hbm_temperature_c", 151, 95),
        ("voltage_v", -0.5, 0.9),
        ("ecc_double_bit_errors", -1, 3),
    ],
)
def test_an_impossible_new_value_is_set_aside_like_the_old_ones(name, impossible, possible):
    chip = ChipSample(ChipIdentity(0, 0, "910B3"), Health.OK, **{name: impossible})  # type: ignore[arg-type]
    cleared, warnings = plausible(chip)
    assert getattr(cleared, name) is None
    assert cleared.notes[name].status is MetricStatus.IMPLAUSIBLE
    assert cleared.notes[name].reason.startswith(f"implausible value {float(impossible):g} ")
    assert warnings and name in warnings[0]
    kept, none = plausible(replace(chip, **{name: possible}))
    assert getattr(kept, name) == possible and none == ()


# --- npu-smi: None with a reason naming the DCMI backend, from one place -------------------------


def test_the_npu_smi_table_reads_exactly_the_old_metrics_and_notes_every_other():
    assert set(OLD) == TABLE_METRICS
    assert set(NOT_IN_TABLE) == set(NEW)
    assert set(NOT_IN_TABLE.values()) == {
        MetricNote(
            MetricStatus.UNSUPPORTED, "not in npu-smi's table: the DCMI backend reads it (--backend dcmi)"
        )
    }


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.txt")), ids=lambda p: p.name[:3])
def test_every_chip_of_every_capture_has_each_new_metric_none_with_the_dcmi_reason(path):
    table = parse_info(path.read_text(errors="replace"))
    for chip in table.chips:
        unavailable = chip.unavailable()
        for name in NEW:
            assert getattr(chip, name) is None
            assert chip.notes[name] == NOT_IN_TABLE[name]
            assert unavailable[name].endswith(": the DCMI backend reads it (--backend dcmi)")
        assert not any(note.reason.endswith("(--backend dcmi)") for m, note in chip.notes.items() if m in OLD)


def test_a_replayed_npu_smi_capture_says_the_same(tmp_path):
    capture = tmp_path / "capture.txt"
    capture.write_text(next(CAPTURES.glob("001_*.txt")).read_text())
    outcome: SourceReading = CaptureSource.open(capture).read()
    assert outcome.reading is not None and outcome.reading.chips
    for chip in outcome.reading.chips:
        assert {name: chip.notes[name] for name in NEW} == NOT_IN_TABLE


# --- the model's other additions ----------------------------------------------------------------


def test_the_dcmi_version_is_the_chip_source_version_of_a_dcmi_snapshot():
    when = datetime(2026, 11, 24, tzinfo=timezone.utc)
    versions = Versions(npu_smi="24.1.rc2", driver="24.1.rc2", dcmi="24.1.0")
    assert Snapshot(when, "dcmi", versions, chip_source="dcmi").chip_source_version == "24.1.0"
    assert Snapshot(when, "npu-smi", versions).chip_source_version == "24.1.rc2"
    assert Snapshot(when, "npu-smi", versions).backend_note is None


# --- history: a series of a metric the chip never reported stays empty ---------------------------


def _at(t: float, chip: ChipSample) -> Snapshot:
    return Snapshot(datetime.fromtimestamp(t, tz=timezone.utc), "test", chips=(chip,))


def test_the_history_of_a_driver_only_metric_starts_at_the_chips_first_value():
    npu_smi = ChipSample(ChipIdentity(0, 0), power_w=90.0, notes=dict(NOT_IN_TABLE))
    history = History(10)
    history.add(_at(1.0, npu_smi))
    history.add(_at(2.0, replace(npu_smi, vector_percent=40, aicore_freq_mhz=1800)))
    history.add(_at(3.0, npu_smi))  # a gap once it has begun
    assert history.series((0, 0), "vector_percent") == [(2.0, 40.0), (3.0, None)]
    assert history.values((0, 0), "aicore_freq_mhz") == [1800.0, None]
    assert history.values((0, 0), "hbm_bandwidth_percent") == []  # never reported: nothing kept
    assert history.values((0, 0), "hbm_used_mib") == [None, None, None]  # a card cell keeps its gaps
    stale = MetricNote(MetricStatus.STALE, "dcmi timed out; showing the value from 2 s ago")
    history.add(_at(4.0, replace(npu_smi, vector_percent=40, notes={"vector_percent": stale})))
    assert history.values((0, 0), "vector_percent") == [40.0, None, None]
