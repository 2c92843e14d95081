"""Provides SamplerHub: one background sampler thread per set of options, shared by the views using it.

Several ``%npuwatch`` views with the same options share one feed, so they never run npu-smi twice
per tick.  Each channel's daemon thread builds the feed, samples every ``interval_s`` (a
``npuwatch.poller.Poller``) and hands each Snapshot to its subscribers; the last subscriber
leaving stops the thread, which then closes the feed (removing a demo's simulated machine).
Nothing here waits for npu-smi on the caller's thread: a hung npu-smi holds only the channel's
own thread.

An exception from the feed or a view is a bug (npu-smi failures arrive as notes in the
Snapshot): its traceback goes to a file (``npuwatch.crash``) and the views get one line saying so.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from npuwatch.crash import crash_line
from npuwatch.poller import Poller

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed
    from npuwatch.feeds import FeedOptions
    from npuwatch.model import Snapshot

_log = logging.getLogger("npuwatch")

FeedFactory = Callable[["FeedOptions"], "SnapshotFeed"]
SnapshotCallback = Callable[["Snapshot"], None]
ErrorCallback = Callable[[str], None]
Subscriber = Tuple[SnapshotCallback, ErrorCallback, ErrorCallback]  # snapshot, error, crash line


def _default_factory(options: FeedOptions) -> SnapshotFeed:
    from npuwatch.feeds import open_feed  # the composition root, loaded when a view starts

    return open_feed(options)


class Subscription:
    """One view's place on a channel: ``cancel()`` leaves it (never blocks)."""

    def __init__(self, channel: Channel, ident: int) -> None:
        self.channel = channel
        self.ident = ident

    def cancel(self) -> None:
        """Stop receiving snapshots; the channel stops when this was its last subscriber."""
        self.channel.remove(self.ident)


class Channel:
    """One feed, its sampler thread and its subscribers."""

    def __init__(self, hub: SamplerHub, options: FeedOptions, factory: FeedFactory) -> None:
        self.hub = hub
        self.options = options  # frozen and hashable: the channel's key in its hub
        self.label = ""
        self.latest: Optional[Snapshot] = None
        self.error: Optional[str] = None
        self.crashed = False  # ``error`` is an internal error's crash line, not a source problem
        self.samples = 0
        self.feed: Optional[SnapshotFeed] = None
        self._factory = factory
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._subscribers: Dict[int, Subscriber] = {}
        self._failed_callbacks: set = set()
        self._crashes: Dict[Tuple[str, str], str] = {}
        self.thread = threading.Thread(target=self._run, name="npuwatch-notebook-sampler", daemon=True)

    @property
    def stopped(self) -> bool:
        """True once the channel was told to stop (its thread may still be finishing a sample)."""
        return self._stop.is_set()

    @property
    def subscribers(self) -> int:
        """How many views receive this channel's snapshots."""
        with self._lock:
            return len(self._subscribers)

    def add(
        self,
        ident: int,
        on_snapshot: SnapshotCallback,
        on_error: ErrorCallback,
        on_crash: Optional[ErrorCallback] = None,
    ) -> None:
        with self._lock:
            self._subscribers[ident] = (on_snapshot, on_error, on_crash or on_error)

    def remove(self, ident: int) -> None:
        with self._lock:
            self._subscribers.pop(ident, None)
            last = not self._subscribers
        if last:
            self.stop()

    def stop(self) -> None:
        """Ask the thread to stop after its current sample; the feed is closed by the thread."""
        self._stop.set()
        self.hub.forget(self)

    def _run(self) -> None:
        try:
            feed = self._factory(self.options)
        except (ValueError, OSError) as exc:  # a source that cannot be opened: say why
            self.error = f"could not start sampling: {exc}"
            self._publish(None)
            return
        except Exception as exc:
            self._crash(exc)
            return
        self.feed = feed
        try:
            self.label = feed.label
            self._loop(feed)
        except Exception as exc:  # a bug outside sampling: every view says so, none goes silent
            self._crash(exc)
        finally:
            try:
                feed.close()
            except Exception as exc:
                _log.warning("npuwatch: closing the notebook's sampler failed: %s", exc)

    def _loop(self, feed: SnapshotFeed) -> None:
        """Sample every interval on this channel's thread until the channel stops."""
        Poller(
            lambda: self._tick(feed), lambda: feed.interval_s, stop_event=self._stop, min_wait_s=0.05
        ).run()

    def _tick(self, feed: SnapshotFeed) -> None:
        try:
            snapshot: Optional[Snapshot] = feed.sample()
            self.error, self.crashed = None, False
        except Exception as exc:  # the sampler turns npu-smi problems into notes: this is a bug
            snapshot = None
            self.error, self.crashed = self._crash_line(exc), True
        if self._stop.is_set():
            return
        if snapshot is not None:
            self.latest = snapshot
            self.samples += 1
        self._publish(snapshot)

    def _crash_line(self, exc: Exception) -> str:
        """The crash line for ``exc``; the same error every tick writes its traceback only once."""
        key = (type(exc).__name__, str(exc))
        if key not in self._crashes:
            self._crashes[key] = crash_line(exc, "the notebook sampler")
        return self._crashes[key]

    def _crash(self, exc: Exception) -> None:
        self.error, self.crashed = self._crash_line(exc), True
        self._publish(None)

    def _publish(self, snapshot: Optional[Snapshot]) -> None:
        with self._lock:
            subscribers = list(self._subscribers.items())
        for ident, (on_snapshot, on_error, on_crash) in subscribers:
            try:
                if snapshot is not None:
                    on_snapshot(snapshot)
                elif self.crashed and self.error:
                    on_crash(self.error)
                else:
                    on_error(self.error or "no snapshot")
            except Exception as exc:  # one broken view must not stop the others
                self._view_failed(ident, exc, on_crash)

    def _view_failed(self, ident: int, exc: Exception, on_crash: ErrorCallback) -> None:
        """A view's own callback raised: its traceback to a file, once, and the line to that view."""
        if ident in self._failed_callbacks:
            return
        self._failed_callbacks.add(ident)
        line = crash_line(exc, "a notebook view")
        _log.warning("%s", line)
        try:
            on_crash(line)
        except Exception:  # the view cannot even show a line: the log above is all there is
            _log.debug("npuwatch: the view could not show its crash line", exc_info=True)


class SamplerHub:
    """The channels of this kernel, by options; stops them all at interpreter exit."""

    def __init__(self, factory: Optional[FeedFactory] = None) -> None:
        self.factory: FeedFactory = factory or _default_factory
        self._lock = threading.Lock()
        self._channels: Dict[FeedOptions, Channel] = {}
        self._ids = itertools.count(1)
        self._atexit = False

    def subscribe(
        self,
        options: FeedOptions,
        on_snapshot: SnapshotCallback,
        on_error: ErrorCallback,
        on_crash: Optional[ErrorCallback] = None,
    ) -> Subscription:
        """Receive the snapshots of the feed ``options`` name, starting its thread if needed.

        The callbacks run on the channel's thread (or on this one, at once, with the latest
        snapshot when the channel already has one).  ``on_error`` gets why there is no snapshot
        (a source that cannot be opened); ``on_crash`` (default ``on_error``) gets the one-line
        report of an internal error, whose traceback was written to a file.
        """
        ident = next(self._ids)
        with self._lock:
            channel = self._channels.get(options)
            fresh = channel is None or channel.stopped
            if channel is None or fresh:
                channel = Channel(self, options, self.factory)
                self._channels[options] = channel
            channel.add(ident, on_snapshot, on_error, on_crash)
            if not self._atexit:
                atexit.register(self.stop_all)
                self._atexit = True
        if fresh:
            channel.thread.start()
        elif channel.latest is not None:
            on_snapshot(channel.latest)
        return Subscription(channel, ident)

    def forget(self, channel: Channel) -> None:
        """Drop a stopped channel, so the next subscriber with its options starts a new one."""
        with self._lock:
            if self._channels.get(channel.options) is channel:
                del self._channels[channel.options]

    def channels(self) -> List[Channel]:
        """The running channels."""
        with self._lock:
            return list(self._channels.values())

    def stop_all(self, timeout_s: float = 2.0) -> None:
        """Stop every channel and wait up to ``timeout_s`` in all for their threads (kernel exit)."""
        channels = self.channels()
        for channel in channels:
            channel.stop()
        deadline = time.monotonic() + timeout_s
        for channel in channels:
            if channel.thread.is_alive():
                channel.thread.join(max(0.0, deadline - time.monotonic()))
            feed = channel.feed
            if channel.thread.is_alive() and feed is not None:
                # Stuck in a hung npu-smi: the process is exiting, so release the feed (a demo's
                # temporary machine) from here rather than leave it behind.
                try:
                    feed.close()
                except Exception as exc:
                    _log.warning("npuwatch: closing the notebook's sampler failed: %s", exc)


_HUB: List[SamplerHub] = []


def default_hub() -> SamplerHub:
    """This kernel's hub (created on first use)."""
    if not _HUB:
        _HUB.append(SamplerHub())
    return _HUB[0]
