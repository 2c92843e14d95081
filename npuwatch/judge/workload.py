"""Provides the workload judge: what each chip is limited by, over a window, with hysteresis.

Each sample is read first (``observe``) with the chip's signals latched between an enter and an
exit threshold (a signal hovering at a threshold does not flap) and the history that says whether
the job was busy lately: compute-bound, memory-bound, AI CPU-bound, input-bound (a drop inside an
active job while its host side — the process and its children, or the whole host — is busy),
waiting, allocated-idle (a process holds the chip, no work for a while), undetermined (the signal
that would tell is not read here: AI CPU, or the host side from another PID namespace), idle,
in use by a process not visible here, or holding memory with no process; and whether AI Core runs
below its rated clock while busy, and why where the readings show it (heat, a power cap — the
card's rating when the reading is the card's — or not reported).  The ``WorkloadJudge`` that
every feed runs (the live sampler and a replay alike, by the snapshots' own times) then shows a
class only once it has held for the settle time (in samples and seconds), a throttle once it has
been read often enough in its window and until it has not been for ``throttle_clear_s``, averages
the evidence over the window, and remembers which process last held each chip's memory, so memory
held after a job is gone names its likely owner.  What the source reads is the snapshot's
``described`` (``npuwatch.source_info``), never its backend's name.  The thresholds are rows of
``Thresholds`` (``npuwatch.judge.limits``); nothing else classifies a workload.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from npuwatch.chip_families import family_of
from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds
from npuwatch.judge.rules import held_memory, is_stale, lost_reason
from npuwatch.model import (
    ChipSample,
    EvidenceValue,
    LastOwner,
    NpuProcess,
    Snapshot,
    Throttling,
    Workload,
    WorkloadClass,
)
from npuwatch.source_info import SCOPE_CARD, SourceInfo

ChipKey = Tuple[int, int]

#: The chip metrics a class is decided from, averaged over the window as its evidence.
INPUTS: Tuple[str, ...] = (
    "aicore_percent",
    "hbm_bandwidth_percent",
    "aicpu_percent",
    "aicore_freq_mhz",
    "aicore_rated_freq_mhz",
    "temperature_c",
    "power_w",
    "hbm_used_mib",
)
#: The classes each metric decides: a chip source that does not read it cannot decide them.
_DECIDES: Tuple[Tuple[str, str], ...] = (
    ("hbm_bandwidth_percent", WorkloadClass.MEMORY_BOUND.value),
    ("aicpu_percent", WorkloadClass.AICPU_BOUND.value),
    ("aicore_freq_mhz", "throttling"),
)
#: How sentences name a signal a class needed ("needs a source that reads AI CPU").
READING_TITLES = {
    "hbm_bandwidth_percent": "HBM bandwidth",
    "aicpu_percent": "AI CPU",
    "aicore_freq_mhz": "the AI Core clock",
    "host_cpu_percent": "the host side's CPU",
}
HOST_HIDDEN = "host CPU not visible here: run with --pid=host"
AICPU_UNREAD = "needs a source that reads AI CPU"

_NEXT_STEPS = {
    WorkloadClass.COMPUTE_BOUND: (
        "AI Core is the limit, as it should be: to go faster, profile the operators "
        "(`msprof --aic-metrics=PipeUtilization`) and look at mixed precision or fused operators."
    ),
    WorkloadClass.MEMORY_BOUND: (
        "HBM bandwidth is the limit: profile memory traffic (`msprof --aic-metrics=Memory`), fuse "
        "element-wise operators, avoid format conversions (TransData) and recomputation that re-read HBM."
    ),
    WorkloadClass.AICPU_BOUND: (
        "operators are falling back to the AI CPU: profile with `msprof --aicpu=on` and check these "
        "operators' support (and dtypes) on this SoC; replace or cast the ones that run on the AI CPU."
    ),
    WorkloadClass.INPUT_BOUND: (
        "the host does not feed the chip fast enough: add data-loader workers, pin memory and "
        "prefetch, or move preprocessing onto the NPU."
    ),
    WorkloadClass.WAITING: (
        "AI Core waits between launches: take a timeline profile (`msprof --task-time=on`) to find "
        "launch or synchronisation gaps (many small operators, host syncs such as .item(), stream "
        "waits, a slow collective)."
    ),
    WorkloadClass.IDLE: "nothing to do: no process uses the chip.",
    WorkloadClass.IDLE_HOLDING_HBM: (
        "memory is held with no process: find the holder with `fuser -v /dev/davinci*` and end it "
        "(a zombie or a process in another container); the memory is freed when it exits."
    ),
    WorkloadClass.UNKNOWN: "see the chip's health and the chip source: no current AI Core reading.",
    WorkloadClass.ALLOCATED_IDLE: (
        "nothing to do here: a process holds the chip but sends it no work (an idle server, a "
        "parked notebook); end it if its memory is needed elsewhere."
    ),
    WorkloadClass.IN_USE_ELSEWHERE: (
        "a process not listed here uses the chip (another container, or a driver that lists no "
        "processes): nothing to free; `npu-smi info` on the host shows it."
    ),
    WorkloadClass.UNDETERMINED: (
        "the signal that would say why AI Core is low is not read here: read the chips with a "
        "source that reads it, or run npuwatch where it sees the job's processes (--pid=host)."
    ),
}
#: What decides each class, as the README says it (the rules are ``observe``'s).
DECIDED_BY = {
    WorkloadClass.COMPUTE_BOUND: "AI Core at or above `aicore_low_percent` (and not memory-bound)",
    WorkloadClass.MEMORY_BOUND: (
        "HBM bandwidth at or above `hbm_bandwidth_high_percent` while AI Core is below "
        "`aicore_busy_percent` (needs a source that reads HBM bandwidth)"
    ),
    WorkloadClass.AICPU_BOUND: (
        "AI Core low, AI CPU at or above `aicpu_busy_percent` (needs a source that reads AI CPU)"
    ),
    WorkloadClass.INPUT_BOUND: (
        "AI Core low while the job's host side loads: its process and children at or above "
        "`host_loader_percent` or its children at `host_busy_percent`; or a drop (AI Core busy within "
        "`active_window_s`) with the host at `host_saturated_percent` (where children were not read) "
        "or the process at `host_busy_percent`, AI Core still working and AI CPU read and not busy"
    ),
    WorkloadClass.WAITING: (
        "AI Core low in an active job, the host side not loading (a process spinning one core while "
        "AI Core stopped is a sync or a collective) and AI CPU not busy (or not read: said)"
    ),
    WorkloadClass.IDLE: "no process on the chip, AI Core not busy",
    WorkloadClass.IDLE_HOLDING_HBM: (
        "no process in the source's process table, AI Core not busy, memory more than "
        "`hbm_held_min_mib` above the family's idle memory, for `held_settle_s` "
        "(the `hbm-held` rule of the judge table)"
    ),
    WorkloadClass.UNKNOWN: (
        "no current AI Core reading (the chip is lost, its values are stale, or not reported)"
    ),
    WorkloadClass.ALLOCATED_IDLE: (
        "a process on the chip, AI Core below `aicore_idle_percent` and not busy for "
        "`active_window_s`, the host side not loading"
    ),
    WorkloadClass.IN_USE_ELSEWHERE: "AI Core busy with no process listed on the chip",
    WorkloadClass.UNDETERMINED: (
        "AI Core low in a job and the deciding signal not read: the job's host CPU from another PID "
        "namespace, or AI CPU when the host side is busy (input- or AI CPU-bound)"
    ),
}


def class_table() -> str:
    """The README's table of the classes: what decides each and the next step (Markdown)."""
    lines = ["| class | card tag | decided by | next step |", "|---|---|---|---|"]
    for kind in WorkloadClass:
        step = _NEXT_STEPS[kind]
        lines.append(f"| `{kind.value}` | {kind.tag} | {DECIDED_BY[kind]} | {step[:1].upper()}{step[1:]} |")
    return "\n".join(lines)


_THROTTLE_STEPS = {
    Throttling.THERMAL: (
        "AI Core is throttled because the chip is hot: check this slot's fans and airflow and the "
        "server's inlet temperature. "
    ),
    Throttling.POWER: (
        "AI Core is throttled at its power cap: check the card's power limit and the server's power "
        "budget and supplies. "
    ),
    Throttling.UNREPORTED: (
        "AI Core runs below its rated clock while busy and the readings show neither heat nor a power "
        "cap: check the power limit set on the card or the rack (`npu-smi info -t power -i N`) and "
        "the BMC's throttle events. "
    ),
}


@dataclass(frozen=True)
class Context:
    """What a chip is judged with besides its own sample: what the source read, where npuwatch
    runs, the host's CPU and the power rating the chip's reading compares with."""

    process_table: bool = True
    host_visible: bool = True  # npuwatch sees the host's PIDs (not a container's own namespace)
    host_cpu_percent: Optional[float] = None  # the whole host's, % of all cores
    reads_aicpu: bool = True
    rated_power_w: Optional[float] = None  # the chip's or, for a card-scope reading, the card's
    power_scope: str = "chip"


@dataclass
class Signals:
    """A chip's signals latched between their enter and exit thresholds, and its recent history.
    ``observe`` updates it; a fresh one reads a single sample."""

    aicore_busy: Optional[bool] = None
    no_work: Optional[bool] = None
    bandwidth_high: Optional[bool] = None
    aicpu_busy: Optional[bool] = None
    host_busy: Optional[bool] = None
    host_saturated: Optional[bool] = None
    below_rated: Optional[bool] = None
    last_busy_s: Optional[float] = None  # the last sample with AI Core busy
    first_s: Optional[float] = None


def _high(previous: Optional[bool], value: Optional[float], enter: float, leave: float) -> Optional[bool]:
    """A signal that is on at or above ``enter`` and stays on down to ``leave``."""
    if value is None:
        return None
    return value >= leave if previous else value >= enter


def _low(previous: Optional[bool], value: Optional[float], enter: float, leave: float) -> Optional[bool]:
    """A signal that is on below ``enter`` and stays on up to ``leave``."""
    if value is None:
        return None
    return value < leave if previous else value < enter


@dataclass(frozen=True)
class Observation:
    """One sample's reading of a chip: its class and throttling cause, and the inputs that decided."""

    time_s: float
    kind: WorkloadClass
    throttling: Optional[Throttling]
    inputs: Mapping[str, Optional[float]]
    busiest: Optional[NpuProcess] = None  # the chip's busiest process on the host
    idle_mib: Optional[int] = None  # the idle allowance
    hedge: str = ""  # what the class cannot tell, and what would (undetermined, a hedged waiting)
    needs: Tuple[str, ...] = ()  # the signals it needed and could not read


def observe(
    chip: ChipSample,
    processes: Sequence[NpuProcess],
    time_s: float,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    context: Optional[Context] = None,
    signals: Optional[Signals] = None,
) -> Observation:
    """How ``chip`` reads in this sample (``processes`` are the ones listed on it), with the
    chip's ``signals`` (updated; none: this sample alone) and the snapshot's ``context``."""
    context = context or Context(rated_power_w=family_of(chip.identity.name).rated_power_w)
    signals = signals if signals is not None else Signals()
    stale = is_stale(chip)  # a stale chip is unknown: its inputs are not this sample's
    inputs: Dict[str, Optional[float]] = (
        dict.fromkeys(INPUTS) if stale else {n: getattr(chip, n) for n in INPUTS}
    )
    visible = [p for p in processes if p.host is not None]
    busiest = max(visible, key=_tree_cpu) if visible else None
    inputs["host_cpu_percent"] = None if busiest is None else _tree_cpu(busiest)
    aicore = inputs["aicore_percent"]
    if stale or aicore is None or lost_reason(chip) is not None:
        return Observation(time_s, WorkloadClass.UNKNOWN, None, inputs)
    _latch(signals, inputs, busiest, context, thresholds, time_s)
    throttling = _throttling(chip, inputs, signals, context, thresholds)
    if signals.aicore_busy:
        signals.last_busy_s = time_s
    if not processes:
        if signals.aicore_busy:
            return Observation(time_s, WorkloadClass.IN_USE_ELSEWHERE, throttling, inputs)
        held = held_memory(chip, processes, thresholds, context.process_table)
        if held is not None:
            kind = WorkloadClass.IDLE_HOLDING_HBM
            return Observation(time_s, kind, throttling, inputs, None, held.idle_mib)
        return Observation(time_s, WorkloadClass.IDLE, throttling, inputs)
    kind, hedge, needs = _busy_class(inputs, signals, busiest, context, thresholds, time_s)
    return Observation(time_s, kind, throttling, inputs, busiest, None, hedge, needs)


def _tree_cpu(process: NpuProcess) -> float:
    host = process.host
    return (host.tree_cpu_percent if host is not None else None) or 0.0


def _latch(
    signals: Signals,
    inputs: Mapping[str, Optional[float]],
    busiest: Optional[NpuProcess],
    context: Context,
    limits: Thresholds,
    time_s: float,
) -> None:
    """Move each latched signal by this sample's value."""
    s = signals
    if s.first_s is None:
        s.first_s = time_s
    aicore = inputs["aicore_percent"]
    s.aicore_busy = _high(s.aicore_busy, aicore, limits.aicore_low_percent, limits.aicore_low_exit_percent)
    s.no_work = _low(s.no_work, aicore, limits.aicore_idle_percent, limits.aicore_idle_exit_percent)
    s.bandwidth_high = _high(
        s.bandwidth_high,
        inputs["hbm_bandwidth_percent"],
        limits.hbm_bandwidth_high_percent,
        limits.hbm_bandwidth_exit_percent,
    )
    s.aicpu_busy = _high(
        s.aicpu_busy, inputs["aicpu_percent"], limits.aicpu_busy_percent, limits.aicpu_busy_exit_percent
    )
    tree = inputs["host_cpu_percent"] if busiest is not None else None
    s.host_busy = _high(s.host_busy, tree, limits.host_busy_percent, limits.host_busy_exit_percent)
    s.host_saturated = _high(
        s.host_saturated,
        context.host_cpu_percent,
        limits.host_saturated_percent,
        limits.host_saturated_exit_percent,
    )
    freq, rated = inputs["aicore_freq_mhz"], inputs["aicore_rated_freq_mhz"]
    share = freq / rated if freq is not None and rated else None
    s.below_rated = _low(
        s.below_rated, share, 1.0 - limits.throttle_freq_margin, 1.0 - limits.throttle_freq_exit_margin
    )


def _loading(busiest: Optional[NpuProcess], limits: Thresholds) -> bool:
    """The job's host side is loading data: more than one core's worth of its process tree, or its
    children (data-loader workers) busy."""
    host = busiest.host if busiest is not None else None
    if host is None:
        return False
    tree = host.tree_cpu_percent or 0.0
    children = host.children_cpu_percent or 0.0
    return tree >= limits.host_loader_percent or children >= limits.host_busy_percent


def _busy_class(
    inputs: Mapping[str, Optional[float]],
    signals: Signals,
    busiest: Optional[NpuProcess],
    context: Context,
    limits: Thresholds,
    time_s: float,
) -> Tuple[WorkloadClass, str, Tuple[str, ...]]:
    """The class of a chip with a process on it, what it hedges and the signals it lacked."""
    aicore = inputs["aicore_percent"] or 0.0
    if signals.bandwidth_high and aicore < limits.aicore_busy_percent:
        return WorkloadClass.MEMORY_BOUND, "", ()
    if signals.aicore_busy:
        return WorkloadClass.COMPUTE_BOUND, "", ()
    if signals.aicpu_busy:
        return WorkloadClass.AICPU_BOUND, "", ()
    if _loading(busiest, limits):
        return WorkloadClass.INPUT_BOUND, "", ()
    aicpu_known = signals.aicpu_busy is not None
    recent = signals.last_busy_s is not None and time_s - signals.last_busy_s <= limits.active_window_s
    if signals.no_work and not recent:
        return WorkloadClass.ALLOCATED_IDLE, "", ()
    if busiest is None or not context.host_visible:
        needs = ("host_cpu_percent",) + (() if aicpu_known else ("aicpu_percent",))
        hedge = HOST_HIDDEN + ("" if aicpu_known else f"; AI CPU not read ({AICPU_UNREAD})")
        return WorkloadClass.UNDETERMINED, hedge, needs
    host = busiest.host
    # The whole host's saturation stands for the job's workers where its children were not read
    # (a recording made before they were): with them read, the process tree says it.
    saturated = bool(signals.host_saturated) and host is not None and host.children is None
    if recent and saturated:
        return WorkloadClass.INPUT_BOUND, "", ()
    if signals.host_busy and recent and not signals.no_work:
        if not aicpu_known:  # a busy host thread also launches AI CPU operators
            return WorkloadClass.UNDETERMINED, f"input- or AI CPU-bound — {AICPU_UNREAD}", ("aicpu_percent",)
        return WorkloadClass.INPUT_BOUND, "", ()
    if aicpu_known:
        return WorkloadClass.WAITING, "", ()
    return WorkloadClass.WAITING, f"or AI CPU-bound — {AICPU_UNREAD}", ("aicpu_percent",)


def _throttling(
    chip: ChipSample,
    inputs: Mapping[str, Optional[float]],
    signals: Signals,
    context: Context,
    limits: Thresholds,
) -> Optional[Throttling]:
    """Why AI Core runs below its rated frequency while busy (an idle chip clocks down on purpose)."""
    if not signals.aicore_busy or not signals.below_rated:
        return None
    temperature = inputs["temperature_c"]
    warning_c, _ = limits.temperature_limits_c(chip.identity.name)
    if temperature is not None and temperature >= warning_c - limits.throttle_near_limit_c:
        return Throttling.THERMAL
    power, rated_w = inputs["power_w"], context.rated_power_w
    if power is not None and rated_w and power >= rated_w * limits.throttle_power_share:
        return Throttling.POWER
    return Throttling.UNREPORTED


def context_of(snapshot: Snapshot, chip: ChipSample, chips_on_card: int) -> Context:
    """What ``chip`` of ``snapshot`` is judged with: the source's facts, the host's and the power
    rating its reading compares with (the card's when the source says the reading is the card's)."""
    described: SourceInfo = snapshot.described
    family = family_of(chip.identity.name)
    scope = described.scope_of(chip.identity.key, "power_w")
    if scope == SCOPE_CARD or family.power_scope == SCOPE_CARD:
        rated: Optional[float] = family.card_rated_power_w(chips_on_card)
        scope = SCOPE_CARD
    else:
        rated = family.rated_power_w
    host = snapshot.host
    return Context(
        process_table=described.process_table,
        host_visible=host is None or host.host_pid_namespace is not False,
        host_cpu_percent=None if host is None else host.cpu_percent,
        reads_aicpu=described.reads("aicpu_percent"),
        rated_power_w=rated,
        power_scope=scope,
    )


#: Every input an observation carries, in the order the window's sums keep them.
_ALL_INPUTS: Tuple[str, ...] = (*INPUTS, "host_cpu_percent")


class _Sums:
    """The running totals of one class's observations in the window, so a mean costs no loop."""

    __slots__ = ("count", "counts", "totals")

    def __init__(self) -> None:
        self.count = 0
        self.totals = [0.0] * len(_ALL_INPUTS)
        self.counts = [0] * len(_ALL_INPUTS)

    def add(self, seen: Observation, sign: int) -> None:
        self.count += sign
        for i, value in enumerate(map(seen.inputs.get, _ALL_INPUTS)):
            if value is not None:
                self.totals[i] += sign * value
                self.counts[i] += sign

    def evidence(self) -> _Evidence:
        """The window's means as evidence (worked out when read: most ticks nobody reads them)."""
        return _Evidence(list(self.totals), list(self.counts), {})


_INDEX = {name: i for i, name in enumerate(_ALL_INPUTS)}


class _Evidence(Mapping[str, EvidenceValue]):
    """A workload's evidence: the means of its inputs (each rounded to 0.1 when read) and the extra
    facts of its class.  Frozen once the judge hands it out."""

    __slots__ = ("_counts", "_extra", "_totals")

    def __init__(self, totals: List[float], counts: List[int], extra: Dict[str, EvidenceValue]) -> None:
        self._totals, self._counts, self._extra = totals, counts, extra

    @classmethod
    def of(cls, inputs: Mapping[str, Optional[float]]) -> _Evidence:
        """One observation's inputs as evidence."""
        values = [inputs.get(name) for name in _ALL_INPUTS]
        return cls([v or 0.0 for v in values], [0 if v is None else 1 for v in values], {})

    def __getitem__(self, name: str) -> EvidenceValue:
        i = _INDEX.get(name)
        if i is None:
            return self._extra[name]
        count = self._counts[i]
        return round(self._totals[i] / count, 1) if count else None

    def __iter__(self) -> Iterator[str]:
        yield from _ALL_INPUTS
        yield from self._extra

    def __len__(self) -> int:
        return len(_ALL_INPUTS) + len(self._extra)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class _ChipState:
    shown: Optional[WorkloadClass] = None
    candidate: Optional[WorkloadClass] = None
    candidate_since_s: float = 0.0
    candidate_count: int = 0
    signals: Signals = field(default_factory=Signals)
    throttling: Optional[Throttling] = None
    last_throttled_s: Optional[float] = None
    #: The window's throttle readings: (time, the sample's cause or None).
    throttle_window: Deque[Tuple[float, Optional[Throttling]]] = field(default_factory=deque)
    window: Deque[Observation] = field(default_factory=deque)
    sums: Dict[WorkloadClass, _Sums] = field(default_factory=dict)  # the window's, per class
    #: The process that last held the chip's memory, and when: the owner of memory held after it.
    holder: Optional[Tuple[NpuProcess, datetime]] = None
    owner: Optional[LastOwner] = None  # built from ``holder`` when first needed
    rated_power_w: Optional[float] = None  # what its power reading compares with (chip or card)


#: Which cause a tie in the throttle window shows: the one the readings say most plainly.
_CAUSE_ORDER = (Throttling.THERMAL, Throttling.POWER, Throttling.UNREPORTED)


class WorkloadJudge:
    """Judges each chip's workload over a window of snapshots, by the snapshots' own times.

    One per feed: ``judge(snapshot)`` returns the snapshot with every chip's ``workload`` set.
    The first snapshot of a chip shows its class at once (a one-shot snapshot judges one
    sample); afterwards a new class shows only after settling (``settle_samples`` spanning
    ``settle_s``; memory held with no process ``held_settle_samples`` spanning ``held_settle_s``),
    and throttling once ``throttle_settle_samples`` samples in ``throttle_window_s`` read it, until
    none has for ``throttle_clear_s``, so neither flickers.  Time going backwards (a replay
    seeking back) starts afresh.
    """

    def __init__(self, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.thresholds = thresholds
        self._chips: Dict[ChipKey, _ChipState] = {}
        self._last_s: Optional[float] = None

    def reset(self) -> None:
        """Forget every chip's history."""
        self._chips.clear()
        self._last_s = None

    def judge(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` with each chip's workload judged over the window up to it."""
        now_s = snapshot.taken_at.timestamp()
        if self._last_s is not None and now_s < self._last_s:
            self.reset()
        self._last_s = now_s
        by_chip: Dict[ChipKey, List[NpuProcess]] = {}
        for process in snapshot.processes:
            by_chip.setdefault((process.npu_id, process.chip_id), []).append(process)
        per_card: Dict[int, int] = {}
        for chip in snapshot.chips:
            per_card[chip.identity.npu_id] = per_card.get(chip.identity.npu_id, 0) + 1
        described = snapshot.source_info
        chips = []
        for chip in snapshot.chips:
            key = chip.identity.key
            processes = by_chip.get(key, [])
            state = self._chips.setdefault(key, _ChipState())
            if processes:
                state.holder, state.owner = (max(processes, key=_memory_mib), snapshot.taken_at), None
            context = context_of(snapshot, chip, per_card[chip.identity.npu_id])
            seen = observe(chip, processes, now_s, self.thresholds, context, state.signals)
            self._settle(state, seen, hurry=lost_reason(chip) is not None)
            # A snapshot that does not say what its source reads is taken not to read a metric it
            # gave no value for.
            missing = tuple(
                decides
                for name, decides in _DECIDES
                if (not described.reads(name) if described is not None else seen.inputs.get(name) is None)
            )
            state.rated_power_w = context.rated_power_w
            chips.append(chip.with_workload(self._workload(chip, state, seen, missing)))
        return replace(snapshot, chips=tuple(chips))

    def _settle(self, state: _ChipState, seen: Observation, hurry: bool) -> None:
        limits = self.thresholds
        state.window.append(seen)
        state.sums.setdefault(seen.kind, _Sums()).add(seen, 1)
        while state.window[0].time_s < seen.time_s - limits.workload_window_s:
            old = state.window.popleft()
            state.sums[old.kind].add(old, -1)
        if state.shown is None or seen.kind is state.shown or hurry:
            state.shown, state.candidate, state.candidate_count = seen.kind, None, 0
        else:
            if seen.kind is not state.candidate:
                state.candidate, state.candidate_since_s, state.candidate_count = seen.kind, seen.time_s, 0
            state.candidate_count += 1
            held = seen.kind is WorkloadClass.IDLE_HOLDING_HBM
            need = limits.held_settle_samples if held else limits.settle_samples
            need_s = limits.held_settle_s if held else limits.settle_s
            if state.candidate_count >= need and seen.time_s - state.candidate_since_s >= need_s:
                state.shown, state.candidate, state.candidate_count = seen.kind, None, 0
        self._settle_throttle(state, seen, first=state.signals.first_s == seen.time_s)

    def _settle_throttle(self, state: _ChipState, seen: Observation, first: bool) -> None:
        """Throttling shows once enough of its window reads it and clears after a quiet spell, so
        a clock hunting around its trip point reads as one steady throttle; its cause is the
        window's commonest."""
        limits = self.thresholds
        window = state.throttle_window
        window.append((seen.time_s, seen.throttling))
        while window[0][0] < seen.time_s - limits.throttle_window_s:
            window.popleft()
        if seen.throttling is not None:
            state.last_throttled_s = seen.time_s
        causes = [cause for _, cause in window if cause is not None]
        if state.throttling is None:
            if seen.throttling is not None and (first or len(causes) >= limits.throttle_settle_samples):
                state.throttling = _commonest(causes)
            return
        quiet_s = seen.time_s - (
            state.last_throttled_s if state.last_throttled_s is not None else seen.time_s
        )
        if seen.kind is WorkloadClass.UNKNOWN or quiet_s >= limits.throttle_clear_s or not causes:
            state.throttling = None
        else:  # a clock recovering after heat or a cap keeps that cause while it is still low
            known = [cause for cause in causes if cause is not Throttling.UNREPORTED]
            if known or state.throttling is Throttling.UNREPORTED:
                state.throttling = _commonest(known or causes)

    def _workload(
        self, chip: ChipSample, state: _ChipState, seen: Observation, missing: Tuple[str, ...]
    ) -> Workload:
        kind = state.shown or seen.kind
        sums = state.sums.get(kind)
        if sums is not None and sums.count:
            evidence, samples = sums.evidence(), sums.count
            latest = next(o for o in reversed(state.window) if o.kind is kind)
            first = next(o for o in state.window if o.kind is kind)
        else:  # shown from before the window (a steady class always has samples in it)
            evidence, samples, latest, first = _Evidence.of(seen.inputs), 1, seen, seen
        extra = evidence._extra
        if kind in (WorkloadClass.INPUT_BOUND, WorkloadClass.UNDETERMINED) and latest.busiest is not None:
            extra["pid"], extra["process"] = latest.busiest.pid, latest.busiest.name
            host = latest.busiest.host
            if host is not None and host.children is not None:
                extra["children"] = host.children
        if kind is WorkloadClass.IDLE_HOLDING_HBM:
            extra["idle_hbm_mib"] = latest.idle_mib
        if state.throttling is not None:
            extra["temperature_limit_c"] = self.thresholds.temperature_limits_c(chip.identity.name)[0]
            extra["rated_power_w"] = state.rated_power_w
        owner = None
        if kind is WorkloadClass.IDLE_HOLDING_HBM and state.holder is not None:
            state.owner = owner = state.owner or _owner(*state.holder)
        step = _NEXT_STEPS[kind]
        if state.throttling is not None:
            step = _THROTTLE_STEPS[state.throttling] + step[:1].upper() + step[1:]
        return Workload(
            kind=kind,
            summary=_summary(kind, evidence, state.throttling, owner, latest.hedge),
            next_step=step[:1].upper() + step[1:],
            throttling=state.throttling,
            evidence=evidence,
            needs_dcmi=missing,
            owner=owner,
            samples=samples,
            window_s=round(latest.time_s - first.time_s, 3),
            needs_reading=latest.needs,
        )


def _commonest(causes: Sequence[Throttling]) -> Throttling:
    """The cause most samples read; a cause the readings show (heat, a cap) before "not reported"."""
    known = [cause for cause in causes if cause is not Throttling.UNREPORTED] or list(causes)
    return max(_CAUSE_ORDER, key=lambda cause: (known.count(cause), -_CAUSE_ORDER.index(cause)))


def _memory_mib(process: NpuProcess) -> int:
    return process.npu_memory_mib or 0


def _owner(top: NpuProcess, last_seen: datetime) -> LastOwner:
    host = top.host
    return LastOwner(
        pid=top.pid,
        name=top.name,
        user=host.user if host is not None else None,
        command=host.command if host is not None else None,
        npu_memory_mib=top.npu_memory_mib,
        last_seen=last_seen,
    )


def _pct(value: EvidenceValue) -> str:
    return f"{value:.0f} %" if isinstance(value, (int, float)) else "n/a"


def _summary(
    kind: WorkloadClass,
    evidence: Mapping[str, EvidenceValue],
    throttling: Optional[Throttling],
    owner: Optional[LastOwner],
    hedge: str,
) -> str:
    aicore = f"AI Core {_pct(evidence.get('aicore_percent'))}"
    host = evidence.get("host_cpu_percent")
    children = evidence.get("children")
    workers = f" with {children} child processes" if isinstance(children, int) and children else ""
    if kind is WorkloadClass.COMPUTE_BOUND:
        text = aicore
    elif kind is WorkloadClass.MEMORY_BOUND:
        text = f"HBM bandwidth {_pct(evidence.get('hbm_bandwidth_percent'))}, {aicore}"
    elif kind is WorkloadClass.AICPU_BOUND:
        text = f"AI CPU {_pct(evidence.get('aicpu_percent'))}, {aicore}"
    elif kind is WorkloadClass.INPUT_BOUND:
        pid = evidence.get("pid")
        text = f"{aicore}, " + (
            f"PID {pid}{workers} at {_pct(host)} host CPU" if pid is not None else "the host's CPU saturated"
        )
    elif kind is WorkloadClass.WAITING:
        aicpu = evidence.get("aicpu_percent")
        text = f"{aicore}, host {_pct(host)}" + (f", AI CPU {_pct(aicpu)}" if aicpu is not None else "")
    elif kind is WorkloadClass.UNDETERMINED:
        pid = evidence.get("pid")
        shown = f", PID {pid}{workers} at {_pct(host)} host CPU" if pid is not None else ""
        text = f"{aicore}{shown}"
    elif kind is WorkloadClass.ALLOCATED_IDLE:
        text = f"allocated, no work: {aicore}"
    elif kind is WorkloadClass.IN_USE_ELSEWHERE:
        text = f"{aicore}, in use by a process not visible here (another container, an older driver)"
    elif kind is WorkloadClass.IDLE_HOLDING_HBM:
        used = evidence.get("hbm_used_mib")
        used_text = f"{used / 1024:.1f} GiB" if isinstance(used, (int, float)) else "memory"
        text = f"{used_text} held, no process" + (f"; last held by PID {owner.pid}" if owner else "")
    elif kind is WorkloadClass.IDLE:
        text = "no process"
    else:
        text = "no current AI Core reading"
    if hedge:
        text += f": {hedge}" if kind is WorkloadClass.UNDETERMINED else f" ({hedge})"
    if throttling is not None:
        freq, rated = evidence.get("aicore_freq_mhz"), evidence.get("aicore_rated_freq_mhz")
        if throttling is Throttling.THERMAL:
            cause = f"at {_num(evidence.get('temperature_c'))} °C"
        elif throttling is Throttling.POWER:
            cause = f"at {_num(evidence.get('power_w'))} W of {_num(evidence.get('rated_power_w'))} W"
        else:
            heat, power = _num(evidence.get("temperature_c")), _num(evidence.get("power_w"))
            cause = f"at {heat} °C, {power} W: cause not reported"
        text += f"; throttled ({throttling.value}): {_num(freq)} of {_num(rated)} MHz {cause}"
    return text


def _num(value: EvidenceValue) -> str:
    return f"{value:.0f}" if isinstance(value, (int, float)) else "n/a"
