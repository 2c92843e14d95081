"""Provides render_snapshot(): a Snapshot as a plain-text report (``npuwatch snapshot``, ``--plain``),
from the shared view model (``widgets/view_model/``)."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

from npuwatch.judge.rules import link_verdicts
from npuwatch.metrics_table import SHOWN_WHEN_REPORTED
from npuwatch.model import ChipSample, Level, Snapshot
from npuwatch.text_safety import inert, inert_lines
from npuwatch.widgets import format as fmt
from npuwatch.widgets.view_model import (
    ChipRow,
    MetricCell,
    ProcessRow,
    cell_columns,
    chip_name,
    chip_rows,
    process_row,
)


def render_snapshot(snapshot: Snapshot, now_s: Optional[float] = None) -> str:
    """The snapshot as aligned text: header, one line per chip, processes, host, notes.

    Every string from the machine, npu-smi or a file is shown inert (``ESC`` as ``\\x1b``):
    a table's cells before they are measured, then the whole text.
    """
    lines = [_title(snapshot), _versions(snapshot), ""]
    if snapshot.backend_note is not None:  # the chosen backend did not read it: say why
        lines[2:2] = [f"backend: {inert(snapshot.backend_note)}"]
    if snapshot.chips:
        rows = chip_rows(snapshot, ordered=False)  # npu-smi's order
        judged = any(row.workload is not None for row in rows)  # a feed judged the workloads
        lines += _table(_chip_header(judged), [_chip_row(row, judged) for row in rows])
        lines += _extras_table(rows)
        attention = _error_codes(snapshot.chips) + _link_lines(snapshot.chips) + _workloads(rows)
        if attention:
            lines += ["", *attention]
    else:
        lines.append("No NPU chips could be read.")
    if snapshot.processes:
        reference_s = now_s if now_s is not None else snapshot.taken_at.timestamp()
        processes = [process_row(p, reference_s) for p in snapshot.processes]
        reasons = {p.host_unavailable for p in snapshot.processes if p.host is None}
        shared = next(iter(reasons)) if len(reasons) == 1 and len(processes) > 1 else None
        lines += [
            "",
            "Processes",
            *_table(_PROCESS_HEADER, [_process_cells(row, shared) for row in processes]),
        ]
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
        (snapshot.chip_source, snapshot.chip_source_version),
        ("driver", v.driver),
        ("firmware", v.firmware),
        ("CANN", v.cann),
    ]
    return " · ".join(f"{name} {value or fmt.NA}" for name, value in parts)


_ID_HEADER = ("NPU", "Chip", "Phy/Dev", "Name", "Bus-Id", "Health")


def _chip_header(workload: bool = False) -> Tuple[str, ...]:
    """The identity columns, then a column per cell named by the metric table (Util, Memory …),
    then what the chip is limited by when the workloads were judged."""
    return (*_ID_HEADER, *cell_columns(), *(("Workload",) if workload else ()))


def _chip_row(row: ChipRow, workload: bool = False) -> Tuple[str, ...]:
    ident = row.identity
    # Phy-ID on A3, the Device column on 310/310P/310B: at most one of them is printed.
    sub_id = ident.phy_id if ident.phy_id is not None else ident.device_id
    return (
        str(ident.npu_id),
        str(ident.chip_id),
        "-" if sub_id is None else str(sub_id),
        ident.name or fmt.NA,
        ident.bus_id or fmt.NA,
        row.health + (" (stale)" if row.stale else ""),
        *(_cell_text(cell) for cell in row.metrics),
        *((_workload_cell(row),) if workload else ()),
    )


def _workload_cell(row: ChipRow) -> str:
    """``compute-bound``, ``input-bound · throttled: thermal``; ``-`` for a chip not judged."""
    shown = row.explanation
    return "-" if shown is None else shown.heading


def _workloads(rows: Sequence[ChipRow]) -> List[str]:
    """A chip whose class holds its job back, or whose AI Core is throttled: the class over its
    window with the summary, then the next step, the likely owner of memory held with no
    process, and what only the DCMI backend could tell."""
    lines: List[str] = []
    for row in rows:
        shown, tag = row.explanation, row.workload
        if shown is None or tag is None or not (tag.level is Level.WARNING or tag.throttling):
            continue
        where = chip_name(row.key) if row.key[1] else f"NPU {row.key[0]}"
        lines.append(f"▲ {where}: {shown.heading} ({shown.window}): {shown.summary}")
        evidence = " · ".join(f"{e.label} {e.value}" for e in shown.evidence)
        lines += [f"    evidence: {evidence}"] if evidence else []
        lines.append(f"    next step: {shown.next_step}")
        lines += [f"    likely owner: {shown.owner}"] if shown.owner else []
        lines += [f"    ({shown.needs_dcmi})"] if shown.needs_dcmi else []
    return lines


def _cell_text(cell: MetricCell) -> str:
    """A cell as the text table shows it: ``64% AIC``, ``52.5/64.0 GiB HBM``, ``90.7 W``, ``37 °C``."""
    if cell.key == "util":  # which utilisation the layout prints (the 950 prints NPU Util)
        return fmt.NA if cell.value is None else f"{cell.text} {cell.tag}"
    if cell.key == "memory":
        return fmt.NA if not cell.total else f"{cell.text} {cell.tag}"
    if cell.key == "power":  # watts alone: the rating is the notebook's and the dashboard's bar
        return fmt.watts(cell.value)
    return cell.text


def _extras_table(rows: Sequence[ChipRow]) -> List[str]:
    """The metrics without a card cell (the driver-only ones: frequency, Vector, HBM bandwidth …) as a
    second table: a column per metric some chip reports, a row per chip reporting any (``-`` where
    that chip does not).  Nothing when no chip reports one (the npu-smi backend's output)."""
    shown = [row for row in rows if row.extras]
    if not shown:
        return []
    columns: Dict[str, str] = {}  # metric → its header, in the view model's order
    for row in shown:
        for extra in row.extras:
            columns.setdefault(extra.metric, extra.label)
    header = ("NPU", "Chip", *columns.values())
    table = []
    for row in shown:
        texts = {extra.metric: extra.text for extra in row.extras}
        table.append((str(row.key[0]), str(row.key[1]), *(texts.get(m, "-") for m in columns)))
    return ["", *_table(header, table)]


def _error_codes(chips: Sequence[ChipSample]) -> List[str]:
    """A line per chip that is not OK and has error codes (``npu-smi info -t health``)."""
    return [
        f"{fmt.HEALTH_GLYPHS[chip.health]} {chip.identity.label} ({chip.identity.bus_id or 'no Bus-Id'}): "
        f"{chip.health.value} {', '.join(error.text for error in chip.errors)}"
        for chip in chips
        if chip.errors
    ]


def _link_lines(chips: Sequence[ChipSample]) -> List[str]:
    """A line per link the judge finds wanting (narrow, slow under load, down); chips sharing one
    link (a 310P Duo's PCI function) give one."""
    lines: List[str] = []
    seen: Set[Tuple[str, str]] = set()
    for chip in chips:
        ident = chip.identity
        for verdict in link_verdicts(chip):
            link = verdict.link
            if verdict.level is not Level.WARNING:
                continue
            if link.shared_by is not None:
                if (link.kind, link.shared_by) in seen:
                    continue
                seen.add((link.kind, link.shared_by))
            where = f"{ident.label} ({ident.bus_id or 'no Bus-Id'})"
            lines.append(f"▲ {where}: {link.title} {inert(link.detail)} {verdict.word}")
    return lines


_PROCESS_HEADER = ("NPU", "Chip", "PID", "User", "NPU mem", "CPU", "RSS", "Elapsed", "Command")


def _process_cells(row: ProcessRow, shared_reason: Optional[str]) -> Tuple[str, ...]:
    """A process row's cells; ``-`` where the host cannot see the process."""
    return (
        str(row.npu_id),
        str(row.chip_id),
        row.pid,
        row.user or "-",
        row.npu_memory,
        row.cpu or "-",
        row.rss or "-",
        row.elapsed or "-",
        row.command_text(shared_reason),
    )


def _host_line(snapshot: Snapshot) -> str:
    host = snapshot.host
    assert host is not None
    memory = fmt.used_total_bytes(host.memory_used_bytes, host.memory_total_bytes)
    where = " · container" if host.in_container else ""
    load = fmt.load(host.load_average)
    return f"Host {host.hostname}: CPU {fmt.percent(host.cpu_percent)} · memory {memory} · load {load}{where}"


def _notes(chips: Sequence[ChipSample]) -> List[str]:
    """Group identical reasons so 16 chips with the same gap give one line.

    A metric without a card cell (the driver-only ones) is shown where reported and not listed
    here when absent: npu-smi's table never has them, and saying so for every chip is noise (the
    JSON's ``unavailable`` keeps the reason)."""
    grouped: Dict[Tuple[str, str], List[str]] = {}
    for chip in chips:
        for metric, reason in chip.unavailable().items():
            if metric in SHOWN_WHEN_REPORTED:
                continue
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
