"""The DCMI chip source: records → ChipSamples with one status per missing metric, failures → the seam."""

from __future__ import annotations

from pathlib import Path

import pytest

from npuwatch.chip_source import ChipSource
from npuwatch.model import CHIP_METRICS, ChipError, Health, MetricNote, MetricStatus, NpuProcess
from npuwatch.probes.dcmi import records, status
from npuwatch.probes.dcmi.source import (
    NOT_READ,
    DcmiSource,
    chip_sample,
    identity,
    npu_processes,
    open_dcmi_source,
    source_failure,
)
from npuwatch.probes.dcmi.worker import Worker, WorkerFailure
from tests.conftest import REPO, need

OPENER = "tests.dcmi.standin:open_reader"
REF = records.ChipRef(4, 1, logic_id=9, phy_id=9)
FACTS = records.ChipFacts(REF, chip_name="910B3", bus_id="0000:c1:00.0", aicore_rated_freq_mhz=1800)


# --- the one code mapping ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "metric_status", "reason"),
    [
        (-8255, MetricStatus.UNSUPPORTED, "not supported on this chip (DCMI -8255)"),
        (-8013, MetricStatus.UNSUPPORTED, "not supported inside a container (DCMI -8013)"),
        (
            records.SYMBOL_MISSING,
            MetricStatus.UNSUPPORTED,
            "not supported by this DCMI library (the function is missing from libdcmi)",
        ),
        (-8002, MetricStatus.PERMISSION, "not root and not in the HwHiAiUser group (DCMI -8002)"),
        (-8006, MetricStatus.TIMEOUT, "the device did not answer in time (DCMI -8006); retrying"),
        (
            -8012,
            MetricStatus.ERROR,
            "the device is not ready (booting or resetting) (DCMI -8012); retrying",
        ),
        (-8017, MetricStatus.ERROR, "a firmware upgrade is in progress (DCMI -8017); retrying"),
        (-8005, MetricStatus.ERROR, "device error: DCMI internal error"),
        (-8008, MetricStatus.ERROR, "device error: the device does not exist (DCMI -8008)"),
        (-8010, MetricStatus.ERROR, "device error: could not send a message to the device (DCMI -8010)"),
        (-8011, MetricStatus.ERROR, "device error: no reply from the device (DCMI -8011)"),
        (-8001, MetricStatus.ERROR, "invalid parameter (DCMI -8001)"),
        (-8999, MetricStatus.ERROR, "DCMI error -8999 (DCMI -8999)"),
        (records.INVALID_VALUE, MetricStatus.ERROR, "the DCMI library gave an impossible value"),
    ],
)
def test_each_code_has_one_status_and_reason(code, metric_status, reason):
    note = status.note(code)
    assert note.status is metric_status
    assert note.reason.startswith(reason) or note.reason == reason


@pytest.mark.parametrize(
    ("code", "klass"),
    [
        (-8255, status.CodeClass.UNSUPPORTED),
        (-8013, status.CodeClass.UNSUPPORTED),
        (records.SYMBOL_MISSING, status.CodeClass.UNSUPPORTED),
        (-8002, status.CodeClass.PERMISSION),
        (-8006, status.CodeClass.TRANSIENT),
        (-8012, status.CodeClass.TRANSIENT),
        (-8017, status.CodeClass.TRANSIENT),
        (-8005, status.CodeClass.DEVICE),
        (-8008, status.CodeClass.DEVICE),
        (-8010, status.CodeClass.DEVICE),
        (-8011, status.CodeClass.DEVICE),
        (-8001, status.CodeClass.OTHER),
    ],
)
def test_codes_fall_in_the_reference_s_classes(code, klass):
    assert status.classify(code) is klass


def test_the_mapping_reuses_dcmi_codes_meanings_and_hints():
    from npuwatch.probes.dcmi_codes import describe

    for code in (-8005, -8010, -8012):
        known = describe(code)
        assert known is not None
        assert known.meaning in status.reason(code)
        assert status.hint(code) == known.hint


def test_error_codes_are_printed_as_npu_smi_prints_them():
    assert status.error_code_text(0x80E01801) == "80E01801"
    assert status.error_code_text(0x80E01801 - 2**32) == "80E01801"  # the same word read as a signed int
    assert status.error_code_text(0x1) == "00000001"


# --- records → model ---------------------------------------------------------------------------


def test_identity_is_npu_smi_s():
    chip = identity(FACTS)
    assert (chip.npu_id, chip.chip_id) == (4, 1)
    assert chip.name == "910B3"
    assert chip.bus_id == "0000:C1:00.0"
    assert (chip.phy_id, chip.logic_id) == (9, 9)


@pytest.mark.parametrize(
    ("raw", "health"), [(0, Health.OK), (1, Health.WARNING), (2, Health.ALARM), (3, Health.CRITICAL)]
)
def test_health_values_map_to_npu_smi_s_words(raw, health):
    sample = chip_sample(identity(FACTS), FACTS, records.ChipTick(REF, health=raw))
    assert sample.health is health
    assert sample.lost_reason is None


def test_an_absent_health_makes_the_chip_lost_with_every_metric_an_error():
    sample = chip_sample(identity(FACTS), FACTS, records.ChipTick(REF, health=0xFFFFFFFF))
    assert sample.health is Health.UNKNOWN
    assert sample.lost_reason is not None and "0xFFFFFFFF" in sample.lost_reason
    assert set(sample.notes) == set(CHIP_METRICS)
    assert {note.status for note in sample.notes.values()} == {MetricStatus.ERROR}


def test_a_device_that_does_not_exist_is_lost_too():
    tick = records.ChipTick(REF, health=None, codes={"health": -8008})
    sample = chip_sample(identity(FACTS), FACTS, tick)
    assert sample.lost_reason is not None and "DCMI -8008" in sample.lost_reason


def test_values_become_fields_in_their_types_and_every_other_metric_gets_a_note():
    tick = records.ChipTick(
        REF,
        health=0,
        values={"power_w": 93.5, "temperature_c": 41.4, "hbm_used_mib": 3000.0, "voltage_v": 0.82},
        codes={"npu_util_percent": -8255, "aicore_percent": -8002},
    )
    sample = chip_sample(identity(FACTS), FACTS, tick)
    assert sample.power_w == 93.5
    assert sample.temperature_c == 41 and isinstance(sample.temperature_c, int)
    assert sample.hbm_used_mib == 3000 and isinstance(sample.hbm_used_mib, int)
    assert getattr(sample, "voltage_v", 0.82) == 0.82
    assert getattr(sample, "aicore_rated_freq_mhz", 1800) == 1800  # a slow fact, from the enumeration
    assert sample.notes["npu_util_percent"] == MetricNote(
        MetricStatus.UNSUPPORTED, "not supported on this chip (DCMI -8255)"
    )
    assert sample.notes["aicore_percent"].status is MetricStatus.PERMISSION
    assert sample.notes["hugepages_used"] is NOT_READ
    for metric in CHIP_METRICS:  # every metric: a number, or None with its reason
        assert (getattr(sample, metric) is None) == (metric in sample.notes), metric


def test_a_fact_s_code_explains_its_metric():
    facts = records.ChipFacts(REF, codes={"aicore_rated_freq_mhz": -8255})
    sample = chip_sample(identity(facts), facts, records.ChipTick(REF, health=0))
    if "aicore_rated_freq_mhz" in CHIP_METRICS:
        assert sample.notes["aicore_rated_freq_mhz"].status is MetricStatus.UNSUPPORTED


def test_values_for_fields_the_model_lacks_are_left_out():
    tick = records.ChipTick(REF, health=0, values={"no_such_metric": 1.0, "power_w": float("nan")})
    sample = chip_sample(identity(FACTS), FACTS, tick)
    assert sample.power_w is None and "power_w" in sample.notes


def test_error_codes_become_chip_errors():
    tick = records.ChipTick(
        REF,
        health=2,
        error_codes=(
            records.ErrorCodeRecord(0x80E01801, "HBM multi-bit ECC error"),
            records.ErrorCodeRecord(0x80CB8009, ""),
        ),
    )
    sample = chip_sample(identity(FACTS), FACTS, tick)
    assert sample.errors == (ChipError("80E01801", "HBM multi-bit ECC error"), ChipError("80CB8009", None))


def test_process_memory_is_bytes_rounded_down_to_mib():
    found = (records.ProcessRecord(4242, 3 * 2**20 + 5), records.ProcessRecord(7, 2**20 - 1))
    assert npu_processes(identity(FACTS), found) == (
        NpuProcess(4, 1, 4242, npu_memory_mib=3),
        NpuProcess(4, 1, 7, npu_memory_mib=0),
    )


@pytest.mark.parametrize(
    ("kind", "metric_status"),
    [
        ("permission", MetricStatus.PERMISSION),
        ("timeout", MetricStatus.TIMEOUT),
        ("crash", MetricStatus.ERROR),
        ("init", MetricStatus.ERROR),
        ("not-found", MetricStatus.ERROR),
        ("load", MetricStatus.ERROR),
    ],
)
def test_worker_failures_keep_their_kind_on_the_seam(kind, metric_status):
    failure = source_failure(WorkerFailure(kind, "what happened", "what to do", code=-8002))
    assert (failure.kind, failure.message, failure.hint) == (kind, "what happened", "what to do")
    assert failure.metric_status is metric_status
    assert failure.error_code == -8002


# --- the source, reading through a worker ------------------------------------------------------


def _source(tmp_path: Path, mode: str = "ok", timeout_s: float = 5.0) -> DcmiSource:
    environ = {"PYTHONPATH": str(REPO), "STANDIN_MODE": mode, "STANDIN_MARK": str(tmp_path / "mark")}
    worker = Worker(None, "/", timeout_s, environ, opener=OPENER)
    worker.start()
    return DcmiSource(worker, label="demo:test")


def test_the_source_declares_what_it_provides():
    source: ChipSource = DcmiSource(Worker(None, "/", 1.0), label="dcmi")
    assert source.probe_name == "dcmi"
    assert source.label == "dcmi"
    assert source.provides_details is False
    assert source.provides_processes is True
    assert source.provides_logic_ids is True
    assert source.chip_details(0, 0) is None


def test_a_read_gives_chips_processes_and_versions(tmp_path):
    source = _source(tmp_path)
    try:
        outcome = source.read()
    finally:
        source.close()
    assert outcome.failure is None and outcome.reading is not None
    reading = outcome.reading
    assert [chip.identity.key for chip in reading.chips] == [(0, 0), (3, 0)]
    assert reading.chips[0].identity.bus_id == "0000:C1:00.0"
    assert reading.chips[1].health is Health.WARNING
    assert reading.chips[1].errors == (ChipError("80E01801", "HBM multi-bit ECC error"),)
    assert reading.processes == (NpuProcess(0, 0, 4242, npu_memory_mib=3),)
    assert reading.process_table is True
    assert reading.versions.driver == "24.1.rc1.b030"
    assert getattr(reading.versions, "dcmi", "24.1.rc1") == "24.1.rc1"


def test_a_hang_is_a_timeout_reading_and_the_next_read_works(tmp_path):
    source = _source(tmp_path, "hang-tick-once", timeout_s=0.5)
    try:
        hung = source.read()
        after = source.read()
    finally:
        source.close()
    assert hung.reading is None and hung.failure is not None
    assert hung.failure.kind == "timeout"
    assert hung.failure.metric_status is MetricStatus.TIMEOUT
    assert after.failure is None and after.reading is not None and len(after.reading.chips) == 2


def test_a_segfault_is_a_crash_reading_never_an_exception(tmp_path):
    source = _source(tmp_path, "segv-tick-once")
    try:
        crashed = source.read()
        after = source.read()
    finally:
        source.close()
    assert crashed.failure is not None and crashed.failure.kind == "crash"
    assert "SIGSEGV" in crashed.failure.message
    assert after.reading is not None


def test_a_gone_chip_is_lost_and_the_chips_are_listed_again_soon(tmp_path):
    source = _source(tmp_path, "gone")
    clock = [1000.0]
    source._clock = lambda: clock[0]
    try:
        first = source.read()
        assert first.reading is not None
        lost = first.reading.chips[1]
        assert lost.lost_reason is not None and lost.identity.key == (3, 0)
        assert source._reenumeration_due() is False  # not more often than REENUMERATE_SOON_S
        clock[0] += 11.0
        assert source._reenumeration_due() is True
        again = source.read()
        assert source.last_timings.get("inventory_s") is not None
        assert again.reading is not None
    finally:
        source.close()


def test_open_dcmi_source_starts_the_worker_at_once(tmp_path):
    environ = {"PYTHONPATH": str(REPO), "STANDIN_MODE": "ok", "STANDIN_MARK": str(tmp_path / "mark")}
    source = open_dcmi_source(None, "/", "demo:x", 5.0, environ)
    try:
        assert source.worker.pid is not None  # started, not yet waited for
        assert source.label == "demo:x"
        assert source.worker.library is None
    finally:
        source.close()
    assert source.worker.pid is None


def test_open_dcmi_source_takes_the_library_from_the_environment(monkeypatch):
    monkeypatch.setenv("NPUWATCH_DCMI_LIB", "/nowhere/libdcmi.so")
    source = open_dcmi_source(None, "/", timeout_s=None)
    try:
        assert source.worker.library == "/nowhere/libdcmi.so"
        assert source.worker.timeout_s == 2.0
    finally:
        source.close()


# --- through the demos' fake library (C, and its pure-Python twin): the real loader and reader ----


@pytest.fixture(params=["c", "python"])
def fake_library(request: pytest.FixtureRequest) -> str:
    from npuwatch.probes.simulator.dcmi_fake import build
    from npuwatch.probes.simulator.dcmi_fake.install import STANDIN

    if request.param == "python":
        return STANDIN
    built = build.build()
    need(built.path is not None, f"the fake libdcmi.so needs a C compiler: {built.reason}")
    assert built.path is not None
    return str(built.path)


def _machine(path: Path, faults: str = "") -> None:
    """The 910b-training demo's state at a fixed instant, with ``faults`` lines added."""
    from npuwatch.probes.simulator.catalog import SCENARIOS
    from npuwatch.probes.simulator.dcmi_fake.state import render
    from npuwatch.probes.simulator.dynamics import machine_state

    temporary = path.with_suffix(".next")
    temporary.write_text(render(machine_state(SCENARIOS["910b-training"], 100.0, 0)) + faults)
    temporary.replace(path)


def _fake_source(library: str, state: Path, timeout_s: float = 10.0) -> DcmiSource:
    from npuwatch.probes.simulator.dcmi_fake.state import STATE_VARIABLE

    return open_dcmi_source(library, "/", "demo:test", timeout_s, {STATE_VARIABLE: str(state)})


def test_the_fake_machine_reads_as_its_eight_chips(fake_library, tmp_path):
    state = tmp_path / "fake-dcmi.state"
    _machine(state)
    source = _fake_source(fake_library, state)
    try:
        outcome = source.read()
    finally:
        source.close()
    assert outcome.failure is None and outcome.reading is not None
    chips = outcome.reading.chips
    assert [chip.identity.key for chip in chips] == [(n, 0) for n in range(8)]
    assert all(chip.health is Health.OK and chip.power_w is not None for chip in chips)
    assert outcome.reading.process_table and outcome.reading.processes


def test_a_hang_in_the_fake_library_times_out_and_the_next_worker_reads(fake_library, tmp_path):
    state = tmp_path / "fake-dcmi.state"
    _machine(state, "hang dcmi_get_device_temperature -1 -1 0\n")
    source = _fake_source(fake_library, state, timeout_s=1.0)
    try:
        hung = source.read()
        assert hung.failure is not None and hung.failure.kind == "timeout"
        _machine(state)  # the driver recovers
        after = source.read()
    finally:
        source.close()
    assert after.failure is None and after.reading is not None and len(after.reading.chips) == 8
    assert source.worker.starts == 2


def test_a_segfault_in_the_fake_library_is_reported_and_the_next_worker_reads(fake_library, tmp_path):
    state = tmp_path / "fake-dcmi.state"
    _machine(state, "crash dcmi_get_device_power_info -1 -1\n")
    source = _fake_source(fake_library, state)
    try:
        crashed = source.read()
        assert crashed.failure is not None and crashed.failure.kind == "crash"
        assert crashed.failure.message == (
            "the DCMI library crashed (SIGSEGV) in the worker; npuwatch kept running"
        )
        _machine(state)
        after = source.read()
    finally:
        source.close()
    assert after.reading is not None and len(after.reading.chips) == 8


def test_dcmi_init_refused_is_a_permission_failure_with_the_group_fix(fake_library, tmp_path):
    state = tmp_path / "fake-dcmi.state"
    _machine(state, "rc dcmi_init -1 -1 -8002\n")
    source = _fake_source(fake_library, state)
    try:
        refused = source.read()
    finally:
        source.close()
    assert refused.failure is not None
    assert refused.failure.kind == "permission"
    assert refused.failure.metric_status is MetricStatus.PERMISSION
    assert refused.failure.error_code == -8002
    assert "sudo usermod -aG HwHiAiUser $USER" in refused.failure.hint


def test_a_metric_the_fake_refuses_gets_its_status(fake_library, tmp_path):
    state = tmp_path / "fake-dcmi.state"
    _machine(state, "rc dcmi_get_device_temperature -1 -1 -8002\nrc dcmi_get_device_power_info 0 0 -8010\n")
    source = _fake_source(fake_library, state)
    try:
        outcome = source.read()
    finally:
        source.close()
    assert outcome.reading is not None
    first = outcome.reading.chips[0]
    assert first.temperature_c is None
    assert first.notes["temperature_c"] == MetricNote(
        MetricStatus.PERMISSION, "not root and not in the HwHiAiUser group (DCMI -8002)"
    )
    assert first.notes["power_w"].reason == (
        "device error: could not send a message to the device (DCMI -8010)"
    )
    assert outcome.reading.chips[1].power_w is not None
