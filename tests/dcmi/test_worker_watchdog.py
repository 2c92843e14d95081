"""The DCMI worker's watchdog: it ends the worker's group when npuwatch is gone, waking only then.

npuwatch's end closes the worker's request pipe, which wakes the watchdog at once (no periodic
wake-ups while npuwatch runs); a copy of npuwatch forked without exec keeps that pipe open, so
the watchdog also looks every ``WATCH_PARENT_IDLE_S``.  Waits are generous deadlines; nothing
asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List

import psutil

from npuwatch.probes.dcmi.worker import watchdog as worker_watchdog
from tests.conftest import REPO
from tests.dcmi.helpers import gone

DEADLINE_S = 30.0
OPENER = "tests.dcmi.standin:open_reader"

#: A parent that starts a worker, forks a copy of itself that keeps every descriptor (the worker's
#: request pipe too) and sleeps, prints both PIDs, then hangs in a tick.
_PARENT = """
import os, sys, time
from npuwatch.probes.dcmi.worker import Worker
worker = Worker(None, "/", 60.0, opener=sys.argv[1])
worker.start()
copy = os.fork()
if copy == 0:
    time.sleep(120)
    os._exit(0)
print(worker.pid, copy, flush=True)
worker.tick()
"""


def _gone(pid: int) -> bool:
    return gone(pid, within_s=DEADLINE_S)


def test_the_worker_ends_when_npuwatch_is_killed_while_a_forked_copy_holds_its_pipe(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STANDIN_MODE": "hang-tick",
        "STANDIN_MARK": str(tmp_path / "m"),
    }
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, OPENER],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    pids: List[int] = []
    try:
        assert parent.stdout is not None
        pids = [int(word) for word in parent.stdout.readline().split()]
        assert len(pids) == 2, pids
        time.sleep(0.5)  # the worker is stuck in its tick
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=DEADLINE_S)
        assert psutil.pid_exists(pids[1]), "the forked copy should still hold the pipe"
        assert _gone(pids[0]), "the worker outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait()
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_the_watchdog_wakes_when_the_request_pipe_closes_and_ends_the_group_once_the_parent_is_gone(
    monkeypatch,
) -> None:
    requests, writer = os.pipe()
    parents = [os.getppid()]  # the parent the watchdog sees: ours until the test says otherwise
    ended: List[str] = []
    polls: List[float] = []
    real_poll = select.poll

    class CountingPoll:
        def __init__(self) -> None:
            self._poll = real_poll()

        def register(self, fd: int, events: int) -> None:
            self._poll.register(fd, events)

        def poll(self, timeout_ms: float) -> object:
            polls.append(timeout_ms)
            return self._poll.poll(timeout_ms)

    monkeypatch.setattr(worker_watchdog.select, "poll", CountingPoll)
    monkeypatch.setattr(worker_watchdog.os, "getppid", lambda: parents[-1])
    monkeypatch.setattr(worker_watchdog, "end_group", lambda: ended.append("ended"))
    watchdog = threading.Thread(target=worker_watchdog.watch_parent, args=(parents[0], requests), daemon=True)
    watchdog.start()
    try:
        time.sleep(0.3)
        assert not ended and len(polls) == 1, "while npuwatch runs the watchdog waits in one poll"
        parents.append(1)  # npuwatch is gone (reparented) ...
        os.close(writer)  # ... and its end of the pipe closed
        writer = -1
        watchdog.join(DEADLINE_S)
        assert ended == ["ended"]
    finally:
        os.close(requests)
        if writer >= 0:
            os.close(writer)
