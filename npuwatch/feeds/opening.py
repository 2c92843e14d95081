"""Provides ``OpeningFeed``: the dashboard's feed opened, and first sampled, on a thread while the
dashboard imports its toolkit.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from npuwatch.feeds.machine import demo_fallback
from npuwatch.feeds.options import FeedOptions
from npuwatch.feeds.wiring import open_feed
from npuwatch.probes.runner import held_signals, release_signals

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed
    from npuwatch.model import Snapshot
    from npuwatch.probes.simulator.machine import PendingSimulation


class OpeningFeed:
    """``demo_fallback`` and ``open_feed`` on a thread, started at once, then the feed's first
    sample on the same thread.

    The dashboard opens its feed this way before it imports its toolkit: starting DCMI's worker
    process and taking the first sample overlap the import, so the first sample is ready by the
    first paint.  A demo named by the options has its tree built by a forked child
    (``Simulation.begin``), started here before the thread: its file writes then run beside the
    import instead of competing with it for the interpreter.  ``result()`` hands over the feed
    and the banner once the feed is open (raising what opening raised), never waiting for the
    first sample; ``first_sample()`` waits for that one (call it off the UI thread: a hung
    npu-smi holds it until its timeout); ``close()`` ends a feed nobody took.
    """

    def __init__(self, options: FeedOptions, environ: Optional[Mapping[str, str]] = None) -> None:
        self._outcome: Optional[Tuple[SnapshotFeed, str]] = None
        self._error: Optional[BaseException] = None
        self._taken = False
        self._thread: Optional[threading.Thread] = None
        self._opened = threading.Event()
        self._first: Optional[Tuple[Snapshot, float]] = None
        try:
            # A signal (npuwatch's raise SystemExit) waits until the thread owns what was started,
            # and is raised here, where close() can end it: never between a fork and the thread.
            with held_signals():
                decided = _fallback_now(options, environ)
                pending = _begin_demo(options if decided is None else decided[0])
                self._thread = threading.Thread(
                    target=self._open,
                    args=(options, environ, decided, pending),
                    name="npuwatch-open-feed",
                    daemon=True,
                )
                self._thread.start()
        except BaseException:
            self.close()
            raise

    def _open(
        self,
        options: FeedOptions,
        environ: Optional[Mapping[str, str]],
        decided: Optional[Tuple[FeedOptions, str]],
        pending: Optional[PendingSimulation],
    ) -> None:
        release_signals()  # what this thread starts (DCMI's worker) gets the usual signal mask
        try:
            chosen, banner = demo_fallback(options, environ) if decided is None else decided
            feed = open_feed(chosen, environ, pending if chosen.demo is not None else None)
            about = str(getattr(feed, "about", ""))
            self._outcome = (feed, " · ".join(part for part in (banner, about) if part))
        except BaseException as exc:  # handed to result()'s caller
            self._error = exc
            return
        finally:
            if pending is not None:
                pending.close()  # nothing once the feed took the tree
            self._opened.set()
        started = time.monotonic()
        try:
            self._first = (feed.sample(), time.monotonic() - started)
        except Exception:  # a bug in sampling: the dashboard samples again and says what it is
            self._first = None

    def result(self) -> Tuple[SnapshotFeed, str]:
        """The open feed and the banner; what opening raised (a ``UsageError``) is raised here."""
        assert self._thread is not None
        self._opened.wait()
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        self._taken = True
        return self._outcome

    def first_sample(self) -> Optional[Tuple[Snapshot, float]]:
        """The first snapshot the thread took once the feed opened, and the seconds it took: once
        (``None`` after that, when opening failed or sampling raised).  Waits for it."""
        if self._thread is not None:
            self._thread.join()
        first, self._first = self._first, None
        return first

    def close(self) -> None:
        """Close the feed if it opened and ``result()`` never handed it over (a taken feed is its
        owner's to close).  Never waits for the first sample: one still running ends with the
        closed feed, on its daemon thread."""
        if self._taken or self._thread is None:
            return
        self._opened.wait()
        self._taken = True
        if self._outcome is not None:
            self._outcome[0].close()


def _fallback_now(
    options: FeedOptions, environ: Optional[Mapping[str, str]]
) -> Optional[Tuple[FeedOptions, str]]:
    """``demo_fallback`` decided before the thread starts, so a demo standing in for a machine
    without an NPU is built in a child too; ``None`` when the options name a demo or a recording
    already, or when deciding failed (the thread asks again and hands the error to ``result()``)."""
    if options.demo is not None or options.replay is not None:
        return None
    try:
        return demo_fallback(options, environ)
    except Exception:
        return None


def _begin_demo(options: FeedOptions) -> Optional[PendingSimulation]:
    """The demo's machine, its build started in a child, when the options name a valid demo;
    ``None`` otherwise (opening then builds it, or says what is wrong, as ``open_feed`` does)."""
    if options.demo is None:
        return None
    try:
        options.validate()
        from npuwatch.probes.simulator.machine import Simulation

        return Simulation.begin(options.demo)
    except Exception:  # the same error comes again, with its usual words, from open_feed
        return None
