"""The schema-v1 additions of issue 16: the driver-only metrics, ``backend``/``backend_note`` and the
DCMI version, written, validated and read back (and an older recording without them still loads)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Dict

import jsonschema
import pytest

from npuwatch import snapshot_json
from npuwatch.model import (
    CHIP_METRICS,
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    ProbeReport,
    Snapshot,
    Versions,
)
from npuwatch.probes.npu_smi.table import NOT_IN_TABLE, parse_info

SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())
CAPTURES = Path(__file__).resolve().parent.parent / "data" / "npu_smi"
WHEN = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
NEW = CHIP_METRICS[CHIP_METRICS.index("hugepages_total") + 1 :]
DCMI_VALUES: Dict[str, Any] = {
    "aicore_freq_mhz": 1300,
    "aicore_rated_freq_mhz": 1800,
    "vector_percent": 45,
    "cube_percent": None,
    "aicpu_percent": 3,
    "ctrlcpu_percent": 7,
    "hbm_bandwidth_percent": 60,
    "hbm_temperature_c": 41,
    "voltage_v": 0.85,
    "ecc_single_bit_errors": 2,
    "ecc_double_bit_errors": 0,
    "ecc_isolated_pages": 1,
}
NO_CUBE = MetricNote(MetricStatus.UNSUPPORTED, "DCMI -8255: this chip has no AI Cube utilisation")


def validate(document: Dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(document)


def dcmi_snapshot(**changes: Any) -> Snapshot:
    chip = ChipSample(
        ChipIdentity(0, 0, "910B3", "0000:C1:00.0", logic_id=0),
        Health.ALARM,
        power_w=352.8,
        temperature_c=53,
        aicore_percent=86,
        hbm_used_mib=53760,
        hbm_total_mib=65536,
        notes={"cube_percent": NO_CUBE},
        errors=(ChipError("80E01801", "HBM multi-bit ECC error"), ChipError("80CB8009", None)),
        **DCMI_VALUES,
    )
    fields: Dict[str, Any] = {
        "versions": Versions(driver="24.1.rc2", dcmi="24.1.0"),
        "chips": (chip,),
        "probes": (ProbeReport("dcmi", MetricStatus.OK, 0.004, found=1),),
        "chip_source": "dcmi",
        **changes,
    }
    return Snapshot(WHEN, "demo:910b-training", **fields)


def test_a_dcmi_snapshot_writes_every_new_metric_the_backend_and_the_dcmi_version():
    doc = snapshot_json.to_dict(dcmi_snapshot())
    validate(doc)
    assert list(doc)[:5] == ["schema", "taken_at", "source", "backend", "backend_note"]
    assert (doc["backend"], doc["backend_note"]) == ("dcmi", None)
    assert doc["versions"] == {
        "npu_smi": None,
        "driver": "24.1.rc2",
        "firmware": None,
        "cann": None,
        "dcmi": "24.1.0",
    }
    chip = doc["chips"][0]
    assert {name: chip[name] for name in NEW} == DCMI_VALUES
    assert [k for k in chip if k in CHIP_METRICS] == list(CHIP_METRICS)  # the schema's order
    assert chip["unavailable"] == {"cube_percent": NO_CUBE.reason}
    # Said once: an unsupported driver-only metric's status is the default, its reason in unavailable.
    assert chip["metric_status"] == {} and chip["metric_notes"] == {}
    assert chip["error_codes"] == [
        {
            "code": "80E01801",
            "text": "HBM multi-bit ECC error",
            "handling": "restart-business",
            "action": "restart the job (from its last checkpoint): the chip itself stays in service",
        },
        {
            "code": "80CB8009",
            "text": None,
            "handling": "restart-request",
            "action": "retry the failed request or step: the fault is transient",
        },
    ]
    text = snapshot_json.dumps(dcmi_snapshot(), indent=None)
    assert '"aicore_freq_mhz":1300,' in text and '"voltage_v":0.85,' in text


def test_a_driver_only_metric_that_failed_or_is_stale_keeps_its_status():
    timeout = MetricNote(MetricStatus.TIMEOUT, "dcmi_get_device_frequency did not return within 2 s")
    stale = MetricNote(MetricStatus.STALE, "dcmi timed out; showing the value from 2 s ago")
    snapshot = dcmi_snapshot()
    chip = snapshot.chips[0]
    notes = {**chip.notes, "aicore_freq_mhz": timeout, "vector_percent": stale}
    chip = replace(chip, aicore_freq_mhz=None, notes=notes)
    snapshot = replace(snapshot, chips=(chip,))
    doc = snapshot_json.to_dict(snapshot)["chips"][0]
    assert doc["metric_status"] == {"aicore_freq_mhz": "timeout", "vector_percent": "stale"}
    assert doc["unavailable"] == {"aicore_freq_mhz": timeout.reason, "cube_percent": NO_CUBE.reason}
    assert doc["vector_percent"] == 45 and doc["metric_notes"]["vector_percent"] == stale.reason
    assert snapshot_json.from_dict(json.loads(snapshot_json.dumps(snapshot))) == snapshot


def test_a_fallback_says_why_in_backend_note():
    note = "DCMI failed 3 ticks in a row (dcmi_get_device_health timed out): npu-smi reads the chips"
    doc = snapshot_json.to_dict(dcmi_snapshot(chip_source="npu-smi", backend_note=note))
    validate(doc)
    assert (doc["backend"], doc["backend_note"]) == ("npu-smi", note)


def test_the_new_fields_read_back_exactly():
    for original in (dcmi_snapshot(), dcmi_snapshot(chip_source="npu-smi", backend_note="fell back")):
        again = snapshot_json.from_dict(json.loads(snapshot_json.dumps(original)))
        assert again == original
        chip = again.chips[0]
        assert type(chip.aicore_freq_mhz) is int and type(chip.voltage_v) is float
        assert again.versions.dcmi == "24.1.0" and again.chip_source_version == (
            "24.1.0" if again.chip_source == "dcmi" else None
        )


def test_an_npu_smi_snapshot_has_each_new_metric_null_with_the_dcmi_reason():
    table = parse_info(next(CAPTURES.glob("001_*.txt")).read_text())
    snapshot = Snapshot(WHEN, "npu-smi", table.to_reading().versions, chips=table.chips)
    doc = snapshot_json.to_dict(snapshot)
    validate(doc)
    assert (doc["backend"], doc["backend_note"], doc["versions"]["dcmi"]) == ("npu-smi", None, None)
    for chip in doc["chips"]:
        for name in NEW:
            assert chip[name] is None
            assert chip["unavailable"][name] == NOT_IN_TABLE[name].reason
            assert name not in chip["metric_status"] and name not in chip["metric_notes"]
        assert chip["metric_status"]["npu_util_percent"] == "unsupported"  # the old metrics as before
    assert snapshot_json.from_dict(json.loads(snapshot_json.dumps(snapshot))) == snapshot


def test_a_recording_made_before_the_new_fields_still_loads():
    doc = snapshot_json.to_dict(dcmi_snapshot(chip_source="npu-smi"))
    old = copy.deepcopy(doc)
    for key in ("backend", "backend_note"):
        del old[key]
    del old["versions"]["dcmi"]
    for chip in old["chips"]:
        for name in NEW:
            del chip[name]
            chip["unavailable"].pop(name, None)
            chip["metric_status"].pop(name, None)
            chip["metric_notes"].pop(name, None)
    snapshot = snapshot_json.from_dict(old)
    assert snapshot.chip_source == "npu-smi" and snapshot.backend_note is None
    assert snapshot.versions.dcmi is None
    chip = snapshot.chips[0]
    assert chip.power_w == 352.8 and chip.errors[0].code == "80E01801"
    for name in NEW:
        assert getattr(chip, name) is None
        assert chip.notes[name] == MetricNote(MetricStatus.UNSUPPORTED, snapshot_json.NOT_RECORDED)
    again = snapshot_json.to_dict(snapshot)
    validate(again)
    assert again["chips"][0]["unavailable"]["vector_percent"] == (
        "not in the recording (made before npuwatch read this metric)"
    )


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("backend",), "nvml"),
        (("backend_note",), 3),
        (("versions", "dcmi"), 24),
        (("chips", 0, "vector_percent"), 101),
        (("chips", 0, "hbm_bandwidth_percent"), -1),
        (("chips", 0, "cube_percent"), 12.5),
        (("chips", 0, "aicore_freq_mhz"), "1300"),
        (("chips", 0, "hbm_temperature_c"), 41.5),
        (("chips", 0, "voltage_v"), -0.1),
        (("chips", 0, "ecc_double_bit_errors"), -1),
        (("chips", 0, "ecc_isolated_pages"), True),
        (("chips", 0, "error_codes"), [{"code": 2162169857, "text": None}]),
    ],
)
def test_the_schema_rejects_a_wrong_new_field(where, value):
    doc = snapshot_json.to_dict(dcmi_snapshot())
    node: Any = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("vector_percent", "45", "vector_percent: str where a number belongs"),
        ("ecc_single_bit_errors", [2], "ecc_single_bit_errors: list where a number belongs"),
        ("voltage_v", 10**400, "voltage_v: an integer of 401 digits"),
        ("backend", 1, "backend: int where text belongs"),
    ],
)
def test_reading_back_names_a_wrong_new_field(key, value, message):
    doc = snapshot_json.to_dict(dcmi_snapshot())
    (doc["chips"][0] if key in NEW else doc)[key] = value
    with pytest.raises(ValueError, match=message):
        snapshot_json.from_dict(doc)
