"""Provides typed records for ``npu-smi info -t memory|ecc|proc-mem``.

``-t memory`` and ``-t ecc`` have no capture.  Their keys come from the printf calls in the
npu-smi source (hicann/driver ``src/custom/dev_prod/user/npucli/src/npu_info_print.c``:
``print_ddr_info``/``print_hbm_info`` and ``printf_ddr_ecc_info``/``printf_hbm_ecc_info``) and
the hiascend npu-smi reference (Atlas 200I A2 "查询指定芯片内存信息" / "查询指定芯片ECC错误计数"):

- memory: ``DDR Capacity(MB)``, ``DDR Clock Speed(MHz)``, ``HBM Capacity(MB)``,
  ``HBM Clock Speed(MHz)``, ``HBM Temperature(C)``, ``HBM Manufacturer ID`` (``0x..``);
  310/310B print ``Total Capacity(MB)``, ``Capacity(MB)``, ``Clock Speed(MHz)``; 310P adds
  ``Total DDR Capacity(MB)``.
- ecc (``%-40s``): ``{DDR|HBM} {Single|Double} Bit Error Count``, ``… Aggregate Total Err Cnt``,
  ``… Isolated Pages Count``, ``… Next-Isolated Pages Count``; 310/310B print
  ``Single-bit Error Count`` / ``Double-bit Error Count`` (DDR).
- proc-mem (046): ``Process id:… Process name:… Process memory(MB):…`` lines per chip.

Unknown keys are kept in each record's ``fields``, so a new driver's lines are never lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

from npuwatch.probes.npu_smi.kv import KeyValueBlock, parse_key_values
from npuwatch.probes.values import to_int

# ---------------------------------------------------------------- memory

# One `-t proc-mem` process line (046); the name may be blank.
_PROCESS_RE = re.compile(
    r"^Process id\s*:\s*(?P<pid>\S*)\s+Process name\s*:(?P<name>.*?)"
    r"\s*Process memory\(MB\)\s*:\s*(?P<mem>\S*)\s*$"
)


@dataclass(frozen=True)
class ChipMemory:
    """One chip of ``npu-smi info -t memory`` (format: module docstring)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    ddr_capacity_mib: Optional[int] = None  # 310/310B: "Capacity(MB)"
    ddr_total_capacity_mib: Optional[int] = None  # 310P/310B only
    ddr_clock_mhz: Optional[int] = None
    hbm_capacity_mib: Optional[int] = None
    hbm_clock_mhz: Optional[int] = None
    hbm_temperature_c: Optional[int] = None
    hbm_manufacturer_id: Optional[int] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryReport:
    """``npu-smi info -t memory -i N [-c M]``."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipMemory, ...] = ()
    warnings: Tuple[str, ...] = ()


def parse_memory(text: str) -> MemoryReport:
    """Read ``-t memory``."""
    report = parse_key_values(text)
    chips = tuple(
        ChipMemory(
            npu_id=report.npu_id,
            chip_id=block.chip_id,
            ddr_capacity_mib=to_int(block.get("DDR Capacity(MB)", "Capacity(MB)")),
            ddr_total_capacity_mib=to_int(block.get("Total DDR Capacity(MB)", "Total Capacity(MB)")),
            ddr_clock_mhz=to_int(block.get("DDR Clock Speed(MHz)", "Clock Speed(MHz)")),
            hbm_capacity_mib=to_int(block.get("HBM Capacity(MB)")),
            hbm_clock_mhz=to_int(block.get("HBM Clock Speed(MHz)")),
            hbm_temperature_c=to_int(block.get("HBM Temperature(C)")),
            hbm_manufacturer_id=to_int(block.get("HBM Manufacturer ID")),
            fields=block.fields,
        )
        for block in report.chips
    )
    return MemoryReport(report.npu_id, chips, report.warnings)


# ---------------------------------------------------------------- ecc


@dataclass(frozen=True)
class EccCounts:
    """ECC counters of one memory (DDR or HBM), as dcmi_ecc_info reports them."""

    single_bit_errors: Optional[int] = None
    double_bit_errors: Optional[int] = None
    single_bit_aggregate_total: Optional[int] = None
    double_bit_aggregate_total: Optional[int] = None
    single_bit_isolated_pages: Optional[int] = None
    double_bit_isolated_pages: Optional[int] = None
    single_bit_next_isolated_pages: Optional[int] = None
    double_bit_next_isolated_pages: Optional[int] = None


@dataclass(frozen=True)
class ChipEcc:
    """One chip of ``npu-smi info -t ecc``; ``None`` for a memory npu-smi did not print."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    ddr: Optional[EccCounts] = None
    hbm: Optional[EccCounts] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EccReport:
    """``npu-smi info -t ecc -i N [-c M]``."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipEcc, ...] = ()
    warnings: Tuple[str, ...] = ()


def _ecc_counts(block: KeyValueBlock, memory: str) -> Optional[EccCounts]:
    names = [
        ("Single Bit Error Count", "Single-bit Error Count"),
        ("Double Bit Error Count", "Double-bit Error Count"),
        ("Single Bit Aggregate Total Err Cnt",),
        ("Double Bit Aggregate Total Err Cnt",),
        ("Single Bit Isolated Pages Count",),
        ("Double Bit Isolated Pages Count",),
        ("Single Bit Next-Isolated Pages Count",),
        ("Double Bit Next-Isolated Pages Count",),
    ]
    raw = []
    for spellings in names:
        keys = [f"{memory} {spelling}" for spelling in spellings]
        if memory == "DDR":
            # 310/310B print DDR counts without the "DDR " prefix (printf_ddr_ecc_info).
            keys += list(spellings[1:])
        raw.append(block.get(*keys))
    if all(value is None for value in raw):
        return None
    values = [to_int(value) for value in raw]
    return EccCounts(*values)


def parse_ecc(text: str) -> EccReport:
    """Read ``-t ecc``."""
    report = parse_key_values(text)
    chips = tuple(
        ChipEcc(
            report.npu_id,
            block.chip_id,
            _ecc_counts(block, "DDR"),
            _ecc_counts(block, "HBM"),
            block.fields,
        )
        for block in report.chips
    )
    return EccReport(report.npu_id, chips, report.warnings)


# ---------------------------------------------------------------- proc-mem


@dataclass(frozen=True)
class ProcessMemory:
    """One process holding NPU memory in ``-t proc-mem``."""

    pid: int
    name: Optional[str]  # None when npu-smi prints it blank (046, containers)
    memory_mib: Optional[int]


@dataclass(frozen=True)
class ChipProcesses:
    """The processes on one chip (``No process in device.`` gives an empty tuple)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    processes: Tuple[ProcessMemory, ...] = ()


@dataclass(frozen=True)
class ProcMemReport:
    """``npu-smi info -t proc-mem -i N`` (046)."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipProcesses, ...] = ()
    warnings: Tuple[str, ...] = ()


def parse_proc_mem(text: str) -> ProcMemReport:
    """Read ``-t proc-mem``: process lines and ``No process in device.`` per chip."""
    report = parse_key_values(text)
    warnings = list(report.warnings)
    chips = []
    for block in report.chips:
        processes = []
        for note in block.notes:
            match = _PROCESS_RE.match(note)
            if match is None:
                if not note.lower().startswith("no process"):
                    warnings.append(f"unrecognised proc-mem line {note!r}")
                continue
            pid = to_int(match.group("pid"))
            if pid is None:
                warnings.append(f"unreadable process id in {note!r}")
                continue
            name = match.group("name").strip() or None
            processes.append(ProcessMemory(pid, name, to_int(match.group("mem"))))
        chips.append(ChipProcesses(report.npu_id, block.chip_id, tuple(processes)))
    return ProcMemReport(report.npu_id, tuple(chips), tuple(warnings))
