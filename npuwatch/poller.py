"""Provides Poller: one round of work every interval, on a background thread or in the caller's.

The one sampling loop behind ``npuwatch serve``, the notebook's shared sampler, ``record`` and
``--plain``: it runs ``tick()``, then waits what is left of the interval (read again every round,
so a feed whose pace changes is followed), skips rounds while ``paused()`` says so, and ends at
once on ``stop()`` — a wait is on an event, never a bare sleep.  Clock and sleep are injectable,
so tests drive it without waiting.

In the caller's thread (``run()``) an exception from ``tick()`` ends the loop and reaches the
caller (``record`` stops on a full disk, Ctrl-C ends ``--plain``).  On a background thread
(``start()``) nothing may end the loop silently: each distinct failure is logged once
(``FailureLog``) and the next round runs as usual.  The dashboard keeps Textual's re-armed timer
instead: a thread of its own could hold the app open after quit.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional, Set

_log = logging.getLogger("npuwatch")

#: Why ``run()`` returned: ``stop()`` was called (or the stop event set), or ``ends_at`` came.
STOPPED = "stopped"
ENDED = "ended"


class FailureLog:
    """Logs each distinct failure once: the same error every second is one warning, not thousands."""

    def __init__(self, prefix: str = "npuwatch") -> None:
        self.prefix = prefix
        self._seen: Set[str] = set()
        self._lock = threading.Lock()

    def warn(self, message: str, exc: Optional[BaseException] = None) -> bool:
        """Log ``message`` as a warning the first time it comes; True when it was new.

        An ``OSError`` is the machine's state (out of descriptors, a file gone): its message says
        it all.  Any other exception is a bug, logged with its traceback.
        """
        with self._lock:
            if message in self._seen:
                return False
            self._seen.add(message)
        bug = exc is not None and not isinstance(exc, OSError)
        _log.warning("%s: %s", self.prefix, message, exc_info=exc if bug else None)
        return True


class Poller:
    """Calls ``tick()`` every ``interval_s()`` seconds until ``stop()`` (or ``ends_at``)."""

    def __init__(
        self,
        tick: Callable[[], None],
        interval_s: Callable[[], float],
        *,
        name: str = "npuwatch-poller",
        paused: Optional[Callable[[], bool]] = None,
        min_wait_s: float = 0.0,
        ends_at: Optional[float] = None,
        stop_event: Optional[threading.Event] = None,
        failures: Optional[FailureLog] = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Optional[Callable[[float], None]] = None,
    ) -> None:
        self.tick = tick
        self.interval_s = interval_s
        self.name = name
        self.paused = paused
        self.min_wait_s = min_wait_s
        self.ends_at = ends_at  # on ``clock``: no round starts at or after it, no wait runs past it
        self.failures = failures or FailureLog()
        self.clock = clock
        self.thread: Optional[threading.Thread] = None
        self._stop = stop_event or threading.Event()
        self._sleep = sleep

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was called or the stop event set."""
        return self._stop.is_set()

    def stop(self) -> None:
        """End the loop: a wait ends now, a tick under way finishes first."""
        self._stop.set()

    def run(self) -> str:
        """Poll in this thread until stopped (``STOPPED``) or ``ends_at`` (``ENDED``).

        An exception from ``tick()`` ends the loop and propagates.
        """
        return self._loop(self._round)

    def start(self) -> threading.Thread:
        """Poll on a daemon thread; a failing tick is logged once per distinct failure, never fatal."""
        self.thread = threading.Thread(target=self._loop, args=(self._guarded_round,), name=self.name)
        self.thread.daemon = True
        self.thread.start()
        return self.thread

    def join(self, timeout_s: Optional[float] = None) -> None:
        """Wait for the background thread (after ``stop()``), up to ``timeout_s``."""
        if self.thread is not None:
            self.thread.join(timeout_s)

    def _loop(self, one_round: Callable[[], None]) -> str:
        while not self._stop.is_set():
            started = self.clock()
            if self.ends_at is not None and started >= self.ends_at:
                return ENDED
            if self.paused is None or not self.paused():
                one_round()
            if self._stop.is_set():
                break
            wait_s = max(self.min_wait_s, self.interval_s() - (self.clock() - started))
            if self.ends_at is not None:
                wait_s = min(wait_s, max(0.0, self.ends_at - self.clock()))
            self._wait(wait_s)
        return STOPPED

    def _round(self) -> None:
        self.tick()

    def _guarded_round(self) -> None:
        try:
            self.tick()
        except Exception as exc:  # a background loop must outlive any failure: say it once, go on
            self.failures.warn(f"{type(exc).__name__}: {exc}", exc)

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif seconds > 0:
            self._stop.wait(seconds)
