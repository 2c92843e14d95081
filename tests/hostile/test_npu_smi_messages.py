"""What npuwatch says about a failing npu-smi (issue 14, defect 18, two of its nits).

An npu-smi that writes only to stderr is not one that "printed nothing": its words are shown.
One killed by a signal names the signal, not "exited with code -11".
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from npuwatch.probes.npu_smi import FailureKind, classify
from npuwatch.probes.runner import RunResult
from tests.conftest import REPO

ARGV = ("npu-smi", "info")


def result(exit_code: int, stdout: str = "", stderr: str = "") -> RunResult:
    return RunResult(argv=ARGV, exit_code=exit_code, stdout=stdout, stderr=stderr, duration_s=0.1)


def test_an_npu_smi_that_writes_only_to_stderr_is_quoted():
    failure = classify(result(0, stderr="dcmi module initialize failed, please check the driver\n"))
    assert failure is not None
    assert failure.kind is FailureKind.NO_OUTPUT
    assert "printed nothing" not in failure.message
    assert "only on stderr" in failure.message
    assert "please check the driver" in failure.message
    assert "please check the driver" in failure.output


def test_an_npu_smi_that_prints_nothing_at_all_still_says_so():
    failure = classify(result(0))
    assert failure is not None and failure.message == "npu-smi printed nothing"


def test_a_signal_death_names_the_signal():
    failure = classify(result(-11))
    assert failure is not None
    assert failure.kind is FailureKind.FAILED
    assert "killed by SIGSEGV" in failure.message
    assert "-11" not in failure.message
    assert failure.exit_code == -11  # the JSON keeps the number


def test_a_crashing_npu_smi_is_reported_by_its_signal_end_to_end(tmp_path: Path):
    fake = tmp_path / "npu-smi"
    fake.write_text("#!/bin/sh\nkill -SEGV $$\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    done = subprocess.run(
        [sys.executable, "-m", "npuwatch", "snapshot", "--npu-smi", str(fake), "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=60,
    )
    said = done.stdout + done.stderr
    assert "killed by SIGSEGV" in said, said[-2000:]
    assert "exited with code -11" not in said
