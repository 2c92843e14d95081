"""Helpers for the DCMI worker tests (tests/dcmi, tests/hostile): the stand-in library's
environment and waiting for a process to be gone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Union

import psutil

from tests.conftest import REPO


def standin_environ(tmp_path: Path, mode: str) -> Dict[str, str]:
    """The environment that makes the worker's stand-in library behave as ``mode`` (tests/dcmi/standin.py)."""
    return {
        "PYTHONPATH": str(REPO),
        "STANDIN_MODE": mode,
        "STANDIN_MARK": str(tmp_path / "mark"),
    }


def gone(pid: Union[int, psutil.Process], within_s: float = 10.0) -> bool:
    """Whether the process is gone (or a zombie someone else reaps) before a generous deadline.

    PIDs wrap quickly on a busy machine (``pid_max`` is 32768 on CI): the process is pinned by
    its start time (``psutil.Process``, taken now or passed in while it surely ran), so another
    process given the same PID later does not count as it."""
    try:
        proc = pid if isinstance(pid, psutil.Process) else psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def cc_library(folder: Path, name: str, source: str, *flags: str) -> Path:
    """``source`` compiled with ``cc`` into ``folder/name`` (a shared library); the test is skipped
    (or fails, where a compiler is required) without a compiler."""
    import shutil
    import subprocess

    from tests.conftest import need

    compiler = shutil.which("cc")
    need(compiler is not None, "a C compiler (cc) builds the test libraries")
    assert compiler is not None
    folder.mkdir(parents=True, exist_ok=True)
    c_file = folder / (name + ".c")
    c_file.write_text(source)
    out = folder / name
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(out), str(c_file), *flags], check=True, timeout=120
    )
    return out
