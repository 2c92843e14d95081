"""Provides SamplerHub: one background sampler thread per set of options, shared by the views using it.

Several ``%npuwatch`` views with the same options share one feed, so they never run npu-smi twice
per tick.  Each channel's daemon thread builds the feed, samples every ``interval_s`` and hands
each Snapshot to its subscribers; the last subscriber leaving stops the thread, which then closes
the feed (removing a demo's simulated machine).  Nothing here waits for npu-smi on the caller's
thread: a hung npu-smi holds only the channel's own thread.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed
    from npuwatch.model import Snapshot

_log = logging.getLogger("npuwatch")

FeedFactory = Callable[..., "SnapshotFeed"]
SnapshotCallback = Callable[["Snapshot"], None]
ErrorCallback = Callable[[str], None]
OptionsKey = Tuple[Tuple[str, Any], ...]


def options_key(options: Mapping[str, Any]) -> OptionsKey:
    """A hashable key for ``build_sampler`` options: equal options share a channel."""
    items = []
    for name, value in sorted(options.items()):
        if isinstance(value, (list, tuple, set, frozenset)):
            value = tuple(sorted(value))
        items.append((name, value))
    return tuple(items)


def _default_factory(**options: Any) -> SnapshotFeed:
    from npuwatch.wiring import build_sampler

    return build_sampler(**options)


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

    def __init__(
        self, hub: SamplerHub, key: OptionsKey, options: Mapping[str, Any], factory: FeedFactory
    ) -> None:
        self.hub = hub
        self.key = key
        self.options = dict(options)
        self.label = ""
        self.latest: Optional[Snapshot] = None
        self.error: Optional[str] = None
        self.samples = 0
        self.feed: Optional[SnapshotFeed] = None
        self._factory = factory
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._subscribers: Dict[int, Tuple[SnapshotCallback, ErrorCallback]] = {}
        self._failed_callbacks: set = set()
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

    def add(self, ident: int, on_snapshot: SnapshotCallback, on_error: ErrorCallback) -> None:
        with self._lock:
            self._subscribers[ident] = (on_snapshot, on_error)

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
            feed = self._factory(**self.options)
        except Exception as exc:
            self.error = f"could not start sampling: {exc}"
            self._publish(None)
            return
        self.feed = feed
        try:
            self.label = feed.label
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    snapshot: Optional[Snapshot] = feed.sample()
                    self.error = None
                except Exception as exc:  # the sampler contains environment problems: this is a bug
                    snapshot, self.error = None, f"sampling failed: {type(exc).__name__}: {exc}"
                if self._stop.is_set():
                    break
                if snapshot is not None:
                    self.latest = snapshot
                    self.samples += 1
                self._publish(snapshot)
                self._stop.wait(max(0.05, feed.interval_s - (time.monotonic() - started)))
        finally:
            try:
                feed.close()
            except Exception as exc:
                _log.warning("npuwatch: closing the notebook's sampler failed: %s", exc)

    def _publish(self, snapshot: Optional[Snapshot]) -> None:
        with self._lock:
            subscribers = list(self._subscribers.items())
        for ident, (on_snapshot, on_error) in subscribers:
            try:
                if snapshot is not None:
                    on_snapshot(snapshot)
                else:
                    on_error(self.error or "no snapshot")
            except Exception as exc:  # one broken view must not stop the others
                if ident not in self._failed_callbacks:
                    self._failed_callbacks.add(ident)
                    _log.warning("npuwatch: a notebook view failed to update: %r", exc)


class SamplerHub:
    """The channels of this kernel, by options; stops them all at interpreter exit."""

    def __init__(self, factory: Optional[FeedFactory] = None) -> None:
        self.factory: FeedFactory = factory or _default_factory
        self._lock = threading.Lock()
        self._channels: Dict[OptionsKey, Channel] = {}
        self._ids = itertools.count(1)
        self._atexit = False

    def subscribe(
        self, options: Mapping[str, Any], on_snapshot: SnapshotCallback, on_error: ErrorCallback
    ) -> Subscription:
        """Receive the snapshots of the feed ``options`` name, starting its thread if needed.

        The callbacks run on the channel's thread (or on this one, at once, with the latest
        snapshot when the channel already has one).
        """
        key = options_key(options)
        ident = next(self._ids)
        with self._lock:
            channel = self._channels.get(key)
            fresh = channel is None or channel.stopped
            if channel is None or fresh:
                channel = Channel(self, key, options, self.factory)
                self._channels[key] = channel
            channel.add(ident, on_snapshot, on_error)
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
            if self._channels.get(channel.key) is channel:
                del self._channels[channel.key]

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
