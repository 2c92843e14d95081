"""Prometheus vectors → fleet nodes (npuwatch.fleet.series), the fleet JSON and its schema: no server."""

from __future__ import annotations

import json
from importlib import resources
from typing import Dict, List, Optional, Tuple

import jsonschema
import pytest
from referencing import Registry, Resource

from npuwatch.fleet import fleet_json
from npuwatch.fleet.model import Exporter, FleetSnapshot
from npuwatch.fleet.prometheus import Sample
from npuwatch.fleet.series import fleet_queries, read_nodes, selector_matchers
from npuwatch.model import Level

NOW = 1_800_000_000.0


def schema_validator() -> jsonschema.Draft202012Validator:
    files = resources.files("npuwatch")
    fleet = json.loads(files.joinpath("fleet-v1.schema.json").read_text())
    node = json.loads(files.joinpath("snapshot-v1.schema.json").read_text())
    registry = Registry().with_resources(
        [(fleet["$id"], Resource.from_contents(fleet)), (node["$id"], Resource.from_contents(node))]
    )
    return jsonschema.Draft202012Validator(
        fleet, registry=registry, format_checker=jsonschema.FormatChecker()
    )


Tagged = Tuple[str, Sample]


def s(tag: str, value: float, instance: Optional[str] = "n1:9492", **labels: str) -> Tagged:
    full: Dict[str, str] = {"job": "npu", **labels}
    if instance is not None:
        full["instance"] = instance
    return tag, Sample(full, value, NOW)


def chip(npu: int, tag: str, value: float, instance: str = "n1:9492", **labels: str) -> Tagged:
    return s(
        tag, value, instance, id=str(npu), model_name="910B3", pcie_bus_info=f"0000:0{npu}:00.0", **labels
    )


def healthy_node(instance: str, health: Dict[int, float], temps: Dict[int, float]) -> List[Tagged]:
    out = [s("health_time", NOW - 1, instance), s("up", 1, instance), s("up_time", NOW - 1, instance)]
    for npu, value in health.items():
        out.append(chip(npu, "npu_chip_info_health_status", value, instance))
        out.append(chip(npu, "npu_chip_info_temperature", temps.get(npu, 40), instance))
        out.append(chip(npu, "npu_chip_info_utilization", 50 + npu, instance))
    return out


def test_npu_exporter_chips_are_judged_worst_node_first():
    samples = healthy_node("good:1", {0: 1, 1: 1}, {})
    samples += healthy_node("bad:1", {0: 1, 1: 0}, {0: 99})
    reading = read_nodes(samples, NOW, with_up_only=False)
    assert [n.instance for n in reading.nodes] == ["bad:1", "good:1"]
    bad = reading.nodes[0]
    assert bad.exporter is Exporter.NPU_EXPORTER
    assert (bad.level, bad.chips_ok, bad.chips_total) == (Level.CRITICAL, 0, 2)
    assert "NPU 0: 99 °C (critical limit 95 °C)" in bad.reasons
    assert any(r.startswith("NPU 1: Alarm") for r in bad.reasons)
    assert bad.aicore_mean == 50.5 and bad.aicore_min == 50
    assert reading.warnings == ()


def test_npuwatch_level_and_workload_series_are_used_when_present():
    samples = healthy_node("n:1", {0: 0}, {})
    samples.append(chip(0, "npuwatch_chip_level", 1, "n:1", npu_id="0", chip_id="0", level="warning"))
    samples.append(chip(0, "npuwatch_chip_level", 0, "n:1", npu_id="0", chip_id="0", level="critical"))
    samples.append(
        chip(0, "npuwatch_chip_workload", 1, "n:1", npu_id="0", chip_id="0", **{"class": "waiting"})
    )
    (node,) = read_nodes(samples, NOW, with_up_only=False).nodes
    assert node.exporter is Exporter.NPUWATCH
    assert node.level is Level.WARNING  # npuwatch's judge: health 0 with level warning is a Warning
    assert node.chips[0].sample.health.value == "Warning"
    assert node.workload_classes == {"waiting": 1}


def test_series_without_instance_or_ids_are_skipped_with_a_warning():
    samples = [s("npu_chip_info_health_status", 1, None, id="0"), s("npu_chip_info_health_status", 1, "n:1")]
    reading = read_nodes(samples, NOW, with_up_only=False)
    assert reading.nodes == ()
    why = "(the fleet needs instance and npu_id or id on every NPU series)"
    assert reading.warnings == (
        f"1 series skipped: no instance label {why}",
        f"1 series skipped: no npu_id or id label {why}",
    )


@pytest.mark.parametrize(
    ("up", "health_time", "expected"),
    [
        (0, NOW - 1, "up == 0"),
        (1, None, "stopped at the latest scrape"),
        (None, None, "no longer scrapes it"),
        (1, NOW - 600, "600 s old (limit 60 s) though it answers Prometheus: its clock is behind"),
    ],
)
def test_stale_nodes_keep_their_chips_with_the_reason(up, health_time, expected):
    samples = [chip(0, "npu_chip_info_health_status", 1), chip(0, "npu_chip_info_temperature", 40)]
    if up is not None:
        samples.append(s("up", up))
    if health_time is not None:
        samples.append(s("health_time", health_time))
    (node,) = read_nodes(samples, NOW, with_up_only=True).nodes
    assert node.stale and expected in (node.stale_reason or "")
    assert node.chips_total == 1 and node.level is Level.UNKNOWN
    assert node.reasons[0] == f"stale: {node.stale_reason}"


def test_a_target_without_npu_series_is_a_node_only_with_a_selector():
    samples = [s("up", 1, "other:9100")]
    assert read_nodes(samples, NOW, with_up_only=False).nodes == ()
    (node,) = read_nodes(samples, NOW, with_up_only=True).nodes
    assert node.stale and "sends no NPU series" in (node.stale_reason or "")


def test_a_node_clock_ahead_is_a_warning():
    samples = [
        *healthy_node("n:1", {0: 1}, {}),
        s("npuwatch_last_sample_timestamp_seconds", NOW + 119, "n:1"),
    ]
    samples += [s("last_sample_scraped", NOW - 1, "n:1"), s("npuwatch_sample_age_seconds", 0.5, "n:1")]
    (node,) = read_nodes(samples, NOW, with_up_only=False).nodes
    assert not node.stale
    assert node.clock_offset_s == pytest.approx(120.5)
    assert node.warnings == ("its clock is 120 s ahead of Prometheus' (fix NTP on the node)",)


def test_the_node_label_names_the_node():
    samples = [*healthy_node("10.0.0.7:9492", {0: 1}, {})]
    samples.append(chip(1, "npu_chip_info_health_status", 1, "10.0.0.7:9492", node="gpu-node-7"))
    (node,) = read_nodes(samples, NOW, with_up_only=False).nodes
    assert (node.node, node.instance) == ("gpu-node-7", "10.0.0.7:9492")


@pytest.mark.parametrize(
    ("given", "matchers"),
    [(None, ""), ('{job="npu"}', 'job="npu"'), ('job="npu", cluster=~"a|b",', 'job="npu", cluster=~"a|b"')],
)
def test_selectors(given, matchers):
    assert selector_matchers(given) == matchers
    queries = dict(fleet_queries(matchers))
    assert f"npu_chip_info_temperature{{{matchers}}}[300s]" in queries["npu_chip_info_temperature"]
    assert queries["up"] == f"up{{{matchers}}}"


@pytest.mark.parametrize("bad", ["up", '{job="npu"} or vector(1)', "{job=npu}", '{job="a"}}'])
def test_a_bad_selector_is_refused(bad):
    with pytest.raises(ValueError, match="not a series selector"):
        selector_matchers(bad)


def test_the_json_is_valid_and_reads_back():
    samples = healthy_node("good:1", {0: 1, 1: 1}, {}) + healthy_node("bad:1", {0: 0}, {})
    samples.append(
        chip(0, "npu_chip_info_process_info", 4000, "good:1", process_id="77", process_name="python")
    )
    samples.append(chip(1, "npu_chip_info_process_info", 4000, "good:1", process_id="78"))
    reading = read_nodes(samples, NOW, with_up_only=False)
    fleet = FleetSnapshot(
        taken_at=reading.nodes[0].taken_at, source="prometheus:http://p:9090", nodes=reading.nodes
    )
    document = json.loads(fleet_json.dumps(fleet))
    schema_validator().validate(document)
    assert [n["node"] for n in document["nodes"]] == ["bad:1", "good:1"]
    back = fleet_json.from_dict(document)
    assert [(n.node, n.level, n.chips_total, n.chips_ok, n.reasons) for n in back.nodes] == [
        (n.node, n.level, n.chips_total, n.chips_ok, n.reasons) for n in fleet.nodes
    ]
    assert back.nodes[1].snapshot is not None and len(back.nodes[1].snapshot.processes) == 2
    assert json.loads(fleet_json.dumps(back)) == document


def test_a_node_document_is_not_a_fleet_document():
    with pytest.raises(ValueError, match="not a npuwatch/fleet/v1 document"):
        fleet_json.from_dict({"schema": "npuwatch/snapshot/v1"})


def test_non_finite_values_are_left_out():
    samples = healthy_node("n:1", {0: 1}, {})
    samples.append(chip(0, "npu_chip_info_process_info", float("inf"), "n:1", process_id="9"))
    samples.append(chip(0, "npu_chip_info_power", float("nan"), "n:1"))
    (node,) = read_nodes(samples, NOW, with_up_only=False).nodes
    assert node.snapshot is not None and node.snapshot.processes == ()
    assert node.chips[0].sample.power_w is None
