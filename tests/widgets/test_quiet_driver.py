"""The dashboard's terminal driver (``widgets/tui/quiet_driver.py``): its stop signal wakes a
selector, so the keyboard thread can wait without a timeout; the live apps use it."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import sys
import threading
from typing import List

import pytest

from npuwatch.widgets.tui.app_base import LiveApp
from npuwatch.widgets.tui.quiet_driver import QuietLinuxDriver, WakingEvent


def test_setting_the_event_wakes_a_selector_and_clearing_it_drains_the_pipe():
    event = WakingEvent()
    selector = selectors.DefaultSelector()
    try:
        selector.register(event.read_fd, selectors.EVENT_READ)
        assert selector.select(0) == []
        event.set()
        event.set()  # twice: one wake-up is enough, the pipe never blocks the setter
        assert event.is_set()
        assert [key.fd for key, _ in selector.select(0)] == [event.read_fd]
        event.clear()
        assert not event.is_set()
        assert selector.select(0) == []  # drained: the next wait sleeps again
    finally:
        selector.close()
        event.close()
    event.set()  # a closed pipe leaves a plain event
    assert event.is_set()


@pytest.mark.skipif(sys.platform == "win32", reason="textual's Windows driver is kept")
def test_the_live_apps_run_on_the_quiet_driver():
    assert LiveApp().get_driver_class() is QuietLinuxDriver


@pytest.mark.skipif(not hasattr(signal, "SIGTSTP"), reason="job control signals are POSIX")
def test_a_job_control_signal_is_handled_on_the_loop_not_inside_the_code_it_interrupted(monkeypatch):
    """Stopping writes to the screen through a queue whose lock the interrupted code may hold: a
    handler run in the middle of that write would wait on itself forever."""
    handled: List[str] = []
    monkeypatch.setattr(QuietLinuxDriver, "_sigtstp_application", lambda self, *_: handled.append("TSTP"))
    monkeypatch.setattr(QuietLinuxDriver, "_sigcont_application", lambda self, *_: handled.append("CONT"))
    kept = [(number, signal.getsignal(number)) for number in (signal.SIGTSTP, signal.SIGCONT)]

    async def main() -> List[str]:
        QuietLinuxDriver(LiveApp())
        lock = threading.Lock()
        with lock:  # as a write to the writer's queue holds its lock
            os.kill(os.getpid(), signal.SIGTSTP)
            os.kill(os.getpid(), signal.SIGCONT)
            for _ in range(1000):  # bytecodes run: Python's handlers have run by now
                pass
            during = list(handled)
        await asyncio.sleep(0.05)
        return during

    try:
        assert asyncio.run(main()) == []
        assert handled == ["TSTP", "CONT"]  # then on the loop, in the order they came
    finally:
        for number, handler in kept:
            signal.signal(number, handler)
