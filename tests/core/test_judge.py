"""The judge: one level and its reasons per chip, from one per-model table."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from npuwatch.chip_families import FAMILIES, OTHER, limits_table
from npuwatch.judge import (
    Level,
    ReasonKind,
    Thresholds,
    judge_chip,
    judge_snapshot,
    limits_for,
    temperature_level,
)
from npuwatch.judge.rules import held_memory
from npuwatch.model import (
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    NpuProcess,
    PcieLink,
    Snapshot,
)
from npuwatch.text_safety import first_clause

NOW = datetime(2026, 11, 24, tzinfo=timezone.utc)


def chip(name: str = "910B3", *, npu: int = 0, **values) -> ChipSample:
    values.setdefault("health", Health.OK)
    return ChipSample(ChipIdentity(npu, 0, name), **values)


@pytest.mark.parametrize(
    ("name", "temperature_c", "level"),
    [
        ("910B3", 80, Level.OK),
        ("910B3", 88, Level.WARNING),
        ("910B3", 97, Level.CRITICAL),
        ("310P3", 78, Level.OK),
        ("310P3", 82, Level.WARNING),
        ("310P3", 92, Level.CRITICAL),
        ("Ascend910", 85, Level.WARNING),
        ("Ascend910", 95, Level.CRITICAL),
        ("310B4", 80, Level.WARNING),
        ("950DT", 84, Level.OK),
    ],
)
def test_temperature_levels_come_from_the_model_row(name, temperature_c, level):
    assert temperature_level(chip(name, temperature_c=temperature_c)) is level
    assert judge_chip(chip(name, temperature_c=temperature_c)).level is level


def test_every_family_row_names_its_sources_and_critical_is_above_warning():
    for row in (*FAMILIES, OTHER):
        assert row.temperature_critical_c > row.temperature_warning_c
        assert row.source_of("rated_power_w")
    assert limits_for("910B3").rated_power_w == 400.0
    assert limits_for("910PremiumA").rated_power_w == 310.0
    assert limits_for("Ascend910").rated_power_w is None
    assert limits_for(None) is OTHER


def test_a_critical_override_pulls_the_warning_down_and_a_warning_override_keeps_ten_degrees():
    assert Thresholds(temperature_critical_c=70.0).temperature_limits_c("910B3") == (70.0, 70.0)
    assert Thresholds(temperature_warning_c=70.0).temperature_limits_c("910B3") == (70.0, 80.0)
    assert Thresholds().temperature_limits_c("310P3") == (80.0, 90.0)


@pytest.mark.parametrize(
    ("health", "level"),
    [
        (Health.OK, Level.OK),
        (Health.WARNING, Level.WARNING),
        (Health.ALARM, Level.CRITICAL),
        (Health.CRITICAL, Level.CRITICAL),
        (Health.UNKNOWN, Level.UNKNOWN),
    ],
)
def test_health_severity_is_a_property_of_health(health, level):
    assert health.level is level
    assert judge_chip(chip(health=health)).level is level


def test_a_chip_in_alarm_gives_its_error_codes_in_the_reason():
    errors = (ChipError("80E01801", "HBM multi-bit ECC error"), ChipError("80CB8002"))
    judged = judge_chip(chip(health=Health.ALARM, errors=errors))
    assert judged.texts == ("Alarm 80E01801 HBM multi-bit ECC error (+1 code) → restart-business",)
    assert "npu-smi info -t health -i 0 -c 0" in judged.reasons[0].detail


def test_levels_rank_critical_over_unknown_over_warning():
    judged = judge_chip(chip(health=Health.UNKNOWN, temperature_c=88))
    assert judged.level is Level.UNKNOWN
    assert [r.kind for r in judged.reasons] == [ReasonKind.HEALTH, ReasonKind.TEMPERATURE]
    assert judge_chip(chip(health=Health.UNKNOWN, temperature_c=99)).level is Level.CRITICAL
    assert Level.UNKNOWN.unhealthy and Level.CRITICAL.unhealthy and not Level.WARNING.unhealthy


def test_memory_held_with_no_process_is_a_warning_and_a_process_clears_it():
    held = chip(hbm_used_mib=20000, hbm_total_mib=65536)
    judged = judge_chip(held)
    assert (judged.level, judged.texts) == (Level.WARNING, ("19.5 GiB HBM held, no process",))
    process = NpuProcess(0, 0, 4242, "python", 16000)
    assert judge_chip(held, (process,)).level is Level.OK
    idle = chip(hbm_used_mib=3400, hbm_total_mib=65536)  # capture 003: the driver's own idle use
    assert judge_chip(idle).level is Level.OK


def test_a_310b_soc_never_holds_memory_and_a_310p_holds_ddr():
    assert held_memory(chip("310B4", memory_used_mib=3000, memory_total_mib=3513), ()) is None
    held = held_memory(chip("310P3", memory_used_mib=16300, memory_total_mib=21534), ())
    assert held is not None and held.kind == "memory"


def test_a_narrow_link_is_a_warning_and_a_slow_one_alone_is_not():
    narrow = judge_chip(chip(pcie=PcieLink(32.0, 32.0, 8, 16)))
    assert (narrow.level, narrow.texts) == (Level.WARNING, ("PCIe x8 of x16",))
    assert judge_chip(chip(pcie=PcieLink(16.0, 32.0, 16, 16))).level is Level.OK


def test_a_lost_chip_is_critical_from_the_model_fact_not_the_wording():
    gone = chip(lost_reason="the chip source stopped listing it")
    judged = judge_chip(gone)
    assert (judged.level, judged.texts) == (Level.CRITICAL, ("lost",))
    off_bus = judge_chip(chip(pcie=PcieLink(present=False)))
    assert off_bus.texts == ("off the PCIe bus",)
    reworded = chip(notes={"power_w": MetricNote(MetricStatus.ERROR, "npu-smi no longer lists this chip")})
    assert judge_chip(reworded).level is Level.OK, "a note's wording is not a fact"


def test_a_stale_chip_cannot_be_judged():
    note = MetricNote(MetricStatus.STALE, "npu-smi hung: values from 4 s ago")
    stale = chip(health=Health.ALARM, temperature_c=99, notes={"temperature_c": note})
    judged = judge_chip(stale)
    assert (judged.level, [r.kind for r in judged.reasons]) == (Level.UNKNOWN, [ReasonKind.STALE])


def test_judge_snapshot_groups_processes_by_chip_and_caches_the_last_answer():
    chips = (
        chip(npu=0, hbm_used_mib=20000, hbm_total_mib=65536),
        chip(npu=1, hbm_used_mib=20000, hbm_total_mib=65536),
    )
    snapshot = Snapshot(NOW, "test", chips=chips, processes=(NpuProcess(1, 0, 7, "python", 16000),))
    judged = judge_snapshot(snapshot)
    assert (judged[(0, 0)].level, judged[(1, 0)].level) == (Level.WARNING, Level.OK)
    assert judge_snapshot(snapshot) == judged
    assert judge_snapshot(replace(snapshot, processes=()))[(1, 0)].level is Level.WARNING


def test_first_clause_keeps_a_short_message_whole_and_cuts_a_long_one_at_its_colon():
    long = "npu-smi failed with DCMI error -8005 (INNER_ERR): " + "the meaning " * 10
    assert first_clause(long, 60) == "npu-smi failed with DCMI error -8005 (INNER_ERR)"
    assert first_clause("npu-smi: gone", 60) == "npu-smi: gone"
    assert first_clause("x" * 70, 60) == "x" * 59 + "…"


def test_the_readme_states_the_limits_table_exactly_as_the_family_table_has_it():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- limits-table:", 1)[1].split("<!-- end limits-table -->", 1)[0]
    stated = [line for line in table.splitlines() if line.startswith("|")]
    assert stated == limits_table().splitlines()
    assert len(stated) == 2 + len(FAMILIES) + 1  # header, rule, every family and "any other chip"
