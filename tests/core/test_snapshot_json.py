"""Tests for the npuwatch/snapshot/v1 JSON form: schema, nulls with reasons, round trip."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from npuwatch import snapshot_json
from npuwatch.chip_link import pcie_record
from npuwatch.judge import judge_chip
from npuwatch.model import (
    CHIP_METRICS,
    ChipIdentity,
    ChipSample,
    Health,
    HostInfo,
    MetricNote,
    MetricStatus,
    NpuProcess,
    PcieLink,
    ProbeReport,
    ProcessHostInfo,
    Snapshot,
    Versions,
)
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.source_info import SCOPE_CARD, MetricScope, SourceInfo

DATA = Path(__file__).resolve().parent.parent / "data" / "npu_smi"
SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())


def validate(document: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(document)


def sample_snapshot() -> Snapshot:
    chip = ChipSample(
        identity=ChipIdentity(npu_id=0, chip_id=1, name="Ascend910", bus_id="0000:9F:00.0", phy_id=1),
        health=Health.WARNING,
        power_w=None,
        temperature_c=35,
        aicore_percent=0,
        hbm_used_mib=3200,
        hbm_total_mib=65536,
        memory_used_mib=0,
        memory_total_mib=0,
        hugepages_used=0,
        hugepages_total=0,
        notes={
            "power_w": MetricNote(MetricStatus.UNSUPPORTED, "npu-smi prints '-'"),
            "npu_util_percent": MetricNote(MetricStatus.UNSUPPORTED, "not shown by this npu-smi layout"),
            "temperature_c": MetricNote(MetricStatus.STALE, "showing the value from 3 s ago"),
        },
        pcie=PcieLink(16.0, 16.0, 8, 16, 0, 0, 0, 0),
        # The record the sampler's PCIe enricher makes of that reading (npuwatch.links.pcie).
        links=(pcie_record(PcieLink(16.0, 16.0, 8, 16, 0, 0, 0, 0), "0000:9f:00.0"),),
    )
    process = NpuProcess(
        npu_id=0,
        chip_id=1,
        pid=42,
        name="python",
        npu_memory_mib=3120,
        host=ProcessHostInfo(
            user="alice",
            command="python train.py",
            cpu_percent=99.5,
            rss_bytes=1 << 30,
            start_time_s=1.7e9,
        ),
    )
    return Snapshot(
        taken_at=datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone.utc),
        source="demo:a3",
        versions=Versions(npu_smi="24.1.rc1", driver="24.1.rc1"),
        chips=(chip,),
        processes=(process,),
        host=HostInfo(
            hostname="node1",
            cpu_percent=12.5,
            per_cpu_percent=(10.0, 15.0),
            memory_used_bytes=1,
            memory_total_bytes=2,
            load_average=(0.1, 0.2, 0.3),
        ),
        warnings=("w",),
        probes=(ProbeReport("npu-smi", MetricStatus.OK, 0.2),),
    )


def test_document_matches_the_design_contract():
    doc = snapshot_json.to_dict(sample_snapshot())
    validate(doc)
    assert doc["schema"] == "npuwatch/snapshot/v1"
    assert doc["taken_at"] == "2026-11-22T10:00:00.123456+00:00"
    chip = doc["chips"][0]
    assert list(chip)[:7] == [
        "npu_id",
        "chip_id",
        "phy_id",
        "device_id",
        "logic_id",
        "name",
        "bus_id",
    ]
    assert chip["power_w"] is None and chip["unavailable"]["power_w"] == "npu-smi prints '-'"
    assert chip["npu_util_percent"] is None and "npu_util_percent" in chip["unavailable"]
    assert chip["aicore_percent"] == 0  # a real 0 stays a number
    # Stale values cannot be judged: the judge says unknown, and why.
    assert chip["judgement"] == {"level": "unknown", "reasons": ["PCIe x8 of x16", "values stale"]}
    assert chip["lost_reason"] is None
    assert "temperature_c" not in chip["unavailable"]  # stale is a number with a status
    assert chip["metric_status"]["temperature_c"] == "stale"
    assert chip["pcie"]["current_width"] == 8
    proc = doc["processes"][0]
    assert (proc["user"], proc["rss_bytes"], proc["container_pid"]) == ("alice", 1 << 30, None)
    assert doc["host"]["load_average"] == [0.1, 0.2, 0.3]


def test_every_null_metric_has_a_reason_for_every_capture():
    for path in sorted(DATA.glob("*.txt")):
        table = parse_info(path.read_text(errors="replace"))
        for chip in table.chips:
            doc = snapshot_json._chip_dict(chip, judge_chip(chip))
            nulls = {k for k in CHIP_METRICS if doc[k] is None}
            assert nulls == set(doc["unavailable"]), (path.name, chip.identity)


def test_round_trip_gives_the_same_snapshot():
    scope = MetricScope(0, 0, "power_w", SCOPE_CARD)
    info = SourceInfo("dcmi", "DCMI", False, frozenset({"power_w", "aicpu_percent"}), (scope,))
    original = replace(sample_snapshot(), source_info=info)
    again = snapshot_json.from_dict(json.loads(snapshot_json.dumps(original)))
    assert again == original


def test_one_line_form_for_ndjson():
    line = snapshot_json.dumps(sample_snapshot(), indent=None)
    assert "\n" not in line
    validate(json.loads(line))


def test_from_dict_rejects_other_documents():
    with pytest.raises(ValueError, match="snapshot/v1"):
        snapshot_json.from_dict({"schema": "something/else"})
