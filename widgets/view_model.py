"""Provides the one presentation model of the three views: a Snapshot, its History and the judge's
verdicts → plain rows of display strings, each with a level.

The dashboard (``widgets/tui``), the text views (``snapshot`` and ``--plain``, ``widgets/text.py``)
and the notebook (``widgets/notebook``) render these rows; none of them chooses a label, a scale,
a level or a process cell itself.  What a cell shows comes from the metric table
(``npuwatch.metrics_table``); every level comes from the judge (``npuwatch.judge``), a usage
bar's colour too (``memory_bar_level``, ``power_bar_level``).  Toolkit-free: Rich styles and
HTML classes are each view's small mapping from ``Level``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from npuwatch.alerts import Alert, Severity
from npuwatch.chip_facts import chip_memory
from npuwatch.chip_facts import rated_power_w as _rated_power_w
from npuwatch.history import History
from npuwatch.judge import Judgement, judge_chip, judge_snapshot, temperature_level
from npuwatch.judge.rules import is_stale, memory_bar_level, power_bar_level
from npuwatch.judge.workload_text import needs_sentence
from npuwatch.metrics_table import BY_NAME, CELLS, EXTRAS, ChipMetric, Extra, Scale, cell_metrics, metric
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    EvidenceValue,
    Health,
    HostInfo,
    LastOwner,
    Level,
    MetricStatus,
    NpuProcess,
    Snapshot,
    Throttling,
    Workload,
    WorkloadClass,
)
from npuwatch.widgets import format as fmt

ChipKey = Tuple[int, int]

#: An alert's severity as a level (an ``info`` alert is nothing wrong).
_ALERT_LEVELS = {Severity.CRITICAL: Level.CRITICAL, Severity.WARNING: Level.WARNING, Severity.INFO: Level.OK}


@lru_cache(maxsize=256)
def rated_power_w(model_name: Optional[str]) -> Optional[float]:
    """The judge's rated power of a chip model (``chip_facts.rated_power_w``), looked up once per model."""
    return _rated_power_w(model_name)


def badge(health: Health) -> str:
    """The health badge's text, glyph and word (``✔ OK``, ``✖ Alarm``): it reads without colour."""
    return f"{fmt.HEALTH_GLYPHS[health]} {health.value}"


def worst_health(healths: Sequence[Health]) -> Health:
    """The worst of ``healths`` by the judge's level of each (Critical before Alarm within it)."""
    order = list(Health)  # OK, Warning, Alarm, Critical, Unknown: DCMI's 0..3, then none
    return max(healths, key=lambda health: (health.level.rank, order.index(health)))


class MetricCell(NamedTuple):
    """One card cell of a chip: the metric the chip reports for it, its value as text, bar and level.

    An immutable named tuple rather than a frozen dataclass: the dashboard builds four per chip
    at every sample, and a frozen dataclass's ``__init__`` costs several times as much.
    """

    key: str  # the cell: util | memory | power | temperature (metrics_table.CELLS)
    metric: str  # the metric shown (its History series): aicore_percent, hbm_used_mib …
    label: str  # AI Core, NPU Util, HBM, DDR, Power, Temp
    tag: str  # the terminal's short label: AIC, NPU, HBM, DDR, MEM, PWR, TEMP
    value: Optional[float]  # in the metric's unit; None: n/a
    text: str  # 64%, 52.5/64.0 GiB, 281.4/400 W, 40 °C or n/a
    fraction: Optional[float]  # 0..1 for a bar; None when there is no scale
    level: Level  # unknown when n/a
    reason: Optional[str]  # why the value is n/a (or stale)
    ceiling: Optional[float]  # the bar's and plot's top in the metric's unit (None: the largest value)
    top_label: str  # the plot's top as text: 100%, 64 GiB, 400 W
    total: Optional[float] = None  # memory: the chip's total (MiB)
    series: Tuple[Optional[float], ...] = ()  # oldest first; None is a gap (only when asked for)
    #: ``cell`` for the four card cells; for a metric without a cell (``ChipRow.extras``) how it
    #: shows (``metrics_table.Extra``): ``beside`` a cell, a ``bar``, a ``detail`` line.
    kind: str = "cell"
    beside: str = ""  # the card cell a ``beside`` metric goes next to (util)


class WorkloadTag(NamedTuple):
    """What a chip is limited by, as a card shows it: ``compute``, ``input`` (amber), ``HBM held``.

    A named tuple, one per class and throttling cause (``workload_tag``): the dashboard builds a
    row per chip at every sample and compares these to keep a card's title line as drawn.
    """

    kind: str  # the class: compute-bound, memory-bound, … unknown (``WorkloadClass``)
    tag: str  # the card's word for it: compute, memory, AI CPU, input, waiting, idle, HBM held, ?
    #: warning for a class the judge calls a problem (something other than compute holds the job
    #: back: memory-bound, aicpu-bound, input-bound, waiting, idle-holding-hbm), unknown for
    #: unknown, else ok.
    level: Level
    throttling: str = ""  # thermal | power | "" (not throttled): always a warning

    def mark(self, room: int = 99) -> str:
        """The throttling mark in at most ``room`` columns: ``▼ throttled: thermal``, ``▼ thermal``,
        ``▼``; empty when not throttled."""
        if not self.throttling:
            return ""
        return next(
            (m for m in (f"▼ throttled: {self.throttling}", f"▼ {self.throttling}") if len(m) <= room), "▼"
        )


class EvidenceRow(NamedTuple):
    """One number that decided a chip's workload class: ``HBM bandwidth utilisation  88%``."""

    key: str  # the evidence's name in the JSON: hbm_bandwidth_percent
    label: str
    value: str  # with its unit


@dataclass(frozen=True)
class WorkloadExplanation:
    """What a chip is limited by, explained: the detail screen, the notebook and the text view."""

    kind: str  # input-bound
    tag: str  # input
    level: Level  # the tag's level (``WorkloadTag.level``)
    throttling: str  # ``throttled: thermal`` or ""
    summary: str  # AI Core 3 %, PID 48211 at 240 % host CPU
    next_step: str  # one sentence
    evidence: Tuple[EvidenceRow, ...]  # the numbers that decided it (those read), with units
    window: str  # over 10 s (10 samples)
    #: The classes this chip source cannot decide (npu-smi reads no HBM bandwidth, AI CPU or
    #: frequency), said as ``needs a source that reads HBM bandwidth, AI CPU to tell memory-bound,
    #: aicpu-bound`` (``npuwatch.judge.workload_text.needs_sentence``); "" if none.
    needs_dcmi: str = ""
    #: Memory held with no process: the process that held it last (``PID 48211 · alice ·
    #: python3 train.py · 50337 MiB · last seen 10:01:02, 2:05 before this sample``).
    owner: Optional[str] = None

    @property
    def heading(self) -> str:
        """``input-bound``, ``compute-bound · throttled: thermal``."""
        return f"{self.kind} · {self.throttling}" if self.throttling else self.kind


@dataclass(frozen=True)
class ChipRow:
    """One chip: identity, health badge, the judge's level and reasons, and its cells."""

    key: ChipKey
    identity: ChipIdentity
    title: str  # NPU 0 · 910B3
    detail: str  # chip 1 · phy 3 · 0000:C1:00.0
    health: str  # Health value: OK, Warning, …
    health_class: str  # ok | warning | alarm | critical | unknown
    badge: str  # ✔ OK
    stale: bool
    metrics: Tuple[MetricCell, ...]
    level: Level = Level.OK  # the judge's verdict on the chip
    reasons: Tuple[str, ...] = ()  # the judge's reasons for it
    own_memory: Optional[str] = None  # this kernel's torch_npu allocator figures on this chip
    model: str = ""  # 910B3, or "" when npu-smi gave no name
    reason: Optional[str] = None  # why several of its metrics are n/a, said once for the chip
    #: The metrics without a card cell that the chip reports (the driver-only ones: AI Core
    #: frequency, Vector, HBM bandwidth …), beside ones first, then bars, then detail lines; a
    #: metric the chip does not report is not here (an npu-smi chip has none).
    extras: Tuple[MetricCell, ...] = ()
    #: The chip's error codes with their meaning (``80E01801 HBM multi-bit ECC error``).
    errors: Tuple[str, ...] = ()
    #: What the chip is limited by (the feed's ``WorkloadJudge`` sets ``ChipSample.workload``):
    #: its tag and colour; None before a feed has judged it (a bare replay of an npu-smi text).
    workload: Optional[WorkloadTag] = None
    #: The same, explained (summary, evidence, next step, likely owner of held memory): built
    #: only when asked for (``chip_row(explain=True)``: the notebook, the text view).
    explanation: Optional[WorkloadExplanation] = None

    def cell(self, key: str) -> MetricCell:
        """The cell called ``key`` (util, memory, power, temperature)."""
        return next(cell for cell in self.metrics if cell.key == key)

    def beside(self, key: str) -> Optional[MetricCell]:
        """The metric shown next to the card cell ``key`` (AI Core frequency beside util), if reported."""
        return next((e for e in self.extras if e.kind == "beside" and e.beside == key), None)

    @property
    def bars(self) -> Tuple[MetricCell, ...]:
        """The extra metrics drawn as bars of their own (Vector, HBM bandwidth)."""
        return tuple(e for e in self.extras if e.kind == "bar")

    @property
    def details(self) -> Tuple[MetricCell, ...]:
        """The extra metrics shown as detail lines (``Cube 12%``, ``ECC 2-bit 0 errors``)."""
        return tuple(e for e in self.extras if e.kind == "detail")


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
    """One process holding NPU memory; the host cells are None when the host cannot see it."""

    npu_id: int
    chip_id: int
    where: str  # NPU 0 or NPU 0 chip 1
    pid: str
    user: Optional[str]
    npu_memory: str
    cpu: Optional[str]
    rss: Optional[str]
    elapsed: Optional[str]
    command: str  # the host's command line, else npu-smi's process name
    no_host: Optional[str]  # why there are no host details
    mine: bool  # this kernel's own process
    own: bool = False  # run by the user who watches (the dashboard bolds these)

    def command_text(self, said: Optional[str] = None) -> str:
        """The command, with why the host cannot see it unless that was ``said`` for every row."""
        if self.no_host is None or self.no_host == said:
            return self.command
        return f"{self.command}  ({self.no_host})"


@dataclass(frozen=True)
class AlertRow:
    """One alert, as the terminal dashboard raises it (AlertTracker)."""

    severity: str  # info | warning | critical
    message: str
    detail: str
    level: Level = Level.OK


@dataclass(frozen=True)
class ViewModel:
    """Everything one frame of a live view shows."""

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
    return tuple(
        chip_row(c, history, points, mine.get(c.identity.key), judged.get(c.identity.key), explain_at=now)
        for c in chips
    )


def cell_columns() -> Tuple[str, ...]:
    """The column header of each cell, in cell order (the metric table's ``column``): Util, Memory …"""
    return tuple(next(row.column or row.label for row in cell_metrics(key)) for key in CELLS)


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
) -> ChipRow:
    """One chip: identity, health badge, level and the cells (``points`` history values each).

    ``judgement`` is the judge's verdict on the chip within its snapshot (``judge_snapshot``);
    without one the chip is judged alone (as if no process were listed on it).  ``explain_at``
    (the snapshot's time): with its workload explained, the owner's last sighting against it.
    Without ``details`` the extras leave out the detail lines' metrics (the dashboard's cards and
    lines, rebuilt every second, show none of them: Cube, AI CPU, ECC …).
    """
    ident = chip.identity
    verdict = judgement if judgement is not None else judge_chip(chip)
    metrics = tuple(_CELL_BUILDERS[key](chip, history, points) for key in CELLS)
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


def workload_tag(workload: Workload) -> WorkloadTag:
    """The card's tag of a chip's workload (one object per class and throttling cause)."""
    return _workload_tag(workload.kind, workload.throttling)


@lru_cache(maxsize=64)
def _workload_tag(kind: WorkloadClass, throttling: Optional[Throttling]) -> WorkloadTag:
    level = Level.UNKNOWN if kind is WorkloadClass.UNKNOWN else Level.WARNING if kind.problem else Level.OK
    return WorkloadTag(kind.value, kind.tag, level, "" if throttling is None else throttling.value)


def explain(workload: Workload, now: datetime) -> WorkloadExplanation:
    """A chip's workload explained, at the snapshot time ``now``: the class, the numbers that
    decided it with their units, the next step, what the chip source cannot tell, and the likely
    owner of memory held with no process."""
    tag = workload_tag(workload)
    evidence = tuple(
        EvidenceRow(key, evidence_label(key), evidence_text(key, value))
        for key, value in workload.evidence.items()
        if value is not None
    )
    return WorkloadExplanation(
        kind=tag.kind,
        tag=tag.tag,
        level=tag.level,
        throttling=workload.throttle_tag,
        summary=workload.summary,
        next_step=workload.next_step,
        evidence=evidence,
        window=_window(workload),
        needs_dcmi=needs_sentence(workload.needs_dcmi),
        owner=None if workload.owner is None else owner_text(workload.owner, now),
    )


def _window(workload: Workload) -> str:
    """``over 10 s (10 samples)``; ``from one sample`` for a one-shot snapshot."""
    if workload.samples <= 1:
        return "from one sample"
    return f"over {workload.window_s:.0f} s ({workload.samples} samples)"


_METRIC_NAMES = frozenset(BY_NAME)
#: The evidence that is no metric of the table: its label and unit.
_EVIDENCE: Dict[str, Tuple[str, str]] = {
    "host_cpu_percent": ("Job's host CPU", "%"),
    "pid": ("Job's PID", ""),
    "process": ("Job's process", ""),
    "idle_hbm_mib": ("HBM an idle chip holds", "MiB"),
    "temperature_limit_c": ("Temperature warning", "°C"),
    "rated_power_w": ("Rated power", "W"),
}


def _evidence_row(key: str) -> Tuple[str, str]:
    if key in _EVIDENCE:
        return _EVIDENCE[key]
    if key in _METRIC_NAMES:
        row = metric(key)
        return row.title, row.unit
    return key.replace("_", " ").capitalize(), ""


def evidence_label(key: str) -> str:
    """The label of an evidence value: ``AI Core``, ``HBM bandwidth utilisation``, ``Job's host CPU``."""
    return _evidence_row(key)[0]


def evidence_text(key: str, value: EvidenceValue) -> str:
    """An evidence value in its unit: ``88%``, ``52.5 GiB``, ``1300 MHz``, ``372.4 W``, ``84 °C``."""
    if value is None:
        return fmt.NA
    if isinstance(value, str):
        return value
    unit = _evidence_row(key)[1]
    if unit == "W" and float(value).is_integer():  # a rating: 400 W, not 400.0 W
        return f"{value:.0f} W"
    if unit in ("%", "MiB", "W", "°C"):
        return fmt.with_unit(value, unit)
    number = f"{value:.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:g}"
    return f"{number} {unit}" if unit else number


def owner_text(owner: LastOwner, now: datetime) -> str:
    """``PID 48211 · alice · python3 train.py · 50337 MiB · last seen 10:01:02, 2:05 before this
    sample``: who held a chip's memory last, from what npuwatch saw."""
    parts = [f"PID {owner.pid}"]
    if owner.user:
        parts.append(owner.user)
    command = owner.command or owner.name
    if command:
        parts.append(command)
    if owner.npu_memory_mib is not None:
        parts.append(fmt.mib(owner.npu_memory_mib))
    if owner.last_seen is not None:
        ago = (now - owner.last_seen).total_seconds()
        seen = f"last seen {owner.last_seen.astimezone().strftime('%H:%M:%S')}"
        parts.append(f"{seen}, {fmt.duration(ago)} before this sample" if ago >= 1 else seen)
    return " · ".join(parts)


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


def _common_reason(cells: Sequence[MetricCell]) -> Optional[str]:
    """The reason at least two of a chip's metrics share: said once for the chip, not per metric."""
    reasons = [cell.reason for cell in cells if cell.reason]
    if len(reasons) < 2:  # most chips: every value read
        return None
    counts = Counter(reasons)
    reason, count = counts.most_common(1)[0]
    return reason if count >= 2 else None


def _reason(chip: ChipSample, *metrics: str) -> Optional[str]:
    """Why the first of ``metrics`` with a note is absent or stale, in words."""
    for name in metrics:
        note = chip.notes.get(name)
        if note is not None and (getattr(chip, name) is None or note.status is MetricStatus.STALE):
            return note.reason if note.status is not MetricStatus.STALE else f"stale: {note.reason}"
    return None


def _series(history: Optional[History], key: ChipKey, name: str, points: int) -> Tuple[Optional[float], ...]:
    if history is None or points <= 0:
        return ()
    return tuple(history.values(key, name, last=points))


def _cell(
    chip: ChipSample,
    history: Optional[History],
    points: int,
    key: str,
    name: str,
    *,
    text: str,
    fraction: Optional[float],
    level: Level,
    ceiling: Optional[float],
    top_label: str,
    reason: Optional[str],
    label: Optional[str] = None,
    tag: Optional[str] = None,
    total: Optional[float] = None,
) -> MetricCell:
    row = metric(name)
    return MetricCell(
        key=key,
        metric=name,
        label=label or row.label,
        tag=tag or row.tag,
        value=chip.metric(name),
        text=text,
        fraction=fraction,
        level=Level.UNKNOWN if text == fmt.NA else level,
        reason=reason,
        ceiling=ceiling,
        top_label=top_label,
        total=total,
        series=_series(history, chip.identity.key, name, points),
    )


def _utilisation(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    """AI Core, or what the layout prints instead (the 950's NPU Util, capture 037)."""
    choices = cell_metrics("util")
    row = next((m for m in choices if getattr(chip, m.name) is not None), choices[0])
    value = chip.metric(row.name)
    return _cell(
        chip,
        history,
        points,
        "util",
        row.name,
        text=fmt.percent(value),
        fraction=None if value is None else value / (row.ceiling or 100.0),
        level=Level.OK,
        ceiling=row.ceiling,
        top_label="100%",
        reason=_reason(chip, row.name),
    )


def _memory(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    """HBM, or DDR on the 310 family (capture 044); the kind the model has when npu-smi gave neither."""
    memory = chip_memory(chip)
    used, total = memory.used_mib, memory.total_mib
    total_metric = metric(memory.used_metric).total or memory.used_metric
    text = fmt.used_total_gib(used, total)
    share = used / total if used is not None and total else None
    return _cell(
        chip,
        history,
        points,
        "memory",
        memory.used_metric,
        label=None if memory.kind else "Memory",
        tag=None if memory.kind else "MEM",
        text=text,
        fraction=share,
        level=memory_bar_level(share),
        ceiling=float(total) if total else None,
        top_label=f"{fmt.gib(total, 0)} GiB" if total else "max",
        reason=_reason(chip, memory.used_metric, total_metric)
        or (None if text != fmt.NA else "not reported"),
        total=total,
    )


def _power(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    rated = rated_power_w(chip.identity.name)
    value = chip.power_w
    share = value / rated if rated and value is not None else None
    return _cell(
        chip,
        history,
        points,
        "power",
        "power_w",
        text=fmt.watts(value, rated),
        fraction=share,
        level=power_bar_level(share),
        ceiling=rated,
        top_label=f"{rated:.0f} W" if rated else "max",
        reason=_reason(chip, "power_w"),
    )


def _temperature(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    row = metric("temperature_c")
    value = chip.temperature_c
    ceiling = row.ceiling or 100.0
    return _cell(
        chip,
        history,
        points,
        "temperature",
        "temperature_c",
        text=fmt.celsius(value),
        fraction=None if value is None else min(1.0, value / ceiling),
        level=temperature_level(chip),  # the judge's per-model limits
        ceiling=ceiling,
        top_label=f"{ceiling:.0f} °C",
        reason=_reason(chip, "temperature_c"),
    )


def _other(key: str) -> CellBuilder:
    """The cell of a metric that has no cell of its own above: its value in its unit, a bar on a
    percentage or fixed scale, the first metric of the cell the chip reports."""

    def build(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
        choices = cell_metrics(key)
        row = next((m for m in choices if getattr(chip, m.name) is not None), choices[0])
        value = chip.metric(row.name)
        scaled = row.scale in (Scale.PERCENT, Scale.FIXED) and row.ceiling
        return _cell(
            chip,
            history,
            points,
            key,
            row.name,
            text=fmt.with_unit(value, row.unit),
            fraction=value / row.ceiling if scaled and row.ceiling and value is not None else None,
            level=Level.OK,
            ceiling=row.ceiling,
            top_label=fmt.with_unit(row.ceiling, row.unit) if row.ceiling else "max",
            reason=_reason(chip, row.name),
        )

    return build


#: The extras in the order every view shows them: beside a cell, then bars, then detail lines.
_EXTRA_ORDER = (Extra.BESIDE, Extra.BAR, Extra.DETAIL)
_EXTRAS_SHOWN: Tuple[ChipMetric, ...] = tuple(
    row for kind in _EXTRA_ORDER for row in EXTRAS if row.extra is kind
)
#: The extras a dashboard card or line can show: beside a cell, and bars.
_EXTRAS_ON_CARDS: Tuple[ChipMetric, ...] = tuple(
    row for row in _EXTRAS_SHOWN if row.extra is not Extra.DETAIL
)


def _extra(chip: ChipSample, row: ChipMetric, history: Optional[History], points: int) -> MetricCell:
    """A metric without a card cell that the chip reports: ``1300/1800 MHz`` against its rated
    value, ``45%`` with a bar on a percentage scale, else its value in its unit.  Its level is ok:
    what a value means (throttling, ECC) is the judge's to say.

    Without a history series the cell is a function of the value, the rated value and the
    reason, and is kept per those (the dashboard builds three a chip every second, mostly with
    values seen before)."""
    value = chip.metric(row.name)
    rated = chip.metric(row.rated) if row.rated else None
    reason = _reason(chip, row.name)
    if row.graphed and history is not None and points > 0:
        return _extra_cell(row, value, rated, reason, _series(history, chip.identity.key, row.name, points))
    key = (row.name, value, rated, reason)
    cell = _EXTRA_CELLS.get(key)
    if cell is None:
        if len(_EXTRA_CELLS) >= _EXTRA_CELLS_KEPT:
            _EXTRA_CELLS.clear()
        cell = _EXTRA_CELLS[key] = _extra_cell(row, value, rated, reason, ())
    return cell


#: The extra cells built without a series, by (metric, value, rated value, reason).
_EXTRA_CELLS: Dict[Tuple[str, Optional[float], Optional[float], Optional[str]], MetricCell] = {}
_EXTRA_CELLS_KEPT = 4096


def _extra_cell(
    row: ChipMetric,
    value: Optional[float],
    rated: Optional[float],
    reason: Optional[str],
    series: Tuple[Optional[float], ...],
) -> MetricCell:
    ceiling = rated or (row.ceiling if row.scale in (Scale.PERCENT, Scale.FIXED) else None)
    text = f"{amount(value, '')}/{amount(rated, row.unit)}" if rated else amount(value, row.unit)
    return MetricCell(
        key=row.name,
        metric=row.name,
        label=row.label,
        tag=row.tag,
        value=value,
        text=text,
        fraction=None if value is None or not ceiling else min(1.0, max(0.0, value / ceiling)),
        level=Level.OK,
        reason=reason,
        ceiling=ceiling,
        top_label=amount(ceiling, row.unit) if ceiling else "max",
        series=series,
        kind=row.extra.value if row.extra is not None else Extra.DETAIL.value,
        beside=row.beside or "",
    )


def amount(value: Optional[float], unit: str) -> str:
    """A value in its unit: ``45%``, ``41 °C``, ``1800 MHz``, ``0.85 V``, ``3 pages`` (a whole
    number stays whole however large: an ECC count of 1234567 is not ``1.23457e+06``)."""
    if value is None:
        return fmt.NA
    if unit == "%":
        return fmt.percent(value)
    if unit == "°C":
        return fmt.celsius(value)
    number = str(int(value)) if float(value).is_integer() else f"{value:g}"
    if number == "1" and unit in _COUNTED:
        unit = unit[:-1]  # 1 page, 1 error
    return f"{number} {unit}" if unit else number


_COUNTED = frozenset({"errors", "pages"})


CellBuilder = Callable[[ChipSample, Optional[History], int], MetricCell]
_CELL_BUILDERS: Dict[str, CellBuilder] = {
    "util": _utilisation,
    "memory": _memory,
    "power": _power,
    "temperature": _temperature,
}
_CELL_BUILDERS.update({key: _other(key) for key in CELLS if key not in _CELL_BUILDERS})


def graph_top(chip: ChipSample, name: str, values: Sequence[Optional[float]]) -> float:
    """The top of a large graph of ``name``: the metric table's scale, else 1.1 × the data's top.

    A percentage tops at 100; memory at the chip's total; power at the rated power unless the
    data goes past it; a temperature (no true maximum) zooms to the data.
    """
    row = metric(name)
    highest = max((v for v in values if v is not None), default=0.0)
    if row.scale is Scale.PERCENT and row.ceiling:
        return row.ceiling
    if row.scale is Scale.TOTAL and row.total is not None:
        total = chip.metric(row.total)
        if total:
            return total
    if row.scale is Scale.RATED_POWER:
        rated = rated_power_w(chip.identity.name)
        if rated and highest <= rated:
            return rated
    if row.rated is not None:  # AI Core frequency: its rated frequency, unless the data goes past it
        rated_value = chip.metric(row.rated)
        if rated_value and highest <= rated_value:
            return rated_value
    return max((v for v in values if v is not None), default=1.0) * 1.1 or 1.0


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
