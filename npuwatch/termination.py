"""Provides how npuwatch ends on SIGTERM, SIGHUP and SIGINT: children first, then the command.

Every handler first kills every child npuwatch started (a hung npu-smi, the DCMI worker) and
stops new ones from starting (``runner.end_all``): a sampling thread inside a hung run returns at
once, whatever ``--timeout`` is, and its next step starts nothing.  Then every command unwinds
like Ctrl-C (``raise_on_termination``), so a demo's tree is removed and nothing npuwatch started
outlives it; ``record`` and ``serve`` instead close cleanly and exit 0 (``stop_on_termination``).

A textual app must not be unwound that way: a SystemExit raised by a handler lands wherever the
event loop happens to be, and when it escapes the app's run loop textual never stops its driver,
whose input and writer threads are not daemons — the process then cannot exit (seen under load:
a dashboard alive minutes after SIGTERM, its input thread spinning on the closed terminal).
``call_on_termination`` lets the dashboard ask its app to exit from the loop itself instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterator, List, Optional, Tuple

#: The signals that end npuwatch: docker stop / kill, a closed terminal, Ctrl-C from outside.
SIGNAL_NAMES = ("SIGTERM", "SIGHUP", "SIGINT")
#: How long an app asked to stop by a signal may take before the process ends without it.
STOP_GRACE_S = 3.0


def _end_after(grace_s: float, code: int) -> None:
    """End the process ``grace_s`` from now unless it has ended: a daemon timer, so a clean exit
    is never held back.  Seen: textual's shutdown writing to a terminal that a SIGHUP took away
    can block for ever on its writer queue (an orphan dashboard, hours later)."""

    def end() -> None:
        _kill_children()
        os._exit(code)

    timer = threading.Timer(grace_s, end)
    timer.daemon = True
    timer.start()


def _kill_children() -> None:
    from npuwatch.probes.runner import end_all

    end_all()  # a thread blocked on a hung npu-smi returns at once, and starts no other


def raise_on_termination() -> None:
    """From now on SIGTERM and SIGHUP kill every child, then raise ``SystemExit(128 + signum)``
    (Python's own SIGINT already raises KeyboardInterrupt).  Main thread only."""

    def stop(signum: int, _frame: object) -> None:
        _kill_children()
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), stop)


@contextlib.contextmanager
def call_on_termination(stop: Callable[[int], None]) -> Iterator[None]:
    """While inside, a terminating signal kills every child and then calls ``stop(128 + signum)``
    on the running event loop (woken at once), instead of raising; a second signal while it
    stops exits at once, and so does a stop that takes more than ``STOP_GRACE_S``.  Outside the
    main thread (where handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping: List[bool] = []

    def handle(signum: int, _frame: object) -> None:
        _kill_children()
        code = 128 + signum
        if stopping:
            os._exit(code)  # the second signal: the user insists, and the first could not end it
        stopping.append(True)
        import asyncio  # loaded already by the app that runs the loop; `check` never gets here

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not inside the loop (before it started or after it ended)
            raise SystemExit(code) from None
        loop.call_soon_threadsafe(stop, code)
        _end_after(STOP_GRACE_S, code)

    previous: List[Tuple[int, object]] = []
    for name in SIGNAL_NAMES:
        if hasattr(signal, name):
            number = getattr(signal, name)
            previous.append((number, signal.signal(number, handle)))
    try:
        yield
    finally:
        for number, handler in previous:
            signal.signal(number, handler)  # type: ignore[arg-type]


class Termination:
    """What ``stop_on_termination`` hands its caller: ``event`` is set by the first signal, and
    ``signal_name`` says which one (``SIGTERM``); empty while none came."""

    def __init__(self, event: Optional[threading.Event] = None) -> None:
        self.event = event or threading.Event()
        self.signal_name = ""

    def handle(self, signum: int, _frame: object) -> None:
        _kill_children()
        if not self.signal_name:
            self.signal_name = signal.Signals(signum).name
        # Not ``event.set()`` here: the handler runs in the main thread between two bytecodes,
        # maybe while that thread holds the event's own (non-reentrant) lock inside ``wait()``.
        threading.Thread(target=self.event.set, name="npuwatch-signal", daemon=True).start()


@contextlib.contextmanager
def stop_on_termination(event: Optional[threading.Event] = None) -> Iterator[Termination]:
    """While inside, SIGTERM, SIGHUP and SIGINT kill every child and set ``event`` instead of
    raising: a command that closes cleanly on a signal (``record`` finishes its file, ``serve``
    its server) waits on the event, and whatever its sampling was waiting on has already been
    killed, so it ends at once.  Outside the main thread it only hands the event over."""
    termination = Termination(event)
    previous: List[Tuple[int, object]] = []
    if threading.current_thread() is threading.main_thread():
        for name in SIGNAL_NAMES:
            if hasattr(signal, name):
                number = getattr(signal, name)
                previous.append((number, signal.signal(number, termination.handle)))
    try:
        yield termination
    finally:
        for number, handler in previous:
            signal.signal(number, handler)  # type: ignore[arg-type]
