"""Provides the presentation model's records: the rows and cells the three views render (a chip,
its cells and workload, the host, a process, an alert, one frame)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional, Tuple

from npuwatch.model import (
    ChipIdentity,
    Level,
)

ChipKey = Tuple[int, int]


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
