"""Provides LiveApp and ``run_live_app``: what the dashboard (``tui.app``) and the fleet view
(``fleet.app``) share as textual apps refreshed from a daemon thread.

An internal error ends the app and is kept in ``crash``; ``run_live_app`` then prints one line
naming the traceback file instead of textual's screenful of locals.  Python's cycle collector runs
less often while the app runs, and its keyboard thread sleeps while nothing is typed.  A signal asks
the app to exit from its own loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import time
from typing import Any, Iterator, List, Optional, Tuple, Type

from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.message import Message
from textual.widgets import Input

from npuwatch.crash import EXIT_INTERNAL, crash_line
from npuwatch.termination import call_on_termination

#: Python's cycle collector runs after this many new container objects while the dashboard runs
#: (Python's default is 700): a second's repaint makes thousands of short-lived tuples and lines,
#: freed as they go, and collecting every 700 of them cost about 0.8 ms of CPU a second.
GC_GEN0_THRESHOLD = 20_000


class LiveApp(App[None]):
    """A textual app whose data comes from a daemon thread (``_sampling_since`` is set while a
    refresh runs); ``t`` switches the theme, ``/`` shows the ``#filter`` input."""

    #: What the ``/`` box shows until something is typed.
    FILTER_PLACEHOLDER = "filter"

    def __init__(self) -> None:
        super().__init__()
        self.crash: Optional[Exception] = None
        self._sampling_since: Optional[float] = None

    def run(self, **kwargs: Any) -> Any:
        """Run in the terminal, Python's cycle collector running less often meanwhile; what
        textual's ``run`` returns (the value the app exited with)."""
        with fewer_collections():
            return super().run(**kwargs)

    def get_driver_class(self) -> Type[Driver]:
        """textual's driver for this terminal; on Linux and macOS the one whose input thread
        sleeps while nothing is typed (``quiet_driver``)."""
        chosen = super().get_driver_class()
        if sys.platform == "win32":
            return chosen
        from textual.drivers.linux_driver import LinuxDriver

        if chosen is LinuxDriver:
            from npuwatch.widgets.tui.quiet_driver import QuietLinuxDriver

            return QuietLinuxDriver
        return chosen

    def _handle_exception(self, error: Exception) -> None:
        """An internal error ends the app; ``run_live_app`` prints one line naming the traceback
        file instead of Textual's screenful of locals."""
        self.crash = error
        super()._handle_exception(error)
        self._exit_renderables.clear()

    def _post(self, message: Message) -> None:
        """Post from the refresh thread; nothing when the app quit while the refresh ran."""
        with contextlib.suppress(RuntimeError):  # the event loop is closed
            self.post_message(message)

    def _busy_s(self) -> Optional[float]:
        """How long the refresh under way has run; None when none runs."""
        return None if self._sampling_since is None else time.monotonic() - self._sampling_since

    def binding_help(self) -> List[Tuple[Binding, Tuple[str, str]]]:
        """Each binding with a tooltip and its help line (key, what it does): the help screen and
        the footer never disagree."""
        lines: List[Tuple[Binding, Tuple[str, str]]] = []
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.tooltip:
                first = dataclasses.replace(binding, key=binding.key.split(",")[0])
                lines.append((binding, (self.get_key_display(first), binding.tooltip)))
        return lines

    def filter_box(self) -> Optional[Input]:
        """The ``/`` box, once opened: it is mounted the first time ``/`` is pressed (on the app's
        first screen), a widget fewer to style before the first frame."""
        try:
            return self.screen_stack[0].query_one("#filter", Input)
        except NoMatches:
            return None

    async def action_filter(self) -> None:
        box = self.filter_box()
        if box is None:
            box = Input(placeholder=self.FILTER_PLACEHOLDER, id="filter")
            await self.screen_stack[0].mount(box)
        box.display = True
        box.focus()

    def close_filter_box(self) -> None:
        """Empty and hide the ``/`` box (nothing when it was never opened)."""
        box = self.filter_box()
        if box is not None:
            box.value = ""
            box.display = False

    def action_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"


@contextlib.contextmanager
def fewer_collections(gen0: int = GC_GEN0_THRESHOLD) -> Iterator[None]:
    """Raise the cycle collector's first threshold to ``gen0`` for the block, then restore it."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], gen0), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def run_live_app(app: LiveApp) -> None:
    """Run ``app`` until it exits.  A signal asks the app to exit from its loop, so textual restores
    the terminal and stops its driver's threads (a SystemExit raised mid-loop could leave them running)."""
    with call_on_termination(lambda code: app.exit(return_code=code)):
        app.run()


def exit_status(app: LiveApp, where: str) -> int:
    """The app's exit status once it ran: 70 after an internal error, whose one line (naming
    ``where`` and the traceback's file) goes to stderr; the terminal is restored by then."""
    if app.crash is not None:
        print(crash_line(app.crash, where), file=sys.stderr)
        return EXIT_INTERNAL
    return app.return_code or 0
