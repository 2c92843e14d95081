"""`npuwatch record` as users run it: real processes, kill -9 mid-recording, replay of what is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import List

import jsonschema
import pytest

from npuwatch.cli import EXIT_USAGE, main
from npuwatch.recording import RecordingError, read_recording

SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())


def npuwatch(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuwatch", *args], capture_output=True, text=True, timeout=timeout_s
    )


def wait_until(condition, deadline_s: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def snapshots_in(path: Path) -> int:
    """How many snapshots a recording being written holds so far."""
    try:
        return len(read_recording(path).snapshots)
    except Exception:
        return 0


def test_record_writes_schema_v1_lines_and_says_where(tmp_path: Path) -> None:
    path = tmp_path / "demo.ndjson"
    result = npuwatch("record", str(path), "--demo", "--interval", "0.2", "--duration", "1.5")
    assert result.returncode == 0, result.stderr
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) >= 2
    for line in lines:
        jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(line))
    assert f"{len(lines)} snapshots" in result.stderr
    assert f"Replay: npuwatch --replay {path}" in result.stderr
    assert "duration 1.5 s reached" in result.stderr


def _complete_snapshots(path: Path) -> int:
    try:
        return len(read_recording(path).snapshots)
    except RecordingError:  # not there yet, or no complete line yet
        return 0


@pytest.mark.parametrize("name", ["killed.ndjson", "killed.ndjson.gz"])
def test_a_recorder_killed_with_sigkill_leaves_a_file_that_replays(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    recorder = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "record", str(path), "--demo", "a3", "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # Several complete lines in (read back the way a replay reads them: a size threshold
        # was one line short when the first gzip lines compressed well).
        grown = wait_until(lambda: _complete_snapshots(path) >= 3)
        assert grown, "the recorder wrote nothing"
    finally:
        recorder.send_signal(signal.SIGKILL)
        recorder.communicate(timeout=30)
    assert recorder.returncode == -signal.SIGKILL
    recording = read_recording(path)
    assert len(recording.snapshots) >= 3
    assert all(len(s.chips) == 16 for s in recording.snapshots)
    # Whatever the kill tore is at most the last line, and it is only a warning.
    assert len(recording.warnings) <= 1
    replayed = npuwatch("snapshot", "--json", "--replay", str(path))
    assert replayed.returncode == 0, replayed.stderr
    doc = json.loads(replayed.stdout)
    assert doc["source"] == f"replay:{name}"
    assert len(doc["chips"]) == 16


def test_a_line_torn_by_the_kill_is_skipped_by_every_reader(tmp_path: Path) -> None:
    """The kill above usually lands between writes; this cuts a line in half as a kill inside one does."""
    path = tmp_path / "torn.ndjson"
    assert npuwatch("record", str(path), "--demo", "--interval", "0.2", "--duration", "1").returncode == 0
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(data.splitlines()[-1]) // 2 - 1])
    replayed = npuwatch("snapshot", "--json", "--replay", str(path))
    assert replayed.returncode == 0, replayed.stderr
    doc = json.loads(replayed.stdout)
    assert any("the last line is incomplete" in w for w in doc["warnings"])


def test_max_size_stops_before_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "small.ndjson"
    result = npuwatch("record", str(path), "--demo", "--interval", "0.1", "--max-size", "0.05")
    assert result.returncode == 0, result.stderr
    assert 0 < path.stat().st_size <= 0.05 * 1024 * 1024
    assert "--max-size 0.05 MB reached" in result.stderr
    assert len(read_recording(path).snapshots) >= 1


def test_sigterm_finishes_a_gzip_recording_cleanly(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "stopped.ndjson.gz"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "record", str(path), "--demo", "--interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert wait_until(lambda: snapshots_in(path) >= 2)
    recorder.send_signal(signal.SIGTERM)
    _, err = recorder.communicate(timeout=30)
    assert recorder.returncode == 128 + signal.SIGTERM or recorder.returncode == 0, err
    assert "snapshots" in err
    # The trailer was written: the standard library reads it with no complaint.
    lines = gzip.decompress(path.read_bytes()).splitlines()
    assert len(lines) == len(read_recording(path).snapshots) >= 2


def test_replay_values_match_the_recorded_ones(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "rec.ndjson"
    assert npuwatch("record", str(path), "--demo", "310p-duo", "--duration", "0.5").returncode == 0
    recorded = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert main(["snapshot", "--json", "--replay", str(path)]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert replayed["chips"] == recorded["chips"]
    assert replayed["processes"] == recorded["processes"]
    assert replayed["host"] == recorded["host"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["snapshot", "--demo", "--speed", "2"], "--speed applies only to --replay of a recording"),
        (["record", "x.ndjson", "--demo", "--max-size", "0"], "expected more than 0 MB, got '0'"),
        (
            ["snapshot", "--replay", "r.ndjson", "--speed", "-1"],
            "expected more than 0 as the speed factor, got '-1'",
        ),
    ],
)
def test_bad_options_exit_64(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: List[str], message: str
) -> None:
    os.chdir(tmp_path)
    (tmp_path / "r.ndjson").write_text("{}\n")
    assert main(args) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_an_unwritable_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = npuwatch("record", str(tmp_path / "no-dir" / "x.ndjson"), "--demo", "--duration", "1")
    assert result.returncode == 1
    assert result.stderr.strip().startswith("npuwatch record: cannot write")
    assert "Traceback" not in result.stderr


def test_a_file_that_is_no_recording_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "empty.ndjson"
    path.write_text("{garbage\n")
    assert main(["snapshot", "--replay", str(path)]) == EXIT_USAGE
    assert "holds no complete snapshot" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["--plain"], ["record", "out.ndjson"], ["serve"], ["snapshot"]])
def test_a_bad_recording_is_a_usage_error_for_every_reading_command(
    tmp_path: Path, capsys: pytest.CaptureFixture, command: List[str]
) -> None:
    os.chdir(tmp_path)
    (tmp_path / "bad.ndjson").write_text("{bad\n")
    assert main([*command, "--replay", "bad.ndjson"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "bad.ndjson holds no complete snapshot" in err and "internal error" not in err
    assert not (tmp_path / "out.ndjson").exists()  # record made no file


def test_speed_without_a_recording_is_a_usage_error_in_the_live_view(capsys: pytest.CaptureFixture) -> None:
    assert main(["--demo", "--speed", "2", "--plain"]) == EXIT_USAGE
    assert "--speed applies only to --replay of a recording" in capsys.readouterr().err


@pytest.mark.parametrize("speed", ["1", "4"])
def test_recording_a_replay_ends_at_the_end_of_the_replay(tmp_path: Path, speed: str) -> None:
    """Seen (issue 27, 8): ``record OUT --replay IN`` appended IN's last sample for ever (338 MB
    in 36 minutes from 4 lines).  It ends after the replay's last sample, with the usual summary,
    at the pace ``--speed`` gives."""
    from npuwatch import snapshot_json
    from tests.core.test_replay import recording

    four = tmp_path / "four.ndjson"
    lines = [snapshot_json.dumps(s, indent=None) for s in recording((0.0, 0.2, 0.4, 0.6)).snapshots]
    four.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "again.ndjson"
    result = npuwatch("record", str(out), "--replay", str(four), "--speed", speed, timeout_s=60)
    assert result.returncode == 0, result.stderr
    replayed = read_recording(out).snapshots
    assert f"npuwatch record: {len(replayed)} snapshots" in result.stderr
    assert "(end of the replayed recording)" in result.stderr
    assert replayed[-1].taken_at == recording((0.0, 0.2, 0.4, 0.6)).snapshots[-1].taken_at
    assert 1 <= len(replayed) <= 4 * 4  # the replay's pace, never the last sample over and over
