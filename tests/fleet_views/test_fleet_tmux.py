"""The fleet view in a real terminal: tmux runs it on the fake fleet feed, the test reads the
screen and types (the dashboard's tmux harness: tests/widgets/test_tui_tmux.py)."""

from __future__ import annotations

import sys
from typing import Iterator

import pytest

from tests.conftest import REPO
from tests.widgets.test_tui_tmux import Terminal, tmux_terminal

FLEET = [sys.executable, "-m", "tests.fleet_views.fakes"]


@pytest.fixture
def term(tmp_path) -> Iterator[Terminal]:
    with tmux_terminal(tmp_path) as shown:
        yield shown


def start(terminal, *args, size=(160, 44)):
    # The fake feed lives in the tests package: run from the repository.
    terminal.start(["env", f"PYTHONPATH={REPO}", *FLEET, *args], *size)


@pytest.mark.slow
def test_fleet_worst_first_drill_into_a_node_and_back(term):
    terminal = term
    start(terminal)
    screen = terminal.wait(lambda s: "node-ok" in s and "chips OK" in s, "the fleet table")
    order = [name for name in ("node-alarm", "node-gone", "node-a3", "node-ok") if name in screen]
    assert sorted(order, key=screen.index) == ["node-alarm", "node-gone", "node-a3", "node-ok"]
    assert "✖ critical" in screen and "◌ stale" in screen
    assert "stale: no scrape for 95 s (up == 0)" in screen
    assert "6 compute · 2 input" in screen
    assert "Traceback" not in screen
    terminal.keys("Enter")
    screen = terminal.wait_text("╭─ NPU 3 · 910B2")
    assert "› node-alarm ✖ critical · 7/8 chips OK" in screen
    assert "✖ Alarm" in screen
    terminal.keys("Escape")
    terminal.wait_gone("╭─ NPU 3 · 910B2")
    terminal.wait_text("AI Core avg/min")
    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"


@pytest.mark.slow
def test_fleet_narrow_terminal_and_a_source_that_fails(term):
    terminal = term
    start(terminal, "--error-from", "3", size=(80, 24))
    screen = terminal.wait_text("Prometheus unreachable: connection refused")
    assert "showing the last data" in screen or "showing the" in screen
    assert "node-alarm" in screen  # the rows stay, marked stale
    terminal.keys("Enter")
    screen = terminal.wait_text("✖ Alarm")  # 80 columns: one line per chip
    assert "node-alarm ✖ critical · stale" in screen
    assert "Traceback" not in screen
    terminal.keys("q")
    assert terminal.wait_exit() == "EXIT=0"
