"""Job control and internal errors in a real terminal: tmux runs an interactive shell, the shell
runs the dashboard (or the fleet view), and the test suspends it (``kill -TSTP``, Ctrl-Z), checks
the shell is back with the terminal as it was, resumes it with ``fg`` and quits with ``q``.  An
error on any of the app's threads ends it with exit 70 and one line (the harness:
tests/widgets/test_tui_tmux.py).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from tests.conftest import REPO
from tests.widgets.test_tui_tmux import NPUWATCH, Terminal, tmux_terminal

PROMPT = "shell$ "


@pytest.fixture
def shell(tmp_path) -> Iterator[Terminal]:
    """A tmux pane running an interactive bash (job control on, no rc files), prompt ``shell$``."""
    with tmux_terminal(tmp_path) as term:
        term.tmux(
            "new-session", "-d", "-s", "main", "-x", "120", "-y", "40",
            "env", f"PS1={PROMPT}", "bash", "--norc", "--noprofile", "-i",
        )  # fmt: skip
        term.wait(lambda screen: screen.rstrip().endswith(PROMPT.rstrip()), "the shell's prompt")
        yield term


def run(term: Terminal, command: str) -> None:
    term.keys("-l", command)
    term.keys("Enter")


def foreground_pid(term: Terminal) -> int:
    """The process the pane's shell runs now (its one child)."""
    shell_pid = term.tmux("display-message", "-p", "-t", "main", "#{pane_pid}").stdout.strip()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children: List[int] = []
        for task in Path(f"/proc/{shell_pid}/task").iterdir():
            children += [int(pid) for pid in (task / "children").read_text().split()]
        if len(children) == 1:
            return children[0]
        time.sleep(0.1)
    pytest.fail(f"the shell {shell_pid} runs {children}, not one program")


def wait_file(path: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.1)
    pytest.fail(f"{path} was never written")


def settings(term: Terminal, path: Path) -> str:
    """The terminal's settings as the shell sees them now (``stty -a``)."""
    final, part = shlex.quote(str(path)), shlex.quote(f"{path}.part")
    run(term, f"stty -a > {part} && mv {part} {final}")
    return wait_file(path)


def state(pid: int) -> str:
    """The process's state letter (``T``: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def suspended(term: Terminal, times: int) -> str:
    """Wait for the shell to report the ``times``-th stopped job and show its prompt again."""
    return term.wait(
        lambda s: s.count("Stopped") >= times and s.rstrip().endswith(PROMPT.rstrip()), f"stop number {times}"
    )


@pytest.mark.slow
def test_the_dashboard_suspends_resumes_and_quits_with_0(shell, tmp_path):
    before = settings(shell, tmp_path / "before.txt")
    run(shell, f"{shlex.quote(str(NPUWATCH))} --demo; echo rc=$?")
    shell.wait(lambda s: "Processes (" in s and "╭─ NPU 0 · 910B3" in s, "the dashboard")
    pid = foreground_pid(shell)

    os.kill(pid, signal.SIGTSTP)  # kill -TSTP, as job control or a user sends it
    screen = suspended(shell, 1)
    assert "╭─ NPU 0" not in screen and "Traceback" not in screen  # the shell's screen, not the app's
    assert state(pid) == "T"  # stopped, not ended
    assert settings(shell, tmp_path / "stopped.txt") == before  # echo, line editing: as before

    run(shell, "fg; echo rc=$?")
    shell.wait(lambda s: "Processes (" in s and "╭─ NPU 0 · 910B3" in s, "the dashboard again")
    shell.keys("?")  # keys reach it again
    shell.wait_text("npuwatch keys")
    shell.keys("Escape")
    shell.wait_gone("npuwatch keys")

    shell.keys("C-z")  # the terminal's Ctrl-Z comes to the app as a key: it suspends too
    suspended(shell, 2)
    assert state(pid) == "T"
    run(shell, "fg; echo rc=$?")
    shell.wait(lambda s: "Processes (" in s and "╭─ NPU 0 · 910B3" in s, "the dashboard after Ctrl-Z")
    shell.keys("q")
    screen = shell.wait_text("rc=0")
    assert "Traceback" not in screen and "internal error" not in screen
    assert settings(shell, tmp_path / "after.txt") == before


@pytest.mark.slow
def test_the_fleet_view_suspends_resumes_and_quits_with_0(shell, tmp_path):
    fleet = shlex.join(["env", f"PYTHONPATH={REPO}", sys.executable, "-m", "tests.fleet_views.fakes"])
    run(shell, f"{fleet}; echo rc=$?")
    shell.wait(lambda s: "node-ok" in s and "chips OK" in s, "the fleet table")
    pid = foreground_pid(shell)
    while Path(f"/proc/{pid}/comm").read_text().strip() == "env":  # env execs python: same pid
        time.sleep(0.05)

    os.kill(pid, signal.SIGTSTP)
    screen = suspended(shell, 1)
    assert "node-ok" not in screen and "Traceback" not in screen
    assert state(pid) == "T"
    run(shell, "fg; echo rc=$?")
    shell.wait(lambda s: "node-ok" in s and "chips OK" in s, "the fleet table again")
    shell.keys("q")
    screen = shell.wait_text("rc=0")
    assert "Traceback" not in screen


#: How each fault is injected once the dashboard shows its first sample (``x`` is typed then).
FAULTS = {
    # the driver's input thread raises while it handles a key
    "input-thread": (
        "from npuwatch.widgets.tui.quiet_driver import QuietLinuxDriver\n"
        "handle = QuietLinuxDriver.process_message\n"
        "def process_message(self, message):\n"
        "    if getattr(message, 'character', None) == 'x':\n"
        "        raise ZeroDivisionError('injected')\n"
        "    handle(self, message)\n"
        "QuietLinuxDriver.process_message = process_message\n",
        "ZeroDivisionError: injected",
    ),
    # a plain thread the app started raises
    "thread": (
        "import threading\n"
        "def key(self, event):\n"
        "    if event.character == 'x':\n"
        "        threading.Thread(target=lambda: 1 / 0, daemon=True).start()\n"
        "NpuwatchApp.on_key = key\n",
        "ZeroDivisionError: division by zero",
    ),
    # a textual thread worker raises
    "worker": (
        "def key(self, event):\n"
        "    if event.character == 'x':\n"
        "        self.run_worker(lambda: 1 / 0, thread=True)\n"
        "NpuwatchApp.on_key = key\n",
        "WorkerFailed",
    ),
    # a callback a thread scheduled on the event loop raises
    "loop-callback": (
        "import asyncio\n"
        "def key(self, event):\n"
        "    if event.character == 'x':\n"
        "        asyncio.get_running_loop().call_soon(lambda: 1 / 0)\n"
        "NpuwatchApp.on_key = key\n",
        "ZeroDivisionError: division by zero",
    ),
    # the refresh thread's sampler raises: shown while sampling goes on, and `q` then exits 70
    "refresh": (
        "def key(self, event):\n"
        "    if event.character == 'x':\n"
        "        def broken():\n"
        "            raise ZeroDivisionError('injected')\n"
        "        self.sampler.sample = broken\n"
        "NpuwatchApp.on_key = key\n",
        "internal error in sampling: ZeroDivisionError: injected",
    ),
    # textual's own way out of an error it caught (as its driver does for its input thread)
    "panic": (
        "def key(self, event):\n"
        "    if event.character == 'x':\n"
        "        self.panic('OSError: [Errno 22] injected')\n"
        "NpuwatchApp.on_key = key\n",
        "TextualPanicError: OSError: [Errno 22] injected",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_an_error_on_any_thread_of_the_app_exits_70_with_one_line(terminal_for_faults, tmp_path, fault):
    inject, summary = FAULTS[fault]
    script = tmp_path / "faulty_dashboard.py"
    script.write_text(
        "import sys\n"
        "from npuwatch.widgets.tui.app import NpuwatchApp\n"
        f"{inject}"
        "from npuwatch.cli import main\n"
        "sys.exit(main(['--demo', 'idle']))\n"
    )
    term = terminal_for_faults
    program = f"XDG_STATE_HOME={shlex.quote(str(tmp_path))} " + shlex.join([sys.executable, str(script)])
    term.start(["sh", "-c", f"{program}; echo EXIT=$?; sleep 30"], 120, 40)
    term.wait(lambda s: "Processes (" in s, "the dashboard")
    term.keys("x")
    if fault == "refresh":
        term.wait_text("sampler error")  # shown on the alerts line; the dashboard goes on
        term.keys("q")
    term.wait(lambda s: "EXIT=" in s, "the exit")
    joined = term.tmux("capture-pane", "-p", "-J", "-t", "main").stdout  # wrapped lines joined
    lines = [line for line in joined.splitlines() if line.strip()]
    assert lines[-1] == "EXIT=70", joined
    assert len(lines) == 2, joined  # one line before the status: no traceback
    where = "sampling" if fault == "refresh" else "the dashboard"
    assert lines[0].startswith(f"npuwatch: internal error in {where}: ")
    assert summary in lines[0] and "traceback in" in lines[0]
    report = Path(lines[0].split("traceback in ")[1].split(";")[0])
    assert "injected" in report.read_text() or "ZeroDivisionError" in report.read_text()
    term.tmux("kill-session", "-t", "main", check=False)


@pytest.fixture
def terminal_for_faults(tmp_path) -> Iterator[Terminal]:
    with tmux_terminal(tmp_path) as term:
        yield term
