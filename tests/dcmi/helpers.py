"""Helpers for the DCMI worker tests (tests/dcmi, tests/hostile): the stand-in library's
environment and waiting for a process to be gone."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict

import psutil

from tests.conftest import REPO


def standin_environ(tmp_path: Path, mode: str) -> Dict[str, str]:
    """The environment that makes the worker's stand-in library behave as ``mode`` (tests/dcmi/standin.py)."""
    return {
        "PYTHONPATH": str(REPO),
        "STANDIN_MODE": mode,
        "STANDIN_MARK": str(tmp_path / "mark"),
    }


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether ``pid`` is gone (or a zombie someone else reaps) before a generous deadline."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False
