"""End-to-end in a real terminal: tmux runs ``npuwatch --demo``, the test reads the screen and types.

Each test gets a private tmux server (``tmux -L npuwatch-test-<pid>-<n>``, no user config) that
is killed in teardown.  The program runs under ``sh -c '…; echo EXIT=$? > file'`` so its exit
status survives the pane.  Screens are polled until the expected text appears (generous
deadlines, never fixed sleeps); nothing asserts how long anything took.
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

import pytest

from tests.conftest import need

NPUWATCH = Path(sys.executable).parent / "npuwatch"
DEADLINE_S = 60.0
_servers = itertools.count()


class Terminal:
    """One tmux session running one command, on its own tmux server."""

    def __init__(self, workdir: Path) -> None:
        self.socket = f"npuwatch-test-{os.getpid()}-{next(_servers)}"
        self.exit_file = workdir / "exit-status"
        self.last_screen = ""

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=30,
            env=terminal_environ(),
        )

    def start(self, argv: List[str], width: int, height: int) -> None:
        program = " ".join(shlex.quote(word) for word in argv)
        script = f"{program}; echo EXIT=$? > {shlex.quote(str(self.exit_file))}"
        self.tmux("new-session", "-d", "-s", "main", "-x", str(width), "-y", str(height), "sh", "-c", script)
        # No client ever attaches, so the window keeps the size it was created with.
        shown = self.tmux("display-message", "-p", "-t", "main", "#{window_width}x#{window_height}")
        assert shown.stdout.strip() == f"{width}x{height}"

    def screen(self) -> str:
        result = self.tmux("capture-pane", "-p", "-t", "main", check=False)
        if result.returncode == 0:
            self.last_screen = result.stdout
        return self.last_screen

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def wait(self, condition: Callable[[str], bool], what: str) -> str:
        """Poll the screen until ``condition(screen)`` holds; fail with the last screen if never."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            screen = self.screen()
            if condition(screen):
                return screen
            if self.exit_status() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"never saw {what}; exit {self.exit_status()}; last screen:\n{self.last_screen}")

    def wait_text(self, text: str) -> str:
        return self.wait(lambda screen: text in screen, repr(text))

    def wait_gone(self, text: str) -> str:
        return self.wait(lambda screen: text not in screen, f"{text!r} gone")

    def exit_status(self) -> Optional[str]:
        try:
            return self.exit_file.read_text().strip() or None
        except FileNotFoundError:
            return None

    def wait_exit(self) -> str:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            status = self.exit_status()
            if status is not None:
                return status
            time.sleep(0.1)
        pytest.fail(f"the program did not exit; last screen:\n{self.screen()}")

    def close(self) -> None:
        self.tmux("kill-server", check=False)
        # kill-server ends the server but leaves its socket file behind.
        sockets = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (sockets / self.socket).unlink(missing_ok=True)


@contextmanager
def tmux_terminal(workdir: Path) -> Iterator[Terminal]:
    """A Terminal on its own tmux server (the test is skipped without tmux), ended on the way out."""
    need(shutil.which("tmux") is not None, "tmux is not installed")
    term = Terminal(workdir)
    try:
        yield term
    finally:
        term.close()


def terminal_environ() -> Dict[str, str]:
    """The environment the tmux server (and so the program) starts with.

    Without pytest's own variables: it exports COLUMNS=80 and LINES=24, which textual would
    take as the terminal's size whatever the pane's real size is.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("COLUMNS", "LINES", "TMUX", "TMUX_PANE", "NPUWATCH_SIM_NOW")
        and not key.startswith(("PYTEST_", "TEXTUAL_"))
    }
    env.update(LANG="C.UTF-8", LC_ALL="C.UTF-8")
    return env


@pytest.fixture
def terminal(tmp_path) -> Iterator[Terminal]:
    with tmux_terminal(tmp_path) as term:
        assert NPUWATCH.exists(), f"the npuwatch console script is missing: {NPUWATCH}"
        yield term


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_demo_detail_sort_help_and_quit(terminal, size):
    width, height = size
    terminal.start([str(NPUWATCH), "--demo"], width, height)
    screen = terminal.wait(
        lambda s: "demo:910b-training" in s and "Processes (" in s and "910B3" in s, "the dashboard"
    )
    assert "sort NPU ▲" in screen
    assert "Traceback" not in screen
    # Wide terminals draw each NPU as a titled card; 80 columns give one line per chip.
    assert ("╭─ NPU 0 · 910B3" in screen) == (width >= 120)

    terminal.keys("Enter")  # the first chip card has the focus from the start
    terminal.wait_text("NPU 0 · chip 0 · 910B3")
    if width >= 100:  # below the fold on small terminals
        terminal.wait_text("PCIe:")
    terminal.keys("Escape")
    terminal.wait(lambda s: "Processes (" in s and "NPU 0 · chip 0 ·" not in s, "the dashboard again")

    terminal.keys("s")
    terminal.wait_text("sort NPU mem ▼")

    terminal.keys("?")
    terminal.wait_text("npuwatch keys")
    terminal.keys("Escape")
    terminal.wait_gone("npuwatch keys")

    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"


@pytest.mark.slow
def test_a3_demo_groups_chips_per_npu(terminal):
    terminal.start([str(NPUWATCH), "--demo", "a3"], 200, 50)
    screen = terminal.wait_text("NPU 3 · Ascend910 · 2 chips")
    assert "NPU 0 · Ascend910 · 2 chips" in screen
    assert "chip 1 phy 1" in screen
    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"


@pytest.mark.slow
def test_hung_npu_smi_stays_responsive_and_shows_the_timeout(terminal):
    terminal.start([str(NPUWATCH), "--demo", "npu-smi-hang", "--timeout", "1"], 120, 40)
    terminal.wait_text("npu-smi hung")
    # Keys work while npu-smi hangs: help opens and closes.
    terminal.keys("?")
    terminal.wait_text("npuwatch keys")
    terminal.keys("Escape")
    terminal.wait_gone("npuwatch keys")
    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"


@pytest.mark.slow
def test_a_demo_recording_replays_in_a_real_terminal(terminal, tmp_path):
    recording = tmp_path / "a3.ndjson.gz"
    recorded = subprocess.run(
        [str(NPUWATCH), "record", str(recording), "--demo", "a3", "--interval", "0.25", "--duration", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recorded.returncode == 0, recorded.stderr
    terminal.start([str(NPUWATCH), "--replay", str(recording)], 200, 50)
    screen = terminal.wait(lambda s: "replay:a3.ndjson.gz" in s and "NPU 3 · Ascend910" in s, "the replay")
    assert "▶ 00:0" in screen and "×1" in screen
    terminal.keys("p")
    terminal.wait_text("⏸ 00:0")
    terminal.keys(">")
    terminal.wait_text("×2")
    terminal.keys("]")  # past the end: the last sample, marked
    terminal.wait_text("end of recording")
    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"


@pytest.mark.slow
def test_a_crash_exits_70_with_one_line_and_leaves_the_terminal_usable(terminal, tmp_path):
    """A bug in rendering (injected here) ends the dashboard with exit 70, one line naming the
    traceback file, and the terminal back in its normal mode (echo, line editing, main screen)."""
    script = tmp_path / "crashing_dashboard.py"
    script.write_text(
        "import sys\n"
        "from npuwatch.widgets.tui.app import NpuwatchApp\n"
        "def broken(self, snapshot):\n"
        "    raise ZeroDivisionError('injected')\n"
        "NpuwatchApp.show = broken\n"
        "from npuwatch.cli import main\n"
        "sys.exit(main(['--demo', 'idle']))\n"
    )
    stty = tmp_path / "stty.txt"
    run = f"XDG_STATE_HOME={shlex.quote(str(tmp_path))} " + shlex.join([sys.executable, str(script)])
    part, done = shlex.quote(f"{stty}.part"), shlex.quote(str(stty))
    after = f"status=$?; stty -a > {part}; echo $status >> {part}; mv {part} {done}; sleep 30"
    terminal.start(
        ["sh", "-c", f"{run}; {after}"],
        100,
        30,
    )
    screen = terminal.wait_text("traceback in")
    assert "npuwatch: internal error in the dashboard: ZeroDivisionError: injected" in screen
    assert "Traceback (most recent" not in screen
    terminal.wait(lambda _screen: stty.exists(), "the terminal settings after exit")
    settings = stty.read_text().split()
    assert settings[-1] == "70"
    assert "echo" in settings and "icanon" in settings and "-echo" not in settings
    terminal.tmux("kill-session", "-t", "main", check=False)


@pytest.mark.slow
def test_keys_typed_after_the_keyboard_thread_fell_asleep_still_work(terminal):
    """The dashboard's keyboard thread waits without a timeout once no key came for a while
    (``quiet_driver``); a lone Escape, told from an escape sequence only by a timeout, must still
    close the help screen, and ``q`` still end the program."""
    from npuwatch.widgets.tui.quiet_driver import KEY_POLL_FOR_S

    terminal.start([str(NPUWATCH), "--demo"], 120, 40)
    terminal.wait_text("Processes (")
    terminal.keys("?")
    terminal.wait_text("npuwatch keys")
    time.sleep(KEY_POLL_FOR_S + 1.0)  # the thread now sleeps until a key or the app's end
    terminal.keys("Escape")
    terminal.wait_gone("npuwatch keys")
    time.sleep(KEY_POLL_FOR_S + 1.0)
    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"
