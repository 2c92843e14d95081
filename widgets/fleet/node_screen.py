"""Provides NodeScreen: one node of the fleet with the single-node dashboard's cards.

The node's chips are its ``FleetNode.snapshot`` (an ordinary node Snapshot), drawn by the
dashboard's own ``ChipGrid`` with the judge's verdicts and the node's History, so a chip reads the
same here as in ``npuwatch`` on that node: cards per NPU, levels, badges, workload tags and
sparklines.  Enter on a chip opens the dashboard's detail screen; Esc goes back to the fleet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, List, Optional, Tuple

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.events import Resize
from textual.geometry import Size
from textual.screen import Screen

from npuwatch.fleet.model import FleetNode
from npuwatch.history import History
from npuwatch.judge import judge_snapshot
from npuwatch.model import Snapshot
from npuwatch.text_safety import inert
from npuwatch.widgets.fleet.rows import age_text, level_text
from npuwatch.widgets.tui.chip_grid import ChipGrid
from npuwatch.widgets.tui.chip_layout import choose_layout
from npuwatch.widgets.tui.chips import group_chips
from npuwatch.widgets.tui.detail_screen import DetailScreen
from npuwatch.widgets.tui.host_panel import HostPanel
from npuwatch.widgets.tui.key_bar import KeyBar
from npuwatch.widgets.tui.line import Line
from npuwatch.widgets.tui.messages import ChipSelected
from npuwatch.widgets.tui.processes import ProcessTable

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails

#: The Rich style of a level's word in the headers and the table.
LEVEL_STYLES = {
    "critical": "bold red",
    "warning": "bold dark_orange",
    "unknown": "bold grey62",
    "ok": "green",
}
#: Rows the host panel takes (choose_layout counts them; a node without host figures hides it).
HOST_ROWS = 3


class NodeFeed:
    """What the dashboard's detail screen reads of a feed, for one node of the fleet: its History.

    A fleet never runs npu-smi on a node, so there are no on-demand chip reports.
    """

    def __init__(self, node: str, history: History) -> None:
        self.node = node
        self.history = history

    @property
    def label(self) -> str:
        """The node's name."""
        return self.node

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """None: the fleet reads what each node exports, it never asks npu-smi."""
        return None


class NodeScreen(Screen[None]):
    """One node: header, its reasons, the chip cards, host (when polled with --hosts), processes."""

    BINDINGS: ClassVar[List[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="back to the fleet"),
        Binding("q", "app.quit", "Quit", tooltip="quit"),
    ]

    def __init__(self, name: str, node: Optional[FleetNode], history: History, error: Optional[str]) -> None:
        super().__init__()
        self.node_name = name
        self.node = node
        self.history = history
        self.error = error
        self.feed = NodeFeed(name, history)
        self._chip_keys: Optional[List[Tuple[int, int]]] = None
        self._terminal: Optional[Size] = None

    def compose(self) -> ComposeResult:
        yield Line(id="header")
        yield Line(id="alerts")
        yield ChipGrid(self.history, id="chips")
        yield HostPanel()
        yield ProcessTable()
        yield KeyBar()

    def on_mount(self) -> None:
        self.show(self.node, self.error)

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size)

    def use_history(self, history: History) -> None:
        """Draw the sparklines from ``history`` from now on (the feed's, once fetched)."""
        self.history = history
        self.feed.history = history
        try:
            self.query_one(ChipGrid).history = history
        except NoMatches:
            return
        self.show(self.node, self.error)

    # --- rendering -----------------------------------------------------------------------------

    def show(self, node: Optional[FleetNode], error: Optional[str] = None) -> None:
        """Render the node as the latest refresh has it (``None``: it left the fleet)."""
        self.node, self.error = node, error
        try:
            self._render_header()
            self._render_reasons()
            snapshot = node.snapshot if node is not None else None
            self._render_chips(snapshot)
            host = self.query_one(HostPanel)
            host.display = snapshot is not None and snapshot.host is not None
            if snapshot is not None:
                host.show(snapshot)
                self.query_one(ProcessTable).show(snapshot.processes, snapshot.taken_at.timestamp())
            if isinstance(self.app.screen, DetailScreen) and snapshot is not None:
                self.app.screen.show(snapshot)
        except NoMatches:  # a refresh that lands while the screen closes
            return

    def _render_header(self) -> None:
        node = self.node
        text = Text()
        text.append(" npuwatch fleet ", style="bold reverse")
        text.append(f" › {inert(self.node_name)} ", style="bold")
        if node is None:
            text.append(" not in the latest refresh", style="bold dark_orange")
        else:
            text.append(level_text(node), style="dim" if node.stale else LEVEL_STYLES[node.level.value])
            text.append(f" · {node.chips_ok}/{node.chips_total} chips OK")
            if node.instance and node.instance != node.node:
                text.append(f" · {inert(node.instance)}", style="dim")
            text.append(f" · {node.exporter.value}", style="dim")
            when = node.taken_at.astimezone().strftime("%H:%M:%S") if node.taken_at else "n/a"
            text.append(f" · data {when} ({age_text(node.age_s)} old)", style="dim")
        self.query_one("#header", Line).set(text)

    def _render_reasons(self) -> None:
        node = self.node
        line = self.query_one("#alerts", Line)
        if self.error:
            line.set(Text(f"✖ {inert(self.error)} (showing the last data, marked stale)", style="bold red"))
            return
        if node is None:
            line.set(Text("This node is no longer reported by the fleet's source.", style="dark_orange"))
            return
        parts = list(node.reasons)
        if node.stale:
            parts.insert(0, f"stale: {node.stale_reason or 'no data'}")
        parts += list(node.warnings)
        if not parts:
            line.set(Text("✔ every chip OK", style="dim green"))
            return
        style = "dim" if node.stale else LEVEL_STYLES[node.level.value]
        line.set(Text(inert(" · ".join(parts)), style=style))

    def _render_chips(self, snapshot: Optional[Snapshot]) -> None:
        grid = self.query_one(ChipGrid)
        groups = group_chips(snapshot.chips) if snapshot is not None else []
        keys = [chip.identity.key for group in groups for chip in group]
        if keys != self._chip_keys:
            self._chip_keys = keys
            grid.set_chips(groups)
            self._apply_layout(self._terminal or self.app.size)
            self.call_after_refresh(lambda: self._apply_layout(self._terminal or self.app.size))
            if groups:
                self.set_focus(grid, scroll_visible=False)  # now: a key as the chips appear reaches them
        if snapshot is not None and grid.show(groups, judge_snapshot(snapshot)):
            self._apply_layout(self._terminal or self.app.size)

    def _apply_layout(self, size: Size) -> None:
        self._terminal = size
        try:
            grid = self.query_one(ChipGrid)
            host_shown = self.query_one(HostPanel).display
        except NoMatches:
            return
        # choose_layout counts the host panel's rows: a node without one gives them to the chips.
        room = Size(size.width, size.height + (0 if host_shown else HOST_ROWS))
        layout = choose_layout(room, grid.shapes(), header_rows=1)
        grid.styles.max_height = layout.max_rows
        grid.set_layout(layout.compact, layout.columns)

    # --- keys ----------------------------------------------------------------------------------

    def on_chip_selected(self, message: ChipSelected) -> None:
        message.stop()
        node = self.node
        if node is not None and node.snapshot is not None:
            self.app.push_screen(DetailScreen(message.key, node.snapshot, self.feed))  # type: ignore[arg-type]
