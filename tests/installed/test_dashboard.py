"""The installed ``npuwatch --demo`` dashboard in a real terminal (tmux), with and without colour.

Drives tmux with the dashboard tier's ``Terminal`` (tests/widgets/test_tui_tmux.py).  That
terminal starts its program with its own environment and the test's directory, so the program
is started through ``env -C WORKDIR``: in the temporary directory, with the venv's environment.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from tests.installed.product import Installed
from tests.widgets.test_tui_tmux import Terminal, terminal_environ, tmux_terminal

pytestmark = pytest.mark.slow

DEMO_CHIPS = 8  # the default demo: 8 × 910B3, NPU IDs 0-7
#: "  3  910B3" on one line per chip (below 120 columns), "╭─ NPU 3 · 910B3" on a card.
CHIP = re.compile(r"(?:^|NPU )\s*(\d+)\s+(?:· )?910B3", re.MULTILINE)


def env_argv(target: Dict[str, str], base: Dict[str, str], cwd: Path) -> List[str]:
    """``env -C cwd -u … KEY=VALUE …``: turns the ``base`` environment into ``target`` in ``cwd``."""
    argv = ["env", "-C", str(cwd)]
    argv += [word for key in sorted(set(base) - set(target)) for word in ("-u", key)]
    argv += [f"{key}={value}" for key, value in sorted(target.items()) if base.get(key) != value]
    return argv


def chips_shown(screen: str) -> List[int]:
    return sorted({int(found) for found in CHIP.findall(screen)})


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    with tmux_terminal(tmp_path) as term:  # its socket file removed too
        yield term


@pytest.mark.parametrize("no_color", [False, True], ids=["color", "NO_COLOR"])
@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_demo_dashboard_shows_every_chip_and_quits(
    installed: Installed, terminal: Terminal, workdir: Path, size, no_color
):
    width, height = size
    env = installed.environ(**({"NO_COLOR": "1"} if no_color else {}))
    argv = [*env_argv(env, terminal_environ(), workdir), str(installed.bin("npuwatch")), "--demo"]
    terminal.start(argv, width, height)
    screen = terminal.wait(
        lambda s: "demo:910b-training" in s and len(chips_shown(s)) == DEMO_CHIPS, "every chip of the demo"
    )
    assert chips_shown(screen) == list(range(DEMO_CHIPS)), screen
    assert "Traceback" not in screen

    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0", terminal.screen()
