"""Provides ProcessTable: NPU processes with host details; sortable, filterable, own rows highlighted."""

from __future__ import annotations

import getpass
import time
from typing import Callable, List, NamedTuple, Optional, Sequence, Tuple

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Click
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from npuwatch.model import NpuProcess
from npuwatch.text_safety import inert
from npuwatch.widgets.tui.line import combined_style, fitted_strip, text_strip
from npuwatch.widgets.view_model import process_row

COLUMNS = ("NPU", "Chip", "PID", "User", "NPU mem", "%CPU", "RSS", "Elapsed", "Command")


class Cell(NamedTuple):
    """One cell of the table: its text, its style, and a dim note after the text (why the host
    cannot see a process), cheaper than a Rich Text per cell (a table of sixteen rows makes
    ~150 cells a second)."""

    plain: str
    style: str = ""
    note: str = ""  # a tail of ``plain`` drawn dim italic

    @property
    def spans(self) -> bool:
        """Whether the cell has more than one style."""
        return bool(self.note)

    def text(self) -> Text:
        """The cell as Rich Text."""
        head = self.plain[: len(self.plain) - len(self.note)]
        text = Text(head, style=self.style)
        if self.note:
            text.append(self.note, style="dim italic")
        return text


Row = Tuple[Cell, ...]

# Sort orders `s` cycles through: (name, key, descending).
SORTS: Tuple[Tuple[str, Callable[[NpuProcess], tuple], bool], ...] = (
    ("NPU", lambda p: (p.npu_id, p.chip_id, p.pid), False),
    ("NPU mem", lambda p: (p.npu_memory_mib or 0,), True),
    ("%CPU", lambda p: ((p.host.cpu_percent or 0.0) if p.host else -1.0,), True),
    ("PID", lambda p: (p.pid,), False),
    ("User", lambda p: ((p.host.user or "") if p.host else "~",), False),
)


def me() -> str:
    """The login name of whoever runs the dashboard, whose processes are highlighted."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


class ProcessTable(ScrollView, can_focus=True):
    """The process table: a fixed header line over rows that scroll; ``show`` re-renders it.

    Drawn with textual's line API from strips built once per sample.  (A ``DataTable``
    re-rendered every cell each second, because %CPU and Elapsed change every second,
    and that was the dashboard's largest cost.)  Clicking a column header sorts by it.
    """

    def __init__(self) -> None:
        super().__init__(id="processes")
        self.sort_index = 0
        self.filter_text = ""
        self.user = me()
        self.processes: Sequence[NpuProcess] = ()
        # The snapshot's time, so re-sorting or filtering a replay keeps the same Elapsed column.
        self.now_s: Optional[float] = None
        self.rows: List[Row] = []
        self._drawn_rows: List[Row] = []  # what ``_strips`` show
        self._widths: List[int] = []
        self._sorted_by = -1  # the sort the header underlines
        self._strips: List[Strip] = []
        self._header = Strip.blank(0)
        self._drawn_for: Optional[Tuple[int, Style]] = None  # (width, widget style) of the strips
        self._column_starts: List[int] = []
        self._frame: Optional[Tuple[int, Style, int]] = None  # (width, style, scroll) while rendering

    def on_mount(self) -> None:
        self._retitle()

    @property
    def row_count(self) -> int:
        """How many rows are shown (after the filter)."""
        return len(self.rows)

    def get_row_at(self, index: int) -> List[str]:
        """The cells of row ``index`` as plain text (for tests and screen readers)."""
        return [cell.plain for cell in self.rows[index]]

    def show(self, processes: Sequence[NpuProcess], now_s: Optional[float] = None) -> None:
        """Rebuild the rows (a few dozen at most) from ``processes``."""
        self.processes = processes
        if now_s is not None:
            self.now_s = now_s
        now = self.now_s if self.now_s is not None else time.time()
        self.rows = visible_rows(processes, self.sort_index, self.filter_text, self.user, now)
        width = self._line_width()
        # Rows are cut to the width beside the scrollbar (the command last), so nothing scrolls
        # sideways: drawn as wide as the widget, the last two columns hid under the vertical
        # scrollbar and textual added a horizontal one to reach them, a line of the table lost.
        self.virtual_size = Size(0, len(self.rows) + 1)
        self._retitle()
        self._repaint((width, self.visual_style.rich_style))

    def _repaint(self, frame: Tuple[int, Style]) -> None:
        """Draw the rows that changed now and repaint their lines: the border and its title, the
        column header and the blank lines under the rows mostly stay as they are."""
        if self._drawn_for != frame:  # never drawn, resized or restyled: all of it, when it is painted
            self._drawn_for = None
            self.refresh()
            return
        widths, drawn = self._widths, self._drawn_rows
        moved = _column_widths(self.rows) != widths or len(self.rows) != len(drawn)
        if moved or self._sorted_by != self.sort_index:  # columns or rows moved, or the header changed
            self._draw(*frame)
            self.refresh()
            return
        console, (width, base) = self.app.console, frame
        # Only rows on screen: textual clips a repaint to the screen, not to the widget, so a row
        # scrolled out below would repaint the line under the table (the footer) every second.
        top, height = self.scroll_offset.y, self.size.height
        changed = []
        for index, (was, now) in enumerate(zip(drawn, self.rows)):
            if was != now:
                self._strips[index] = row_strip(now, widths, console, width, base)
                if 1 <= 1 + index - top < height:
                    changed.append(Region(0, 1 + index - top, width, 1))
        self._drawn_rows = list(self.rows)
        if changed:
            self.refresh(*changed)

    def next_sort(self) -> None:
        """Cycle to the next sort order."""
        self.sort_by((self.sort_index + 1) % len(SORTS))

    def sort_by(self, index: int) -> None:
        """Sort by the order ``SORTS[index]``."""
        self.sort_index = index
        self.show(self.processes)

    def set_filter(self, text: str) -> None:
        """Keep only rows whose user, command, name or PID contain ``text``."""
        self.filter_text = text.strip()
        self.show(self.processes)

    def _retitle(self) -> None:
        name, _, descending = SORTS[self.sort_index]
        arrow = "▼" if descending else "▲"
        shown = f" · filter “{self.filter_text}”" if self.filter_text else ""
        title = f"Processes ({len(self.processes)}) · sort {name} {arrow}{shown}"
        if title != self.border_title:  # setting it repaints the whole table, even to the same words
            self.border_title = title

    def _draw(self, width: int, base: Style) -> None:
        widths = _column_widths(self.rows)
        console = self.app.console
        self._column_starts = []
        header = Text(style="bold")
        for i, name in enumerate(COLUMNS):
            self._column_starts.append(len(header.plain))
            header.append(
                f" {name:<{widths[i]}} ", style="bold underline" if name == SORTS[self.sort_index][0] else ""
            )
        self._header = text_strip(header, console, width, base)
        self._strips = [row_strip(row, widths, console, width, base) for row in self.rows]
        self._widths, self._drawn_rows, self._sorted_by = widths, list(self.rows), self.sort_index
        self._drawn_for = (width, base)

    def render_lines(self, crop: Region) -> List[Strip]:
        # The width, style and scroll position once for the lines textual asks for, not per line.
        self._frame = (self._line_width(), self.visual_style.rich_style, self.scroll_offset.y)
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        width, base, top = self._frame or (
            self._line_width(),
            self.visual_style.rich_style,
            self.scroll_offset.y,
        )
        if self._drawn_for != (width, base):
            self._draw(width, base)
        if y == 0:
            return self._header
        index = y - 1 + top
        if 0 <= index < len(self._strips):
            return self._strips[index]
        return Strip.blank(width, base)

    def _line_width(self) -> int:
        """The cells a row has: the widget's width less its vertical scrollbar's."""
        return self.scrollable_content_region.width

    def on_click(self, event: Click) -> None:
        if event.y != 0:
            return
        x = event.x + self.scroll_offset.x
        column = max((i for i, start in enumerate(self._column_starts) if start <= x), default=0)
        names = [name for name, _, _ in SORTS]
        if COLUMNS[column] in names:
            self.sort_by(names.index(COLUMNS[column]))


def _column_widths(rows: Sequence[Row]) -> List[int]:
    """Each column's width: its widest cell, or its name."""
    return [max([len(COLUMNS[i]), *(len(row[i].plain) for row in rows)]) for i in range(len(COLUMNS))]


def row_strip(row: Sequence[Cell], widths: Sequence[int], console: Console, width: int, base: Style) -> Strip:
    """A table row ``width`` cells wide over ``base``: each cell after a space, padded to its
    column's width; segment for segment what ``text_strip`` makes of the row joined as one Text
    (the unstyled stretches between styled cells are one segment), without building that Text."""
    if any(cell.spans for cell in row):  # a command with its reason (a process the host cannot see)
        line = Text()
        for cell, column in zip(row, widths):
            line.append(" ")
            line.append_text(cell.text())
            line.append(" " * (column - len(cell.plain) + 1))
        return text_strip(line, console, width, base)
    plain = combined_style(console, base, ("",))
    segments: List[Segment] = []
    loose: List[str] = []  # unstyled text not yet in a segment
    for cell, column in zip(row, widths):
        text = cell.plain
        loose.append(" ")
        if cell.style and text:
            segments.append(Segment("".join(loose), plain))
            segments.append(Segment(text, combined_style(console, base, ("", cell.style))))
            loose = []
        else:
            loose.append(text)
        loose.append(" " * (column - len(text) + 1))
    tail = "".join(loose)
    if tail:
        segments.append(Segment(tail, plain))
    return fitted_strip(segments, sum(cell_len(segment.text) for segment in segments), width, base)


def visible_rows(
    processes: Sequence[NpuProcess], sort_index: int, filter_text: str, user: str, now_s: float
) -> List[Row]:
    """The table rows after filter and sort (pure, so it is testable without an app)."""
    _, key, descending = SORTS[sort_index]
    wanted = filter_text.lower()
    kept = [p for p in processes if not wanted or wanted in _haystack(p)]
    kept.sort(key=key, reverse=descending)
    return [_row(p, user, now_s) for p in kept]


def _haystack(process: NpuProcess) -> str:
    host = process.host
    parts = [str(process.pid), process.name or ""]
    if host is not None:
        parts += [host.user or "", host.command or ""]
    return " ".join(parts).lower()


def _row(process: NpuProcess, user: str, now_s: float) -> Row:
    """The view model's process row as cells: dim with the reason when the host cannot see it."""
    row = process_row(process, now_s, user=user)
    style = "bold" if row.own else ""
    ids = (str(row.npu_id), str(row.chip_id), row.pid)
    if row.no_host is not None:
        cells = (*ids, "—", row.npu_memory, "—", "—", "—")
        note = f"({inert(row.no_host)})"
        command = Cell(f"{inert(row.command)}  {note}", style, note)
        return (*(Cell(c, "dim") for c in cells), command)
    # The user, name and command line are whoever runs the job's: shown, never obeyed (the other
    # cells are numbers the view model formatted).
    values = (*ids, inert(row.user or "?"), row.npu_memory, row.cpu, row.rss, row.elapsed, inert(row.command))
    return tuple(Cell(c or "—", style) for c in values)
