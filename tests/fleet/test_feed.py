"""The fleet feed: a failing source keeps the last nodes, marked stale; fleet record and replay."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List, Union

import pytest

from npuwatch.fleet.feed import FleetFeed, FleetRecordingWriter, ReplaySource, read_fleet_recording
from npuwatch.fleet.model import Exporter, FleetChip, FleetNode, FleetSnapshot
from npuwatch.fleet.prometheus import PrometheusError, UnreachableError
from npuwatch.model import ChipIdentity, ChipSample, Health, Level, Snapshot
from npuwatch.recording import RecordingError, RecordingWriter
from tests.conftest import REPO
from tests.fleet.cluster import run_fleet

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def node(name: str, level: Level, at: datetime, temperature: int = 40) -> FleetNode:
    sample = ChipSample(ChipIdentity(0, 0, name="910B3"), health=Health.OK, temperature_c=temperature)
    snapshot = Snapshot(taken_at=at, source=f"prometheus:{name}", chips=(sample,))
    chip = FleetChip(sample, level, () if level is Level.OK else ("something",))
    return FleetNode(name, name, (chip,), level, (), False, None, at, 0.5, Exporter.NPUWATCH, snapshot)


def fleet(at: datetime, temperature: int = 40) -> FleetSnapshot:
    nodes = (node("a:1", Level.WARNING, at, temperature), node("b:1", Level.OK, at, temperature))
    return FleetSnapshot(taken_at=at, source="prometheus:http://p:9090", nodes=nodes)


class Scripted:
    """A source that answers from a script: a FleetSnapshot, or an exception to raise."""

    def __init__(self, script: List[Union[FleetSnapshot, Exception]]) -> None:
        self.script = script
        self.closed = False

    @property
    def label(self) -> str:
        return "scripted"

    def read(self) -> FleetSnapshot:
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self.closed = True


def test_a_failing_source_keeps_the_last_nodes_marked_stale_with_the_error():
    error = "cannot reach Prometheus at http://p:9090: connection refused (is it running?)"
    later = fleet(T0 + timedelta(seconds=5))
    source = Scripted([UnreachableError(error), fleet(T0), UnreachableError(error), later])
    with FleetFeed(source, 5.0) as feed:
        first = feed.sample()
        assert (first.error, first.nodes) == (error, ())
        assert feed.sample().error is None
        kept = feed.sample()
        assert kept.error == error
        assert [n.node for n in kept.nodes] == ["a:1", "b:1"]
        assert all(n.stale and n.stale_reason == error for n in kept.nodes)
        assert all(n.reasons[0] == f"stale: {error}" for n in kept.nodes)
        assert [n.level for n in kept.nodes] == [Level.UNKNOWN, Level.UNKNOWN]
        assert kept.nodes[0].chips_total == 1  # the last chips stay
        again = feed.sample()
        assert again.error is None and not any(n.stale for n in again.nodes)
        assert feed.history.values("a:1", "chips_ok") == [0.0, None, 0.0]  # the failed refresh is a gap
        assert feed.history.values("b:1", "chips_ok", last=1) == [1.0]
    assert source.closed


def test_every_prometheus_error_is_caught_by_sample():
    feed = FleetFeed(Scripted([PrometheusError("x")]), 1.0)
    assert feed.sample().error == "x"


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "fleet.ndjson.gz"
    with FleetRecordingWriter(path) as writer:
        for second in range(5):
            writer.write_fleet(fleet(T0 + timedelta(seconds=second), temperature=40 + second))
    return path


def test_a_fleet_recording_reads_back_in_order(recording: Path):
    fleets, warnings = read_fleet_recording(recording)
    assert warnings == ()
    assert [f.taken_at for f in fleets] == [T0 + timedelta(seconds=s) for s in range(5)]
    assert [f.nodes[0].chips[0].sample.temperature_c for f in fleets] == [40, 41, 42, 43, 44]
    assert fleets[0].nodes[0].level is Level.WARNING


def test_replay_plays_with_timing_and_gives_the_recorded_history(recording: Path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("npuwatch.fleet.feed.time.monotonic", lambda: clock[0])
    source = ReplaySource(recording, speed=2.0)
    assert source.duration_s == 4.0
    assert source.read().taken_at == T0
    clock[0] += 1.0  # two recorded seconds at 2x
    assert source.read().taken_at == T0 + timedelta(seconds=2)
    assert [s.chips[0].temperature_c for s in source.node_history("a:1")] == [40, 41, 42]
    clock[0] += 100.0
    assert source.read().taken_at == T0 + timedelta(seconds=4)
    assert source.ended
    feed = FleetFeed(source, 1.0)
    feed.sample()
    history = feed.node_history("a:1")
    assert history is not None
    assert history.values((0, 0), "temperature_c") == [40.0, 41.0, 42.0, 43.0, 44.0]


def test_a_torn_last_line_is_skipped(recording: Path, tmp_path: Path):
    plain = tmp_path / "plain.ndjson"
    with FleetRecordingWriter(plain) as writer:
        writer.write_fleet(fleet(T0))
    with open(plain, "a", encoding="utf-8") as handle:
        handle.write('{"schema": "npuwatch/fleet/v1", "taken_at": ')
    fleets, warnings = read_fleet_recording(plain)
    assert len(fleets) == 1
    (warning,) = warnings
    assert warning == "plain.ndjson: the last line is incomplete (the recorder stopped mid-write); ignored"


def test_a_node_recording_is_not_a_fleet_recording_and_back(tmp_path: Path, recording: Path):
    node_file = tmp_path / "node.ndjson"
    with RecordingWriter(node_file) as writer:
        writer.write(fleet(T0).nodes[0].snapshot)  # type: ignore[arg-type]
    with pytest.raises(RecordingError, match="it is a node recording"):
        read_fleet_recording(node_file)
    result = run_fleet("--replay", str(node_file), "--json")
    assert result.returncode == 64
    assert "it is a node recording (replay it with `npuwatch --replay`)" in result.stderr
    node_replay = subprocess.run(
        [sys.executable, "-m", "npuwatch", "snapshot", "--json", "--replay", str(recording)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert node_replay.returncode != 0
    assert "npuwatch/fleet/v1" in node_replay.stderr
    assert "Traceback" not in node_replay.stderr


def test_record_then_replay_on_the_command_line(tmp_path: Path, recording: Path):
    copy = tmp_path / "again.ndjson"
    fast = ("--speed", "100", "--interval", "0.05")
    result = run_fleet("--replay", str(recording), *fast, "--record", str(copy))
    assert result.returncode == 0, result.stderr
    assert "fleet snapshots to" in result.stderr and "(end of the recording)" in result.stderr
    fleets, _ = read_fleet_recording(copy)
    assert fleets[-1].taken_at == T0 + timedelta(seconds=4)
    refused = run_fleet("--replay", str(recording), "--record", str(copy))
    assert refused.returncode == 64 and "already exists (pass --force" in refused.stderr
    shown = run_fleet("--replay", str(recording), "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["source"] == "prometheus:http://p:9090"
    assert [n["node"] for n in document["nodes"]] == ["a:1", "b:1"]
