"""`npuwatch fleet` against a real Prometheus (Debian's `prometheus`) scraping, every second, three
`npuwatch serve` demos (chip-alarm, a3, 910b-training; clocks frozen) and npu-exporter's exact
exposition (tests/fleet/data/npu_exporter.prom, after Ascend/mind-cluster's
component/npu-exporter/collector/testdata/prometheus_metrics: the same labels and per-sample
timestamps), and the same three servers polled with --hosts."""

from __future__ import annotations

import time
from typing import Callable, Dict, Iterator, List

import pytest

from tests.fleet.cluster import (
    Cluster,
    ExpositionServer,
    exporter_body,
    first_line_json,
    free_port,
    run_fleet,
    running_cluster,
    wait_until,
)
from tests.fleet.test_series import schema_validator

SCENARIOS = ("chip-alarm", "a3", "910b-training")
COMPARED = ("power_w", "temperature_c", "aicore_percent", "hbm_used_mib", "hbm_total_mib")


EXPOSITIONS: Dict[str, Callable[[], ExpositionServer]] = {
    "npu-exporter": lambda: ExpositionServer(exporter_body()),
    "npu-exporter-behind": lambda: ExpositionServer(exporter_body(), clock_offset_s=-120.0),
    "npu-exporter-no-id": lambda: ExpositionServer(exporter_body(drop_labels=("id",))),
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("fleet-cluster")
    # settle_s: a few scrapes of each
    with running_cluster(root, SCENARIOS, EXPOSITIONS, settle_s=2.0) as made:
        yield made


def fleet_json(cluster: Cluster, *extra: str) -> Dict:
    result = run_fleet("--prometheus", cluster.prometheus.url, "--json", *extra)
    document = first_line_json(result)
    assert document is not None, result.stderr
    schema_validator().validate(document)
    document["_exit"] = result.returncode
    document["_stderr"] = result.stderr
    return document


def by_chip(chips: List[Dict]) -> Dict:
    return {(c["npu_id"], c["chip_id"]): c for c in chips}


def test_three_serve_nodes_worst_first_with_values_equal_to_each_snapshot(cluster: Cluster):
    fleet = fleet_json(cluster, "--selector", '{job="npu"}')
    assert (fleet["_exit"], fleet["_stderr"]) == (0, "")
    assert fleet["schema"] == "npuwatch/fleet/v1"
    nodes = fleet["nodes"]
    assert len(nodes) == 3
    assert fleet["chips_total"] == sum(n["chips_total"] for n in nodes) == 32
    alarm = cluster.serves["chip-alarm"]
    first = nodes[0]
    assert first["instance"] == alarm.address
    assert first["level"] == "critical"
    assert first["reasons"][0].startswith("NPU 3: Alarm 80E01801")
    assert "restart-business" in first["reasons"][0]
    assert (first["chips_ok"], first["chips_total"]) == (7, 8)
    for node in nodes:
        assert node["exporter"] == "npuwatch"
        assert node["stale"] is False
        assert node["age_s"] is not None and node["age_s"] < 30
        serve = next(s for s in cluster.serves.values() if s.address == node["instance"])
        snapshot = serve.snapshot()
        mine, theirs = by_chip(node["chips"]), by_chip(snapshot["chips"])
        assert mine.keys() == theirs.keys()
        for key, chip in mine.items():
            assert {m: chip[m] for m in COMPARED} == {m: theirs[key][m] for m in COMPARED}, (
                serve.scenario,
                key,
            )
            assert chip["judgement"]["level"] == theirs[key]["judgement"]["level"]
            assert chip["name"] == theirs[key]["name"]
            assert chip["bus_id"] == theirs[key]["bus_id"]
        assert sum(node["workload_classes"].values()) == len(node["chips"])  # npuwatch_chip_workload
        hottest = max(snapshot["chips"], key=lambda c: c["temperature_c"])
        assert node["hottest"]["temperature_c"] == hottest["temperature_c"]


def classes_of(chips: List[Dict]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for chip in chips:
        if chip["workload"] is not None:
            counts[chip["workload"]["class"]] = counts.get(chip["workload"]["class"], 0) + 1
    return counts


def test_workload_classes_are_the_ones_each_serve_judged(cluster: Cluster):
    def same() -> bool:
        fleet = fleet_json(cluster, "--selector", '{job="npu"}')
        for node in fleet["nodes"]:
            serve = next(s for s in cluster.serves.values() if s.address == node["instance"])
            if node["workload_classes"] != classes_of(serve.snapshot()["chips"]):
                return False
            if classes_of(node["chips"]) != node["workload_classes"]:
                return False
        return True

    wait_until(same, 30, "the fleet's workload classes equal to each /snapshot's")


def test_without_a_selector_every_target_with_npu_series_is_a_node(cluster: Cluster):
    result = run_fleet("--prometheus", cluster.prometheus.url, "--json")
    fleet = first_line_json(result)
    assert fleet is not None
    wanted = {s.address for s in cluster.serves.values()} | {
        cluster.expositions[job].address for job in ("npu-exporter", "npu-exporter-behind")
    }
    assert {n["instance"] for n in fleet["nodes"]} == wanted  # Prometheus itself is no node
    assert fleet["chips_total"] == 48
    assert any("series skipped: no npu_id or id label" in w for w in fleet["warnings"])
    assert result.returncode == 1


def test_npu_exporter_series_are_judged_by_the_same_judge(cluster: Cluster):
    fleet = fleet_json(cluster, "--selector", '{job="npu-exporter"}')
    assert (fleet["_exit"], fleet["_stderr"]) == (0, "")
    (node,) = fleet["nodes"]
    assert node["exporter"] == "npu-exporter"
    assert node["instance"] == cluster.expositions["npu-exporter"].address
    assert (node["chips_ok"], node["chips_total"], node["level"]) == (6, 8, "critical")
    assert "NPU 2: Alarm 80E01801 → restart-business" in node["reasons"]
    assert "NPU 5: 97 °C (critical limit 95 °C)" in node["reasons"]
    chips = by_chip(node["chips"])
    assert chips[(2, 0)]["power_w"] == 302.5
    assert chips[(2, 0)]["error_codes"][0]["code"] == "80E01801"
    assert chips[(2, 0)]["error_codes"][0]["handling"] == "restart-business"
    assert chips[(7, 0)]["aicore_percent"] == 83
    assert chips[(7, 0)]["hbm_used_mib"] == 50700
    assert chips[(0, 0)]["bus_id"] == "0000:C1:00.0"
    assert node["workload_classes"] == {}  # npu-exporter has no workload series
    assert {(p["npu_id"], p["pid"], p["npu_memory_mib"]) for p in node["processes"]} == {
        (i, 4321 + i, 48000 + i) for i in range(8)
    }


def test_a_node_whose_clock_is_behind_is_stale_with_the_reason(cluster: Cluster):
    fleet = fleet_json(cluster, "--selector", '{job="npu-exporter-behind"}')
    (node,) = fleet["nodes"]
    assert node["stale"] is True
    assert "clock is behind" in node["stale_reason"]
    assert 100 < node["age_s"] < 200
    assert node["chips_total"] == 8  # its last chips stay
    assert fleet["_exit"] == 1
    (line,) = fleet["_stderr"].splitlines()
    assert line.startswith("npuwatch fleet: ") and "clock is behind" in line


def test_series_missing_labels_are_skipped_with_one_line(cluster: Cluster):
    result = run_fleet(
        "--prometheus", cluster.prometheus.url, "--json", "--selector", '{job="npu-exporter-no-id"}'
    )
    assert result.returncode == 1
    skipped, stale = result.stderr.splitlines()
    assert skipped.startswith("npuwatch fleet: ") and "series skipped: no npu_id or id label" in skipped
    assert "sends no NPU series" in stale
    fleet = first_line_json(result)
    assert fleet is not None
    (node,) = fleet["nodes"]  # the target is still a row: never silently dropped
    assert (node["stale"], node["chips_total"]) == (True, 0)


def test_an_empty_result_is_one_line_exit_1(cluster: Cluster):
    result = run_fleet("--prometheus", cluster.prometheus.url, "--json", "--selector", '{job="nothing"}')
    assert (result.returncode, result.stdout) == (1, "")
    (line,) = result.stderr.splitlines()
    assert 'has no NPU series matching {job="nothing"}' in line


def test_a_serve_url_is_not_a_prometheus_api(cluster: Cluster):
    serve = cluster.serves["a3"]
    result = run_fleet("--prometheus", f"http://{serve.address}", "--json")
    assert (result.returncode, result.stdout) == (1, "")
    (line,) = result.stderr.splitlines()
    assert "is not a Prometheus API" in line


def test_hosts_polls_the_three_servers(cluster: Cluster):
    addresses = [serve.address for serve in cluster.serves.values()]
    result = run_fleet("--hosts", ",".join(addresses), "--json")
    assert (result.returncode, result.stderr) == (0, "")
    fleet = first_line_json(result)
    assert fleet is not None
    schema_validator().validate(fleet)
    assert [n["chips_total"] for n in fleet["nodes"]].count(16) == 1
    assert fleet["chips_total"] == 32
    first = fleet["nodes"][0]
    assert first["instance"] == cluster.serves["chip-alarm"].address
    assert first["reasons"][0].startswith("NPU 3: Alarm 80E01801")
    for node in fleet["nodes"]:
        snapshot = next(s for s in cluster.serves.values() if s.address == node["instance"]).snapshot()
        theirs = by_chip(snapshot["chips"])
        for key, chip in by_chip(node["chips"]).items():
            assert {m: chip[m] for m in COMPARED} == {m: theirs[key][m] for m in COMPARED}


def test_hosts_with_an_unreachable_address_marks_only_it_stale(cluster: Cluster):
    dead = f"127.0.0.1:{free_port()}"
    addresses = [serve.address for serve in cluster.serves.values()]
    started = time.monotonic()
    result = run_fleet("--hosts", ",".join([*addresses, dead]), "--json", "--timeout", "3")
    assert time.monotonic() - started < 30
    fleet = first_line_json(result)
    assert fleet is not None
    assert result.returncode == 1
    (line,) = result.stderr.splitlines()
    assert dead in line and "connection refused" in line
    stale = [n for n in fleet["nodes"] if n["stale"]]
    assert [n["instance"] for n in stale] == [dead]
    assert fleet["chips_total"] == 32
    assert fleet["nodes"][0]["instance"] == cluster.serves["chip-alarm"].address


def test_a_node_opened_gets_its_history_from_range_queries(cluster: Cluster):
    from npuwatch.fleet.feed import FleetFeed, PrometheusSource
    from npuwatch.fleet.prometheus import Prometheus

    source = PrometheusSource(Prometheus(cluster.prometheus.url), matchers='job="npu"')
    with FleetFeed(source, 1.0) as feed:
        fleet = feed.sample()
        a3 = cluster.serves["a3"]
        node = fleet.node(a3.address)
        assert node is not None and node.chips_total == 16
        history = feed.node_history(a3.address)
    assert history is not None
    assert len(history.chips()) == 16
    snapshot = a3.snapshot()
    power = history.values((0, 0), "power_w")
    assert len(power) >= 3  # a point a second (the feed's interval) since Prometheus began scraping it
    assert power[-1] == snapshot["chips"][0]["power_w"]


def test_stopping_a_serve_makes_its_node_stale_within_two_scrape_intervals(cluster: Cluster):
    # Last in this module: it stops one of the servers the tests above read.
    serve = cluster.serves["910b-training"]
    before = fleet_json(cluster, "--selector", '{job="npu"}')
    assert not any(n["stale"] for n in before["nodes"])
    serve.stop()
    time.sleep(2.0)  # two scrape intervals
    after = fleet_json(cluster, "--selector", '{job="npu"}')
    node = next(n for n in after["nodes"] if n["instance"] == serve.address)
    assert node["stale"] is True, node
    assert "up == 0" in node["stale_reason"]
    assert node["chips_total"] == 8  # never dropped: its last chips stay
    assert node["level"] in ("unknown", "critical")
    assert after["_exit"] == 1
    assert f"{serve.address} is stale" in after["_stderr"]
    wait_until(lambda: True, 1, "")
