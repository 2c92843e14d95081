"""What a chip source says it reads is what it reads (psutil-style contract), and the snapshot keeps it.

Every backend declares a ``SourceInfo`` (``SOURCE_INFO`` beside its source).  On the demo machine
(the simulator's fake npu-smi, the fake ``libdcmi.so``) each declared metric is carried with a
value by some reading, and no reading carries a value for a metric its source did not declare;
every reading says whether it read a process table this tick, and DCMI's 310P board power is
the card's (``MetricScope``).  The JSON keeps it through ``record`` and ``--replay``; a recording
made before the field derives what its backend could truthfully read.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Dict, FrozenSet, Set

import pytest

from npuwatch import snapshot_json
from npuwatch.chip_source import source_title
from npuwatch.cli import main
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.model import CHIP_METRICS, Snapshot
from npuwatch.probes.dcmi.source import SOURCE_INFO as DCMI
from npuwatch.probes.npu_smi.source import SOURCE_INFO as NPU_SMI
from npuwatch.source_info import SCOPE_CARD, SCOPE_CHIP, MetricScope, SourceInfo, title_for

DECLARED = {"npu-smi": NPU_SMI, "dcmi": DCMI}
#: The demos that together show every layout each backend reads: an A2 table (HBM, AI Core), a
#: 310P Duo (DDR, huge pages, NPU Util, board power) and a 950 (NPU Util through npu-smi, Cube).
LAYOUTS = ("910b-training", "310p-duo", "950")
#: A declared metric no demo shows, and why (psutil's "not on this platform" note): none today.
NOT_ON_THE_DEMO: Dict[str, FrozenSet[str]] = {"npu-smi": frozenset(), "dcmi": frozenset()}


def sampled(scenario: str, backend: str) -> Snapshot:
    with open_feed(FeedOptions(demo=scenario, backend=backend, interval_s=1.0, host=False)) as feed:
        return feed.sample()


def carried(snapshot: Snapshot) -> Set[str]:
    """The metrics any chip of ``snapshot`` carries a value for."""
    return {name for chip in snapshot.chips for name in CHIP_METRICS if chip.metric(name) is not None}


@pytest.mark.parametrize("backend", sorted(DECLARED))
def test_each_backend_reads_exactly_the_metrics_it_declares(backend):
    declared = DECLARED[backend]
    seen: Set[str] = set()
    for scenario in LAYOUTS:
        snapshot = sampled(scenario, backend)
        info = snapshot.source_info
        assert info is not None and info.name == snapshot.chip_source == backend, scenario
        assert info.metrics == declared.metrics and info.title == declared.title, scenario
        surplus = carried(snapshot) - declared.metrics
        assert not surplus, f"{backend} on {scenario} reads {sorted(surplus)} it does not declare"
        seen |= carried(snapshot)
    # Every capability declared has a reader: each declared metric has a value somewhere.
    assert declared.metrics - seen == NOT_ON_THE_DEMO[backend]


def scenario_names():
    from npuwatch.probes.simulator import list_scenarios

    return [entry[0] for entry in list_scenarios()]


@pytest.mark.parametrize("backend", sorted(DECLARED))
@pytest.mark.parametrize("scenario", scenario_names())
def test_no_demo_reading_carries_a_metric_its_source_does_not_declare(scenario, backend):
    snapshot = sampled(scenario, backend)
    info = snapshot.described
    assert info.name == snapshot.chip_source  # auto is not asked here: the backend asked reads
    assert carried(snapshot) <= DECLARED[info.name].metrics


def test_npu_smi_declares_none_of_the_driver_only_metrics():
    assert not NPU_SMI.reads("aicpu_percent") and not NPU_SMI.reads("aicore_freq_mhz")
    assert NPU_SMI.unread(("aicore_percent", "aicpu_percent", "hbm_bandwidth_percent")) == (
        "aicpu_percent",
        "hbm_bandwidth_percent",
    )
    assert DCMI.unread(CHIP_METRICS) == ()


@pytest.mark.parametrize("backend", sorted(DECLARED))
def test_a_reading_says_it_read_a_process_table_and_lists_what_it_read(backend):
    snapshot = sampled("910b-training", backend)
    assert snapshot.described.process_table
    assert snapshot.processes  # the training job's processes: the table was read, not assumed


def test_dcmi_keeps_a_310p_duo_s_board_power_as_the_card_s_on_its_first_chip():
    snapshot = sampled("310p-duo", "dcmi")
    info = snapshot.described
    assert info.scopes  # the fact DCMI's reader records is kept, not dropped
    for scope in info.scopes:
        assert (scope.metric, scope.scope, scope.chip_id) == ("power_w", SCOPE_CARD, 0)
        chip = snapshot.chip(scope.npu_id, scope.chip_id)
        assert chip is not None and chip.power_w is not None
        second = snapshot.chip(scope.npu_id, 1)
        assert second is not None and info.scope_of(second.identity.key, "power_w") == SCOPE_CHIP
    assert {s.npu_id for s in info.scopes} == {c.identity.npu_id for c in snapshot.chips}


def test_a_failed_read_says_no_process_table_was_read():
    snapshot = sampled("dcmi-permission", "dcmi")
    assert snapshot.described.name == "dcmi" and not snapshot.described.process_table


@pytest.mark.parametrize("backend", sorted(DECLARED))
def test_the_titles_known_by_name_are_the_backends_own(backend):
    assert title_for(backend) == source_title(backend) == DECLARED[backend].title


def test_auto_carries_the_info_of_the_backend_that_read():
    fell_back = sampled("dcmi-permission", "auto")
    assert fell_back.chip_source == "npu-smi" and fell_back.backend_note is not None
    assert fell_back.described.metrics == NPU_SMI.metrics
    read = sampled("910b-training", "auto")
    assert read.chip_source == "dcmi" and read.described.metrics == DCMI.metrics


# --- the JSON, a recording and a replay keep it ---------------------------------------------------


def record(tmp_path: Path, *argv: str) -> Path:
    path = tmp_path / "run.ndjson"
    assert main(["record", *argv, "--duration", "1", "--interval", "0.5", "--quiet", str(path)]) == 0
    return path


def replayed(path: Path) -> Snapshot:
    with open_feed(FeedOptions(replay=str(path), speed=100.0)) as feed:
        return feed.sample()


def test_snapshot_json_carries_the_source_info(capsys):
    assert main(["snapshot", "--json", "--demo", "310p-duo", "--backend", "dcmi"]) == 0
    doc = json.loads(capsys.readouterr().out)
    info = doc["source_info"]
    assert (info["name"], info["title"], info["process_table"]) == ("dcmi", "DCMI", True)
    assert info["metrics"] == list(CHIP_METRICS)
    assert {(s["metric"], s["scope"], s["chip_id"]) for s in info["scopes"]} == {("power_w", "card", 0)}


def test_a_replay_keeps_what_the_recorded_source_could_read(tmp_path):
    path = record(tmp_path, "--demo", "310p-duo", "--backend", "dcmi")
    snapshot = replayed(path)
    assert snapshot.source_info is not None
    assert snapshot.source_info.name == "dcmi" and snapshot.source_info.reads("aicpu_percent")
    assert snapshot.source_info.scope_of((2, 0), "power_w") == SCOPE_CARD


def strip_source_info(path: Path, processes: bool = True) -> Path:
    """The recording as a version before ``source_info`` wrote it (and, optionally, no process)."""
    lines = []
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        del doc["source_info"]
        if not processes:
            doc["processes"] = []
        lines.append(json.dumps(doc))
    older = path.with_name("older.ndjson.gz")
    older.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return older


def test_a_recording_made_before_the_field_derives_a_truthful_one(tmp_path):
    older = strip_source_info(record(tmp_path, "--demo", "910b-training", "--backend", "npu-smi"))
    info = replayed(older).described
    assert info.name == "npu-smi" and info.title == "npu-smi"
    assert not info.reads("aicpu_percent")  # npu-smi never read AI CPU: not "everything"
    assert info.metrics == NPU_SMI.metrics
    assert info.process_table  # the recording lists the job's processes


def test_a_recording_without_processes_does_not_claim_a_process_table(tmp_path):
    path = record(tmp_path, "--demo", "910b-training", "--backend", "dcmi")
    info = replayed(strip_source_info(path, processes=False)).described
    assert info.name == "dcmi" and info.title == "DCMI" and info.reads("aicpu_percent")
    assert not info.process_table  # nothing shows one was read: "no process listed" is not "none"


def test_an_unknown_backend_s_recording_reads_the_metrics_it_shows():
    doc = snapshot_json.to_dict(sampled("910b-training", "npu-smi"))
    doc["backend"] = "some-future-source"
    del doc["source_info"]
    info = snapshot_json.from_dict(doc).described
    assert info.name == "some-future-source"
    assert info.metrics == NPU_SMI.metrics - {"npu_util_percent"}  # the A2 table has no NPU Util


def test_a_hand_built_snapshot_writes_null_and_reads_back_none():
    snapshot = Snapshot(sampled("idle", "npu-smi").taken_at, "test")
    doc = snapshot_json.to_dict(snapshot)
    assert doc["source_info"] is None
    assert snapshot_json.from_dict(doc).source_info is None


def test_a_wrong_source_info_is_a_clear_error_and_unknown_words_are_left_out():
    doc = snapshot_json.to_dict(sampled("idle", "npu-smi"))
    doc["source_info"] = {**doc["source_info"], "metrics": ["power_w", "warp_drive_percent"]}
    doc["source_info"]["scopes"] = [
        {"npu_id": 0, "chip_id": 0, "metric": "power_w", "scope": "rack"},
        {"npu_id": 0, "chip_id": 0, "metric": "power_w", "scope": "card"},
    ]
    info = snapshot_json.from_dict(doc).source_info
    assert info == SourceInfo(
        "npu-smi", "npu-smi", True, frozenset({"power_w"}), (MetricScope(0, 0, "power_w", SCOPE_CARD),)
    )
    doc["source_info"] = {**doc["source_info"], "metrics": "power_w"}
    with pytest.raises(ValueError, match="metrics"):
        snapshot_json.from_dict(doc)


def test_the_fleet_keeps_each_node_s_source_info(tmp_path):
    import subprocess
    import sys

    from npuwatch.fleet import fleet_json
    from tests.exporter.test_serve_cli import start_serve, started_port

    process, out, _ = start_serve(
        tmp_path, "--demo", "310p-duo", "--backend", "dcmi", "--listen", "127.0.0.1:0", "--interval", "0.5"
    )
    try:
        port, _ = started_port(process, out)
        argv = [sys.executable, "-m", "npuwatch", "fleet", "--hosts", f"127.0.0.1:{port}", "--json"]
        for _ in range(60):  # until the node has a sample (its /snapshot answers 503 before)
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            doc = json.loads(result.stdout)
            if doc["nodes"] and doc["nodes"][0]["source_info"] is not None:
                break
    finally:
        process.terminate()
        process.wait(timeout=60)
    info = doc["nodes"][0]["source_info"]
    assert (info["name"], info["title"]) == ("dcmi", "DCMI")
    assert {(s["metric"], s["scope"]) for s in info["scopes"]} == {("power_w", "card")}
    node = fleet_json.from_dict(doc).nodes[0]  # a fleet recording's line, read back
    assert node.snapshot is not None and node.snapshot.source_info is not None
    assert node.snapshot.source_info.scope_of((2, 0), "power_w") == SCOPE_CARD


def test_what_a_verdict_needs_is_a_source_that_reads_it_never_a_backend_s_name():
    assert (
        NPU_SMI.needs(("aicore_percent", "aicpu_percent")) == "needs a source that reads AI CPU utilisation"
    )
    assert NPU_SMI.needs(("aicore_freq_mhz", "aicore_rated_freq_mhz", "power_w")) == (
        "needs a source that reads AI Core frequency and AI Core rated frequency"
    )
    assert DCMI.needs(("aicpu_percent",)) == ""
