"""Provides the builders of the presentation model: a Snapshot, its History and the judge's
verdicts → a frame (``build_view``), a row per chip (``chip_row``), the host and the processes."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from npuwatch.alerts import Alert, Severity
from npuwatch.history import History
from npuwatch.judge import Judgement, judge_chip, judge_snapshot
from npuwatch.judge.limits import PowerRating, power_ratings
from npuwatch.judge.rules import is_stale
from npuwatch.metrics_table import CELLS
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    HostInfo,
    Level,
    NpuProcess,
    Snapshot,
)
from npuwatch.widgets import format as fmt
from npuwatch.widgets.view_model.cells import (
    _CELL_BUILDERS,
    _EXTRAS_ON_CARDS,
    _EXTRAS_SHOWN,
    _common_reason,
    _extra,
    _power,
)
from npuwatch.widgets.view_model.rows import (
    AlertRow,
    ChipKey,
    ChipRow,
    HostRow,
    ProcessRow,
    ReasonGroup,
    ViewModel,
)
from npuwatch.widgets.view_model.workload_view import explain, workload_tag

#: An alert's severity as a level (an ``info`` alert is nothing wrong).
_ALERT_LEVELS = {Severity.CRITICAL: Level.CRITICAL, Severity.WARNING: Level.WARNING, Severity.INFO: Level.OK}


def badge(health: Health) -> str:
    """The health badge's text, glyph and word (``✔ OK``, ``✖ Alarm``): it reads without colour."""
    return f"{fmt.HEALTH_GLYPHS[health]} {health.value}"


def worst_health(healths: Sequence[Health]) -> Health:
    """The worst of ``healths`` by the judge's level of each (Critical before Alarm within it)."""
    order = list(Health)  # OK, Warning, Alarm, Critical, Unknown: DCMI's 0..3, then none
    return max(healths, key=lambda health: (health.level.rank, order.index(health)))


def reason_groups(rows: Sequence[ChipRow]) -> Tuple[ReasonGroup, ...]:
    """Every n/a reason once, with the metrics and chips it explains (in chip order)."""
    metrics: Dict[Tuple[str, ChipKey], List[str]] = {}
    for row in rows:
        for cell in row.metrics:
            if cell.reason:
                metrics.setdefault((cell.reason, row.key), []).append(cell.label)
    groups: Dict[Tuple[str, Tuple[str, ...]], List[ChipKey]] = {}
    for (reason, key), labels in metrics.items():
        groups.setdefault((reason, tuple(labels)), []).append(key)
    return tuple(ReasonGroup(reason, labels, tuple(keys)) for (reason, labels), keys in groups.items())


def _shared_reason(rows: Sequence[ChipRow]) -> Optional[str]:
    """The reason every n/a value of every chip has (a failed npu-smi), when there is one."""
    reasons = {cell.reason for row in rows for cell in row.metrics if cell.reason}
    if len(rows) < 2 or len(reasons) != 1 or any(row.reason is None for row in rows):
        return None
    return reasons.pop()


def build_view(
    snapshot: Snapshot,
    history: History,
    alerts: Sequence[Alert] = (),
    *,
    points: int = 900,
    window: str = "",
    own_memory: Optional[Mapping[ChipKey, str]] = None,
    host_cpu_series: Sequence[Optional[float]] = (),
    my_pid: Optional[int] = None,
) -> ViewModel:
    """The frame for ``snapshot``: ``points`` history values per plot, ``own_memory`` by chip key."""
    host = snapshot.host
    hostname = host.hostname if host is not None else "no host (replay)"
    mine = own_memory or {}
    rows = chip_rows(snapshot, history, points, mine)
    now_s = snapshot.taken_at.timestamp()
    return ViewModel(
        title=f"npuwatch · {hostname}",
        source=snapshot.source,
        updated=sample_time(snapshot),
        chips=rows,
        host=None if host is None else host_row(host, host_cpu_series),
        processes=tuple(process_row(p, now_s, my_pid) for p in snapshot.processes),
        alerts=tuple(alert_row(a) for a in alerts),
        warnings=snapshot.warnings,
        window=window,
        shared_reason=_shared_reason(rows),
    )


def chip_rows(
    snapshot: Snapshot,
    history: Optional[History] = None,
    points: int = 0,
    own_memory: Optional[Mapping[ChipKey, str]] = None,
    *,
    ordered: bool = True,
    explain: bool = True,
) -> Tuple[ChipRow, ...]:
    """A row per chip of ``snapshot``, each with the judge's verdict: in (NPU, chip) order, or in
    the snapshot's own order (npu-smi's) when not ``ordered``; ``explain``: with each chip's
    workload explained (``ChipRow.explanation``)."""
    judged = judge_snapshot(snapshot)
    mine = own_memory or {}
    chips = sorted(snapshot.chips, key=lambda c: c.identity.key) if ordered else snapshot.chips
    now = snapshot.taken_at if explain else None
    ratings = power_ratings(snapshot)
    return tuple(
        chip_row(
            c,
            history,
            points,
            mine.get(c.identity.key),
            judged.get(c.identity.key),
            explain_at=now,
            power=ratings.get(c.identity.key),
        )
        for c in chips
    )


def sample_time(snapshot: Snapshot) -> str:
    """``10:00:01``: when the sample was taken, in the kernel's local time."""
    return snapshot.taken_at.astimezone().strftime("%H:%M:%S")


def alert_row(alert: Alert) -> AlertRow:
    """One alert with its level."""
    return AlertRow(alert.severity.value, alert.message, alert.detail, _ALERT_LEVELS[alert.severity])


def chip_row(
    chip: ChipSample,
    history: Optional[History] = None,
    points: int = 0,
    own_memory: Optional[str] = None,
    judgement: Optional[Judgement] = None,
    *,
    explain_at: Optional[datetime] = None,
    details: bool = True,
    power: Optional[PowerRating] = None,
) -> ChipRow:
    """One chip: identity, health badge, level and the cells (``points`` history values each).

    ``judgement`` is the judge's verdict on the chip within its snapshot (``judge_snapshot``);
    without one the chip is judged alone (as if no process were listed on it).  ``explain_at``
    (the snapshot's time): with its workload explained, the owner's last sighting against it.
    Without ``details`` the extras leave out the detail lines' metrics (the dashboard's cards and
    lines, rebuilt every second, show none of them: Cube, AI CPU, ECC …).  ``power``: the rating
    the chip's power reading compares with in its snapshot (``limits.power_ratings``: a card's
    reading with the card's rating); without it, the chip's own.
    """
    ident = chip.identity
    verdict = judgement if judgement is not None else judge_chip(chip)
    metrics = tuple(
        _power(chip, history, points, power) if key == "power" else _CELL_BUILDERS[key](chip, history, points)
        for key in CELLS
    )
    shown = _EXTRAS_SHOWN if details else _EXTRAS_ON_CARDS
    extras = tuple(_extra(chip, row, history, points) for row in shown if getattr(chip, row.name) is not None)
    workload = chip.workload
    title, detail = _names(ident)
    return ChipRow(
        key=ident.key,
        identity=ident,
        title=title,
        detail=detail,
        health=chip.health.value,
        health_class=chip.health.value.lower(),
        badge=badge(chip.health),
        stale=is_stale(chip),
        metrics=metrics,
        level=verdict.level,
        reasons=verdict.texts,
        own_memory=own_memory,
        model=ident.name or "",
        reason=_common_reason(metrics),
        extras=extras,
        errors=tuple(error.text for error in chip.errors),
        workload=None if workload is None else workload_tag(workload),
        explanation=None if workload is None or explain_at is None else explain(workload, explain_at),
    )


@lru_cache(maxsize=1024)
def _names(ident: ChipIdentity) -> Tuple[str, str]:
    """A chip's title (``NPU 0 · 910B3``) and detail line, once per identity."""
    return f"NPU {ident.npu_id} · {ident.name or 'unknown model'}", _detail(ident)


def _detail(ident: ChipIdentity) -> str:
    parts = [f"chip {ident.chip_id}"] if ident.chip_id or ident.phy_id is not None else []
    if ident.phy_id is not None:
        parts.append(f"phy {ident.phy_id}")
    if ident.device_id is not None:
        parts.append(f"dev {ident.device_id}")
    if ident.logic_id is not None:
        parts.append(f"logic {ident.logic_id}")
    parts.append(ident.bus_id or "Bus-Id n/a")
    return " · ".join(parts)


def host_row(host: HostInfo, cpu_series: Sequence[Optional[float]] = ()) -> HostRow:
    """The host line: CPU, memory, load, container."""
    used, total = host.memory_used_bytes, host.memory_total_bytes
    return HostRow(
        hostname=host.hostname,
        cpu_text=fmt.percent(host.cpu_percent),
        cpu_fraction=None if host.cpu_percent is None else host.cpu_percent / 100,
        memory_text=fmt.used_total_bytes(used, total),
        memory_fraction=used / total if used is not None and total else None,
        load_text=fmt.load(host.load_average),
        in_container=host.in_container,
        cpu_series=tuple(cpu_series),
    )


def process_row(
    process: NpuProcess, now_s: float, my_pid: Optional[int] = None, user: str = ""
) -> ProcessRow:
    """One row of a process table at ``now_s``; ``my_pid`` marks this kernel's own process and
    ``user`` the watching user's."""
    host = process.host
    cpu = rss = elapsed = shown_user = no_host = None
    if host is None:
        no_host = process.host_unavailable or "no host details"
        command = process.name or "?"
    else:
        shown_user = host.user or "?"
        cpu, rss = fmt.percent(host.cpu_percent), fmt.bytes_iec(host.rss_bytes)
        elapsed = fmt.duration(None if host.start_time_s is None else now_s - host.start_time_s)
        command = host.command or process.name or "?"
    return ProcessRow(
        npu_id=process.npu_id,
        chip_id=process.chip_id,
        where=f"NPU {process.npu_id}" + (f" chip {process.chip_id}" if process.chip_id else ""),
        pid=str(process.pid),
        user=shown_user,
        npu_memory=fmt.mib(process.npu_memory_mib),
        cpu=cpu,
        rss=rss,
        elapsed=elapsed,
        command=command,
        no_host=no_host,
        mine=my_pid is not None and process.pid == my_pid,
        own=host is not None and bool(user) and host.user == user,
    )
