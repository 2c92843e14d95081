"""Provides NodeHistories: each node's chip history, accumulated from the fleet's refreshes.

A node screen draws the single-node cards, whose sparklines read a ``History``.  When the fleet
feed can give a node's history itself (``node_history(name)``: Prometheus range queries), the
screen uses that; otherwise the points come from here: every refresh adds each node's snapshot
once (a stale node's repeated snapshot adds nothing).  A large fleet keeps only the opened node's
points, so memory does not grow with the number of nodes.
"""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Callable, Dict, Optional, Tuple

from npuwatch.fleet.model import FleetSnapshot
from npuwatch.history import History

#: Points kept per chip and metric: a card's sparklines show the last few dozen.
NODE_POINTS = 300
#: Up to this many chips in the fleet, every node's history is kept (so a node opens with its
#: sparklines already drawn); above it only the opened node's.
KEEP_ALL_UP_TO_CHIPS = 1024


class NodeHistories:
    """Per node: a History and the time of the last snapshot added to it (thread-safe)."""

    def __init__(self, capacity: int = NODE_POINTS, keep_all_up_to_chips: int = KEEP_ALL_UP_TO_CHIPS) -> None:
        self.capacity = capacity
        self.keep_all_up_to_chips = keep_all_up_to_chips
        self._lock = threading.Lock()
        self._kept: Dict[str, Tuple[History, Optional[datetime]]] = {}

    def add(self, fleet: FleetSnapshot, opened: Optional[str] = None) -> None:
        """Add each node's snapshot when it is newer than the last one added; keep every node's
        history in a small fleet, else only ``opened``'s."""
        keep_all = fleet.chips_total <= self.keep_all_up_to_chips
        present = set()
        for node in fleet.nodes:
            if not keep_all and node.node != opened:
                continue
            present.add(node.node)
            snapshot = node.snapshot
            if snapshot is None:
                continue
            with self._lock:
                history, last = self._kept.get(node.node, (None, None))
                if history is None:
                    history = History(self.capacity)
                if last is not None and snapshot.taken_at <= last:
                    self._kept[node.node] = (history, last)
                    continue
                self._kept[node.node] = (history, snapshot.taken_at)
            history.add(snapshot)
        with self._lock:
            for name in [name for name in self._kept if name not in present and name != opened]:
                del self._kept[name]

    def of(self, node: str) -> History:
        """The node's History (a new, empty one when none is kept yet)."""
        with self._lock:
            found = self._kept.get(node)
            if found is None:
                found = self._kept[node] = (History(self.capacity), None)
            return found[0]

    def adopt(self, node: str, history: History) -> None:
        """Keep adding ``node``'s refreshes to ``history`` (the feed's own, from range queries)."""
        with self._lock:
            self._kept[node] = (history, None)

    def nodes(self) -> Tuple[str, ...]:
        """The nodes whose history is kept."""
        with self._lock:
            return tuple(sorted(self._kept))


def fetch_node_history(feed: object, name: str, deliver: Callable[[str, History], None]) -> None:
    """When ``feed`` keeps a node's history itself (``node_history(name)``: Prometheus range
    queries), fetch ``name``'s on a daemon thread, so a slow Prometheus never holds a view, and
    hand it to ``deliver`` on that thread; a feed that fails keeps the accumulated history."""
    reader = getattr(feed, "node_history", None)
    if not callable(reader):
        return

    def fetch() -> None:
        try:
            found = reader(name)
        except Exception:  # a feed's history is a bonus: the accumulated one stays
            return
        if isinstance(found, History):
            deliver(name, found)

    threading.Thread(target=fetch, name="npuwatch-fleet-history", daemon=True).start()
