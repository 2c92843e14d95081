"""Provides FleetView: ``%npuwatch fleet`` / ``npuwatch.notebook.fleet()``, a live table of nodes.

Every widget is created here, on the caller's (the kernel's main) thread; the view's daemon
thread refreshes the fleet feed every ``feed.interval_s`` and only assigns ``.value`` strings.  A
slow Prometheus holds only that thread.  The view stops on ``stop()``, when its widget is closed
(from Python or the front-end) and at interpreter exit; its thread then closes the feed.  An
exception while refreshing or rendering is a bug: one line in the view names the file with its
traceback (``npuwatch.crash``), and the view keeps refreshing.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from npuwatch.crash import crash_line
from npuwatch.history import History
from npuwatch.poller import Poller
from npuwatch.widgets.fleet.histories import NodeHistories, fetch_node_history
from npuwatch.widgets.fleet.rows import SORTS, FleetHeader, FleetRow, fleet_header, fleet_rows, node_row
from npuwatch.widgets.notebook import fleet_html
from npuwatch.widgets.notebook.layout import resolve_layout
from npuwatch.widgets.notebook.live_html import crash_html
from npuwatch.widgets.notebook.live_view import import_ipywidgets
from npuwatch.widgets.notebook.view_lifecycle import ViewLifecycle
from npuwatch.widgets.view_model import build_view

if TYPE_CHECKING:
    from npuwatch.fleet.model import FleetSnapshot
    from npuwatch.widgets.fleet.app import FleetFeed

WAITING = "waiting for the first refresh…"
#: The node picker's "no node" entry.
NO_NODE = ("— open a node —", "")
#: Points of each plot of an opened node's chips.
NODE_POINTS = 120
WHERE = "the notebook fleet view"
_RUNNING: weakref.WeakSet[FleetView] = weakref.WeakSet()


class FleetView(ViewLifecycle):
    """A live fleet table: ``.widget`` (display it), ``.fleet`` (the latest FleetSnapshot), ``.stop()``."""

    def __init__(self, feed: FleetFeed, *, sort: str = "worst", filter_text: str = "") -> None:
        widgets = import_ipywidgets()
        if sort not in dict(SORTS):
            raise ValueError(f"sort must be one of {', '.join(key for key, _ in SORTS)}, got {sort!r}")
        self.feed = feed
        self.sort = sort
        self.filter_text = filter_text
        self.fleet: Optional[FleetSnapshot] = None
        self.rows: Tuple[FleetRow, ...] = ()
        self.head: Optional[FleetHeader] = None
        self.status = WAITING
        self.crash_line: Optional[str] = None
        self.updates = 0
        self.node_choice = ""  # the node whose chips are shown under the table ("" for none)
        self.histories = NodeHistories(capacity=NODE_POINTS)
        self._names: Tuple[str, ...] = ()
        self._picking = False  # the picker's options are being replaced (not the user's choice)
        self._lock = threading.RLock()
        self._first = threading.Event()
        self._stop = threading.Event()
        self._crashes: Dict[Tuple[str, str], str] = {}
        self._source = str(getattr(feed, "label", "") or "")

        html = widgets.HTML
        self.header = html(fleet_html.header_html(None, WAITING, self._source))
        self.sorter = widgets.Dropdown(
            options=[(label, key) for key, label in SORTS],
            value=sort,
            description="order",
            layout=widgets.Layout(width="240px"),
        )
        self.filter_box = widgets.Text(
            value=filter_text, placeholder="filter nodes by name", layout=widgets.Layout(width="220px")
        )
        self.node_picker = widgets.Dropdown(
            options=[NO_NODE], value="", description="node", layout=widgets.Layout(width="320px")
        )
        self.table = html("")
        self.node = html("")
        self.crash = html("")
        self.sorter.observe(self._on_sort, names="value")
        self.filter_box.observe(self._on_filter, names="value")
        self.node_picker.observe(self._on_pick, names="value")
        controls = widgets.HBox([self.sorter, self.filter_box, self.node_picker])
        self.widget = widgets.VBox([self.header, controls, self.crash, self.table, self.node])
        self.widget.add_class("npuwatch-fleet-live")
        self._watch_widget()
        self.thread = threading.Thread(target=self._run, name="npuwatch-notebook-fleet", daemon=True)
        _RUNNING.add(self)
        self.thread.start()

    # --- lifecycle ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True until ``stop()`` or the widget is closed."""
        return not self._stop.is_set()

    def stop(self) -> None:
        """Stop refreshing; the thread closes the feed after its current refresh.  Never blocks."""
        with self._lock:
            if self._stop.is_set():
                return
            self._stop.set()
            self.status = "stopped"
        if self.widget.comm is not None:
            self.header.value = fleet_html.header_html(self.head, self.status, self._source)

    # --- the thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            Poller(self._tick, lambda: self.feed.interval_s, stop_event=self._stop, min_wait_s=0.05).run()
        finally:
            try:
                self.feed.close()
            except Exception as exc:  # closing is best effort; say so once
                self._on_crash(self._crash_line(exc))

    def _tick(self) -> None:
        try:
            fleet = self.feed.sample()
            self.histories.add(fleet, self.node_choice or None)
        except Exception as exc:  # the feed turns source failures into FleetSnapshot.error: a bug
            self._on_crash(self._crash_line(exc))
            return
        if self._stop.is_set():
            return
        self._show(lambda: self._render(fleet))

    def _render(self, fleet: FleetSnapshot) -> None:
        self.fleet = fleet
        self.head = fleet_header(fleet)
        self.rows = fleet_rows(fleet, self.sort, self.filter_text)
        self.status = "source failing" if fleet.error else "live"
        self.crash_line = None
        self.crash.value = ""
        self.header.value = fleet_html.header_html(self.head, self.status, self._source)
        self.table.value = fleet_html.table_html(self.rows, bool(self.filter_text))
        self._update_picker(tuple(sorted(node.node for node in fleet.nodes)))
        self.node.value = self._node_html()
        self.updates += 1

    def _update_picker(self, names: Tuple[str, ...]) -> None:
        """The picker lists the fleet's nodes; a chosen node that is still there stays chosen."""
        if names == self._names:
            return
        self._names = names
        self._picking = True
        try:
            self.node_picker.options = [NO_NODE, *((name, name) for name in names)]
            self.node_picker.value = self.node_choice if self.node_choice in names else ""
        finally:
            self._picking = False

    def _node_html(self) -> str:
        """The chosen node's chips with the single-node notebook's cards or table, and plots."""
        name, fleet = self.node_choice, self.fleet
        if not name or fleet is None:
            return ""
        node = fleet.node(name)
        if node is None:
            return fleet_html.node_missing_html(name)
        if node.snapshot is None:
            return fleet_html.node_html(node_row(node), "")
        window = f"{NODE_POINTS * self.feed.interval_s / 60:g} min"
        view = build_view(node.snapshot, self.histories.of(name), points=NODE_POINTS, window=window)
        layout = resolve_layout("auto", len(view.chips))
        return fleet_html.node_html(node_row(node), fleet_html.chips_of(view, NODE_POINTS, layout))

    def _on_pick(self, change: Dict[str, Any]) -> None:
        """A node chosen in the picker (on the kernel's main thread): its chips under the table,
        its history from the feed when the feed keeps one (fetched on a thread)."""
        if self._picking:
            return
        name = str(change.get("new") or "")
        with self._lock:
            self.node_choice = name
            self.node.value = self._node_html()
        if name:
            fetch_node_history(self.feed, name, self._history_arrived)

    def _history_arrived(self, name: str, history: History) -> None:
        """The feed's history of ``name`` (on the fetching thread): later refreshes add to it."""
        with self._lock:
            self.histories.adopt(name, history)
            if self.node_choice == name and not self._stop.is_set():
                self.node.value = self._node_html()

    def _redraw(self) -> None:
        """The order or the filter changed (on the kernel's main thread): the same fleet again."""
        with self._lock:
            if self.fleet is not None:
                self.rows = fleet_rows(self.fleet, self.sort, self.filter_text)
                self.table.value = fleet_html.table_html(self.rows, bool(self.filter_text))

    def _on_sort(self, change: Dict[str, Any]) -> None:
        self.sort = str(change.get("new") or "worst")
        self._redraw()

    def _on_filter(self, change: Dict[str, Any]) -> None:
        self.filter_text = str(change.get("new") or "")
        self._redraw()

    def _crash_line(self, exc: Exception) -> str:
        """The line for ``exc``; the same error every refresh writes its traceback only once."""
        key = (type(exc).__name__, str(exc))
        with self._lock:
            if key not in self._crashes:
                self._crashes[key] = crash_line(exc, WHERE)
            return self._crashes[key]

    def _on_crash(self, line: str) -> None:
        with self._lock:
            self.crash_line = line
            if self.widget.comm is not None:
                self.crash.value = crash_html(line)
        self._first.set()

    # --- what a notebook shows ------------------------------------------------------------------------

    def text(self) -> str:
        """The current table as plain text (the text/plain fallback)."""
        with self._lock:
            rows, head, status, crash = self.rows, self.head, self.status, self.crash_line
        shown = fleet_html.fleet_text(rows, head, status, self._source)
        return f"{shown}\n{crash}" if crash else shown

    def html(self) -> str:
        """The current table as static HTML (the text/html fallback)."""
        with self._lock:
            rows, head, status, crash = self.rows, self.head, self.status, self.crash_line
        return (
            '<div class="npuwatch-fleet-live">'
            f"{fleet_html.header_html(head, status, self._source)}{crash_html(crash)}"
            f"{fleet_html.table_html(rows, bool(self.filter_text)) if head is not None else ''}</div>"
        )

    def __repr__(self) -> str:
        return f"<npuwatch FleetView {self._source}: {self.status}, {self.updates} updates>"

    def state(self) -> Dict[str, Any]:
        """What the view shows, as plain data (tests, and scripts that poll a running view)."""
        with self._lock:
            return {
                "status": self.status,
                "source": self.head.source if self.head is not None else self._source,
                "error": self.head.error if self.head is not None else None,
                "nodes": [row.node for row in self.rows],
                "levels": [row.level_text for row in self.rows],
                "stale": [row.node for row in self.rows if row.stale],
                "node": self.node_choice,
                "node_html": self.node.value,
                "updates": self.updates,
                "crash": self.crash_line,
                "running": self.running,
                "thread_alive": self.thread.is_alive(),
                "table_html": self.table.value,
            }


def stop_all() -> int:
    """Stop every running fleet view of this kernel; how many were running."""
    running = [view for view in list(_RUNNING) if view.running]
    for view in running:
        view.stop()
    return len(running)


atexit.register(stop_all)
