"""Provides parse_info(): the ``npu-smi info`` summary table (every layout) → chips and processes.

The table is read by structure, never by column offsets (docs/design.md §3):

1. every line is a border (``+----+``, ``+====+``), a row (``| … | … |``) or noise;
   a row is split on its ``|`` cell borders;
2. the two header rows (the one with ``Health``, and the one after it) say which fields each
   cell holds, in order — ``NPU Name``, ``Chip Phy-ID``, ``Power(W) Temp(C) Hugepages…``;
3. each chip is two rows (``NPU Name | Health | Power Temp Hugepages`` then
   ``Chip [Phy-ID|Device] | Bus-Id | AICore Memory [HBM]``); a multi-chip card repeats the
   pair per chip with the same NPU ID;
4. the process table has its own header (``Process id``); groups are per NPU.

Layouts seen (tests/data/npu_smi/MANIFEST.md): 20.x 80/86 columns without Hugepages (004);
21.x–25.x 93/98 columns (001, 003, 022 …); A3 ``Chip  Phy-ID`` with ``-`` power on chip 1
(007, 043, 100); 310P/310B ``Chip    Device`` with no HBM and ``NA`` power (039, 044, 049, 051);
26.x 116 columns with ``Process id in container`` (008); 950 with separate ``NPU ID`` and
``Name`` cells and ``NPU Util(%)`` (037, 082).  Damaged captures — elided ``...`` rows,
cut tables, hand-edited widths — give what can be read plus warnings, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from npuwatch.chip_source import ChipReading
from npuwatch.model import (
    CHIP_METRICS,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    NpuProcess,
    Versions,
)
from npuwatch.probes.npu_smi.processes import NO_PROCESS_RE, read_processes
from npuwatch.probes.npu_smi.rows import HeaderCell, Row, header_cell, split_rows
from npuwatch.probes.values import is_placeholder, to_float, to_int, to_text

# A value is a `used / total` pair (spaces optional on either side: `33126/ 65536`) or a word.
_VALUE_RE = re.compile(r"\S+?\s*/\s*\S+|\S+")
_VERSION_RE = re.compile(r"npu-smi\s+(\S+)")
_DRIVER_RE = re.compile(r"Version:\s*(\S+)")
_HEALTH_HEADER_RE = re.compile(r"\bHealth\b")
_PROCESS_HEADER_RE = re.compile(r"Process\s+id", re.IGNORECASE)

# Without a header (a fragment such as capture 089) assume the common 910B/A3 layout.
_DEFAULT_HEADER = (
    (("npu", "name"), ("health",), ("power", "temp", "hugepages")),
    (("chip",), ("bus",), ("aicore", "memory", "hbm")),
)


@dataclass(frozen=True)
class InfoTable:
    """What one ``npu-smi info`` output says: versions, chips, processes, and parse warnings."""

    npu_smi_version: Optional[str] = None
    driver_version: Optional[str] = None
    chips: Tuple[ChipSample, ...] = ()
    processes: Tuple[NpuProcess, ...] = ()
    #: True when a process section was read (so "no process on this chip" is known, not assumed).
    process_table: bool = False
    #: NPU IDs with the ``No running processes found in NPU n`` line.
    idle_npus: Tuple[int, ...] = ()
    warnings: Tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """No table at all (junk, a truncated header): neither a chip nor npu-smi's version line."""
        return not self.chips and not self.npu_smi_version

    def to_reading(self) -> ChipReading:
        """This table as the chip-source seam's backend-neutral reading."""
        return ChipReading(
            versions=Versions(npu_smi=self.npu_smi_version, driver=self.driver_version),
            chips=self.chips,
            processes=self.processes,
            process_table=self.process_table,
            warnings=self.warnings,
        )


@dataclass
class _Parse:
    warnings: List[str] = field(default_factory=list)
    npu_smi_version: Optional[str] = None
    driver_version: Optional[str] = None


def parse_info(text: str) -> InfoTable:
    """Parse the output of ``npu-smi info``; never raises on damaged input."""
    state = _Parse()
    warnings = state.warnings
    rows = split_rows(text, warnings)
    chip_rows: List[Row] = []
    process_rows: List[Row] = []
    header: Optional[Tuple[Row, Optional[Row]]] = None
    process_header: Optional[Row] = None
    section = "chips"
    i = 0
    while i < len(rows):
        row = rows[i]
        joined = " ".join(row.cells)
        if "npu-smi" in joined and "Version" in joined:
            _read_versions(joined, state)
        elif section == "chips" and "Health" in joined and _HEALTH_HEADER_RE.search(joined):
            nxt = rows[i + 1] if i + 1 < len(rows) and rows[i + 1].block == row.block else None
            header = (row, nxt)
            i += 2 if nxt is not None else 1
            continue
        elif "rocess" in joined and _PROCESS_HEADER_RE.search(joined):
            section, process_header = "processes", row
        elif "processes" in joined and NO_PROCESS_RE.search(joined):
            section = "processes"
            process_rows.append(row)
        elif section == "chips":
            chip_rows.append(row)
        else:
            process_rows.append(row)
        i += 1
    layout = _layout(header, chip_rows, warnings)
    chips = _read_chips(chip_rows, layout, warnings)
    processes, idle = read_processes(process_rows, process_header, warnings)
    if not chips and not warnings:
        warnings.append("no chip rows found: this does not look like `npu-smi info` output")
    return InfoTable(
        npu_smi_version=state.npu_smi_version,
        driver_version=state.driver_version,
        chips=tuple(chips),
        processes=tuple(processes),
        process_table=process_header is not None or bool(idle),
        idle_npus=tuple(idle),
        warnings=tuple(warnings),
    )


def _read_versions(joined: str, state: _Parse) -> None:
    version = _VERSION_RE.search(joined)
    driver = _DRIVER_RE.search(joined)
    state.npu_smi_version = version.group(1) if version else None
    state.driver_version = driver.group(1) if driver else None


# --- layout ---------------------------------------------------------------------------------


_Layout = Tuple[Tuple[HeaderCell, ...], Tuple[HeaderCell, ...]]


def _layout(
    header: Optional[Tuple[Row, Optional[Row]]], chip_rows: List[Row], warnings: List[str]
) -> _Layout:
    if header is not None and header[1] is not None:
        first, second = header[0], header[1]
        return tuple(header_cell(c) for c in first.cells), tuple(header_cell(c) for c in second.cells)
    if chip_rows:
        warnings.append("no header rows: assuming the standard 910B/A3 layout")
    row1 = tuple(HeaderCell(keys, tuple(range(len(keys)))) for keys in _DEFAULT_HEADER[0])
    second_keys = list(_DEFAULT_HEADER[1])
    # A fragment whose chip cell has two numbers is A3 (`Chip Phy-ID`, 089) when HBM is
    # printed, 310P (`Chip Device`) otherwise.
    sample = next((r for r in chip_rows[1::2] if r.cells and len(r.cells[0].split()) == 2), None)
    if sample is not None:
        second_keys[0] = ("chip", "phy" if len(_values(sample.cells[-1])) >= 3 else "device")
    row2 = tuple(HeaderCell(keys, tuple(range(len(keys)))) for keys in second_keys)
    return row1, row2


def _values(cell: str) -> List[str]:
    """The values of a data cell: words, with ``used / total`` pairs joined (``0    / 0`` → ``0/0``)."""
    tokens = cell.split()
    if "/" not in cell:
        return tokens
    out: List[str] = []
    for token in tokens:
        if out and (out[-1].endswith("/") or token.startswith("/")):
            out[-1] += token
        else:
            out.append(token)
    return out


#: ``_assign`` results by (header fields, header starts, cell text): most cells (NPU and name,
#: health, chip, Bus-Id) print the same text every tick.  The dicts are shared: never mutated.
_ASSIGNED: Dict[Tuple[Tuple[str, ...], Tuple[int, ...], str], Dict[str, str]] = {}
#: The cache is emptied when it reaches this many cells (the changing value cells fill it).
_ASSIGNED_MAX = 4096


def _assign(header: HeaderCell, cell: str) -> Dict[str, str]:
    """``_assign_cell``, remembered per header cell and cell text (the caller must not mutate it)."""
    key = (header.keys, header.starts, cell)
    known = _ASSIGNED.get(key)
    if known is None:
        known = _assign_cell(header, cell)
        if len(_ASSIGNED) >= _ASSIGNED_MAX:
            _ASSIGNED.clear()
        _ASSIGNED[key] = known
    return known


def _assign_cell(header: HeaderCell, cell: str) -> Dict[str, str]:
    """Map a data cell's values to the header cell's fields.

    Values and fields pair up in order.  A name (the last field of ``NPU Name``) may hold
    spaces, so extra values join it.  When a value is missing, each value goes to the field
    whose header starts nearest to it.
    """
    values = _values(cell)
    keys = header.keys
    if len(values) == len(keys):
        return dict(zip(keys, values))
    if len(values) > len(keys) and keys and keys[-1] == "name":
        head = len(keys) - 1
        return {**dict(zip(keys[:head], values[:head])), "name": " ".join(values[head:])}
    out: Dict[str, str] = {}
    for match in _VALUE_RE.finditer(cell):
        start, value = match.start(), match.group(0).replace(" ", "")
        if not keys:
            break
        nearest = min(range(len(keys)), key=lambda j: abs(header.starts[j] - start))
        out.setdefault(keys[nearest], value)
    return out


# --- chips ----------------------------------------------------------------------------------


def _read_chips(rows: List[Row], layout: _Layout, warnings: List[str]) -> List[ChipSample]:
    """Pair the rows of each bordered block: a chip is two rows, a block holds whole chips."""
    chips: List[ChipSample] = []
    head1, head2 = layout
    health_at = next((i for i, c in enumerate(head1) if "health" in c.keys), None)
    declared_both = frozenset(k for cell in head1 + head2 for k in cell.keys)
    declared_first = frozenset(k for cell in head1 for k in cell.keys)
    blocks: Dict[int, List[Row]] = {}
    for row in rows:
        blocks.setdefault(row.block, []).append(row)
    for block in blocks.values():
        for i in range(0, len(block), 2):
            first = block[i]
            second = block[i + 1] if i + 1 < len(block) else None
            if second is None and not _looks_like_first_row(first, health_at):
                warnings.append(f"line {first.line_no}: a chip's second row without its first; skipped")
                continue
            fields = _row_fields(first, head1, warnings)
            if second is None:
                warnings.append(f"line {first.line_no}: chip row without its second row (cut or elided)")
            else:
                fields.update(_row_fields(second, head2, warnings))
            declared = declared_first if second is None else declared_both
            chip = _chip(fields, declared, first.line_no, warnings)
            if chip is not None:
                chips.append(chip)
    return chips


def _looks_like_first_row(row: Row, health_at: Optional[int]) -> bool:
    if health_at is None or health_at >= len(row.cells):
        return False
    return (
        Health.parse(row.cells[health_at]) is not Health.UNKNOWN or row.cells[health_at].upper() == "UNKNOWN"
    )


def _row_fields(row: Row, header: Tuple[HeaderCell, ...], warnings: List[str]) -> Dict[str, str]:
    if len(row.cells) != len(header) and not row.cut:
        warnings.append(
            f"line {row.line_no}: {len(row.cells)} cells where the header has {len(header)}; read by position"
        )
    fields: Dict[str, str] = {}
    for head, cell in zip(header, row.cells):
        fields.update(_assign(head, cell))
    return fields


def _chip(
    fields: Dict[str, str], declared: FrozenSet[str], line_no: int, warnings: List[str]
) -> Optional[ChipSample]:
    identity = _identity(fields)
    if identity is None:
        warnings.append(f"line {line_no}: no readable NPU ID; chip skipped")
        return None
    notes: Dict[str, MetricNote] = dict(NOT_IN_TABLE)
    reader = _MetricReader(fields, declared, notes)
    hugepages = reader.pair("hugepages", ("hugepages_used", "hugepages_total"))
    memory = reader.pair("memory", ("memory_used_mib", "memory_total_mib"))
    hbm = reader.pair("hbm", ("hbm_used_mib", "hbm_total_mib"))
    return ChipSample(
        identity=identity,
        health=Health.parse(fields.get("health")),
        power_w=reader.number("power", "power_w"),
        temperature_c=_whole(reader.number("temp", "temperature_c")),
        aicore_percent=_whole(reader.number("aicore", "aicore_percent")),
        npu_util_percent=_whole(reader.number("npu_util", "npu_util_percent")),
        hbm_used_mib=hbm[0],
        hbm_total_mib=hbm[1],
        memory_used_mib=memory[0],
        memory_total_mib=memory[1],
        hugepages_used=hugepages[0],
        hugepages_total=hugepages[1],
        notes=notes,
    )


_IdentityKey = Tuple[Optional[str], Optional[str], Optional[str], Optional[str], Optional[str], Optional[str]]
#: Identities already read, by their printed fields (the same every tick); emptied at 4096.
_IDENTITIES: Dict[_IdentityKey, ChipIdentity] = {}


def _identity(fields: Dict[str, str]) -> Optional[ChipIdentity]:
    """The chip's identity from its printed fields; ``None`` without a readable NPU ID."""
    key = (
        fields.get("npu"),
        fields.get("chip"),
        fields.get("name"),
        fields.get("bus"),
        fields.get("phy"),
        fields.get("device"),
    )
    known = _IDENTITIES.get(key)
    if known is not None:
        return known
    npu_id = to_int(key[0])
    if npu_id is None:
        return None
    chip_id = to_int(key[1])
    identity = ChipIdentity(
        npu_id=npu_id,
        chip_id=0 if chip_id is None else chip_id,
        name=to_text(key[2]),
        bus_id=to_text(key[3]),
        phy_id=to_int(key[4]),
        device_id=to_int(key[5]),
    )
    if len(_IDENTITIES) >= _ASSIGNED_MAX:
        _IDENTITIES.clear()
    _IDENTITIES[key] = identity
    return identity


#: The metrics ``_chip`` reads from the table; every other metric of the table is one no layout of
#: npu-smi's table prints (the driver-only ones: AI Core frequency, Vector, HBM bandwidth, ECC …).
TABLE_METRICS = frozenset(
    {
        "power_w",
        "temperature_c",
        "aicore_percent",
        "npu_util_percent",
        "hbm_used_mib",
        "hbm_total_mib",
        "memory_used_mib",
        "memory_total_mib",
        "hugepages_used",
        "hugepages_total",
    }
)


#: Why an npu-smi chip has none of the driver-only metrics: one reason for them all (it groups into
#: one line wherever reasons are grouped, and a recording repeats it per chip and metric: short).
NOT_IN_TABLE_NOTE = MetricNote(
    MetricStatus.UNSUPPORTED, "not in npu-smi's table: the DCMI backend reads it (--backend dcmi)"
)
#: The note of every metric the table never prints, which every chip read from it starts with (live
#: and replayed captures alike): one place, so a metric added to the metric table gets it too.
NOT_IN_TABLE: Dict[str, MetricNote] = {
    name: NOT_IN_TABLE_NOTE for name in CHIP_METRICS if name not in TABLE_METRICS
}

_ABSENT_COLUMN = {
    "hbm": "no HBM-Usage column in this npu-smi layout (the chip's memory is DDR: see memory_used_mib)",
    "npu_util": "not shown by this npu-smi layout",
    "aicore": "not shown by this npu-smi layout (it prints NPU Util instead)",
    "hugepages": "not shown by this npu-smi layout (no Hugepages-Usage column before driver 21.x)",
}


class _MetricReader:
    """Turns printed cells into numbers, and every absent one into a note saying why."""

    def __init__(
        self, fields: Dict[str, str], declared: FrozenSet[str], notes: Dict[str, MetricNote]
    ) -> None:
        self.fields = fields
        self.declared = declared
        self.notes = notes

    def _absent(self, key: str, metrics: Sequence[str]) -> None:
        if key in self.declared:
            reason, status = "missing from the row (cut or damaged output)", MetricStatus.ERROR
        else:
            reason = _ABSENT_COLUMN.get(key, "not shown by this npu-smi layout")
            status = MetricStatus.UNSUPPORTED
        for metric in metrics:
            self.notes[metric] = MetricNote(status, reason)

    def _placeholder(self, raw: str, metrics: Sequence[str]) -> None:
        if is_placeholder(raw):
            reason = f"npu-smi prints '{raw}': this chip does not report it"
            status = MetricStatus.UNSUPPORTED
        else:
            reason, status = f"unreadable value '{raw}'", MetricStatus.ERROR
        for metric in metrics:
            self.notes[metric] = MetricNote(status, reason)

    def number(self, key: str, metric: str) -> Optional[float]:
        raw = self.fields.get(key)
        if raw is None:
            self._absent(key, (metric,))
            return None
        value = to_float(raw)
        if value is None:
            self._placeholder(raw, (metric,))
        return value

    def pair(self, key: str, metrics: Tuple[str, str]) -> Tuple[Optional[int], Optional[int]]:
        raw = self.fields.get(key)
        if raw is None:
            self._absent(key, metrics)
            return None, None
        used, _, total = raw.partition("/")
        values = (to_int(used), to_int(total))
        for value, metric, part in zip(values, metrics, (used.strip(), total.strip())):
            if value is None:
                self._placeholder(part or raw, (metric,))
        return values


def _whole(value: Optional[float]) -> Optional[int]:
    """npu-smi prints temperature and utilisation as integers; keep them integers."""
    return None if value is None else round(value)
