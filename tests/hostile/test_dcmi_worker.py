"""Hostile cases about the DCMI worker process: nothing it or the library starts outlives npuwatch.

The worker runs a stand-in reader (``tests/dcmi/standin.py``) that hangs or spawns on demand.
Each case checks with psutil that every process it caused is gone; waits are generous
deadlines, nothing asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import psutil
import pytest

from npuwatch.probes.dcmi.worker import Worker, WorkerFailure, WorkerTick
from tests.dcmi.helpers import gone, standin_environ

DEADLINE_S = 30.0
OPENER = "tests.dcmi.standin:open_reader"

#: A parent that starts a worker, prints its PID, then ticks (``tick``), waits (``idle``) or exits
#: without closing it (``exit``).
_PARENT = """
import sys, time
from npuwatch.probes.dcmi.worker import Worker
worker = Worker(None, "/", 30.0, opener=sys.argv[2])
worker.start()
print(worker.pid, flush=True)
if sys.argv[1] == "tick":
    worker.tick()
elif sys.argv[1] == "idle":
    time.sleep(600)
"""


def _environ(tmp_path: Path, mode: str) -> Dict[str, str]:
    return standin_environ(tmp_path, mode)


def _gone(pid: int) -> bool:
    return gone(pid, within_s=DEADLINE_S)


def _end_worker(pid: int) -> None:
    """Kill the worker ``pid`` and its group if it is still there (a case that failed)."""
    with contextlib.suppress(psutil.Error, OSError):
        if "npuwatch.probes.dcmi.worker" in " ".join(psutil.Process(pid).cmdline()):
            os.killpg(pid, signal.SIGKILL)


def _parent(tmp_path: Path, mode: str, action: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _PARENT, action, OPENER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **_environ(tmp_path, mode)},
        start_new_session=True,
    )


def _worker_pid(parent: subprocess.Popen[str]) -> int:
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert line.strip().isdigit(), line
    return int(line)


@pytest.mark.parametrize(
    ("mode", "action"),
    [
        ("ok", "idle"),  # the worker waits for a request: its stdin closes
        ("hang-open", "idle"),  # stuck in loading the library: its watchdog sees the parent gone
        ("hang-tick", "tick"),  # stuck in a call while the parent waits on it
    ],
)
def test_the_worker_ends_when_npuwatch_is_killed(tmp_path, mode, action):
    parent = _parent(tmp_path, mode, action)
    pid = _worker_pid(parent)
    try:
        assert psutil.pid_exists(pid)
        time.sleep(0.3)  # let it get where the case wants it (waiting, or stuck)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=DEADLINE_S)
        assert _gone(pid), f"the worker {pid} outlived its killed parent"
    finally:  # a failed case leaves nothing behind either
        if parent.poll() is None:
            parent.kill()
        parent.wait()
        _end_worker(pid)


def test_a_parent_that_exits_without_closing_leaves_no_worker(tmp_path):
    parent = _parent(tmp_path, "ok", "exit")
    pid = _worker_pid(parent)
    assert parent.wait(timeout=DEADLINE_S) == 0
    assert _gone(pid), "runner.kill_all() at exit should have ended the worker"


def test_a_timeout_kills_what_the_library_started_too(tmp_path):
    worker = Worker(None, "/", 1.0, _environ(tmp_path, "spawn-hang-tick"), opener=OPENER)
    with worker:
        worker.start()
        pid = worker.pid
        assert pid is not None
        failure = worker.tick()
        assert isinstance(failure, WorkerFailure) and failure.kind == "timeout"
        grandchild = int((tmp_path / "mark").read_text())
        assert _gone(pid)
        assert _gone(grandchild), "the library's own child outlived the killed worker"


def test_repeated_hangs_leave_at_most_the_running_worker(tmp_path):
    seen: List[int] = []
    with Worker(None, "/", 0.3, _environ(tmp_path, "hang-tick"), opener=OPENER) as worker:
        for _ in range(3):
            if worker.pid is not None:
                seen.append(worker.pid)
            answer = worker.tick()
            assert isinstance(answer, WorkerFailure) and answer.kind == "timeout"
        assert all(_gone(pid) for pid in seen[: len(seen)])
        running = worker.pid
    if running is not None:
        assert _gone(running)
    assert not isinstance(answer, WorkerTick)
