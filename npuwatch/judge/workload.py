"""Provides the workload judge: what each chip is limited by, over a window, with hysteresis.

Each sample is read on its own first (``observe``): compute-bound, memory-bound, AI CPU-bound,
input-bound, waiting, idle or idle holding memory, and whether AI Core is throttled.  The
``WorkloadJudge`` that every feed runs (the live sampler and a replay alike, by the snapshots'
own times) then shows a class only once it has held for the settle time, averages the evidence
over the window, and remembers which process last held each chip's memory, so memory held after
a job is gone names its likely owner.  The thresholds are rows of ``Thresholds``
(``npuwatch.judge.limits``); nothing else classifies a workload.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds, limits_for
from npuwatch.judge.rules import held_memory, host_cpu_percent, is_stale, lost_reason
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
#: The classes each driver-only input decides: a chip source without it (npu-smi) cannot.
_DECIDES: Tuple[Tuple[str, str], ...] = (
    ("hbm_bandwidth_percent", WorkloadClass.MEMORY_BOUND.value),
    ("aicpu_percent", WorkloadClass.AICPU_BOUND.value),
    ("aicore_freq_mhz", "throttling"),
)

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
        "launch or synchronisation gaps (many small operators, host syncs such as .item(), stream waits)."
    ),
    WorkloadClass.IDLE: "nothing to do: no process uses the chip.",
    WorkloadClass.IDLE_HOLDING_HBM: (
        "memory is held with no process: find the holder with `fuser -v /dev/davinci*` and end it "
        "(a zombie or a process in another container); the memory is freed when it exits."
    ),
    WorkloadClass.UNKNOWN: "see the chip's health and the chip source: no current AI Core reading.",
}
#: What decides each class, as the README says it (the rules are ``observe``'s).
DECIDED_BY = {
    WorkloadClass.COMPUTE_BOUND: "AI Core at or above `aicore_low_percent` (and not memory-bound)",
    WorkloadClass.MEMORY_BOUND: (
        "HBM bandwidth at or above `hbm_bandwidth_high_percent` while AI Core is below "
        "`aicore_busy_percent` (needs the DCMI backend)"
    ),
    WorkloadClass.AICPU_BOUND: (
        "AI Core low, AI CPU at or above `aicpu_busy_percent` (needs the DCMI backend)"
    ),
    WorkloadClass.INPUT_BOUND: (
        "AI Core low, the chip's busiest process at or above `host_busy_percent` on the host"
    ),
    WorkloadClass.WAITING: "AI Core low, neither the host process nor the AI CPU busy",
    WorkloadClass.IDLE: "no process on the chip",
    WorkloadClass.IDLE_HOLDING_HBM: (
        "no process, memory above the idle allowance (the `hbm-held` rule of the judge table)"
    ),
    WorkloadClass.UNKNOWN: (
        "no current AI Core reading (the chip is lost, its values are stale, or not reported)"
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
}


@dataclass(frozen=True)
class Observation:
    """One sample's reading of a chip: its class and throttling cause, and the inputs that decided."""

    time_s: float
    kind: WorkloadClass
    throttling: Optional[Throttling]
    inputs: Mapping[str, Optional[float]]
    busiest: Optional[NpuProcess] = None  # the chip's busiest process on the host
    idle_mib: Optional[int] = None  # the idle allowance


def observe(
    chip: ChipSample,
    processes: Sequence[NpuProcess],
    time_s: float,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> Observation:
    """How ``chip`` reads in this one sample (``processes`` are the ones listed on it)."""
    stale = is_stale(chip)  # a stale chip is unknown: its inputs are not this sample's
    inputs: Dict[str, Optional[float]] = (
        dict.fromkeys(INPUTS) if stale else {n: getattr(chip, n) for n in INPUTS}
    )
    busiest = max(processes, key=host_cpu_percent) if processes else None
    host = None if busiest is None or busiest.host is None else busiest.host.cpu_percent
    inputs["host_cpu_percent"] = host
    aicore = inputs["aicore_percent"]
    if stale or aicore is None or lost_reason(chip) is not None:
        return Observation(time_s, WorkloadClass.UNKNOWN, None, inputs)
    throttling = _throttling(chip, inputs, thresholds)
    if not processes:
        held = held_memory(chip, processes, thresholds)
        if held is not None:
            kind = WorkloadClass.IDLE_HOLDING_HBM
            return Observation(time_s, kind, throttling, inputs, None, held.idle_mib)
        return Observation(time_s, WorkloadClass.IDLE, throttling, inputs)
    return Observation(time_s, _busy_class(inputs, thresholds), throttling, inputs, busiest)


def _busy_class(inputs: Mapping[str, Optional[float]], thresholds: Thresholds) -> WorkloadClass:
    aicore = inputs["aicore_percent"] or 0.0
    bandwidth, aicpu, host = (
        inputs["hbm_bandwidth_percent"],
        inputs["aicpu_percent"],
        inputs["host_cpu_percent"],
    )
    if (
        bandwidth is not None
        and bandwidth >= thresholds.hbm_bandwidth_high_percent
        and aicore < thresholds.aicore_busy_percent
    ):
        return WorkloadClass.MEMORY_BOUND
    if aicore >= thresholds.aicore_low_percent:
        return WorkloadClass.COMPUTE_BOUND
    if aicpu is not None and aicpu >= thresholds.aicpu_busy_percent:
        return WorkloadClass.AICPU_BOUND
    if host is not None and host >= thresholds.host_busy_percent:
        return WorkloadClass.INPUT_BOUND
    return WorkloadClass.WAITING


def _throttling(
    chip: ChipSample, inputs: Mapping[str, Optional[float]], thresholds: Thresholds
) -> Optional[Throttling]:
    """Why AI Core runs below its rated frequency while busy, when the reason shows."""
    freq, rated, aicore = inputs["aicore_freq_mhz"], inputs["aicore_rated_freq_mhz"], inputs["aicore_percent"]
    if freq is None or not rated or aicore is None or aicore < thresholds.aicore_low_percent:
        return None  # an idle chip clocks down on purpose
    if freq >= rated * (1.0 - thresholds.throttle_freq_margin):
        return None
    temperature = inputs["temperature_c"]
    warning_c, _ = thresholds.temperature_limits_c(chip.identity.name)
    if temperature is not None and temperature >= warning_c - thresholds.throttle_near_limit_c:
        return Throttling.THERMAL
    power, rated_w = inputs["power_w"], limits_for(chip.identity.name).rated_power_w
    if power is not None and rated_w and power >= rated_w * thresholds.throttle_power_share:
        return Throttling.POWER
    return None


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
    throttling: Optional[Throttling] = None
    throttle_seen: bool = False
    throttle_candidate: Optional[Throttling] = None
    throttle_count: int = 0
    window: Deque[Observation] = field(default_factory=deque)
    sums: Dict[WorkloadClass, _Sums] = field(default_factory=dict)  # the window's, per class
    #: The process that last held the chip's memory, and when: the owner of memory held after it.
    holder: Optional[Tuple[NpuProcess, datetime]] = None
    owner: Optional[LastOwner] = None  # built from ``holder`` when first needed


class WorkloadJudge:
    """Judges each chip's workload over a window of snapshots, by the snapshots' own times.

    One per feed: ``judge(snapshot)`` returns the snapshot with every chip's ``workload`` set.
    The first snapshot of a chip shows its class at once (a one-shot snapshot judges one
    sample); afterwards a new class shows only after settling, and a throttling cause after
    ``throttle_settle_samples`` samples, so neither flickers.  Time going backwards (a replay
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
        needs = snapshot.chip_source != "dcmi"
        chips = []
        for chip in snapshot.chips:
            key = chip.identity.key
            processes = by_chip.get(key, [])
            state = self._chips.setdefault(key, _ChipState())
            if processes:
                state.holder, state.owner = (max(processes, key=_memory_mib), snapshot.taken_at), None
            seen = observe(chip, processes, now_s, self.thresholds)
            self._settle(state, seen, hurry=lost_reason(chip) is not None)
            chips.append(chip.with_workload(self._workload(chip, state, seen, needs)))
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
            need = (
                limits.held_settle_samples
                if seen.kind is WorkloadClass.IDLE_HOLDING_HBM
                else limits.settle_samples
            )
            if state.candidate_count >= need and seen.time_s - state.candidate_since_s >= limits.settle_s:
                state.shown, state.candidate, state.candidate_count = seen.kind, None, 0
        if not state.throttle_seen or seen.throttling is state.throttling:
            state.throttling, state.throttle_seen, state.throttle_count = seen.throttling, True, 0
            return
        if seen.throttling is not state.throttle_candidate:
            state.throttle_candidate, state.throttle_count = seen.throttling, 0
        state.throttle_count += 1
        if state.throttle_count >= limits.throttle_settle_samples:
            state.throttling, state.throttle_count = seen.throttling, 0

    def _workload(self, chip: ChipSample, state: _ChipState, seen: Observation, needs_dcmi: bool) -> Workload:
        kind = state.shown or seen.kind
        sums = state.sums.get(kind)
        if sums is not None and sums.count:
            evidence, samples = sums.evidence(), sums.count
            latest = next(o for o in reversed(state.window) if o.kind is kind)
            first = next(o for o in state.window if o.kind is kind)
        else:  # shown from before the window (a steady class always has samples in it)
            evidence, samples, latest, first = _Evidence.of(seen.inputs), 1, seen, seen
        extra = evidence._extra
        if kind is WorkloadClass.INPUT_BOUND and latest.busiest is not None:
            extra["pid"], extra["process"] = latest.busiest.pid, latest.busiest.name
        if kind is WorkloadClass.IDLE_HOLDING_HBM:
            extra["idle_hbm_mib"] = latest.idle_mib
        if state.throttling is not None:
            extra["temperature_limit_c"] = self.thresholds.temperature_limits_c(chip.identity.name)[0]
            extra["rated_power_w"] = limits_for(chip.identity.name).rated_power_w
        owner = None
        if kind is WorkloadClass.IDLE_HOLDING_HBM and state.holder is not None:
            state.owner = owner = state.owner or _owner(*state.holder)
        missing = tuple(decides for name, decides in _DECIDES if needs_dcmi and seen.inputs.get(name) is None)
        step = _NEXT_STEPS[kind]
        if state.throttling is not None:
            step = _THROTTLE_STEPS[state.throttling] + step[:1].upper() + step[1:]
        return Workload(
            kind=kind,
            summary=_summary(kind, evidence, state.throttling, owner, chip),
            next_step=step[:1].upper() + step[1:],
            throttling=state.throttling,
            evidence=evidence,
            needs_dcmi=missing,
            owner=owner,
            samples=samples,
            window_s=round(latest.time_s - first.time_s, 3),
        )


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
    chip: ChipSample,
) -> str:
    aicore = f"AI Core {_pct(evidence.get('aicore_percent'))}"
    if kind is WorkloadClass.COMPUTE_BOUND:
        text = aicore
    elif kind is WorkloadClass.MEMORY_BOUND:
        text = f"HBM bandwidth {_pct(evidence.get('hbm_bandwidth_percent'))}, {aicore}"
    elif kind is WorkloadClass.AICPU_BOUND:
        text = f"AI CPU {_pct(evidence.get('aicpu_percent'))}, {aicore}"
    elif kind is WorkloadClass.INPUT_BOUND:
        text = f"{aicore}, PID {evidence.get('pid')} at {_pct(evidence.get('host_cpu_percent'))} host CPU"
    elif kind is WorkloadClass.WAITING:
        aicpu = evidence.get("aicpu_percent")
        text = f"{aicore}, host {_pct(evidence.get('host_cpu_percent'))}" + (
            f", AI CPU {_pct(aicpu)}" if aicpu is not None else ""
        )
    elif kind is WorkloadClass.IDLE_HOLDING_HBM:
        used = evidence.get("hbm_used_mib")
        used_text = f"{used / 1024:.1f} GiB" if isinstance(used, (int, float)) else "memory"
        text = f"{used_text} held, no process" + (f"; last held by PID {owner.pid}" if owner else "")
    elif kind is WorkloadClass.IDLE:
        text = "no process"
    else:
        text = "no current AI Core reading"
    if throttling is not None:
        freq, rated = evidence.get("aicore_freq_mhz"), evidence.get("aicore_rated_freq_mhz")
        cause = (
            f"{_num(evidence.get('temperature_c'))} °C"
            if throttling is Throttling.THERMAL
            else f"{_num(evidence.get('power_w'))} W"
        )
        text += f"; throttled ({throttling.value}): {_num(freq)} of {_num(rated)} MHz at {cause}"
    return text


def _num(value: EvidenceValue) -> str:
    return f"{value:.0f}" if isinstance(value, (int, float)) else "n/a"
