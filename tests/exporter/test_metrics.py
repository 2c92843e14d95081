"""The snapshot → Prometheus families mapping: names, labels, exact values, what is left out."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from datetime import datetime, timezone
from typing import Dict, FrozenSet, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families

from npuwatch.exporter.metrics import (
    CHIP_LABELS,
    HEALTH_CODES,
    PROCESS_LABELS,
    ExporterView,
    chip_id_label,
    render,
    render_age,
)
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.metrics_table import metric
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    MetricStatus,
    NpuProcess,
    ProbeReport,
    Snapshot,
    Versions,
)

Series = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]
TAKEN = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
OK_PROBE = ProbeReport("npu-smi", MetricStatus.OK, 0.05)


def series(body: bytes) -> Series:
    """Every sample of an exposition, by (sample name, label set)."""
    out: Series = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = sample.value
    return out


def names(body: bytes) -> set:
    return {name for name, _ in series(body)}


def chip_key(name: str, **labels: str) -> Tuple[str, FrozenSet[Tuple[str, str]]]:
    return (name, frozenset(labels.items()))


def chip(npu_id: int = 0, chip_id: int = 0, **values: object) -> ChipSample:
    identity = ChipIdentity(npu_id, chip_id, name="910B3", bus_id=f"0000:C{npu_id}:00.0", logic_id=npu_id)
    fields: Dict[str, object] = {"health": Health.OK, **values}
    return ChipSample(identity, **fields)  # type: ignore[arg-type]


def snap(*chips: ChipSample, processes: Tuple[NpuProcess, ...] = (), probes=(OK_PROBE,)) -> Snapshot:
    return Snapshot(
        TAKEN,
        "demo:test",
        Versions(npu_smi="24.1.rc1", driver="24.1.rc1"),
        chips=chips,
        processes=processes,
        probes=tuple(probes),
    )


def labels_of(sample: ChipSample) -> Dict[str, str]:
    i = sample.identity
    return {
        "id": chip_id_label(i),
        "model_name": i.name or "",
        "pcie_bus_info": i.bus_id or "",
        "npu_id": str(i.npu_id),
        "chip_id": str(i.chip_id),
    }


def test_every_chip_metric_has_its_npu_exporter_name_labels_and_value():
    c = chip(
        3,
        power_w=90.7,
        temperature_c=37,
        aicore_percent=7,
        hbm_used_mib=53984,
        hbm_total_mib=65536,
        memory_used_mib=1024,
        memory_total_mib=15360,
    )
    got = series(render(ExporterView(snap(c), 0.1)))
    labels = {
        "id": "3",
        "model_name": "910B3",
        "pcie_bus_info": "0000:C3:00.0",
        "npu_id": "3",
        "chip_id": "0",
    }
    expected = {
        "npu_chip_info_health_status": 1.0,
        "npu_chip_info_power": 90.7,
        "npu_chip_info_temperature": 37.0,
        "npu_chip_info_utilization": 7.0,
        "npu_chip_info_hbm_used_memory": 53984.0,
        "npu_chip_info_hbm_total_memory": 65536.0,
        "npu_chip_info_used_memory": 1024.0,
        "npu_chip_info_total_memory": 15360.0,
    }
    for name, value in expected.items():
        assert got[chip_key(name, **labels)] == value, name
    assert got[("machine_npu_nums", frozenset())] == 1.0
    assert set(CHIP_LABELS) == set(labels)


def test_a_metric_that_is_none_is_left_out_for_that_chip_only():
    reported = chip(0, power_w=350.0, temperature_c=50)
    missing = chip(1, power_w=None, temperature_c=51)
    got = series(render(ExporterView(snap(reported, missing))))
    power = [labels for name, labels in got if name == "npu_chip_info_power"]
    assert power == [frozenset(labels_of(reported).items())]
    assert len([name for name, _ in got if name == "npu_chip_info_temperature"]) == 2
    assert all(value == value for value in got.values())  # no NaN anywhere


def test_a_zero_memory_total_is_a_placeholder_and_left_out_but_a_zero_used_is_kept():
    # 910B prints DDR as "0 / 0": no DDR pair.  An idle chip's HBM used 0 is a real 0.
    c = chip(0, memory_used_mib=0, memory_total_mib=0, hbm_used_mib=0, hbm_total_mib=65536)
    got = names(render(ExporterView(snap(c))))
    assert "npu_chip_info_used_memory" not in got
    assert "npu_chip_info_total_memory" not in got
    value = series(render(ExporterView(snap(c))))
    assert value[chip_key("npu_chip_info_hbm_used_memory", **labels_of(c))] == 0.0


@pytest.mark.parametrize(("health", "code"), [(h, HEALTH_CODES[h]) for h in Health])
def test_health_status_is_1_healthy_0_unhealthy_and_minus_1_unknown(health, code):
    c = chip(0, health=health)
    got = series(render(ExporterView(snap(c))))
    assert got[chip_key("npu_chip_info_health_status", **labels_of(c))] == code
    assert code == {Health.OK: 1, Health.UNKNOWN: -1}.get(health, 0)


def test_machine_counts_split_healthy_unhealthy_and_unknown():
    chips = (
        chip(0),
        chip(1, health=Health.WARNING),
        chip(2, health=Health.ALARM),
        chip(3, health=Health.UNKNOWN),
    )
    got = series(render(ExporterView(snap(*chips))))
    assert got[("machine_npu_nums", frozenset())] == 4
    assert got[("machine_healthy_npu_nums", frozenset())] == 1
    assert got[("machine_unhealthy_npu_nums", frozenset())] == 2
    assert got[("machine_unknown_npu_nums", frozenset())] == 1


def test_the_950s_npu_util_is_overall_utilization_and_ai_core_is_left_out():
    c = chip(0, aicore_percent=None, npu_util_percent=87)
    got = series(render(ExporterView(snap(c))))
    assert got[chip_key("npu_chip_info_overall_utilization", **labels_of(c))] == 87
    assert "npu_chip_info_utilization" not in {name for name, _ in got}


@pytest.mark.parametrize(
    ("identity", "expected"),
    [
        (ChipIdentity(0, 1, phy_id=1, logic_id=1), "1"),  # A3: the physical ID, as npu-exporter v6
        (ChipIdentity(7, 0, phy_id=14, logic_id=3), "14"),
        (ChipIdentity(4, 0, logic_id=4), "4"),  # 910B: npu-smi -m's logic ID
        (ChipIdentity(2, 1, device_id=1), "1"),  # 310P without -m: the Device column
        (ChipIdentity(5, 0), "5"),  # a replayed capture: the NPU ID
        (ChipIdentity(5, 1), "5-1"),
    ],
)
def test_the_id_label_falls_back_from_physical_to_logic_to_device_to_npu_id(identity, expected):
    assert chip_id_label(identity) == expected


def test_processes_are_npu_memory_per_pid_with_chip_labels():
    c0, c1 = chip(0), chip(1)
    processes = (
        NpuProcess(0, 0, 4242, "python3", 3120),
        NpuProcess(1, 0, 4243, "python3", 100),
        NpuProcess(1, 0, 4243, "python3", 20),  # listed twice on one chip: summed
        NpuProcess(1, 0, 4244, "idle", None),  # no memory reported: left out
        NpuProcess(9, 0, 4245, "ghost", 1),  # a chip not in the snapshot (--devices): left out
    )
    got = series(render(ExporterView(snap(c0, c1, processes=processes))))
    rows = {labels: value for (name, labels), value in got.items() if name == "npu_chip_info_process_info"}
    assert rows == {
        frozenset({**labels_of(c0), "process_id": "4242", "process_name": "python3"}.items()): 3120.0,
        frozenset({**labels_of(c1), "process_id": "4243", "process_name": "python3"}.items()): 120.0,
    }
    assert set(PROCESS_LABELS) == {*CHIP_LABELS, "process_id", "process_name"}


def test_before_the_first_sample_only_npuwatch_up_0_and_the_empty_families():
    got = series(render(ExporterView()))
    assert got == {("npuwatch_up", frozenset()): 0.0}
    assert render_age(None) == b""


def test_own_health_up_duration_probe_errors_timestamp_and_info():
    failed = ProbeReport("npu-smi", MetricStatus.TIMEOUT, 5.0, "npu-smi info did not answer within 5.0 s")
    view = ExporterView(snap(chip(0), probes=(failed,)), 5.01, None, {"npu-smi": 3, "sysfs": 0})
    got = series(render(view))
    assert got[("npuwatch_up", frozenset())] == 0.0
    assert got[("npuwatch_scrape_duration_seconds", frozenset())] == 5.01
    assert got[("npuwatch_probe_errors_total", frozenset({("probe", "npu-smi")}))] == 3
    assert got[("npuwatch_probe_errors_total", frozenset({("probe", "sysfs")}))] == 0
    assert got[("npuwatch_last_sample_timestamp_seconds", frozenset())] == TAKEN.timestamp()
    info = [labels for name, labels in got if name == "npuwatch_info"]
    assert dict(info[0])["source"] == "demo:test"
    assert series(render(ExporterView(snap(chip(0)), 0.1)))[("npuwatch_up", frozenset())] == 1.0
    assert series(render_age(2.5)) == {("npuwatch_sample_age_seconds", frozenset()): 2.5}


def test_a_sampler_failure_is_not_up_even_with_an_older_snapshot():
    view = ExporterView(snap(chip(0)), 0.1, "RuntimeError: boom", {"sampler": 1})
    assert not view.up
    assert series(render(view))[("npuwatch_up", frozenset())] == 0.0


@pytest.mark.parametrize("scenario", ["910b-training", "a3", "310p-duo", "950", "chip-alarm"])
def test_every_value_of_a_demo_snapshot_is_exposed_exactly(scenario, monkeypatch):
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "120")
    with open_feed(FeedOptions(demo=scenario, interval_s=1.0)) as sampler:
        snapshot = sampler.sample()
    got = series(render(ExporterView(snapshot, 0.1)))
    fields = {
        "npu_chip_info_power": "power_w",
        "npu_chip_info_temperature": "temperature_c",
        "npu_chip_info_utilization": "aicore_percent",
        "npu_chip_info_overall_utilization": "npu_util_percent",
        "npu_chip_info_hbm_used_memory": "hbm_used_mib",
        "npu_chip_info_hbm_total_memory": "hbm_total_mib",
        "npu_chip_info_used_memory": "memory_used_mib",
        "npu_chip_info_total_memory": "memory_total_mib",
    }
    assert snapshot.chips
    for c in snapshot.chips:
        labels = labels_of(c)
        assert got[chip_key("npu_chip_info_health_status", **labels)] == HEALTH_CODES[c.health]
        for name, field in fields.items():
            value = getattr(c, field)
            total = c.hbm_total_mib if "hbm" in name else c.memory_total_mib
            if "memory" in name and not total:
                value = None
            key = chip_key(name, **labels)
            if value is None:
                assert key not in got, (name, labels)
            else:
                assert got[key] == float(value), (name, labels)
    process_rows = [k for k in got if k[0] == "npu_chip_info_process_info"]
    assert len(process_rows) == len({(p.npu_id, p.chip_id, p.pid) for p in snapshot.processes})
    assert got[("machine_npu_nums", frozenset())] == len(snapshot.chips)
    ids = [chip_id_label(c.identity) for c in snapshot.chips]
    assert len(set(ids)) == len(ids)  # `id` names one chip


def test_the_judges_level_is_one_series_per_level_with_1_on_the_chips_level():
    hot = chip(0, temperature_c=88)  # 910B3: warning from 85 °C
    alarm = chip(1, health=Health.ALARM)
    fine = chip(2, temperature_c=40)
    got = series(render(ExporterView(snapshot=snap(hot, alarm, fine))))
    for sample, level in ((hot, "warning"), (alarm, "critical"), (fine, "ok")):
        for each in ("ok", "warning", "critical", "unknown"):
            key = chip_key("npuwatch_chip_level", **labels_of(sample), level=each)
            assert got[key] == (1 if each == level else 0), (sample.identity.label, each)


# --- the driver-only metrics (issue 16) ---------------------------------------------------------

DCMI_VALUES: Dict[str, object] = {
    "aicore_freq_mhz": 1300,
    "aicore_rated_freq_mhz": 1800,
    "vector_percent": 45,
    "cube_percent": 12,
    "aicpu_percent": 3,
    "ctrlcpu_percent": 7,
    "hbm_bandwidth_percent": 60,
    "hbm_temperature_c": 41,
    "voltage_v": 0.85,
    "ecc_single_bit_errors": 2,
    "ecc_double_bit_errors": 0,
    "ecc_isolated_pages": 1,
}
LABELS_3 = 'chip_id="0",id="3",model_name="910B3",npu_id="3",pcie_bus_info="0000:C3:00.0"'


def test_each_new_metric_is_one_exact_line_under_npu_exporters_name_or_npuwatchs():
    from npuwatch.model import ChipError

    errors = (ChipError("80E01801", "HBM multi-bit ECC error"), ChipError("80CB8009"))
    c = chip(3, health=Health.ALARM, errors=errors, **DCMI_VALUES)
    lines = render(ExporterView(snap(c, chip(4)), 0.1)).decode().splitlines()
    expected = [
        f"npu_chip_info_aicore_current_freq{{{LABELS_3}}} 1300.0",
        f"npuwatch_chip_aicore_rated_freq{{{LABELS_3}}} 1800.0",
        f"npu_chip_info_vector_utilization{{{LABELS_3}}} 45.0",
        f"npu_chip_info_cube_utilization{{{LABELS_3}}} 12.0",
        f"npuwatch_chip_aicpu_utilization{{{LABELS_3}}} 3.0",
        f"npuwatch_chip_ctrlcpu_utilization{{{LABELS_3}}} 7.0",
        f"npu_chip_info_hbm_bandwidth_utilization{{{LABELS_3}}} 60.0",
        f"npu_chip_info_hbm_temperature{{{LABELS_3}}} 41.0",
        f"npu_chip_info_voltage{{{LABELS_3}}} 0.85",
        f"npu_chip_info_hbm_ecc_single_bit_error_cnt{{{LABELS_3}}} 2.0",
        f"npu_chip_info_hbm_ecc_double_bit_error_cnt{{{LABELS_3}}} 0.0",  # a real 0 is kept
        f"npuwatch_chip_hbm_ecc_isolated_pages{{{LABELS_3}}} 1.0",
        # npu-exporter's error codes: the driver's unsigned number, the first, then _1 …
        f"npu_chip_info_error_code{{{LABELS_3}}} 2.162169857e+09",  # 0x80E01801
        f"npu_chip_info_error_code_1{{{LABELS_3}}} 2.160820233e+09",  # 0x80CB8009
    ]
    for line in expected:
        assert line in lines, line
    assert "# TYPE npu_chip_info_voltage gauge" in lines
    assert (
        "# HELP npu_chip_info_aicore_current_freq the npu ai core current frequency, unit is 'MHz'" in lines
    )
    # Chip 4 reports none of them: not one series of it (never NaN, never a fake 0).
    new_names = {line.split("{")[0] for line in expected}
    assert not [ln for ln in lines if ln.split("{")[0] in new_names and 'npu_id="4"' in ln]


def test_an_npu_smi_snapshot_exports_no_new_family_not_even_its_help_line():
    c = chip(0, power_w=90.7, temperature_c=37, aicore_percent=7, hbm_used_mib=3000, hbm_total_mib=65536)
    body = render(ExporterView(snap(c), 0.1)).decode()
    for row in DCMI_VALUES:
        assert str(metric(row).exporter_name) not in body
    assert "npu_chip_info_error_code" not in body  # a chip without error codes has none
    assert "npu_chip_info_overall_utilization" not in body  # no chip reports it: the family is left out
    labels = 'chip_id="0",id="0",model_name="910B3",npu_id="0",pcie_bus_info="0000:C0:00.0"'
    assert f"npu_chip_info_power{{{labels}}} 90.7" in body.splitlines()


def test_error_codes_stop_at_npu_exporters_ten_and_skip_a_code_that_is_not_hex():
    from npuwatch.exporter.metrics import ERROR_CODE_FAMILIES, error_code_value
    from npuwatch.model import ChipError

    assert error_code_value("80E01801") == 0x80E01801 and error_code_value("0") == 0
    for junk in ("not-hex", "0x80E01801", "180E018011", " 80E01801", "8_0E", ""):
        assert error_code_value(junk) is None, junk
    codes = (
        ChipError("not-hex"),
        *(ChipError(f"80E0180{i}") for i in range(9)),
        *(ChipError("81000000"),) * 3,
    )
    got = series(render(ExporterView(snap(chip(3, health=Health.ALARM, errors=codes)))))
    rows = {name: value for (name, _), value in got.items() if name.startswith("npu_chip_info_error_code")}
    assert list(rows) == list(ERROR_CODE_FAMILIES) and len(rows) == 10
    assert rows["npu_chip_info_error_code"] == 0x80E01800
    assert rows["npu_chip_info_error_code_9"] == 0x81000000


def test_npuwatch_info_names_the_backend():
    snapshot = replace(snap(chip(0)), chip_source="dcmi")
    got = series(render(ExporterView(snapshot)))
    info = [dict(labels) for name, labels in got if name == "npuwatch_info"]
    assert info[0]["backend"] == "dcmi"


#: A name as hostile as a source can make it: ESC sequences (clear screen, set the title), CR, a
#: newline, a quote, a backslash, C1 and bidi controls and a byte that is not UTF-8 (decoded with
#: surrogateescape, as npuwatch reads /proc and command output).
HOSTILE = 'x\x1b[2J\x1b]0;pwn\x07\r\n"q" \\b \x9b\u202e' + b"\xff".decode("utf-8", "surrogateescape")


def test_hostile_label_values_are_escaped_as_everywhere_else_and_the_exposition_parses():
    from npuwatch.text_safety import inert

    identity = ChipIdentity(0, 0, name=HOSTILE, bus_id=HOSTILE, logic_id=0)
    hostile = ChipSample(identity, health=Health.OK, aicore_percent=50)
    processes = (NpuProcess(0, 0, 4242, HOSTILE, 3120),)
    snapshot = replace(
        snap(hostile, processes=processes),
        source=f"root:{HOSTILE}",
        versions=Versions(npu_smi=HOSTILE, driver=HOSTILE),
    )
    body = render(ExporterView(snapshot, 0.1, None, {HOSTILE: 1}))
    assert all(byte >= 0x20 or byte == 0x0A for byte in body), "a control byte reached the exposition"
    assert b"\xc2\x9b" not in body and "\u202e".encode() not in body  # nor C1 or bidi controls
    assert len(body.decode("utf-8").splitlines()) == len(body.splitlines())  # no line split
    got = series(body)  # parses (prometheus_client's own parser)
    shown = inert(HOSTILE)
    assert got[chip_key("npu_chip_info_utilization", **{**labels_of(hostile), "model_name": shown,
                                                        "pcie_bus_info": shown})] == 50.0  # fmt: skip
    process = [dict(labels) for name, labels in got if name == "npu_chip_info_process_info"]
    assert process[0]["process_name"] == shown and process[0]["model_name"] == shown
    info = next(dict(labels) for name, labels in got if name == "npuwatch_info")
    assert info["source"] == f"root:{shown}" and info["npu_smi_version"] == shown == info["driver_version"]
    assert got[("npuwatch_probe_errors_total", frozenset({("probe", shown)}))] == 1
    promtool = shutil.which("promtool")
    if promtool is not None:  # the parser Prometheus itself uses
        checked = subprocess.run(
            [promtool, "check", "metrics"], input=body, capture_output=True, timeout=60, check=False
        )
        assert checked.returncode == 0 and b"error" not in checked.stderr + checked.stdout, checked
