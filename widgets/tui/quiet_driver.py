"""Provides QuietLinuxDriver: textual's terminal driver with an input thread that sleeps while
nothing is typed.

textual's Linux driver reads the keyboard on a thread that wakes ten times a second, typed to or
not, to see whether it should stop: about 1.5 ms of CPU a second, a tenth of the whole dashboard's
cost at a 1 s interval (measured with per-thread CPU from /proc).  This driver's thread waits on
the terminal and on a wake-up pipe that stopping writes to, so an untouched dashboard costs nothing
there.  It still polls ten times a second for a moment after each key, as textual's does: a lone
Escape is told from the start of an escape sequence by a timeout (textual's ``ESCDELAY``) that
only a poll after the key can notice.

Suspending (Ctrl-Z, ``kill -TSTP``) stops application mode the way quitting does, input thread and
all, and ``fg`` starts it again with a new input thread: the wake-up pipe that stopping closed is
opened again first, and a SIGCONT that follows no suspension of ours (``kill -STOP`` then
``-CONT``) redraws instead of starting a second pair of threads.  Both signals are handled on the
app's event loop, between its callbacks, never inside whatever the main thread was running when
one arrived: that might hold the lock of the writer's queue, which stopping needs (a deadlock that
left the app drawn and running after ``kill -TSTP``).  An error on the input thread ends
the app as an internal error (exit 70, one line: ``app_base``), never as textual's panic, which
printed a screenful of traceback and exited 0.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import time
from codecs import getincrementaldecoder
from threading import Event
from typing import Callable, List, Tuple

from textual import constants
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

#: How often the input thread looks for a timed-out escape sequence after a key (textual's pace).
KEY_POLL_S = 0.1
#: For how long after the last key it keeps polling: well past textual's escape delay.
KEY_POLL_FOR_S = max(1.0, 4 * constants.ESCAPE_DELAY)

_Ready = List[Tuple[selectors.SelectorKey, int]]


class WakingEvent(Event):
    """A ``threading.Event`` whose ``set()`` also writes to a pipe a selector can wait on."""

    def __init__(self) -> None:
        super().__init__()
        self.read_fd = self._write_fd = -1
        self.open()

    @property
    def closed(self) -> bool:
        return self.read_fd < 0

    def open(self) -> None:
        """Open the pipe if it is closed (a suspension closes it with the input thread it served)."""
        if self.closed:
            self.read_fd, self._write_fd = os.pipe()  # not inherited by children (PEP 446)
            os.set_blocking(self.read_fd, False)
            os.set_blocking(self._write_fd, False)

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):  # full (a wake-up is already waiting) or closed
            os.write(self._write_fd, b"x")

    def clear(self) -> None:
        super().clear()
        with contextlib.suppress(OSError):  # drained (BlockingIOError) or closed
            while os.read(self.read_fd, 512):
                pass

    def close(self) -> None:
        """Close the pipe (the event still works as a plain event after this)."""
        for fd in (self.read_fd, self._write_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.read_fd = self._write_fd = -1


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread waits for a key or for stopping instead of waking ten
    times a second; everything else is textual's."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.exit_event = WakingEvent()
        self._application_mode = False  # the terminal is ours: input and writer threads run
        self._suspended = False  # application mode stopped by SIGTSTP, until SIGCONT starts it
        # textual's __init__ set the handlers to do the work at once: do it on the loop instead.
        signal.signal(signal.SIGTSTP, self._on_job_signal)
        signal.signal(signal.SIGCONT, self._on_job_signal)

    def _on_job_signal(self, signum: int, _frame: object) -> None:
        """SIGTSTP or SIGCONT, from Python's handler: the work is queued on the running event loop,
        so it runs between the loop's callbacks and never while the main thread holds a lock it
        needs (a write to the screen was under way).  With no loop running, SIGTSTP stops at once."""
        import asyncio  # loaded already: the driver is made inside the app's loop

        handle = self._sigtstp_application if signum == signal.SIGTSTP else self._sigcont_application
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # before the app's loop started or after it ended
            if signum == signal.SIGTSTP:
                os.kill(os.getpid(), signal.SIGSTOP)
            return
        loop.call_soon_threadsafe(handle)

    def start_application_mode(self) -> None:
        event = self.exit_event
        if isinstance(event, WakingEvent):
            event.open()  # closed by the suspension this start ends
        before = self._key_thread
        super().start_application_mode()
        if self._key_thread is not before:  # textual returns early from a background job (bg)
            self._application_mode, self._suspended = True, False

    def stop_application_mode(self) -> None:
        self._application_mode = False
        super().stop_application_mode()

    def suspend_application_mode(self) -> None:
        self._suspended = True
        super().suspend_application_mode()

    def _sigtstp_application(self, *args: object) -> None:
        """SIGTSTP: give the terminal back and stop (textual's), or only stop while application mode
        is not running (before it starts, after the app ended, while ``App.suspend`` runs a program)."""
        if self._application_mode:
            super()._sigtstp_application(*args)
        else:
            os.kill(os.getpid(), signal.SIGSTOP)

    def _sigcont_application(self, *args: object) -> None:
        """SIGCONT: start application mode again after our suspension.  After a stop we did not
        see (``kill -STOP``) the threads still run: only the terminal is set up and drawn again."""
        if not self._auto_restart:  # App.suspend runs a program and restarts the mode itself
            return
        if self._suspended:
            self.resume_application_mode()
        elif self._application_mode:
            self.stop_application_mode()  # the shell may have reset the terminal meanwhile
            self.resume_application_mode()
            self._app.post_message(self.SignalResume())

    def _run_input_thread(self) -> None:
        """The input thread: an error in it ends the app as an internal error (``LiveApp.internal_error``);
        textual's own wrapper made it a panic, which exits 0 after a screenful of traceback."""
        try:
            self.run_input_thread()
        except BaseException as error:  # every error of this thread ends the app
            report = getattr(self._app, "internal_error", None)
            if report is None:  # pragma: no cover - only the live apps use this driver
                raise
            report(error)

    def close(self) -> None:
        super().close()
        event = self.exit_event
        if isinstance(event, WakingEvent) and (self._key_thread is None or not self._key_thread.is_alive()):
            event.close()

    def run_input_thread(self) -> None:
        """Read keys and mouse events until stopped, as textual's loop does (same parser, same
        decoding, the same final read), waiting without a timeout while no key came lately."""
        event = self.exit_event
        if not isinstance(event, WakingEvent):  # pragma: no cover - set in __init__
            super().run_input_thread()
            return
        fileno = self.fileno
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        process: Callable[..., None] = self._processor(parser, decode)
        selector = selectors.DefaultSelector()
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(event.read_fd, selectors.EVENT_READ)
        last_key = time.monotonic()
        try:
            while not event.is_set():
                recent = time.monotonic() - last_key < KEY_POLL_FOR_S
                woken = selector.select(KEY_POLL_S if recent else None)
                ready = [item for item in woken if item[0].fd == fileno]
                if ready:
                    last_key = time.monotonic()
                process(ready)
            selector.unregister(fileno)
            selector.unregister(event.read_fd)
            final = selectors.DefaultSelector()
            final.register(fileno, selectors.EVENT_READ)
            try:
                process(final.select(KEY_POLL_S), final=True)
            finally:
                final.close()
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass

    def _processor(self, parser: XTermParser, decode: Callable[..., str]) -> Callable[..., None]:
        """What textual's loop does with each batch of ready input: read, parse, dispatch, then
        let the parser time out a pending escape sequence."""
        fileno = self.fileno

        def process(ready: _Ready, final: bool = False) -> None:
            for index, (_key, mask) in enumerate(ready):
                if mask & selectors.EVENT_READ:
                    text = decode(os.read(fileno, 1024 * 4), final=final and index == len(ready) - 1)
                    if not text:  # stdin is a pipe that ended
                        break
                    for message in parser.feed(text):
                        self.process_message(message)
            for message in parser.tick():
                self.process_message(message)

        return process
