"""Provides ProcessTable: NPU processes with host details; sortable, filterable, own rows highlighted."""

from __future__ import annotations

import getpass
import time
from typing import Callable, List, Optional, Sequence, Tuple

from rich.text import Text
from textual.widgets import DataTable

from npuwatch.model import NpuProcess
from npuwatch.widgets import format as fmt

COLUMNS = ("NPU", "Chip", "PID", "User", "NPU mem", "%CPU", "RSS", "Elapsed", "Command")

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


class ProcessTable(DataTable):
    """The process table; ``show`` re-renders from a snapshot's processes."""

    def __init__(self) -> None:
        super().__init__(id="processes", zebra_stripes=True, cursor_type="row")
        self.sort_index = 0
        self.filter_text = ""
        self.user = me()
        self.processes: Sequence[NpuProcess] = ()
        # The snapshot's time, so re-sorting or filtering a replay keeps the same Elapsed column.
        self.now_s: Optional[float] = None

    def on_mount(self) -> None:
        self._columns = self.add_columns(*COLUMNS)
        self._row_keys: List[str] = []
        self._retitle()

    def show(self, processes: Sequence[NpuProcess], now_s: Optional[float] = None) -> None:
        """Rebuild the rows (a few dozen at most) from ``processes``."""
        self.processes = processes
        if now_s is not None:
            self.now_s = now_s
        now = self.now_s if self.now_s is not None else time.time()
        rows = visible_rows(processes, self.sort_index, self.filter_text, self.user, now)
        keys = [f"{row[0].plain}/{row[1].plain}/{row[2].plain}" for row in rows]
        if keys == self._row_keys:
            # Same processes in the same order: changed cells cost a repaint, not a relayout.
            for key, row in zip(keys, rows):
                for column, cell in zip(self._columns, row):
                    if self.get_cell(key, column) != cell:
                        self.update_cell(key, column, cell)
        else:
            self.clear()
            for key, row in zip(keys, rows):
                self.add_row(*row, key=key)
            self._row_keys = keys
        self._retitle()

    def next_sort(self) -> None:
        """Cycle to the next sort order."""
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.show(self.processes)

    def set_filter(self, text: str) -> None:
        """Keep only rows whose user, command, name or PID contain ``text``."""
        self.filter_text = text.strip()
        self.show(self.processes)

    def _retitle(self) -> None:
        name, _, descending = SORTS[self.sort_index]
        arrow = "▼" if descending else "▲"
        shown = f" · filter “{self.filter_text}”" if self.filter_text else ""
        self.border_title = f"Processes ({len(self.processes)}) · sort {name} {arrow}{shown}"


def visible_rows(
    processes: Sequence[NpuProcess], sort_index: int, filter_text: str, user: str, now_s: float
) -> List[Tuple[Text, ...]]:
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


def _row(process: NpuProcess, user: str, now_s: float) -> Tuple[Text, ...]:
    host = process.host
    own = host is not None and bool(user) and host.user == user
    style = "bold" if own else ""
    ids = (str(process.npu_id), str(process.chip_id), str(process.pid))
    npu_mem = fmt.mib(process.npu_memory_mib)
    if host is None:
        why = process.host_unavailable or "no host details"
        cells = (*ids, "—", npu_mem, "—", "—", "—")
        command = Text(f"{process.name or '?'}  ", style=style)
        command.append(f"({why})", style="dim italic")
        return (*(Text(c, style="dim") for c in cells), command)
    elapsed = None if host.start_time_s is None else now_s - host.start_time_s
    values = (
        *ids,
        host.user or "?",
        npu_mem,
        fmt.percent(host.cpu_percent),
        fmt.bytes_iec(host.rss_bytes),
        fmt.duration(elapsed),
        host.command or process.name or "?",
    )
    return tuple(Text(c, style=style) for c in values)
