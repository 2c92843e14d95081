"""Hostile option values and environment (issue 14, defects 9, 12 and 18).

Garbage in ``NPUWATCH_INTERVAL`` / ``NPUWATCH_TIMEOUT`` or in ``--timeout`` / ``--interval``
(not a number, zero, negative, NaN, infinity, 1e308) is a usage error: exit 64 and one line
naming the value, in every command — except ``check``, whose contract makes a bad
``NPUWATCH_*`` variable a verdict (exit 1), never an "internal error".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from npuwatch.cli import EXIT_USAGE, main
from tests.conftest import CAPTURES

CAPTURE = str(next(CAPTURES.glob("044_*.txt")))
GARBAGE = ["abc", "0", "-1", "nan", "inf", "-inf", "1e308", "100000"]


@pytest.fixture(autouse=True)
def _crash_reports_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name in ("NPUWATCH_INTERVAL", "NPUWATCH_TIMEOUT", "NPUWATCH_ROOT", "NPUWATCH_NPU_SMI"):
        monkeypatch.delenv(name, raising=False)


def _one_usage_line(err: str, named: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert named in lines[0], err
    assert "internal error" not in err and "Traceback" not in err


def _run(words: List[str], env: Dict[str, str]) -> Tuple[int, str]:
    """``npuwatch WORDS`` in a child (the live view and serve would run on with a good value)."""
    child = subprocess.run(
        [sys.executable, "-m", "npuwatch", *words],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return child.returncode, child.stderr


@pytest.mark.parametrize("value", GARBAGE)
@pytest.mark.parametrize("variable", ["NPUWATCH_TIMEOUT", "NPUWATCH_INTERVAL"])
def test_bad_variable_is_a_usage_error_everywhere(variable, value, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(variable, value)
    in_process = [["snapshot", "--replay", CAPTURE]]
    if variable == "NPUWATCH_TIMEOUT":  # the doctor samples once: it never reads the interval
        in_process.append(["doctor", "--root", str(tmp_path)])
    for words in in_process:
        code = main(words)
        err = capsys.readouterr().err
        assert code == EXIT_USAGE, (words, err)
        _one_usage_line(err, variable)
    for words in (
        ["--plain", "--replay", CAPTURE],
        ["serve", "--replay", CAPTURE, "--listen", "127.0.0.1:0"],
    ):
        code, err = _run(words, {variable: value})
        assert code == EXIT_USAGE, (words, err)
        _one_usage_line(err, variable)


@pytest.mark.parametrize("value", GARBAGE)
def test_check_makes_a_bad_timeout_variable_a_verdict_not_an_internal_error(value, monkeypatch, capsys):
    monkeypatch.setenv("NPUWATCH_TIMEOUT", value)
    code = main(["check", "--replay", CAPTURE])
    out, err = capsys.readouterr()
    assert code == 1
    assert out.startswith("unhealthy: NPUWATCH_TIMEOUT=")
    assert "internal error" not in out + err and "Traceback" not in out + err


@pytest.mark.parametrize("value", ["1e300", "1e308", "86401", "inf", "nan", "0", "-5"])
@pytest.mark.parametrize("option", ["--timeout", "--interval"])
@pytest.mark.parametrize("command", ["snapshot", "check", "doctor"])
def test_bad_seconds_option_is_a_usage_error(command, option, value, tmp_path, capsys):
    code = main([command, "--root", str(tmp_path), f"{option}={value}"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert option in err and "internal error" not in err and "Traceback" not in err


def test_a_day_of_seconds_is_still_accepted(capsys):
    code = main(["snapshot", "--replay", CAPTURE, "--timeout", "86400", "--interval", "86400"])
    assert code == 0, capsys.readouterr().err


def _fake_npu_smi(path: Path, marker: str) -> None:
    capture = CAPTURES / "001_910b2-x8-v25.2.0-multiproc.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {marker} >&2\ncat '{capture}'\n")
    path.chmod(0o755)


@pytest.mark.parametrize("given", ["./bin/npu-smi-here", "bin/npu-smi-here", "npu-smi-here"])
def test_a_relative_npu_smi_means_the_current_directory_not_the_root(given, tmp_path, monkeypatch, capsys):
    tree = tmp_path / "tree"
    tree.mkdir()
    work = tmp_path / "work"
    (tree / "bin").mkdir()
    (tree / "bin" / "npu-smi-here").write_text("#!/bin/sh\nexit 9\n")  # what the root holds: never run
    (tree / "npu-smi-here").write_text("#!/bin/sh\nexit 9\n")
    here = work / given
    _fake_npu_smi(here, "cwd")
    monkeypatch.chdir(work)
    assert main(["snapshot", "--json", "--root", str(tree), "--npu-smi", given]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["chips"]) == 8


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 0.0, -1.0, 1e300])
def test_the_notebook_api_refuses_the_same_seconds_as_the_command_line(value):
    from npuwatch.notebook import NotebookUsageError, snapshot

    with pytest.raises(NotebookUsageError, match="timeout_s must be more than 0 and at most 86400"):
        snapshot(demo="idle", timeout_s=value)
