"""Provides LiveApp and ``run_live_app``: what the dashboard (``tui.app``) and the fleet view
(``fleet.app``) share as textual apps refreshed from a daemon thread.

An internal error ends the app and is kept in ``crash``; ``run_live_app`` then prints one line
naming the traceback file instead of textual's screenful of locals, and the exit status is 70.
That holds wherever the error is raised: in the app's loop or a textual worker
(``_handle_exception``), on the driver's input thread (``internal_error``), on any other thread
while the app runs (``threading.excepthook``), in a callback of the event loop (its exception
handler), or in whatever makes textual ``panic``.  Ctrl-Z
suspends (the terminal is given back; ``fg`` redraws).  Python's cycle collector runs
less often while the app runs, and its keyboard thread sleeps while nothing is typed.  A signal asks
the app to exit from its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import io
import signal
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type

from rich.console import Console, RenderableType
from textual import on
from textual.app import App
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.message import Message
from textual.widgets import Input

from npuwatch.crash import EXIT_INTERNAL, crash_line
from npuwatch.termination import call_on_termination

#: How many traceback files the refresh bugs of one run may write (one per distinct error).
MAX_REFRESH_REPORTS = 8

#: Python's cycle collector runs after this many new container objects while the dashboard runs
#: (Python's default is 700): a second's repaint makes thousands of short-lived tuples and lines,
#: freed as they go, and collecting every 700 of them cost about 0.8 ms of CPU a second.
GC_GEN0_THRESHOLD = 20_000


class TextualPanicError(RuntimeError):
    """textual ended the app with ``panic`` (its report of an error it caught itself); ``details``
    is what it would have printed, kept for the crash report."""

    def __init__(self, summary: str, details: str) -> None:
        super().__init__(summary)
        self.details = details


class LiveApp(App[None]):
    """A textual app whose data comes from a daemon thread (``_sampling_since`` is set while a
    refresh runs); ``t`` switches the theme, ``/`` shows the ``#filter`` input, Ctrl-Z suspends."""

    #: What the ``/`` box shows until something is typed.
    FILTER_PLACEHOLDER = "filter"

    # The terminal's Ctrl-Z comes as a key (textual turns the terminal's signals off): it stops
    # the process as in any terminal program; the driver gives the terminal back first.
    BINDINGS = [Binding("ctrl+z", "suspend_process", "Suspend", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.crash: Optional[BaseException] = None
        #: The line of the first bug a refresh raised: shown while refreshing goes on, and quitting
        #: then exits 70 with it (``exit_status``).
        self.refresh_error: Optional[str] = None
        self._refresh_lines: Dict[Tuple[str, str], str] = {}
        self._sampling_since: Optional[float] = None

    def run(self, **kwargs: Any) -> Any:
        """Run in the terminal, Python's cycle collector running less often meanwhile; what
        textual's ``run`` returns (the value the app exited with)."""
        with fewer_collections():
            return super().run(**kwargs)

    async def run_async(self, **kwargs: Any) -> Any:
        """textual's ``run_async``, with an exception raised in a callback of the event loop (one
        a thread scheduled) ending the app as an internal error instead of being logged over the
        screen while the app runs on."""
        loop = asyncio.get_running_loop()

        def handle(the_loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
            error = context.get("exception")
            if isinstance(error, BaseException):
                self.internal_error(error)
            else:  # a warning without an exception (a task destroyed while pending): asyncio's
                the_loop.default_exception_handler(context)

        loop.set_exception_handler(handle)
        return await super().run_async(**kwargs)

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
        if self.crash is None:
            self.crash = error
        super()._handle_exception(error)
        self._exit_renderables.clear()

    def internal_error(self, error: BaseException) -> None:
        """From any thread: ``error`` ends the app as an internal error (the first one is kept)."""
        if self.crash is None:
            self.crash = error
        self.exit(return_code=EXIT_INTERNAL)  # thread-safe: posts to the app's loop

    def panic(self, *renderables: RenderableType) -> None:
        """textual's way out after an error it caught (such as one on a driver's thread) is an
        internal error too: one line and exit 70, never its screenful and exit 0."""
        if self.crash is None:
            details = _plain_text(renderables)
            lines = [line.strip(" │╰╯─") for line in details.splitlines()]
            summary = next((line for line in reversed(lines) if line), "textual panicked")
            self.crash = TextualPanicError(summary, details)
        super().panic(*renderables)
        self._exit_renderables.clear()

    @on(Driver.SignalResume)
    def _redraw_after_resume(self) -> None:
        """Back from Ctrl-Z (``fg``): the terminal showed the shell meanwhile, so every line is
        drawn again, not only the lines that changed."""
        self.refresh(repaint=True, layout=True)

    def refresh_crash_line(self, error: Exception, where: str) -> str:
        """The one line for a bug a refresh raised (the app shows it and refreshes on).  Its
        traceback is written once per distinct error, not at every refresh, and at most
        ``MAX_REFRESH_REPORTS`` files in all."""
        key = (type(error).__name__, str(error))
        line = self._refresh_lines.get(key)
        if line is None:
            if len(self._refresh_lines) < MAX_REFRESH_REPORTS:
                line = crash_line(error, where)
                self._refresh_lines[key] = line
            else:
                line = f"npuwatch: internal error in {where}: {key[0]}: {key[1]} (no more traceback files)"
        if self.refresh_error is None:
            self.refresh_error = line
        return line

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


def _plain_text(renderables: Tuple[RenderableType, ...]) -> str:
    """What ``renderables`` print as, without styles (for a crash report)."""
    console = Console(file=io.StringIO(), width=100, color_system=None, force_terminal=False)
    try:
        for renderable in renderables:
            console.print(renderable)
    except Exception:  # a report of a report: its text is a best effort
        return "\n".join(repr(renderable) for renderable in renderables)
    output = console.file
    return output.getvalue() if isinstance(output, io.StringIO) else ""


@contextlib.contextmanager
def thread_errors_end(app: LiveApp) -> Iterator[None]:
    """While inside, an exception that ends any thread (textual's writer, a refresh thread) ends
    ``app`` as an internal error instead of printing a traceback over the screen and leaving the
    app running without that thread."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        app.internal_error(args.exc_value)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


@contextlib.contextmanager
def job_control_kept() -> Iterator[None]:
    """SIGTSTP and SIGCONT handled as before once the block ends: textual's driver sets handlers
    for them and leaves them set, bound to a driver that has stopped (main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTSTP"):
        yield
        return
    kept = [(number, signal.getsignal(number)) for number in (signal.SIGTSTP, signal.SIGCONT)]
    try:
        yield
    finally:
        for number, handler in kept:
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(number, handler)


def run_live_app(app: LiveApp) -> None:
    """Run ``app`` until it exits.  A signal asks the app to exit from its loop, so textual restores
    the terminal and stops its driver's threads (a SystemExit raised mid-loop could leave them running)."""
    stop = call_on_termination(lambda code: app.exit(return_code=code))
    with stop, thread_errors_end(app), job_control_kept():
        app.run()


def exit_status(app: LiveApp, where: str) -> int:
    """The app's exit status once it ran: 70 after an internal error, whose one line (naming
    ``where`` and the traceback's file) goes to stderr, and after a refresh that raised (the
    first one's line) unless a signal ended the app; the terminal is restored by then."""
    if app.crash is not None:
        print(crash_line(app.crash, where), file=sys.stderr)
        return EXIT_INTERNAL
    code = app.return_code or 0
    if code == 0 and app.refresh_error is not None:  # a refresh failed: shown, now said and counted
        print(app.refresh_error, file=sys.stderr)
        return EXIT_INTERNAL
    return code
