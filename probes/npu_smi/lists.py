"""Parses npu-smi's list-shaped outputs: ``info -l`` (cards), ``-m`` (chip map), ``info watch``.

Column layouts follow the printf calls in the npu-smi source (hicann/driver
``npu_info_print.c``): ``-m`` prints ``"\\t%-30s "`` per column (``print_mapping_info``; A3 adds
``Chip Phy-ID``; 950 prints ``NPU ID  Slot ID  Chip ID  Chip Phy-ID  Chip Name``), ``watch``
prints ``"%-12s"`` per column and ``" %-12s"`` for the columns after ``Memory BW(%)``
(``print_npu_watch_header``).  Header names contain spaces (``Chip Logic ID``, ``AI Core(%)``)
and values can too (``Ascend 910B4``), so rows are read by the header's column start
positions, never by splitting on whitespace alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from npuwatch.probes.npu_smi.kv import split_key_value
from npuwatch.probes.values import to_float, to_int, to_text

# ---------------------------------------------------------------- info -l


@dataclass(frozen=True)
class ListedCard:
    """One NPU (card) of ``npu-smi info -l``."""

    npu_id: int
    chip_count: Optional[int] = None
    product_name: Optional[str] = None
    serial_number: Optional[str] = None
    chip_logic_ids: Tuple[int, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CardList:
    """``npu-smi info -l``: the card count and each card (024)."""

    total_count: Optional[int] = None
    cards: Tuple[ListedCard, ...] = ()
    warnings: Tuple[str, ...] = ()


def _freeze_card(npu_id: int, fields: Dict[str, str], logic_ids: List[int]) -> ListedCard:
    return ListedCard(
        npu_id=npu_id,
        chip_count=to_int(fields.get("Chip Count")),
        product_name=to_text(fields.get("Product Name")),
        serial_number=to_text(fields.get("Serial Number")),
        chip_logic_ids=tuple(logic_ids),
        fields=dict(fields),
    )


def parse_list(text: str) -> CardList:
    """Read ``info -l``: ``Total Count`` (310: ``Card Count``) then one group per ``NPU ID``."""
    total: Optional[int] = None
    cards: List[ListedCard] = []
    warnings: List[str] = []
    npu_id: Optional[int] = None
    fields: Dict[str, str] = {}
    logic_ids: List[int] = []
    for line in text.splitlines():
        pair = split_key_value(line)
        if pair is None:
            if line.strip():
                warnings.append(f"unrecognised line {line.strip()!r}")
            continue
        key, value = pair
        if key in ("Total Count", "Card Count"):
            total = to_int(value)
        elif key == "NPU ID":
            if npu_id is not None:
                cards.append(_freeze_card(npu_id, fields, logic_ids))
            npu_id, fields, logic_ids = to_int(value), {}, []
            if npu_id is None:
                warnings.append(f"unreadable NPU ID {value!r}")
        elif npu_id is None:
            warnings.append(f"{key!r} before any NPU ID")
        elif key == "Chip Logic ID":
            # Newer drivers may list one logic ID per chip: keep them all, in order.
            logic_id = to_int(value)
            if logic_id is not None:
                logic_ids.append(logic_id)
            fields.setdefault(key, value)
        else:
            fields[key] = value
    if npu_id is not None:
        cards.append(_freeze_card(npu_id, fields, logic_ids))
    if total is not None and total != len(cards):
        warnings.append(f"Total Count is {total} but {len(cards)} cards are listed")
    if total is None and not cards:
        warnings.append("no card list found")
    return CardList(total, tuple(cards), tuple(warnings))


# ---------------------------------------------------------------- column tables


def _columns(line: str, names_end_with_paren: bool) -> List[Tuple[int, str]]:
    """(start, name) of each header column, offsets relative to the first non-blank character."""
    text = line.expandtabs(8)
    indent = len(text) - len(text.lstrip())
    columns: List[Tuple[int, str]] = []
    if names_end_with_paren:
        # watch: names are padded to 12 and an 11-character name ("Ctrl Cpu(%)") leaves a single
        # space, but every name ends with its unit in parentheses (054, 055).
        start: Optional[int] = None
        for match in re.finditer(r"\S+", text):
            if start is None:
                start = match.start()
            if match.group().endswith(")"):
                columns.append((start - indent, text[start : match.end()]))
                start = None
        if start is not None:
            columns.append((start - indent, text[start:].strip()))
        return columns
    # -m: names are padded to 30, so columns are split by two or more spaces (023).
    for match in re.finditer(r"\S+(?: \S+)*", text):
        columns.append((match.start() - indent, match.group()))
    return columns


def _cells(line: str, columns: Sequence[Tuple[int, str]]) -> Dict[str, str]:
    """Assign each token of ``line`` to the column it starts in; the last column takes the rest."""
    text = line.expandtabs(8).rstrip()
    indent = len(text) - len(text.lstrip())
    starts = [start for start, _ in columns]
    cells: Dict[str, str] = {}
    last_start: Optional[int] = None
    for match in re.finditer(r"\S+", text):
        position = match.start() - indent
        # The column whose start is at or before the token (one column of slack for a value
        # printed one character early).
        index = 0
        for candidate, start in enumerate(starts):
            if start <= position + 1:
                index = candidate
        name = columns[index][1]
        if index == len(columns) - 1:
            if last_start is None:
                last_start = match.start()
            cells[name] = text[last_start:].strip()
            break
        cells[name] = (cells[name] + " " + match.group()) if name in cells else match.group()
    return cells


# ---------------------------------------------------------------- info -m


@dataclass(frozen=True)
class ChipMapping:
    """One row of ``npu-smi info -m``; MCU rows print ``-`` for the IDs they lack."""

    npu_id: int
    chip_id: Optional[int]
    chip_logic_id: Optional[int] = None
    chip_phy_id: Optional[int] = None
    slot_id: Optional[int] = None
    chip_name: Optional[str] = None
    is_mcu: bool = False
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MappingTable:
    """``npu-smi info -m`` (023, 045, 059)."""

    rows: Tuple[ChipMapping, ...] = ()
    columns: Tuple[str, ...] = ()
    warnings: Tuple[str, ...] = ()

    @property
    def chips(self) -> Tuple[ChipMapping, ...]:
        """The NPU chip rows (MCU rows left out)."""
        return tuple(row for row in self.rows if not row.is_mcu)


_DEFAULT_MAPPING_COLUMNS = ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name")


def parse_mapping(text: str) -> MappingTable:
    """Read ``info -m`` by the header's column positions (names such as ``Ascend 910B4``)."""
    warnings: List[str] = []
    columns: List[Tuple[int, str]] = []
    rows: List[ChipMapping] = []
    assumed = False
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.strip().startswith("NPU ID"):
            columns = _columns(line, names_end_with_paren=False)
            continue
        if not columns:
            # No header seen (cut output): assume the 910/910B layout, name last (may hold spaces).
            if not assumed:
                warnings.append("no header line; assumed NPU ID, Chip ID, Chip Logic ID, Chip Name")
                assumed = True
            cells = dict(zip(_DEFAULT_MAPPING_COLUMNS, line.split(None, 3)))
        else:
            cells = _cells(line, columns)
        npu_id = to_int(cells.get("NPU ID"))
        if npu_id is None:
            warnings.append(f"unrecognised mapping line {line.strip()!r}")
            continue
        name = to_text(cells.get("Chip Name"))
        rows.append(
            ChipMapping(
                npu_id=npu_id,
                chip_id=to_int(cells.get("Chip ID")),
                chip_logic_id=to_int(cells.get("Chip Logic ID")),
                chip_phy_id=to_int(cells.get("Chip Phy-ID")),
                slot_id=to_int(cells.get("Slot ID")),
                chip_name=name,
                is_mcu=(name or "").lower() == "mcu",
                fields=cells,
            )
        )
    if not rows:
        warnings.append("no mapping rows found")
    names = tuple(name for _, name in columns) or (_DEFAULT_MAPPING_COLUMNS if assumed else ())
    return MappingTable(tuple(rows), names, tuple(warnings))


# ---------------------------------------------------------------- info watch


@dataclass(frozen=True)
class WatchRow:
    """One sample line of ``npu-smi info watch``; a column the layout lacks stays ``None``."""

    npu_id: Optional[int]
    chip_id: Optional[int] = None  # no ChipId column on Atlas 350 / 950 (055)
    power_w: Optional[float] = None
    temperature_c: Optional[int] = None
    aicore_percent: Optional[int] = None
    aicpu_percent: Optional[int] = None
    ctrlcpu_percent: Optional[int] = None
    memory_percent: Optional[int] = None  # HBM on 910B/A3/950, DDR elsewhere
    memory_bandwidth_percent: Optional[int] = None
    npu_util_percent: Optional[int] = None
    aicube_percent: Optional[int] = None
    truncated: bool = False  # the stream was cut inside this row
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WatchStream:
    """Everything read from an ``npu-smi info watch`` stream (054, 055)."""

    rows: Tuple[WatchRow, ...] = ()
    columns: Tuple[str, ...] = ()
    warnings: Tuple[str, ...] = ()


def _watch_row(cells: Mapping[str, str], truncated: bool) -> WatchRow:
    return WatchRow(
        npu_id=to_int(cells.get("NpuID(Idx)")),
        chip_id=to_int(cells.get("ChipId(Idx)")),
        power_w=to_float(cells.get("Pwr(W)")),
        temperature_c=to_int(cells.get("Temp(C)")),
        aicore_percent=to_int(cells.get("AI Core(%)")),
        aicpu_percent=to_int(cells.get("AI Cpu(%)")),
        ctrlcpu_percent=to_int(cells.get("Ctrl Cpu(%)")),
        memory_percent=to_int(cells.get("Memory(%)")),
        memory_bandwidth_percent=to_int(cells.get("Memory BW(%)")),
        npu_util_percent=to_int(cells.get("NPU Util(%)")),
        aicube_percent=to_int(cells.get("AI Cube(%)")),
        truncated=truncated,
        fields=dict(cells),
    )


def parse_watch(text: str) -> WatchStream:
    """Read a (possibly still running, possibly cut) ``npu-smi info watch`` stream."""
    warnings: List[str] = []
    columns: List[Tuple[int, str]] = []
    rows: List[WatchRow] = []
    lines = text.splitlines()
    cut_at_end = bool(text) and not text.endswith(("\n", "\r"))
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        if line.strip().startswith("NpuID"):
            # The header is printed again now and then in a long stream; the latest one rules.
            columns = _columns(line, names_end_with_paren=True)
            continue
        if not columns:
            warnings.append(f"row before any header: {line.strip()!r}")
            continue
        cells = _cells(line, columns)
        if to_int(cells.get(columns[0][1])) is None:
            warnings.append(f"unrecognised watch line {line.strip()!r}")
            continue
        truncated = False
        if number == len(lines) - 1 and cut_at_end and len(cells) < len(columns):
            # The stream stopped mid-row: the last value may be cut short, so drop it.
            last = [name for _, name in columns if name in cells][-1]
            cells = {name: value for name, value in cells.items() if name != last}
            truncated = True
            warnings.append("last row cut short; its last value was dropped")
        rows.append(_watch_row(cells, truncated))
    if not rows:
        warnings.append("no watch rows found")
    return WatchStream(tuple(rows), tuple(name for _, name in columns), tuple(warnings))
