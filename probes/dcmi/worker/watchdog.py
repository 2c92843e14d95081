"""Provides the DCMI worker's watchdog: nothing the library starts outlives npuwatch.

Killing the worker's group is not enough: a library may fork a daemon that calls ``setsid()``
(a new session and group) and, once its parent exited, is not even a descendant of the worker
any more.  So:

* the worker makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, before the
  library loads): an orphan of anything the library started is re-parented to the worker, not
  to init, so while the worker lives every such process is its descendant, and killing the
  worker's tree (``runner.kill_tree``: group, session, descendants, pipe holders) finds them;
* every worker gets its own mark (``runner.new_mark``, in ``runner.MARK_VARIABLE``), which
  everything it forks inherits: after the worker died first (a crash, the OOM killer), its
  orphans are found by the mark in ``/proc/PID/environ`` and killed with the worker's tree, and
  ``runner.kill_all()`` sweeps every mark at npuwatch's exit; the worker's own watchdog kills
  its descendants and its mark's holders when npuwatch is gone;
* what escapes both (a process that ``exec``s with a new environment *after* the worker died)
  is the one gap left: a library that does that does it on purpose.

A subreaper inherits zombies: an orphan that exits stays a zombie of the worker until the worker
ends (it never ``wait``s for processes it did not start, which could steal the library's own
children from its ``waitpid``).  ``PR_SET_PDEATHSIG`` is not used for the worker: the signal
comes when the *thread* that started the worker ends (prctl(2)), and npuwatch starts workers from
short-lived threads (the dashboard's opening thread); the watchdog covers npuwatch's end: a
thread woken by the request pipe's hang-up (it never wakes on a timer while npuwatch runs) sees
the worker's parent change, even while the main thread is stuck in the library.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
from typing import Callable, Set

from npuwatch.probes import runner

#: How often the worker looks whether npuwatch is still there once its request pipe closed.
WATCH_PARENT_S = 0.25
#: How often it looks otherwise: npuwatch's end closes the request pipe, which wakes the watchdog
#: at once, so it does not wake while npuwatch runs; a copy of npuwatch forked without exec holds
#: the pipe open too, and this bounds how long such a copy can hide npuwatch's end.
WATCH_PARENT_IDLE_S = 2.0


def watch_parent(parent: int, requests: int = 0) -> None:
    """End the worker's whole group when npuwatch is gone, even while a library call hangs.

    Waits for the request pipe (``requests``) to hang up, which it does when npuwatch ends or
    closes the worker, looking at the parent every ``WATCH_PARENT_IDLE_S`` meanwhile; then every
    ``WATCH_PARENT_S`` (a closed pipe stays hung up, and the worker may be ending by itself).
    """
    poller = select.poll()
    poller.register(requests, 0)  # no events asked: only a hang-up (or an error) wakes it
    hung_up = False
    while os.getppid() == parent:
        if hung_up:
            time.sleep(WATCH_PARENT_S)
        else:
            hung_up = bool(poller.poll(WATCH_PARENT_IDLE_S * 1000))
    end_group()


def end_group() -> None:
    """Kill all the library started, then the worker: its descendants first (every orphan of the
    library's is one, the worker being their subreaper: read from ``/proc/PID/stat`` alone), so a
    slow read of another process's environment in the sweep for the worker's mark that follows
    cannot hold them up; then whatever carries the mark, twice (a process forked while the
    first sweep ran is found by the second); then its process group and itself."""
    kill = _killer()
    kill(runner.descendants(os.getpid()))
    mark = os.environ.get(runner.MARK_VARIABLE)
    if mark:
        for _ in range(2):
            kill(runner.marked_processes({mark}) | runner.descendants(os.getpid()))
    if os.getpgrp() == os.getpid():  # its own group (always, as Worker starts it)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(0)


def _killer() -> Callable[[Set[int]], None]:
    """SIGKILL for each of a set of PIDs, each PID once."""
    killed: Set[int] = set()

    def kill(pids: Set[int]) -> None:
        for pid in pids - killed:
            killed.add(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    return kill


#: prctl(2)'s option that makes a process the reaper of its descendants' orphans.
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Make the worker the reaper of every orphan below it (Linux 3.4+; nothing elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        zero = ctypes.c_ulong(0)
        libc.prctl(ctypes.c_int(_PR_SET_CHILD_SUBREAPER), ctypes.c_ulong(1), zero, zero, zero)
