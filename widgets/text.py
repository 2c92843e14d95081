"""Provides render_snapshot(): a Snapshot as a plain-text report (``npuwatch snapshot``)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from npuwatch.chip_facts import chip_memory
from npuwatch.model import ChipSample, MetricStatus, NpuProcess, Snapshot
from npuwatch.text_safety import inert, inert_lines
from npuwatch.widgets import format as fmt


def render_snapshot(snapshot: Snapshot, now_s: Optional[float] = None) -> str:
    """The snapshot as aligned text: header, one line per chip, processes, host, notes.

    Every string from the machine, npu-smi or a file is shown inert (``ESC`` as ``\\x1b``):
    a table's cells before they are measured, then the whole text.
    """
    lines = [_title(snapshot), _versions(snapshot), ""]
    if snapshot.chips:
        lines += _table(_CHIP_HEADER, [_chip_row(c) for c in snapshot.chips])
        attention = _error_codes(snapshot.chips) + _degraded_links(snapshot.chips)
        if attention:
            lines += ["", *attention]
    else:
        lines.append("No NPU chips could be read.")
    if snapshot.processes:
        reference_s = now_s if now_s is not None else snapshot.taken_at.timestamp()
        reasons = {p.host_unavailable for p in snapshot.processes if p.host is None}
        shared = next(iter(reasons)) if len(reasons) == 1 and len(snapshot.processes) > 1 else None
        rows = [_process_row(p, reference_s, shared) for p in snapshot.processes]
        lines += ["", "Processes", *_table(_PROCESS_HEADER, rows)]
        if shared:
            lines.append(f"  (no host details: {shared})")
    if snapshot.host is not None:
        lines += ["", _host_line(snapshot)]
    notes = _notes(snapshot.chips)
    if notes:
        lines += ["", "Not reported:"] + [f"  {note}" for note in notes]
    if snapshot.warnings:
        lines += ["", "Warnings:"] + [f"  - {inert(w)}" for w in snapshot.warnings]
    return inert_lines("\n".join(lines)) + "\n"


def _title(snapshot: Snapshot) -> str:
    host = snapshot.host.hostname if snapshot.host else "—"
    when = snapshot.taken_at.strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    return f"npuwatch · {host} · source {snapshot.source} · {when}"


def _versions(snapshot: Snapshot) -> str:
    v = snapshot.versions
    parts = [
        ("npu-smi", v.npu_smi),
        ("driver", v.driver),
        ("firmware", v.firmware),
        ("CANN", v.cann),
    ]
    return " · ".join(f"{name} {value or fmt.NA}" for name, value in parts)


_CHIP_HEADER = ("NPU", "Chip", "Phy/Dev", "Name", "Bus-Id", "Health", "Util", "Memory", "Power", "Temp")


def _chip_row(chip: ChipSample) -> Tuple[str, ...]:
    ident = chip.identity
    # Phy-ID on A3, the Device column on 310/310P/310B: at most one of them is printed.
    sub_id = ident.phy_id if ident.phy_id is not None else ident.device_id
    if chip.aicore_percent is not None:
        utilisation = f"{fmt.percent(chip.aicore_percent)} AIC"
    elif chip.npu_util_percent is not None:  # the 950 prints NPU Util instead of AICore
        utilisation = f"{fmt.percent(chip.npu_util_percent)} NPU"
    else:
        utilisation = fmt.NA
    return (
        str(ident.npu_id),
        str(ident.chip_id),
        "-" if sub_id is None else str(sub_id),
        ident.name or fmt.NA,
        ident.bus_id or fmt.NA,
        chip.health.value + (" (stale)" if _is_stale(chip) else ""),
        utilisation,
        _memory(chip),
        fmt.watts(chip.power_w),
        fmt.celsius(chip.temperature_c),
    )


def _memory(chip: ChipSample) -> str:
    memory = chip_memory(chip)
    if not memory.total_mib:
        return fmt.NA
    return f"{fmt.used_total_gib(memory.used_mib, memory.total_mib)} {memory.kind}"


def _error_codes(chips: Sequence[ChipSample]) -> List[str]:
    """A line per chip that is not OK and has error codes (``npu-smi info -t health``)."""
    return [
        f"{fmt.HEALTH_GLYPHS[chip.health]} {chip.identity.label} ({chip.identity.bus_id or 'no Bus-Id'}): "
        f"{chip.health.value} {', '.join(error.text for error in chip.errors)}"
        for chip in chips
        if chip.errors
    ]


def _degraded_links(chips: Sequence[ChipSample]) -> List[str]:
    """A line per PCIe link below its maximum; chips sharing a PCI function (310P Duo) give one."""
    lines: List[str] = []
    seen: Set[str] = set()
    for chip in chips:
        link, ident = chip.pcie, chip.identity
        if link is None or not link.present or not link.degraded:  # the model's one test
            continue
        if ident.bus_id is not None:
            if ident.bus_id.lower() in seen:
                continue
            seen.add(ident.bus_id.lower())
        where = f"{ident.label} ({ident.bus_id or 'no Bus-Id'})"
        lines.append(f"▲ {where}: PCIe {fmt.pcie_link(link)} degraded — the link trained below its maximum")
    return lines


def _is_stale(chip: ChipSample) -> bool:
    return any(note.status is MetricStatus.STALE for note in chip.notes.values())


_PROCESS_HEADER = ("NPU", "Chip", "PID", "User", "NPU mem", "CPU", "RSS", "Elapsed", "Command")


def _process_row(process: NpuProcess, now_s: float, shared_reason: Optional[str]) -> Tuple[str, ...]:
    host = process.host
    npu_mem = fmt.mib(process.npu_memory_mib)
    if host is None:
        reason = process.host_unavailable or "no host details"
        command = process.name or "?" if reason == shared_reason else f"{process.name or '?'}  ({reason})"
        return (
            str(process.npu_id),
            str(process.chip_id),
            str(process.pid),
            "-",
            npu_mem,
            "-",
            "-",
            "-",
            command,
        )
    elapsed = None if host.start_time_s is None else now_s - host.start_time_s
    return (
        str(process.npu_id),
        str(process.chip_id),
        str(process.pid),
        host.user or "?",
        npu_mem,
        fmt.percent(host.cpu_percent),
        fmt.bytes_iec(host.rss_bytes),
        fmt.duration(elapsed),
        host.command or process.name or "?",
    )


def _host_line(snapshot: Snapshot) -> str:
    host = snapshot.host
    assert host is not None
    memory = fmt.used_total_bytes(host.memory_used_bytes, host.memory_total_bytes)
    where = " · container" if host.in_container else ""
    load = fmt.load(host.load_average)
    return f"Host {host.hostname}: CPU {fmt.percent(host.cpu_percent)} · memory {memory} · load {load}{where}"


def _notes(chips: Sequence[ChipSample]) -> List[str]:
    """Group identical reasons so 16 chips with the same gap give one line."""
    grouped: Dict[Tuple[str, str], List[str]] = {}
    for chip in chips:
        for metric, reason in chip.unavailable().items():
            grouped.setdefault((metric, reason), []).append(chip.identity.label)
    return [f"{metric} on {_labels(where)}: {reason}" for (metric, reason), where in grouped.items()]


def _labels(labels: List[str]) -> str:
    return ", ".join(labels) if len(labels) <= 3 else f"{len(labels)} chips"


def _table(header: Sequence[str], shown: Sequence[Sequence[str]]) -> List[str]:
    rows = [[inert(cell) for cell in row] for row in shown]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    last = len(header) - 1

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c if i == last else c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return [line(header)] + [line(r) for r in rows]
