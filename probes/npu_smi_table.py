"""Provides parse_info(): the ``npu-smi info`` summary table (every layout) → chips and processes.

The table is read by structure, never by column offsets (DESIGN §3):

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

from npuwatch.model import ChipIdentity, ChipSample, Health, MetricNote, MetricStatus, NpuProcess

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

# A value is a `used / total` pair (spaces optional on either side: `33126/ 65536`) or a word.
_VALUE_RE = re.compile(r"\S+?\s*/\s*\S+|\S+")
_BORDER_RE = re.compile(r"^\+[-=+]*$")
_VERSION_RE = re.compile(r"npu-smi\s+(\S+)")
_DRIVER_RE = re.compile(r"Version:\s*(\S+)")
_NO_PROCESS_RE = re.compile(r"No running processes found(?:\s+in\s+NPU\s+(\d+))?", re.IGNORECASE)
_HEALTH_HEADER_RE = re.compile(r"\bHealth\b")
_PROCESS_HEADER_RE = re.compile(r"Process\s+id", re.IGNORECASE)
_PLACEHOLDERS = {"NA": "NA", "N/A": "NA", "-": "-", "--": "-"}

# Without a header (a fragment such as capture 089) assume the common 910B/A3 layout.
_DEFAULT_HEADER = (
    (("npu", "name"), ("health",), ("power", "temp", "hugepages")),
    (("chip",), ("bus",), ("aicore", "memory", "hbm")),
)

_PROCESS_FIELDS = (
    (re.compile(r"Process\s+id\s+in\s+container", re.I), "container_pid"),
    (re.compile(r"Process\s+memory", re.I), "memory"),
    (re.compile(r"Process\s+name", re.I), "pname"),
    (re.compile(r"Process\s+id", re.I), "pid"),
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


@dataclass(frozen=True)
class _Row:
    line_no: int
    cells: Tuple[str, ...]
    block: int  # rows between the same two borders share a block number
    cut: bool  # the line ended before its closing `|`


@dataclass
class _Cell:
    """The fields one header cell declares, with their start columns inside the cell."""

    keys: Tuple[str, ...]
    starts: Tuple[int, ...]


@dataclass
class _Parse:
    warnings: List[str] = field(default_factory=list)
    npu_smi_version: Optional[str] = None
    driver_version: Optional[str] = None


def parse_info(text: str) -> InfoTable:
    """Parse the output of ``npu-smi info``; never raises on damaged input."""
    state = _Parse()
    rows = _split_rows(text, state)
    chip_rows: List[_Row] = []
    process_rows: List[_Row] = []
    header: Optional[Tuple[_Row, Optional[_Row]]] = None
    process_header: Optional[_Row] = None
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
        elif "processes" in joined and _NO_PROCESS_RE.search(joined):
            section = "processes"
            process_rows.append(row)
        elif section == "chips":
            chip_rows.append(row)
        else:
            process_rows.append(row)
        i += 1
    layout = _layout(header, chip_rows, state)
    chips = _read_chips(chip_rows, layout, state)
    processes, idle = _read_processes(process_rows, process_header, state)
    if not chips and not state.warnings:
        state.warnings.append("no chip rows found: this does not look like `npu-smi info` output")
    return InfoTable(
        npu_smi_version=state.npu_smi_version,
        driver_version=state.driver_version,
        chips=tuple(chips),
        processes=tuple(processes),
        process_table=process_header is not None or bool(idle),
        idle_npus=tuple(idle),
        warnings=tuple(state.warnings),
    )


def _split_rows(text: str, state: _Parse) -> List[_Row]:
    rows: List[_Row] = []
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
            rows.append(_Row(line_no, tuple(map(str.strip, body.split("|"))), block, cut))
            if top_border is not None and len(rows) == 1:
                _check_top_border(top_border, line, state)
            if cut:
                state.warnings.append(f"line {line_no} is cut short (no closing '|'): read as far as it goes")
            else:
                widths.setdefault(len(line), []).append(line_no)
            last_is_border = False
        elif set(line) <= {".", "…"}:
            elided = True
        # Anything else is noise npu-smi prints around the table (DrvMngGetConsoleLogLevel …).
    if elided:
        state.warnings.append("the output has elided rows ('...'): chips or processes in them are missing")
    if rows and not last_is_border and not rows[-1].cut:
        state.warnings.append("the table ends without its closing border: the output may be cut short")
    _check_widths(widths, state)
    return rows


def _check_top_border(border: str, row: str, state: _Parse) -> None:
    """The top border's ``+`` joints stand over the first row's ``|`` (052 was edited: they do not)."""
    joints = {i for i, ch in enumerate(border) if ch == "+"}
    bars = {i for i, ch in enumerate(row) if ch == "|"}
    if not joints <= bars:
        state.warnings.append(
            "the top border's joints do not line up with the first row (hand-edited or damaged output)"
        )


def _check_widths(widths: Dict[int, List[int]], state: _Parse) -> None:
    """npu-smi prints every line of its table at one width; others were edited or damaged (016, 052)."""
    if len(widths) < 2:
        return
    usual = max(widths, key=lambda width: len(widths[width]))
    odd = sorted(n for width, lines in widths.items() if width != usual for n in lines)
    shown = ", ".join(str(n) for n in odd[:3]) + (" …" if len(odd) > 3 else "")
    state.warnings.append(
        f"line(s) {shown} differ in width from the rest of the table ({usual} columns): "
        "hand-edited or damaged output, read by cell borders"
    )


def _read_versions(joined: str, state: _Parse) -> None:
    version = _VERSION_RE.search(joined)
    driver = _DRIVER_RE.search(joined)
    state.npu_smi_version = version.group(1) if version else None
    state.driver_version = driver.group(1) if driver else None


# --- layout ---------------------------------------------------------------------------------


def _header_cell(text: str) -> _Cell:
    keys: List[str] = []
    starts: List[int] = []
    for match in _HEADER_RE.finditer(text):
        group = match.lastgroup or "other"
        key = "?" + match.group(0) if group == "other" else _HEADER_FIELDS[int(group[1:])][1]
        keys.append(key)
        starts.append(match.start())
    return _Cell(tuple(keys), tuple(starts))


_Layout = Tuple[Tuple[_Cell, ...], Tuple[_Cell, ...]]


def _layout(header: Optional[Tuple[_Row, Optional[_Row]]], chip_rows: List[_Row], state: _Parse) -> _Layout:
    if header is not None and header[1] is not None:
        first, second = header[0], header[1]
        return tuple(_header_cell(c) for c in first.cells), tuple(_header_cell(c) for c in second.cells)
    if chip_rows:
        state.warnings.append("no header rows: assuming the standard 910B/A3 layout")
    row1 = tuple(_Cell(keys, tuple(range(len(keys)))) for keys in _DEFAULT_HEADER[0])
    second_keys = list(_DEFAULT_HEADER[1])
    # A fragment whose chip cell has two numbers is A3 (`Chip Phy-ID`, 089) when HBM is
    # printed, 310P (`Chip Device`) otherwise.
    sample = next((r for r in chip_rows[1::2] if r.cells and len(r.cells[0].split()) == 2), None)
    if sample is not None:
        second_keys[0] = ("chip", "phy" if len(_values(sample.cells[-1])) >= 3 else "device")
    row2 = tuple(_Cell(keys, tuple(range(len(keys)))) for keys in second_keys)
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


def _assign(header: _Cell, cell: str) -> Dict[str, str]:
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


def _read_chips(rows: List[_Row], layout: _Layout, state: _Parse) -> List[ChipSample]:
    """Pair the rows of each bordered block: a chip is two rows, a block holds whole chips."""
    chips: List[ChipSample] = []
    head1, head2 = layout
    health_at = next((i for i, c in enumerate(head1) if "health" in c.keys), None)
    declared_both = frozenset(k for cell in head1 + head2 for k in cell.keys)
    declared_first = frozenset(k for cell in head1 for k in cell.keys)
    blocks: Dict[int, List[_Row]] = {}
    for row in rows:
        blocks.setdefault(row.block, []).append(row)
    for block in blocks.values():
        for i in range(0, len(block), 2):
            first = block[i]
            second = block[i + 1] if i + 1 < len(block) else None
            if second is None and not _looks_like_first_row(first, health_at):
                state.warnings.append(f"line {first.line_no}: a chip's second row without its first; skipped")
                continue
            fields = _row_fields(first, head1, state)
            if second is None:
                state.warnings.append(
                    f"line {first.line_no}: chip row without its second row (cut or elided)"
                )
            else:
                fields.update(_row_fields(second, head2, state))
            declared = declared_first if second is None else declared_both
            chip = _chip(fields, declared, first.line_no, state)
            if chip is not None:
                chips.append(chip)
    return chips


def _looks_like_first_row(row: _Row, health_at: Optional[int]) -> bool:
    if health_at is None or health_at >= len(row.cells):
        return False
    return (
        Health.parse(row.cells[health_at]) is not Health.UNKNOWN or row.cells[health_at].upper() == "UNKNOWN"
    )


def _row_fields(row: _Row, header: Tuple[_Cell, ...], state: _Parse) -> Dict[str, str]:
    if len(row.cells) != len(header) and not row.cut:
        state.warnings.append(
            f"line {row.line_no}: {len(row.cells)} cells where the header has {len(header)}; read by position"
        )
    fields: Dict[str, str] = {}
    for head, cell in zip(header, row.cells):
        fields.update(_assign(head, cell))
    return fields


def _chip(
    fields: Dict[str, str], declared: FrozenSet[str], line_no: int, state: _Parse
) -> Optional[ChipSample]:
    npu_id = _int(fields.get("npu"))
    if npu_id is None:
        state.warnings.append(f"line {line_no}: no readable NPU ID; chip skipped")
        return None
    chip_id = _int(fields.get("chip"))
    notes: Dict[str, MetricNote] = {}
    identity = ChipIdentity(
        npu_id=npu_id,
        chip_id=0 if chip_id is None else chip_id,
        name=_text(fields.get("name")),
        bus_id=_text(fields.get("bus")),
        phy_id=_int(fields.get("phy")),
        device_id=_int(fields.get("device")),
    )
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
        shown = _PLACEHOLDERS.get(raw.upper())
        if shown is not None:
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
        value = _number(raw)
        if value is None:
            self._placeholder(raw, (metric,))
        return value

    def pair(self, key: str, metrics: Tuple[str, str]) -> Tuple[Optional[int], Optional[int]]:
        raw = self.fields.get(key)
        if raw is None:
            self._absent(key, metrics)
            return None, None
        used, _, total = raw.partition("/")
        values = (_int(used), _int(total))
        for value, metric, part in zip(values, metrics, (used.strip(), total.strip())):
            if value is None:
                self._placeholder(part or raw, (metric,))
        return values


def _number(raw: str) -> Optional[float]:
    try:
        value = float(raw)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def _whole(value: Optional[float]) -> Optional[int]:
    """npu-smi prints temperature and utilisation as integers; keep them integers."""
    return None if value is None else round(value)


def _int(raw: Optional[str]) -> Optional[int]:
    if raw is None:
        return None
    text = raw.strip()
    # isdigit() alone accepts '²' and other non-ASCII digits that int() refuses.
    return int(text) if text.isascii() and text.isdigit() else None


def _text(raw: Optional[str]) -> Optional[str]:
    if raw is None:
        return None
    text = raw.strip()
    return None if not text or text.upper() in _PLACEHOLDERS else text


# --- processes ------------------------------------------------------------------------------


def _process_keys(header: Optional[_Row]) -> List[Tuple[str, ...]]:
    if header is None:  # no header seen (a fragment): the classic four cells
        return [("npu", "chip"), ("pid",), ("pname",), ("memory",)]
    keys: List[Tuple[str, ...]] = []
    for cell in header.cells:
        named = next((key for pattern, key in _PROCESS_FIELDS if pattern.search(cell)), None)
        if named is not None:
            keys.append((named,))
        else:
            keys.append(tuple(k for k in _header_cell(cell).keys if k in {"npu", "chip"}))
    return keys


def _read_processes(
    rows: List[_Row], header: Optional[_Row], state: _Parse
) -> Tuple[List[NpuProcess], List[int]]:
    keys = _process_keys(header)
    processes: List[NpuProcess] = []
    idle: List[int] = []
    for row in rows:
        joined = " ".join(row.cells)
        none_found = _NO_PROCESS_RE.search(joined)
        if none_found:
            if none_found.group(1) is not None:
                idle.append(int(none_found.group(1)))
            continue
        fields: Dict[str, str] = {}
        for cell_keys, cell in zip(keys, row.cells):
            if cell_keys in {("pname",)}:
                fields["pname"] = cell.strip()
                continue
            for key, value in zip(cell_keys, cell.split()):
                fields[key] = value
        process = _process(fields)
        if process is None:
            state.warnings.append(f"line {row.line_no}: unreadable process row; skipped")
        else:
            processes.append(process)
    return processes, idle


def _process(fields: Dict[str, str]) -> Optional[NpuProcess]:
    npu_id, pid = _int(fields.get("npu")), _int(fields.get("pid"))
    if npu_id is None or pid is None:
        return None
    chip_id = _int(fields.get("chip"))
    return NpuProcess(
        npu_id=npu_id,
        chip_id=0 if chip_id is None else chip_id,
        pid=pid,
        name=fields.get("pname") or None,
        npu_memory_mib=_int(fields.get("memory")),
        container_pid=_int(fields.get("container_pid")),
    )
