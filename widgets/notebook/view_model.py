"""Provides build_view(): Snapshot, History and alerts → plain rows of display strings for the notebook."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from npuwatch.alerts import Alert, default_temperature_limit_c
from npuwatch.chip_facts import rated_power_w
from npuwatch.history import History
from npuwatch.model import ChipSample, Health, HostInfo, MetricStatus, NpuProcess, Snapshot
from npuwatch.widgets import format as fmt

ChipKey = Tuple[int, int]

#: The same glyph + word badges as the terminal dashboard, so a badge reads without colour.
BADGES = {
    Health.OK: "✔ OK",
    Health.WARNING: "▲ Warning",
    Health.ALARM: "✖ Alarm",
    Health.CRITICAL: "‼ Critical",
    Health.UNKNOWN: "? Unknown",
}
#: Degrees below a model's throttle limit at which its temperature turns amber.
TEMPERATURE_WARN_BELOW_C = 10.0
#: Above this many chips the live view is a compact table by default: 16 cards (A3) are 2,000 px.
COMPACT_ABOVE_CHIPS = 8
#: How the live view lays out its chips: ``auto`` picks ``table`` above COMPACT_ABOVE_CHIPS.
LAYOUTS = ("auto", "cards", "table")


@dataclass(frozen=True)
class MetricCell:
    """One chip metric as shown: label, value text, bar share, level, why ``n/a``, its recent values."""

    key: str  # util | memory | power | temperature
    label: str  # AI Core, NPU Util, HBM, DDR, Power, Temp
    text: str  # 64%, 52.5/64.0 GiB, 281.4/400 W, 40 °C or n/a
    fraction: Optional[float]  # 0..1 for a bar; None when there is no scale
    level: str  # normal | warn | critical | na
    reason: Optional[str]  # why the value is n/a (or stale)
    series: Tuple[Optional[float], ...]  # oldest first, in the metric's own unit; None is a gap
    ceiling: Optional[float]  # the plot's top in the series' unit (None: the largest value)
    top_label: str  # the plot's top as text: 100%, 64 GiB, 400 W


@dataclass(frozen=True)
class ChipRow:
    """One chip card."""

    key: ChipKey
    title: str  # NPU 0 · 910B3
    detail: str  # chip 1 · phy 3 · 0000:C1:00.0
    health: str  # Health value: OK, Warning, …
    health_class: str  # ok | warning | alarm | critical | unknown
    badge: str  # ✔ OK
    stale: bool
    metrics: Tuple[MetricCell, ...]
    own_memory: Optional[str] = None  # this kernel's torch_npu allocator figures on this chip
    model: str = ""  # 910B3, or "" when npu-smi gave no name
    reason: Optional[str] = None  # why several of its metrics are n/a, said once for the chip


@dataclass(frozen=True)
class HostRow:
    """The machine the kernel runs on."""

    hostname: str
    cpu_text: str
    cpu_fraction: Optional[float]
    memory_text: str
    memory_fraction: Optional[float]
    load_text: str
    in_container: bool
    cpu_series: Tuple[Optional[float], ...] = ()


@dataclass(frozen=True)
class ProcessRow:
    """One process holding NPU memory."""

    where: str  # NPU 0 or NPU 0 chip 1
    pid: str
    user: str
    npu_memory: str
    cpu: str
    rss: str
    command: str
    mine: bool  # this kernel's own process


@dataclass(frozen=True)
class AlertRow:
    """One alert, as the terminal dashboard raises it (AlertTracker)."""

    severity: str  # info | warning | critical
    message: str
    detail: str


@dataclass(frozen=True)
class ViewModel:
    """Everything one frame of the live view shows."""

    title: str
    source: str
    updated: str  # the sample time HH:MM:SS (local time of the kernel)
    chips: Tuple[ChipRow, ...]
    host: Optional[HostRow]
    processes: Tuple[ProcessRow, ...]
    alerts: Tuple[AlertRow, ...]
    warnings: Tuple[str, ...]
    window: str  # what the plots span: last 15 min
    shared_reason: Optional[str] = None  # why every chip's values are n/a (npu-smi failed), said once


@dataclass(frozen=True)
class ReasonGroup:
    """One reason values are n/a, with the metrics and chips it explains."""

    reason: str
    metrics: Tuple[str, ...]  # labels: Power, Temp
    chips: Tuple[ChipKey, ...]

    def text(self) -> str:
        """``Power on NPU 1 chip 0, NPU 1 chip 1: npu-smi prints 'NA'…``."""
        where = ", ".join(chip_name(key) for key in self.chips)
        return f"{', '.join(self.metrics)} on {where}: {self.reason}"


def chip_name(key: ChipKey) -> str:
    """``NPU 2 chip 1``: a chip keyed by NPU and chip (Duo and A3 cards hold two chips per NPU)."""
    return f"NPU {key[0]} chip {key[1]}"


def resolve_layout(choice: str, chips: int) -> str:
    """``cards`` or ``table`` for a layout ``choice`` and a number of chips."""
    if choice not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {choice!r}")
    if choice != "auto":
        return choice
    return "table" if chips > COMPACT_ABOVE_CHIPS else "cards"


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
    rows = tuple(
        chip_row(c, history, points, mine.get(c.identity.key))
        for c in sorted(snapshot.chips, key=lambda c: c.identity.key)
    )
    return ViewModel(
        title=f"npuwatch · {hostname}",
        source=snapshot.source,
        updated=sample_time(snapshot),
        chips=rows,
        host=None if host is None else host_row(host, host_cpu_series),
        processes=tuple(process_row(p, my_pid) for p in snapshot.processes),
        alerts=tuple(AlertRow(a.severity.value, a.message, a.detail) for a in alerts),
        warnings=snapshot.warnings,
        window=window,
        shared_reason=_shared_reason(rows),
    )


def sample_time(snapshot: Snapshot) -> str:
    """``10:00:01``: when the sample was taken, in the kernel's local time."""
    return snapshot.taken_at.astimezone().strftime("%H:%M:%S")


def chip_row(chip: ChipSample, history: History, points: int, own_memory: Optional[str] = None) -> ChipRow:
    """One chip card: identity, health badge, utilisation, memory, power and temperature."""
    ident = chip.identity
    key = ident.key
    parts = [f"chip {ident.chip_id}"] if ident.chip_id or ident.phy_id is not None else []
    if ident.phy_id is not None:
        parts.append(f"phy {ident.phy_id}")
    if ident.device_id is not None:
        parts.append(f"dev {ident.device_id}")
    if ident.logic_id is not None:
        parts.append(f"logic {ident.logic_id}")
    parts.append(ident.bus_id or "Bus-Id n/a")
    metrics = (
        _utilisation(chip, history, points),
        _memory(chip, history, points),
        _power(chip, history, points),
        _temperature(chip, history, points),
    )
    return ChipRow(
        key=key,
        title=f"NPU {ident.npu_id} · {ident.name or 'unknown model'}",
        detail=" · ".join(parts),
        health=chip.health.value,
        health_class=chip.health.value.lower(),
        badge=BADGES[chip.health],
        stale=any(note.status is MetricStatus.STALE for note in chip.notes.values()),
        metrics=metrics,
        own_memory=own_memory,
        model=ident.name or "",
        reason=_common_reason(metrics),
    )


def _common_reason(cells: Sequence[MetricCell]) -> Optional[str]:
    """The reason at least two of a chip's metrics share: said once for the chip, not per metric."""
    counts = Counter(cell.reason for cell in cells if cell.reason)
    if not counts:
        return None
    reason, count = counts.most_common(1)[0]
    return reason if count >= 2 else None


def _reason(chip: ChipSample, *metrics: str) -> Optional[str]:
    """Why the first of ``metrics`` with a note is absent or stale, in words."""
    for metric in metrics:
        note = chip.notes.get(metric)
        if note is not None and (getattr(chip, metric) is None or note.status is MetricStatus.STALE):
            return note.reason if note.status is not MetricStatus.STALE else f"stale: {note.reason}"
    return None


def _series(history: History, key: ChipKey, metric: str, points: int) -> Tuple[Optional[float], ...]:
    return tuple(history.values(key, metric, last=points))


def _level_na(text: str, level: str) -> str:
    return "na" if text == fmt.NA else level


def _utilisation(chip: ChipSample, history: History, points: int) -> MetricCell:
    # The 950 prints NPU Util instead of AI Core (capture 037); show whichever the layout has.
    value: Optional[int]
    if chip.aicore_percent is None and chip.npu_util_percent is not None:
        label, value, metric = "NPU Util", chip.npu_util_percent, "npu_util_percent"
    else:
        label, value, metric = "AI Core", chip.aicore_percent, "aicore_percent"
    text = fmt.percent(value)
    return MetricCell(
        key="util",
        label=label,
        text=text,
        fraction=None if value is None else value / 100,
        level=_level_na(text, "normal"),
        reason=_reason(chip, metric),
        series=_series(history, chip.identity.key, metric, points),
        ceiling=100.0,
        top_label="100%",
    )


def _memory(chip: ChipSample, history: History, points: int) -> MetricCell:
    # 310P/310B have no HBM: npu-smi prints their DDR in the Memory-Usage column (capture 044).
    used: Optional[int]
    total: Optional[int]
    metrics: Tuple[str, ...]
    if chip.hbm_total_mib:
        label, used, total, metrics = "HBM", chip.hbm_used_mib, chip.hbm_total_mib, ("hbm_used_mib",)
    elif chip.memory_total_mib:
        label, used, total = "DDR", chip.memory_used_mib, chip.memory_total_mib
        metrics = ("memory_used_mib",)
    else:
        label, used, total = "HBM", chip.hbm_used_mib, chip.hbm_total_mib
        metrics = ("hbm_used_mib", "hbm_total_mib", "memory_used_mib")
    text = fmt.used_total_gib(used, total)
    share = used / total if used is not None and total else None
    level = "normal" if share is None or share < 0.8 else ("warn" if share < 0.95 else "critical")
    return MetricCell(
        key="memory",
        label=label,
        text=text,
        fraction=share,
        level=_level_na(text, level),
        reason=_reason(chip, *metrics) or (None if text != fmt.NA else "not reported"),
        series=_series(history, chip.identity.key, metrics[0], points),
        ceiling=float(total) if total else None,
        top_label=f"{fmt.gib(total, 0)} GiB" if total else "max",
    )


def _power(chip: ChipSample, history: History, points: int) -> MetricCell:
    rated = rated_power_w(chip.identity.name)
    value = chip.power_w
    text = fmt.watts(value, rated)
    share = value / rated if rated and value is not None else None
    level = "normal" if share is None or share < 0.9 else "warn"
    return MetricCell(
        key="power",
        label="Power",
        text=text,
        fraction=share,
        level=_level_na(text, level),
        reason=_reason(chip, "power_w"),
        series=_series(history, chip.identity.key, "power_w", points),
        ceiling=rated,
        top_label=f"{rated:.0f} W" if rated else "max",
    )


def _temperature(chip: ChipSample, history: History, points: int) -> MetricCell:
    limit = default_temperature_limit_c(chip.identity.name)
    value = chip.temperature_c
    text = fmt.celsius(value)
    if value is None or value < limit - TEMPERATURE_WARN_BELOW_C:
        level = "normal"
    else:
        level = "warn" if value < limit else "critical"
    return MetricCell(
        key="temperature",
        label="Temp",
        text=text,
        fraction=None if value is None else min(1.0, value / 100),
        level=_level_na(text, level),
        reason=_reason(chip, "temperature_c"),
        series=_series(history, chip.identity.key, "temperature_c", points),
        ceiling=100.0,
        top_label="100 °C",
    )


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


def process_row(process: NpuProcess, my_pid: Optional[int] = None) -> ProcessRow:
    """One row of the process table; ``my_pid`` marks this kernel's own process."""
    host = process.host
    where = f"NPU {process.npu_id}" + (f" chip {process.chip_id}" if process.chip_id else "")
    if host is None:
        reason = process.host_unavailable or "no host details"
        user, cpu, rss, command = "-", "-", "-", f"{process.name or '?'} ({reason})"
    else:
        user = host.user or "?"
        cpu, rss = fmt.percent(host.cpu_percent), fmt.bytes_iec(host.rss_bytes)
        command = host.command or process.name or "?"
    return ProcessRow(
        where=where,
        pid=str(process.pid),
        user=user,
        npu_memory=fmt.mib(process.npu_memory_mib),
        cpu=cpu,
        rss=rss,
        command=command,
        mine=my_pid is not None and process.pid == my_pid,
    )
