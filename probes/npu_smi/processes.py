"""Provides read_processes(): the process section of ``npu-smi info`` → NpuProcess records.

Groups are per NPU; several processes can share one (001); names can be blank (003) or cut
(089); 26.x adds ``Process id in container`` (008); 950 has no chip column (037); a group can
be ``No running processes found in NPU n``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from npuwatch.model import NpuProcess
from npuwatch.probes.npu_smi.rows import Row, header_cell
from npuwatch.probes.values import PID_MAX, to_int

NO_PROCESS_RE = re.compile(r"No running processes found(?:\s+in\s+NPU\s+(\d+))?", re.IGNORECASE)

PROCESS_FIELDS = (
    (re.compile(r"Process\s+id\s+in\s+container", re.I), "container_pid"),
    (re.compile(r"Process\s+memory", re.I), "memory"),
    (re.compile(r"Process\s+name", re.I), "pname"),
    (re.compile(r"Process\s+id", re.I), "pid"),
)


def _process_keys(header: Optional[Row]) -> List[Tuple[str, ...]]:
    if header is None:  # no header seen (a fragment): the classic four cells
        return [("npu", "chip"), ("pid",), ("pname",), ("memory",)]
    keys: List[Tuple[str, ...]] = []
    for cell in header.cells:
        named = next((key for pattern, key in PROCESS_FIELDS if pattern.search(cell)), None)
        if named is not None:
            keys.append((named,))
        else:
            keys.append(tuple(k for k in header_cell(cell).keys if k in {"npu", "chip"}))
    return keys


#: Good process rows already read, by (cell keys, cells): a running job prints the same rows every
#: tick.  Only rows that gave a process without a warning are kept (a warning names its line).
_KNOWN: Dict[Tuple[Tuple[Tuple[str, ...], ...], Tuple[str, ...]], NpuProcess] = {}
#: The cache is emptied when it holds this many rows.
_KNOWN_MAX = 4096


def read_processes(
    rows: List[Row], header: Optional[Row], warnings: List[str]
) -> Tuple[List[NpuProcess], List[int]]:
    keys = tuple(_process_keys(header))
    processes: List[NpuProcess] = []
    idle: List[int] = []
    for row in rows:
        known = _KNOWN.get((keys, row.cells))
        if known is not None:
            processes.append(known)
            continue
        joined = " ".join(row.cells)
        none_found = NO_PROCESS_RE.search(joined)
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
            warnings.append(f"line {row.line_no}: unreadable process row; skipped")
        elif not 0 < process.pid <= PID_MAX or process.npu_id < 0 or process.chip_id < 0:
            warnings.append(
                f"line {row.line_no}: process row with PID {process.pid} on NPU {process.npu_id} "
                f"chip {process.chip_id} skipped (not a process ID on an NPU)"
            )
        else:
            processes.append(process)
            if len(_KNOWN) >= _KNOWN_MAX:
                _KNOWN.clear()
            _KNOWN[(keys, row.cells)] = process
    return processes, idle


def _process(fields: Dict[str, str]) -> Optional[NpuProcess]:
    npu_id, pid = to_int(fields.get("npu")), to_int(fields.get("pid"))
    if npu_id is None or pid is None:
        return None
    chip_id = to_int(fields.get("chip"))
    return NpuProcess(
        npu_id=npu_id,
        chip_id=0 if chip_id is None else chip_id,
        pid=pid,
        name=fields.get("pname") or None,
        npu_memory_mib=to_int(fields.get("memory")),
        container_pid=to_int(fields.get("container_pid")),
    )
