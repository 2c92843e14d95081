"""``npuwatch snapshot --replay FILE --all [--json]``: the post-mortem of a recording (issue 28,
Deliver 6), through the public command line on recordings written here with the recorder."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from importlib import resources
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import jsonschema
import pytest

from npuwatch.alerts import AlertTracker
from npuwatch.cli import EXIT_USAGE, main
from npuwatch.model import MetricStatus, ProbeReport, Snapshot
from npuwatch.recording import RecordingWriter, read_recording
from npuwatch.replay import ReplaySampler
from tests.conftest import capture_text
from tests.core.test_alerts import chip, proc, snap

SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=timezone.utc)
#: NPU 0's temperature a second apart: a one-sample spike (no alert), then a hot spell of four
#: samples (shown from its second, held through two cool samples, gone at the third).
TEMPERATURES = (45, 45, 95, 45, 45, 95, 95, 95, 95, 45, 45, 45, 45)
#: NPU 1's AI Core with a busy host process: its class changes, and settles, as the judge rules.
AICORE = (90, 90, 90, 2, 2, 2, 2, 90, 90, 2, 90, 90, 90)
HOT_SHOWN = [6, 7, 8, 9, 10]


def story() -> List[Snapshot]:
    out = []
    for i, (temperature, aicore) in enumerate(zip(TEMPERATURES, AICORE)):
        chips = [chip(0, temperature_c=temperature), chip(1, aicore_percent=aicore)]
        snapshot = snap(chips, [proc(0, 0, 1000), proc(1, 0, 1001, cpu=380.0)])
        out.append(replace(snapshot, taken_at=T0 + timedelta(seconds=i)))
    return out


def write(path: Path, snapshots: Sequence[Snapshot]) -> Path:
    with RecordingWriter(path) as writer:
        for snapshot in snapshots:
            writer.write(snapshot)
    return path


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    return write(tmp_path / "incident.ndjson.gz", story())


def run(capsys: pytest.CaptureFixture[str], *args: str) -> Tuple[int, str, str]:
    code = main(["snapshot", *args])
    out, err = capsys.readouterr()
    return code, out, err


def ndjson(text: str) -> List[Dict]:
    documents = [json.loads(line) for line in text.splitlines()]
    for document in documents:
        jsonschema.Draft202012Validator(SCHEMA).validate(document)
    return documents


def messages(document: Dict) -> List[str]:
    return [alert["message"] for alert in document["alerts"]]


def test_json_is_one_valid_document_per_sample_in_order_with_the_alerts_shown(recording, capsys):
    code, out, err = run(capsys, "--replay", str(recording), "--all", "--json")
    assert (code, err) == (0, "")
    documents = ndjson(out)
    assert [d["taken_at"] for d in documents] == [s.taken_at.isoformat() for s in story()]
    assert {d["source"] for d in documents} == {f"replay:{recording.name}"}
    hot = [i for i, d in enumerate(documents) if any(a["kind"] == "temperature" for a in d["alerts"])]
    assert hot == HOT_SHOWN, "the spike never shows; the spell from its second sample to the clear"
    alert = next(a for a in documents[6]["alerts"] if a["kind"] == "temperature")
    assert (alert["npu_id"], alert["chip_id"], alert["severity"]) == (0, 0, "critical")
    assert documents[2]["chips"][0]["judgement"]["level"] == "critical", "the spike itself is judged"
    assert all(d["chips"][1]["workload"] is not None for d in documents), "every chip's class judged"


def live_replay(path: Path) -> List[Tuple[str, List[str], List[str]]]:
    """What the dashboard replaying ``path`` at 1x showed at each sample: the chips' classes and
    flags, and the alert line (its own AlertTracker, refreshed every recorded second)."""
    clock = [0.0]
    sampler = ReplaySampler(read_recording(path), clock=lambda: clock[0])
    tracker = AlertTracker()
    shown = []
    for i in range(len(TEMPERATURES)):
        clock[0] = float(i)
        snapshot = sampler.sample()
        alerts = tracker.update(snapshot)
        classes = [f"{c.workload.kind.value} {c.workload.throttle_tag}" for c in snapshot.chips if c.workload]
        shown.append((snapshot.taken_at.isoformat(), classes, [a.message for a in alerts]))
    return shown


def shown_class(chip_document: Dict) -> str:
    workload = chip_document["workload"]
    throttling = workload["throttling"]
    return f"{workload['class']} {'throttled: ' + throttling if throttling else ''}"


def test_each_sample_is_judged_as_the_live_replay_judged_it(recording, capsys):
    code, out, _ = run(capsys, "--replay", str(recording), "--all", "--json")
    assert code == 0
    post_mortem = [(d["taken_at"], [shown_class(c) for c in d["chips"]], messages(d)) for d in ndjson(out)]
    live = live_replay(recording)
    assert post_mortem == live
    assert len({tuple(classes) for _, classes, _ in live}) > 1, "the story changes NPU 1's class"


def test_text_is_a_block_per_sample_with_levels_classes_and_the_alert_line(recording, capsys):
    code, out, err = run(capsys, "--replay", str(recording), "--all")
    assert (code, err) == (0, "")
    blocks = out.rstrip("\n").split("\n\n")
    assert len(blocks) == len(TEMPERATURES)
    first = blocks[0].splitlines()
    assert first[0] == "2026-03-01 08:00:00.000 UTC"
    assert first[1].split()[:4] == ["NPU", "0", "910B3", "ok"]
    assert first[-1] == "  alerts: no alerts"
    spike = blocks[2].splitlines()
    assert spike[1].split()[3] == "critical" and spike[-1] == "  alerts: no alerts"
    for i in HOT_SHOWN:
        assert blocks[i].splitlines()[-1].startswith("  alerts: ⚠ NPU 0 "), blocks[i]
    assert blocks[11].splitlines()[-1] == "  alerts: no alerts"


def test_a_line_that_is_not_a_snapshot_is_skipped_with_a_warning_and_the_rest_reviewed(tmp_path, capsys):
    path = write(tmp_path / "torn.ndjson", story())
    lines = path.read_bytes().splitlines(keepends=True)
    lines[4] = lines[4].replace(b'"temperature_c":45', b'"temperature_c":"hot"')
    path.write_bytes(b"".join(lines))
    code, out, err = run(capsys, "--replay", str(path), "--all", "--json")
    assert code == 0
    documents = ndjson(out)
    assert len(documents) == len(TEMPERATURES) - 1
    assert T0 + timedelta(seconds=4) not in [datetime.fromisoformat(d["taken_at"]) for d in documents]
    assert err.count("\n") == 1 and "line 5 is not a snapshot" in err and err.startswith("npuwatch: ")


def test_a_recording_where_no_chip_could_be_read_exits_1(tmp_path, capsys):
    hung = ProbeReport(
        "npu-smi", MetricStatus.TIMEOUT, 5.0, "npu-smi did not answer within 5.0 s and was killed"
    )
    samples = [replace(snap([], (), probe=hung), taken_at=T0 + timedelta(seconds=i)) for i in range(3)]
    code, out, err = run(capsys, "--replay", str(write(tmp_path / "hung.ndjson", samples)), "--all", "--json")
    assert code == 1
    documents = ndjson(out)
    assert len(documents) == 3
    assert [a["kind"] for a in documents[0]["alerts"]] == ["npu-smi"], "a hung source alerts at once"
    assert err.startswith("npuwatch: ") and err.count("\n") == 1


def test_not_a_recording_is_one_clear_line(tmp_path, capsys):
    capture = tmp_path / "npu-smi.txt"
    capture.write_text(capture_text("041"))  # a saved `npu-smi info`: one sample, not a recording
    garbage = tmp_path / "garbage.ndjson.gz"
    garbage.write_bytes(gzip.compress(b"\x00\x01 not json at all\n" * 3))
    for args, words in (
        (["--replay", str(tmp_path / "missing.ndjson")], "no such file"),
        (["--replay", str(garbage)], "holds no complete snapshot"),
        (["--replay", str(capture)], "needs a recording made by `npuwatch record`"),
        (["--demo", "910b-training"], "give it with --replay FILE"),
    ):
        code, out, err = run(capsys, *args, "--all")
        assert code == EXIT_USAGE, args
        assert out == ""
        assert err.startswith("npuwatch: ") and words in err and err.count("\n") == 1, err


def test_the_installed_command_streams_and_exits_as_documented(recording, tmp_path):
    npuwatch = [sys.executable, "-m", "npuwatch"]
    done = subprocess.run(
        [*npuwatch, "snapshot", "--replay", str(recording), "--all", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert len(ndjson(done.stdout)) == len(TEMPERATURES)
    missing = subprocess.run(
        [*npuwatch, "snapshot", "--replay", str(tmp_path / "nope.ndjson"), "--all"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == EXIT_USAGE
    assert "Traceback" not in missing.stderr and missing.stderr.count("\n") == 1
