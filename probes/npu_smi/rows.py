"""Provides split_rows(): an ``npu-smi`` table's lines as bordered rows of cells, and header cells.

The structural layer under the table parsers (docs/design.md §3: parse by cell borders, not offsets):
every line is a border (``+----+``, ``+====+``), a row (``| … | … |``) or noise; rows between
the same two borders share a block; header cells name the fields they hold, in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

# Header field names → field keys.  Multi-word names first so `NPU ID` is not read as `NPU`.
_HEADER_FIELDS: Tuple[Tuple[str, str], ...] = (
    (r"NPU\s+ID", "npu"),
    (r"NPU\s+Util\(%\)", "npu_util"),
    (r"AI\s?Core\(%\)", "aicore"),
    (r"Hugepages-Usage\(page\)", "hugepages"),
    (r"Memory-Usage\(MB\)", "memory"),
    (r"HBM-Usage\(MB\)", "hbm"),
    (r"Power\(W\)", "power"),
    (r"Temp\(C\)", "temp"),
    (r"Bus-Id", "bus"),
    (r"Phy-ID", "phy"),
    (r"Health", "health"),
    (r"Device", "device"),
    (r"Name", "name"),
    (r"Chip", "chip"),
    (r"NPU", "npu"),
)
_HEADER_RE = re.compile(
    "|".join(f"(?P<f{i}>{pattern})" for i, (pattern, _) in enumerate(_HEADER_FIELDS)) + r"|(?P<other>\S+)"
)

_BORDER_RE = re.compile(r"^\+[-=+]*$")


@dataclass(frozen=True)
class Row:
    """One ``| … |`` line: its cells, stripped, and where it sits."""

    line_no: int
    cells: Tuple[str, ...]
    block: int  # rows between the same two borders share a block number
    cut: bool  # the line ended before its closing `|`


@dataclass
class HeaderCell:
    """The fields one header cell declares, with their start columns inside the cell."""

    keys: Tuple[str, ...]
    starts: Tuple[int, ...]


def header_cell(text: str) -> HeaderCell:
    keys: List[str] = []
    starts: List[int] = []
    for match in _HEADER_RE.finditer(text):
        group = match.lastgroup or "other"
        key = "?" + match.group(0) if group == "other" else _HEADER_FIELDS[int(group[1:])][1]
        keys.append(key)
        starts.append(match.start())
    return HeaderCell(tuple(keys), tuple(starts))


def split_rows(text: str, warnings: List[str]) -> List[Row]:
    """Split ``text`` into rows, appending a warning for each sign of damage."""
    rows: List[Row] = []
    block = 0
    elided = False
    widths: Dict[int, List[int]] = {}  # line width → line numbers
    last_is_border = True
    top_border: Optional[str] = None
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        first = line[0]
        if first == "+" and _BORDER_RE.match(line):
            if block == 0 and not rows:
                top_border = line
            block += 1
            widths.setdefault(len(line), []).append(line_no)
            last_is_border = True
        elif first == "|":
            cut = len(line) == 1 or line[-1] != "|"
            body = line[1:] if cut else line[1:-1]
            rows.append(Row(line_no, tuple(map(str.strip, body.split("|"))), block, cut))
            if top_border is not None and len(rows) == 1:
                _check_top_border(top_border, line, warnings)
            if cut:
                warnings.append(f"line {line_no} is cut short (no closing '|'): read as far as it goes")
            else:
                widths.setdefault(len(line), []).append(line_no)
            last_is_border = False
        elif set(line) <= {".", "…"}:
            elided = True
        # Anything else is noise npu-smi prints around the table (DrvMngGetConsoleLogLevel …).
    if elided:
        warnings.append("the output has elided rows ('...'): chips or processes in them are missing")
    if rows and not last_is_border and not rows[-1].cut:
        warnings.append("the table ends without its closing border: the output may be cut short")
    _check_widths(widths, warnings)
    return rows


def _check_top_border(border: str, row: str, warnings: List[str]) -> None:
    """The top border's ``+`` joints stand over the first row's ``|`` (052 was edited: they do not)."""
    joints = {i for i, ch in enumerate(border) if ch == "+"}
    bars = {i for i, ch in enumerate(row) if ch == "|"}
    if not joints <= bars:
        warnings.append(
            "the top border's joints do not line up with the first row (hand-edited or damaged output)"
        )


def _check_widths(widths: Dict[int, List[int]], warnings: List[str]) -> None:
    """npu-smi prints every line of its table at one width; others were edited or damaged (016, 052)."""
    if len(widths) < 2:
        return
    usual = max(widths, key=lambda width: len(widths[width]))
    odd = sorted(n for width, lines in widths.items() if width != usual for n in lines)
    shown = ", ".join(str(n) for n in odd[:3]) + (" …" if len(odd) > 3 else "")
    warnings.append(
        f"line(s) {shown} differ in width from the rest of the table ({usual} columns): "
        "hand-edited or damaged output, read by cell borders"
    )
