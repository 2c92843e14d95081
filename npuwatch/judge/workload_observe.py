"""Provides ``observe``: how a chip reads in one sample, given its latched signals and history.

Each signal (AI Core busy or at no work, HBM bandwidth, AI CPU, the job's host side, the host's
saturation, the AI Core clock below rated) is latched between an enter and an exit threshold, so
one hovering at its threshold does not flap; ``Signals`` also remembers the chip's last busy
sample, which tells a drop inside an active job from a chip allocated with no work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

from npuwatch.chip_families import family_of
from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds, power_rating
from npuwatch.judge.rules import held_memory, is_stale, lost_reason
from npuwatch.judge.workload_text import AICPU_UNREAD, HOST_HIDDEN
from npuwatch.model import ChipSample, NpuProcess, Snapshot, Throttling, WorkloadClass
from npuwatch.source_info import SourceInfo

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
DECIDES: Tuple[Tuple[str, str], ...] = (
    ("hbm_bandwidth_percent", WorkloadClass.MEMORY_BOUND.value),
    ("aicpu_percent", WorkloadClass.AICPU_BOUND.value),
    ("aicore_freq_mhz", "throttling"),
)


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
    rated_aicore_mhz: Optional[float] = None  # the family's rated clock, for a source that reads none


@dataclass
class Signals:
    """A chip's signals latched between their enter and exit thresholds, and its recent history.
    ``observe`` updates it; a fresh one reads a single sample."""

    aicore_busy: Optional[bool] = None
    aicore_full: Optional[bool] = None  # at ``aicore_busy_percent``: too busy to be memory-bound
    no_work: Optional[bool] = None
    bandwidth_high: Optional[bool] = None
    aicpu_busy: Optional[bool] = None
    host_busy: Optional[bool] = None
    host_saturated: Optional[bool] = None
    below_rated: Optional[bool] = None
    last_busy_s: Optional[float] = None  # the last sample with AI Core busy
    last_working_s: Optional[float] = None  # the last sample with AI Core above no work
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
    if context is None:  # the chip alone: its own rating (``power_rating``, the one rule)
        rating = power_rating(chip.identity.name)
        rated_mhz = family_of(chip.identity.name).rated_aicore_mhz
        context = Context(rated_power_w=rating.watts, power_scope=rating.scope, rated_aicore_mhz=rated_mhz)
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
    if signals.no_work is False:
        signals.last_working_s = time_s
    if not processes:
        if signals.aicore_busy:
            return Observation(time_s, WorkloadClass.IN_USE_ELSEWHERE, throttling, inputs)
        held = held_memory(chip, processes, thresholds, context.process_table)
        if held is not None:
            kind = WorkloadClass.IDLE_HOLDING_HBM
            return Observation(time_s, kind, throttling, inputs, None, held.idle_mib)
        hedge = "" if context.process_table else "this source lists no processes"
        return Observation(time_s, WorkloadClass.IDLE, throttling, inputs, hedge=hedge)
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
    s.aicore_full = _high(s.aicore_full, aicore, limits.aicore_busy_percent, limits.aicore_busy_exit_percent)
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
    freq = inputs["aicore_freq_mhz"]
    rated = inputs["aicore_rated_freq_mhz"] or context.rated_aicore_mhz  # the family's, if not read
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
    if signals.bandwidth_high and not signals.aicore_full:
        return WorkloadClass.MEMORY_BOUND, "", ()
    if signals.aicore_busy:
        return WorkloadClass.COMPUTE_BOUND, "", ()
    if signals.aicpu_busy:
        return WorkloadClass.AICPU_BOUND, "", ()
    if _loading(busiest, limits):
        return WorkloadClass.INPUT_BOUND, "", ()
    aicpu_known = signals.aicpu_busy is not None
    recent = signals.last_busy_s is not None and time_s - signals.last_busy_s <= limits.active_window_s
    host = busiest.host if busiest is not None and context.host_visible else None
    # The whole host's saturation stands for the job's workers where its children were not read
    # (a recording made before they were); with them read, the process tree says it.  It counts
    # after a drop, or where the history is too short to rule one out.
    young = signals.first_s is None or time_s - signals.first_s < limits.active_window_s
    saturated = bool(signals.host_saturated) and host is not None and host.children is None
    if saturated and (recent or young):
        return WorkloadClass.INPUT_BOUND, "", ()
    since_work_s = time_s - (
        signals.last_working_s if signals.last_working_s is not None else signals.first_s or time_s
    )
    parked = signals.last_working_s is None and host is not None and not signals.host_busy
    if signals.no_work and (since_work_s >= limits.active_window_s or parked):
        return WorkloadClass.ALLOCATED_IDLE, "", ()
    if host is None:
        needs = ("host_cpu_percent",) + (() if aicpu_known else ("aicpu_percent",))
        hedge = HOST_HIDDEN + ("" if aicpu_known else f"; AI CPU not read ({AICPU_UNREAD})")
        return WorkloadClass.UNDETERMINED, hedge, needs
    unread = () if aicpu_known else ("aicpu_percent",)
    if signals.host_busy and not signals.no_work:
        if not aicpu_known:  # a busy host thread also launches AI CPU operators
            return WorkloadClass.UNDETERMINED, f"input- or AI CPU-bound — {AICPU_UNREAD}", unread
        if recent:
            return WorkloadClass.INPUT_BOUND, "", ()
    # AI Core stopped while a host thread spins (a sync, a collective), or no host side busy.
    return WorkloadClass.WAITING, "" if aicpu_known else f"or AI CPU-bound — {AICPU_UNREAD}", unread


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
    # With no cause in the readings, only a clock well below rated is a throttle: a 310P's busy
    # clock sits a little under its rated one by design.
    freq = inputs["aicore_freq_mhz"]
    rated = inputs["aicore_rated_freq_mhz"] or context.rated_aicore_mhz
    if freq is None or not rated or freq >= rated * (1.0 - limits.throttle_unreported_margin):
        return None
    return Throttling.UNREPORTED


def context_of(snapshot: Snapshot, chip: ChipSample, chips_on_card: int) -> Context:
    """What ``chip`` of ``snapshot`` is judged with: the source's facts, the host's and the power
    rating its reading compares with (the card's when the source says the reading is the card's)."""
    described: SourceInfo = snapshot.described
    family = family_of(chip.identity.name)
    rated, scope = power_rating(
        chip.identity.name, described.scope_of(chip.identity.key, "power_w"), chips_on_card
    )
    host = snapshot.host
    return Context(
        process_table=described.process_table,
        host_visible=host is None or host.host_pid_namespace is not False,
        host_cpu_percent=None if host is None else host.cpu_percent,
        reads_aicpu=described.reads("aicpu_percent"),
        rated_power_w=rated,
        power_scope=scope,
        rated_aicore_mhz=family.rated_aicore_mhz,
    )
