"""Provides FleetApp and ``run_fleet_app``: ``npuwatch fleet``'s live terminal view.

A table with a row per node, worst first; ``s`` changes the order, ``/`` filters by node name,
Enter opens a node with the single-node dashboard's cards (``node_screen``), Esc comes back, ``q``
quits.  The fleet feed is refreshed on a daemon thread, as the dashboard samples, so a slow
Prometheus or a dead node never freezes the view; when the source fails, the header says why and
the table keeps the last nodes, marked stale (the feed marks them).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, ClassVar, List, Optional, Protocol, Sequence, Tuple

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult, CSSPathType
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import DataTable, Input

from npuwatch.fleet.model import FleetSnapshot
from npuwatch.history import History
from npuwatch.text_safety import inert
from npuwatch.widgets.fleet.histories import NodeHistories, fetch_node_history
from npuwatch.widgets.fleet.node_screen import LEVEL_STYLES, NodeScreen
from npuwatch.widgets.fleet.rows import (
    COLUMNS,
    FleetRow,
    fleet_header,
    fleet_rows,
    next_sort,
    sort_label,
)
from npuwatch.widgets.tui.app_base import LiveApp, exit_status, run_live_app
from npuwatch.widgets.tui.help_screen import HelpScreen
from npuwatch.widgets.tui.key_bar import KeyBar
from npuwatch.widgets.tui.line import Line

if TYPE_CHECKING:
    from textual.events import Resize

#: The app's actions that act on the node table.
TABLE_ACTIONS = frozenset({"sort", "filter", "clear_filter"})
#: Keys that are not the app's own bindings.
FLEET_KEYS: Tuple[Tuple[str, str], ...] = (
    ("↑ ↓ / PgUp PgDn", "move between nodes"),
    ("Enter", "the node: its chips as cards, levels, sparklines, processes"),
    ("Tab / arrows", "on a node: move between its chips; Enter: the chip's detail"),
    ("Esc", "back (a node → the fleet)"),
)
#: The Reason column's index, and the least room it keeps however narrow the terminal.
REASON = COLUMNS.index("Reason")
LEVEL = COLUMNS.index("Level")
MIN_REASON = 24
#: The dashboard's stylesheet (header, alerts line, chip grid, processes) and the fleet's own.
CSS_FILES = ("../tui/npuwatch.tcss", "fleet.tcss")


class FleetFeed(Protocol):
    """What the fleet view reads of a fleet feed (``npuwatch.fleet.feed``): a refresh at a time.

    A feed may also offer ``node_history(node) -> Optional[History]`` (a node's chips over time,
    from Prometheus range queries) and ``label`` (its source, before the first refresh).
    """

    interval_s: float

    def sample(self) -> FleetSnapshot:
        """The fleet now; a failed source comes back as ``FleetSnapshot.error`` with the last nodes
        marked stale, never as an exception."""
        ...

    def close(self) -> None:
        """Release what the feed holds."""
        ...


class FleetReady(Message):
    """A refresh finished."""

    def __init__(self, fleet: FleetSnapshot, took_s: float) -> None:
        super().__init__()
        self.fleet = fleet
        self.took_s = took_s

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FleetReady)  # a UI that falls behind shows only the newest


class FleetFailed(Message):
    """The feed itself raised: a bug (source failures come as ``FleetSnapshot.error``)."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class FleetApp(LiveApp):
    """``npuwatch fleet``: header, status line, the node table; Enter opens a node."""

    CSS_PATH: ClassVar[Optional[CSSPathType]] = list(CSS_FILES)
    FILTER_PLACEHOLDER = "filter nodes by name or instance"
    TITLE = "npuwatch fleet"
    AUTO_FOCUS = "#nodes"
    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="quit"),
        Binding("question_mark", "help", "Help", tooltip="this help"),
        Binding("s", "sort", "Sort", tooltip="next order: worst first, node, AI Core, power, hottest, age"),
        Binding("slash", "filter", "Filter", tooltip="filter nodes by name (Enter keeps it, Esc clears it)"),
        Binding("r", "refresh", "Refresh", tooltip="refresh now"),
        Binding("t", "theme", "Theme", tooltip="dark / light theme"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, feed: FleetFeed, banner: str = "") -> None:
        super().__init__()
        self.feed = feed
        self.banner = banner
        self.fleet: Optional[FleetSnapshot] = None
        self.rows: Tuple[FleetRow, ...] = ()  # as the table shows them
        self._room = 0  # the Reason column's width they were drawn for
        self.sort = "worst"
        self.filter_text = ""
        self.histories = NodeHistories()
        self._failure: Optional[str] = None
        self._last_took_s = 0.0
        self._timer: Any = None

    # --- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Line(id="header")
        yield Line(id="alerts")
        table: DataTable[Text] = DataTable(id="nodes", cursor_type="row", zebra_stripes=True)
        for column in COLUMNS:
            table.add_column(column, key=column)
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        if self.banner:
            self.query_one("#header").styles.height = 2
        self._render_header()
        self._render_status()
        self.set_interval(1.0, self._tick_clock)
        self._start_sample()

    def on_resize(self, event: Resize) -> None:
        if self.fleet is not None:
            self._render_table()  # the reasons are cut to the width
            self._render_header()

    # --- refreshing (never on the UI thread) -----------------------------------------------------

    def _start_sample(self) -> None:
        if self._sampling_since is not None:
            return
        self._sampling_since = time.monotonic()
        # A daemon thread, as the dashboard's: quitting never waits for a slow Prometheus.
        threading.Thread(target=self._sample, name="npuwatch-fleet-refresh", daemon=True).start()

    def _sample(self) -> None:
        started = time.monotonic()
        try:
            fleet = self.feed.sample()
            self.histories.add(fleet, self._opened())
        except Exception as exc:  # the feed turns source failures into FleetSnapshot.error: a bug
            self._post(FleetFailed(self.refresh_crash_line(exc, "the fleet refresh")))
            return
        self._post(FleetReady(fleet, time.monotonic() - started))

    def on_fleet_ready(self, message: FleetReady) -> None:
        self._sampling_since = None
        self._last_took_s = message.took_s
        self._failure = None
        try:
            self.show(message.fleet)
        except NoMatches:  # the app is shutting down
            return
        self._schedule_next(message.took_s)

    def on_fleet_failed(self, message: FleetFailed) -> None:
        self._sampling_since = None
        self._failure = message.error
        with contextlib.suppress(NoMatches):
            self._render_status()
        self._schedule_next(0.0)

    def _schedule_next(self, took_s: float) -> None:
        # Re-armed after each refresh, so refreshes never overlap however slow the source is.
        self._timer = self.set_timer(max(0.05, self.feed.interval_s - took_s), self._start_sample)

    def _opened(self) -> Optional[str]:
        """The node whose screen is open, if any (its history is kept however large the fleet)."""
        return next((s.node_name for s in self.screen_stack if isinstance(s, NodeScreen)), None)

    # --- rendering -------------------------------------------------------------------------------

    def show(self, fleet: FleetSnapshot) -> None:
        """Render one fleet snapshot (also used by tests, without the thread)."""
        self.fleet = fleet
        self._render_table()
        self._render_header()
        self._render_status()
        for screen in self.screen_stack:
            if isinstance(screen, NodeScreen):
                screen.show(fleet.node(screen.node_name), fleet.error)

    def _render_table(self) -> None:
        """Show the rows: when the same nodes stay in the same order (most refreshes), only the
        cells that changed are updated; a new order or set of nodes rebuilds the table."""
        if self.fleet is None:
            return
        table: DataTable[Text] = self.query_one("#nodes", DataTable)
        chosen = self._cursor_node(table)
        rows = fleet_rows(self.fleet, self.sort, self.filter_text)
        room = reason_room(rows, self.size.width, table.cell_padding)
        names = [row.node for row in rows]
        if names == [row.node for row in self.rows] and room == self._room and table.row_count == len(rows):
            for before, row in zip(self.rows, rows):
                if row != before:
                    self._update_row(table, before, row, room)
            self.rows = rows
            return
        self.rows, self._room = rows, room
        table.clear()
        for row in rows:
            table.add_row(*row_cells(row, room), key=row.node)
        if chosen in names:
            table.move_cursor(row=names.index(chosen), animate=False)

    @staticmethod
    def _update_row(table: DataTable[Text], before: FleetRow, row: FleetRow, room: int) -> None:
        """Update the cells of ``row`` that read differently (all of them when its look changed)."""
        restyled = (before.level, before.stale) != (row.level, row.stale)
        changed = [
            i for i, (was, now) in enumerate(zip(before.cells(), row.cells())) if restyled or was != now
        ]
        for index in changed:
            table.update_cell(row.node, COLUMNS[index], cell_text(row, index, room), update_width=True)

    def _cursor_node(self, table: DataTable[Text]) -> Optional[str]:
        if not self.rows or table.row_count == 0:
            return None
        index = min(table.cursor_row, len(self.rows) - 1)
        return self.rows[index].node if index >= 0 else None

    def _render_header(self) -> None:
        text = Text()
        text.append(" npuwatch fleet ", style="bold reverse")
        busy = self._busy_s()
        if busy is not None and busy > self.feed.interval_s + 1:
            text.append(f" ⏳ refreshing for {busy:.0f} s (stale)", style="bold dark_orange")
        fleet = self.fleet
        if fleet is None:
            label = getattr(self.feed, "label", "")
            if label:
                text.append(f" {inert(str(label))}")
            text.append("  waiting for the first refresh…", style="dim")
        else:
            head = fleet_header(fleet)
            text.append(f" {inert(head.source)} · {head.updated} · every {self.feed.interval_s:g} s")
            if self._last_took_s > self.feed.interval_s * 1.2:
                text.append(f" (refresh takes {self._last_took_s:.1f} s)", style="bold dark_orange")
            text.append(f" · {sort_label(self.sort)}", style="dim")
            if self.filter_text:
                text.append(f" · filter “{inert(self.filter_text)}”", style="bold")
        if self.banner:
            text.append(f"\n {self.banner}", style="italic")
        self.query_one("#header", Line).set(text)

    def _render_status(self) -> None:
        line = self.query_one("#alerts", Line)
        if self._failure:
            line.set(Text(f"✖ internal error: {inert(self._failure)}", style="bold red"))
            return
        fleet = self.fleet
        if fleet is None:
            line.set(Text(""))
            return
        head = fleet_header(fleet)
        if head.error:
            line.set(Text(inert(head.error_line), style="bold red"))
            return
        text = Text(head.summary, style=LEVEL_STYLES[head.level.value])
        shown = len(self.rows)
        if self.filter_text:
            text.append(f" · {shown} shown", style="bold")
        if head.warnings:
            text.append(f" · ⚠ {inert(head.warnings[0])}", style="dark_orange")
            if len(head.warnings) > 1:
                text.append(f" (+{len(head.warnings) - 1} more)", style="dark_orange")
        line.set(text)

    def _tick_clock(self) -> None:
        busy = self._busy_s()
        if busy is not None and busy > self.feed.interval_s + 1:
            self._render_header()

    # --- actions ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: Tuple[object, ...]) -> Optional[bool]:
        # The table's keys act on the table only: hidden (and idle) while a node's screen is open.
        return not (action in TABLE_ACTIONS and self.screen.id != "_default")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.help_keys()))

    def help_keys(self) -> List[Tuple[str, str]]:
        """(key, what it does): each binding's tooltip, then the keys of the table and node screens."""
        return [*(shown for _binding, shown in self.binding_help()), *FLEET_KEYS]

    def action_sort(self) -> None:
        self.sort = next_sort(self.sort)
        self._render_table()
        self._render_header()

    def action_clear_filter(self) -> None:
        self.close_filter_box()
        self._set_filter("")
        self.query_one("#nodes").focus()

    def action_refresh(self) -> None:
        if self._sampling_since is None:
            if self._timer is not None:
                self._timer.stop()
            self._start_sample()

    def _set_filter(self, text: str) -> None:
        self.filter_text = text
        self._render_table()
        self._render_header()
        self._render_status()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.query_one("#nodes").focus()

    @on(DataTable.RowSelected, "#nodes")
    def _node_chosen(self, event: DataTable.RowSelected) -> None:
        name = event.row_key.value
        if name is not None:
            self.open_node(str(name))

    def open_node(self, name: str) -> None:
        """Show node ``name``'s chips (Enter on its row).

        The screen opens at once with the history accumulated from the refreshes; when the feed
        keeps a node's history itself (Prometheus range queries), it is fetched on a daemon thread
        and replaces it when it arrives, so a slow Prometheus never holds the keyboard.
        """
        fleet = self.fleet
        node = fleet.node(name) if fleet is not None else None
        error = fleet.error if fleet is not None else None
        self.push_screen(NodeScreen(name, node, self.histories.of(name), error))
        fetch_node_history(self.feed, name, self._history_fetched)

    def _history_fetched(self, name: str, history: History) -> None:
        with contextlib.suppress(RuntimeError):  # the app quit meanwhile
            self.call_from_thread(self._history_arrived, name, history)

    def _history_arrived(self, name: str, history: History) -> None:
        """The feed's history of ``name``: later refreshes add to it, the open screen draws it."""
        self.histories.adopt(name, history)
        for screen in self.screen_stack:
            if isinstance(screen, NodeScreen) and screen.node_name == name:
                screen.use_history(history)


def reason_room(rows: Sequence[FleetRow], width: int, padding: int = 1) -> int:
    """How many columns the Reason column may take so every other column stays on screen (at
    least ``MIN_REASON``): a long reason is cut with an ellipsis (the node screen shows it whole)."""
    others = 0
    for index, column in enumerate(COLUMNS):
        if index != REASON:
            others += max([cell_len(column), *(cell_len(row.cells()[index]) for row in rows)])
    return max(MIN_REASON, width - others - 2 * padding * len(COLUMNS) - 2)


def row_cells(row: FleetRow, reason_width: int = 0) -> Tuple[Text, ...]:
    """The table cells of a row: the level in its colour, a stale node dim (its reason first);
    the reason cut to ``reason_width`` columns when given."""
    return tuple(cell_text(row, index, reason_width) for index in range(len(COLUMNS)))


def cell_text(row: FleetRow, index: int, reason_width: int = 0) -> Text:
    """Cell ``index`` of ``row`` (see ``row_cells``)."""
    cell = Text(inert(row.cells()[index]))
    if index == REASON and reason_width:
        cell.truncate(reason_width, overflow="ellipsis")
    if row.stale:
        cell.stylize("dim italic" if index == LEVEL else "dim")
    elif index == LEVEL or (index == REASON and row.level.value != "ok"):
        cell.stylize(LEVEL_STYLES[row.level.value])
    return cell


def run_fleet_app(feed: FleetFeed, options: object = None) -> int:
    """Run the live fleet view on ``feed`` until ``q``; the exit status (70 after an internal
    error, whose traceback went to a file).  The caller opened ``feed`` and closes it.

    ``options``: the command's options; a ``banner`` attribute, when present, is shown under the
    header.
    """
    app = FleetApp(feed, banner=str(getattr(options, "banner", "") or "").strip())
    run_live_app(app)
    return exit_status(app, "the fleet view")
