"""A dashboard ended while its demo machine is still being built leaves nothing behind.

The dashboard builds a demo's tree in a forked child while it imports its toolkit.  A signal
at that moment (the terminal closed, ``kill``) must still end every process npuwatch started
and, when npuwatch can clean up (SIGTERM, SIGHUP), remove the tree; after ``kill -9`` the child
ends by itself and the next demo sweeps the tree (as before).  Generous deadlines, no timings.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable, List

import psutil
import pytest

from npuwatch.probes.simulator.machine import DEMO_PREFIX, OWNER_FILE
from tests.widgets.test_tui_tmux import NPUWATCH, Terminal, terminal  # noqa: F401 (a fixture)

DEADLINE_S = 60.0


def _until(condition: Callable[[], bool], what: str, pause_s: float = 0.005) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(pause_s)
    pytest.fail(f"never: {what}")


def _owner(folder: Path) -> int:
    """The PID named by the first demo tree in ``folder`` (0 until one is complete)."""
    for tree in folder.glob(f"{DEMO_PREFIX}*"):
        try:
            return int((tree / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            return 0
    return 0


def _alive(processes: List[psutil.Process]) -> List[psutil.Process]:
    living = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                living.append(proc)
        except psutil.NoSuchProcess:
            continue
    return living


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_signal_while_the_demo_is_being_built_leaves_no_process_and_no_tree(
    terminal: Terminal,  # noqa: F811 (the fixture)
    tmp_path: Path,
    signum: int,
) -> None:
    trees = tmp_path / "trees"
    trees.mkdir()
    terminal.start(["env", f"TMPDIR={trees}", str(NPUWATCH), "--demo", "a3"], 200, 50)
    _until(lambda: _owner(trees) > 0, "the demo's tree folder")
    pid = _owner(trees)
    main = psutil.Process(pid)
    started = main.children(recursive=True)  # the tree's builder (and maybe DCMI's worker)
    os.kill(pid, signum)
    _until(lambda: not _alive([main]), "npuwatch's end", pause_s=0.05)
    _until(lambda: not _alive(started), f"the end of {started}", pause_s=0.05)
    if signum != signal.SIGKILL:
        _until(lambda: not list(trees.glob(f"{DEMO_PREFIX}*")), "the tree removed", pause_s=0.05)
