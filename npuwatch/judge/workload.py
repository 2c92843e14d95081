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
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds
from npuwatch.judge.rules import lost_reason
from npuwatch.judge.workload_evidence import Evidence, Sums
from npuwatch.judge.workload_observe import (
    DECIDES,
    INPUTS,
    Context,
    Observation,
    Signals,
    context_of,
    observe,
)
from npuwatch.judge.workload_text import (
    DECIDED_BY,
    NEXT_STEPS,
    THROTTLE_STEPS,
    class_table,
    summary,
)
from npuwatch.model import ChipSample, LastOwner, NpuProcess, Snapshot, Throttling, Workload, WorkloadClass

#: What callers import from here: the judge, and its parts' public names (one-sample reading,
#: the README's tables).
__all__ = [
    "DECIDED_BY",
    "INPUTS",
    "NEXT_STEPS",
    "Context",
    "Observation",
    "Signals",
    "WorkloadJudge",
    "class_table",
    "context_of",
    "observe",
]

ChipKey = Tuple[int, int]
_NEXT_STEPS = NEXT_STEPS  # the older name, which tests read


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
    sums: Dict[WorkloadClass, Sums] = field(default_factory=dict)  # the window's, per class
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
                for name, decides in DECIDES
                if (not described.reads(name) if described is not None else seen.inputs.get(name) is None)
            )
            state.rated_power_w = context.rated_power_w
            chips.append(chip.with_workload(self._workload(chip, state, seen, missing)))
        return replace(snapshot, chips=tuple(chips))

    def _settle(self, state: _ChipState, seen: Observation, hurry: bool) -> None:
        limits = self.thresholds
        state.window.append(seen)
        state.sums.setdefault(seen.kind, Sums()).add(seen, 1)
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
            evidence, samples, latest, first = Evidence.of(seen.inputs), 1, seen, seen
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
        step = NEXT_STEPS[kind]
        if state.throttling is not None:
            step = THROTTLE_STEPS[state.throttling] + step[:1].upper() + step[1:]
        return Workload(
            kind=kind,
            summary=summary(kind, evidence, state.throttling, owner, latest.hedge),
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
    known: List[Throttling] = [cause for cause in causes if cause is not Throttling.UNREPORTED]
    known = known or list(causes)
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
