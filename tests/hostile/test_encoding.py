"""An ASCII-only stdout (issue 14, defect 17): every command prints, with ASCII stand-ins.

``PYTHONIOENCODING=ascii``, or the C locale without UTF-8 mode, gives streams that cannot encode
``✔``, ``°`` or ``·``: the commands used to fail with ``UnicodeEncodeError`` (exit 70).  Now a
glyph the stream cannot hold prints as an ASCII stand-in (``OK``, ``C``, ``-``), and ``--json``
stays valid JSON (non-ASCII escaped the JSON way).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Dict

import pytest

from npuwatch import snapshot_json
from npuwatch.text_safety import ASCII_MARKS, can_encode, inert
from tests.conftest import REPO
from tests.widgets.fakes import capture_snapshot

#: Generous: each of these commands takes a second or two on the simulator.
DEADLINE_S = 90.0
ASCII = {"PYTHONIOENCODING": "ascii"}
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}


def run(args: list, env: Dict[str, str]) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LC_ALL", "LANG")}
    environ.update({k: v for k, v in env.items() if v})
    environ["NO_COLOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "npuwatch", *args],
        capture_output=True,
        env=environ,
        cwd=REPO,
        timeout=DEADLINE_S,
    )


def assert_ascii_and_no_crash(done: subprocess.CompletedProcess, codes: tuple = (0,)) -> str:
    out = done.stdout.decode("ascii")  # raises if a byte is not ASCII
    err = done.stderr.decode("ascii")
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    assert done.returncode in codes, (done.returncode, err[-2000:])
    return out


@pytest.mark.parametrize("env", [ASCII, C_LOCALE], ids=["PYTHONIOENCODING=ascii", "C-locale"])
def test_snapshot_prints_ascii_marks(env):
    out = assert_ascii_and_no_crash(run(["--demo", "snapshot"], env))
    assert "npuwatch - " in out  # "·" became "-"
    assert " C" in out and "NPU  Chip" in out  # "39 °C" became "39 C"


@pytest.mark.parametrize("env", [ASCII, C_LOCALE], ids=["PYTHONIOENCODING=ascii", "C-locale"])
def test_doctor_prints_ascii_marks(env):
    out = assert_ascii_and_no_crash(run(["--demo", "doctor"], env), codes=(0, 1, 2))
    assert "npuwatch doctor" in out and "(exit " in out


@pytest.mark.parametrize(
    ("args", "codes"),
    [
        (["--demo", "check"], (0, 1)),
        (["--demo", "check", "--json"], (0, 1)),
        (["--demo", "selftest"], (0, 1, 2)),
        (["--demo", "list"], (0,)),
        (["check", "--demo", "no-such-scenario"], (1, 64)),
        (["snapshot", "--interval", "nonsense"], (64,)),
    ],
)
def test_other_commands_survive_an_ascii_stream(args, codes):
    assert_ascii_and_no_crash(run(args, ASCII), codes=codes)


def test_plain_view_survives_an_ascii_stream():
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    child = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "--demo", "--plain", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**environ, **ASCII},
        cwd=REPO,
    )
    try:
        out, err = child.communicate(timeout=8)
    except subprocess.TimeoutExpired:
        child.terminate()  # SIGTERM unwinds like Ctrl-C: the demo's tree is removed
        out, err = child.communicate(timeout=30)
    assert b"Traceback" not in err and b"internal error" not in err, err[-2000:]
    assert b"NPU  Chip" in out
    out.decode("ascii")


def test_snapshot_json_with_a_non_ascii_name_is_valid_ascii_json(tmp_path):
    snapshot = capture_snapshot("001")
    process = snapshot.processes[0]
    assert process.host is not None
    first = replace(process, name="训练-é", host=replace(process.host, command="python3 训练-é.py"))
    recording: Path = tmp_path / "rec.ndjson"
    changed = replace(snapshot, processes=(first, *snapshot.processes[1:]))
    recording.write_text(snapshot_json.dumps(changed, indent=None) + "\n", encoding="utf-8")
    out = assert_ascii_and_no_crash(run(["snapshot", "--json", "--replay", str(recording)], ASCII))
    assert json.loads(out)["processes"][0]["name"] == "训练-é"
    text = assert_ascii_and_no_crash(run(["snapshot", "--replay", str(recording)], ASCII))
    assert "python3 \\u8bad\\u7ec3-e.py" in text  # no letters to stand in: escaped; é loses its accent


def test_marks_are_ascii_and_the_stream_test_knows_utf8_from_ascii():
    import io

    assert all(mark.isascii() for mark in ASCII_MARKS.values())
    assert can_encode(io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert not can_encode(io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    assert inert("é") == "é"  # inert is about controls, not encodings
