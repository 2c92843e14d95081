"""The dashboard's terminal driver (``widgets/tui/quiet_driver.py``): its stop signal wakes a
selector, so the keyboard thread can wait without a timeout; the live apps use it."""

from __future__ import annotations

import selectors
import sys

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
