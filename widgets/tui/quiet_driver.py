"""Provides QuietLinuxDriver: textual's terminal driver with an input thread that sleeps while
nothing is typed.

textual's Linux driver reads the keyboard on a thread that wakes ten times a second, typed to or
not, to see whether it should stop: about 1.5 ms of CPU a second, a tenth of the whole dashboard's
cost at a 1 s interval (measured with per-thread CPU from /proc).  This driver's thread waits on
the terminal and on a wake-up pipe that stopping writes to, so an untouched dashboard costs nothing
there.  It still polls ten times a second for a moment after each key, as textual's does: a lone
Escape is told from the start of an escape sequence by a timeout (textual's ``ESCDELAY``) that
only a poll after the key can notice.
"""

from __future__ import annotations

import contextlib
import os
import selectors
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
            with contextlib.suppress(OSError):
                os.close(fd)


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread waits for a key or for stopping instead of waking ten
    times a second; everything else is textual's."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.exit_event = WakingEvent()

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
