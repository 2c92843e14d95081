"""Provides the rules: pure functions from a chip (and its processes) to a level and its reasons.

Every surface asks these: the dashboard's and the notebook's colours, the alert line
(``npuwatch.alerts``), ``npuwatch check`` and ``/healthz``, the doctor's ``chip-health``,
``hbm-held`` and ``pcie-link``, and ``snapshot --json``'s ``judgement``.  ``link_verdict`` is the
one rule over a chip's links (``ChipSample.links``): every view renders it.  The limits are in
``npuwatch.judge.limits``; nothing else holds a threshold.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from npuwatch.chip_families import family_of
from npuwatch.chip_link import KIND_PCIE, ChipLink, LinkState, pcie_record
from npuwatch.judge.fault_codes import SOURCE as FAULT_SOURCE
from npuwatch.judge.fault_codes import FaultHandling, worst_handling
from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds
from npuwatch.model import (
    ChipSample,
    Health,
    Level,
    MetricStatus,
    NpuProcess,
    Snapshot,
    WorkloadClass,
    worst,
)

ChipKey = Tuple[int, int]


class ReasonKind(enum.Enum):
    """What a reason is about; stable words (the alert kinds use the same ones)."""

    HEALTH = "health"
    TEMPERATURE = "temperature"
    HBM_HELD = "hbm-held"
    PCIE_DEGRADED = "pcie-degraded"
    LINK_DEGRADED = "link-degraded"  # a link of another kind (``Reason.link`` names it)
    DEVICE_LOST = "device-lost"
    STALE = "stale"


@dataclass(frozen=True)
class Reason:
    """One reason for a chip's level: a short ``text`` (no chip label) and a ``detail`` sentence
    that says what to do."""

    kind: ReasonKind
    level: Level
    text: str
    detail: str
    link: str = ""  # the kind of link a link reason is about (``pcie``)


@dataclass(frozen=True)
class Judgement:
    """A chip's level and the reasons for it (none when ``ok``)."""

    level: Level = Level.OK
    reasons: Tuple[Reason, ...] = ()

    @property
    def texts(self) -> Tuple[str, ...]:
        """The reasons' short texts: the ``reasons`` list of ``snapshot --json``."""
        return tuple(reason.text for reason in self.reasons)


OK = Judgement()


@dataclass(frozen=True)
class HeldMemory:
    """Memory a chip holds with no process on it, beyond what an idle chip holds."""

    kind: str  # "HBM" or "memory" (DDR of the 310P)
    used_mib: float
    total_mib: int
    idle_mib: int


def fresh(chip: ChipSample, metric: str) -> Optional[float]:
    """The metric's value when it is a current reading (not stale, not absent)."""
    value = chip.metric(metric)
    note = chip.notes.get(metric)
    if value is None or (note is not None and note.status is MetricStatus.STALE):
        return None
    return value


def is_stale(chip: ChipSample) -> bool:
    """True when the chip's values are held from an older read (the source failed since)."""
    return any(note.status is MetricStatus.STALE for note in chip.notes.values())


def temperature_level(chip: ChipSample, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Level:
    """The level of the chip's current temperature against its model's limits (``ok`` when
    it has none)."""
    value = fresh(chip, "temperature_c")
    if value is None:
        return Level.OK
    warning_c, critical_c = thresholds.temperature_limits_c(chip.identity.name)
    if value >= critical_c:
        return Level.CRITICAL
    return Level.WARNING if value >= warning_c else Level.OK


def memory_bar_level(share: Optional[float], thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Level:
    """The colour level of a memory bar at ``share`` (0..1) of its total; not the chip's level."""
    if share is None or share < thresholds.memory_busy_share:
        return Level.OK
    return Level.CRITICAL if share >= thresholds.memory_full_share else Level.WARNING


def power_bar_level(share: Optional[float], thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Level:
    """The colour level of a power bar at ``share`` of the model's rated power; not the chip's level."""
    return Level.WARNING if share is not None and share >= thresholds.power_high_share else Level.OK


def held_memory(
    chip: ChipSample,
    processes: Sequence[NpuProcess],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    process_table: bool = True,
) -> Optional[HeldMemory]:
    """The memory ``chip`` holds though no process is listed on it, when more than
    ``hbm_held_min_mib`` beyond what an idle chip of its family holds.  The one rule of held
    memory: the workload judge's ``idle-holding-hbm``, the alert and the doctor's ``hbm-held``.

    Not held: a source that read no process table this tick (``process_table`` False: no process
    listed is not no process); a chip whose AI Core is busy (a process not visible here uses it:
    another container, an older driver); a 310B, whose Memory-Usage is the board's RAM shared with
    Linux (capture 039: 1797 of 3513 MiB with no job), not memory a process can leak.
    """
    if processes or not process_table:
        return None
    family = family_of(chip.identity.name)
    hbm = bool(chip.hbm_total_mib)
    if not hbm and family.shared_memory:
        return None
    aicore = fresh(chip, "aicore_percent")
    if aicore is not None and aicore >= thresholds.aicore_low_percent:
        return None
    used = fresh(chip, "hbm_used_mib" if hbm else "memory_used_mib")
    total = chip.hbm_total_mib if hbm else chip.memory_total_mib
    if used is None or not total:
        return None
    idle = family.idle_memory_mib if family.idle_memory_mib else thresholds.idle_allowance_mib(total)
    if used - idle <= thresholds.hbm_held_min_mib:
        return None
    return HeldMemory("HBM" if hbm else "memory", used, total, idle)


def host_cpu_percent(process: NpuProcess) -> float:
    """The process's host CPU use (0 when the host cannot see it)."""
    return (process.host.cpu_percent if process.host is not None else None) or 0.0


def lost_reason(chip: ChipSample) -> Optional[str]:
    """Why the chip is gone, when it is: the source's fact, or PCI config space reading ff ff."""
    if chip.lost_reason is not None:
        return chip.lost_reason
    if chip.pcie is not None and not chip.pcie.present:
        return "its PCI config space reads ff ff: the device fell off the bus (check `dmesg`)"
    return None


def judge_chip(
    chip: ChipSample,
    processes: Sequence[NpuProcess] = (),
    *,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    in_container: bool = False,
    process_table: bool = True,
) -> Judgement:
    """The chip's level and reasons.  ``processes`` are those listed on this chip, or ``None``-like
    empty when there are none; ``in_container`` words the held-memory advice; ``process_table``
    says whether the source read a process table at all.  Held memory is a reason only when the
    chip's settled workload (when judged) says so too, so a job's HBM teardown raises nothing."""
    lost = lost_reason(chip)
    if lost is not None:
        return _judgement([_lost(chip, lost)])
    reasons = [_link_reason(chip, v) for v in link_verdicts(chip, thresholds) if v.level is Level.WARNING]
    if is_stale(chip):
        return _judgement([*reasons, _stale(chip)])
    handling = worst_handling(e.code for e in chip.errors)
    if chip.health is not Health.OK or (handling is not None and handling.level is not Level.OK):
        reasons.append(_health(chip, handling))
    temperature = _temperature(chip, thresholds)
    if temperature is not None:
        reasons.append(temperature)
    held = held_memory(chip, processes, thresholds, process_table)
    settled = chip.workload is None or chip.workload.kind is WorkloadClass.IDLE_HOLDING_HBM
    if held is not None and settled:
        reasons.append(_held(chip, held, in_container))
    return _judgement(reasons)


def judge_snapshot(
    snapshot: Snapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> Dict[ChipKey, Judgement]:
    """Every chip of ``snapshot`` judged; the last answer is kept, so the views, the alert line
    and the exporter judging the same snapshot cost one judgement."""
    cached = _last[0] if _last else None
    if cached is not None and cached.snapshot is snapshot and cached.thresholds == thresholds:
        return dict(cached.judged)
    by_chip: Dict[ChipKey, List[NpuProcess]] = {}
    for process in snapshot.processes:
        by_chip.setdefault((process.npu_id, process.chip_id), []).append(process)
    in_container = snapshot.host is not None and snapshot.host.in_container
    table = snapshot.described.process_table
    judged = {
        chip.identity.key: judge_chip(
            chip,
            by_chip.get(chip.identity.key, ()),
            thresholds=thresholds,
            in_container=in_container,
            process_table=table,
        )
        for chip in snapshot.chips
    }
    _last[:] = [_Judged(snapshot, thresholds, judged)]  # one assignment: safe across threads
    return dict(judged)


@dataclass(frozen=True)
class _Judged:
    snapshot: Snapshot
    thresholds: Thresholds
    judged: Dict[ChipKey, Judgement]


_last: List[_Judged] = []  # the last judge_snapshot answer


def health_query(chip: ChipSample) -> str:
    """The npu-smi command that shows the chip's health report and error codes."""
    identity = chip.identity
    return f"`npu-smi info -t health -i {identity.npu_id} -c {identity.chip_id}`"


def _judgement(reasons: Iterable[Reason]) -> Judgement:
    found = tuple(reasons)
    return Judgement(worst(r.level for r in found), found) if found else OK


def _lost(chip: ChipSample, reason: str) -> Reason:
    off_bus = (chip.pcie is not None and not chip.pcie.present) or "ff ff" in reason
    label = chip.identity.label
    detail = f"{label} ({chip.identity.bus_id or 'no Bus-Id'}): {reason}; jobs on it have failed."
    return Reason(ReasonKind.DEVICE_LOST, Level.CRITICAL, "off the PCIe bus" if off_bus else "lost", detail)


def _stale(chip: ChipSample) -> Reason:
    note = next(n for n in chip.notes.values() if n.status is MetricStatus.STALE)
    detail = f"{chip.identity.label}'s values are not current ({note.reason}): it cannot be judged now."
    return Reason(ReasonKind.STALE, Level.UNKNOWN, "values stale", detail)


def _health(chip: ChipSample, handling: Optional[FaultHandling]) -> Reason:
    label, query = chip.identity.label, health_query(chip)
    if chip.health is Health.UNKNOWN and not chip.errors:
        detail = f"the chip source gives no health for {label}: it may be starting or failing; run {query}."
        return Reason(ReasonKind.HEALTH, Level.UNKNOWN, "health unknown", detail)
    text = chip.health.value
    if chip.errors:
        more = len(chip.errors) - 1
        text += f" {chip.errors[0].text}" + (f" (+{more} code{'s' if more > 1 else ''})" if more else "")
        codes = ", ".join(f"{e.code} ({e.meaning})" if e.meaning else e.code for e in chip.errors)
        why = f"error {codes}; {query} shows the report"
    else:
        why = f"{query} gives the error code"
    if handling is None:
        advice = "check `dmesg` and move jobs off a chip in Alarm or Critical."
        level = chip.health.level
    else:
        advice = f"Huawei's handling of it is {handling.value}: {handling.action} ({FAULT_SOURCE})."
        text += f" → {handling.value}"
        level = worst((chip.health.level, handling.level))
    detail = f"{label} reports {chip.health.value} health: {why}; {advice}"
    return Reason(ReasonKind.HEALTH, level, text, detail)


def _temperature(chip: ChipSample, thresholds: Thresholds) -> Optional[Reason]:
    level = temperature_level(chip, thresholds)
    if level is Level.OK:
        return None
    value = fresh(chip, "temperature_c")
    warning_c, critical_c = thresholds.temperature_limits_c(chip.identity.name)
    critical = level is Level.CRITICAL
    limit = critical_c if critical else warning_c
    text = f"{value:g} °C ({'critical limit' if critical else 'limit'} {limit:g} °C)"
    detail = (
        f"{chip.identity.label} is at {value:g} °C, "
        + (f"past the {critical_c:g} °C critical limit" if critical else f"above the {warning_c:g} °C")
        + " from which it risks throttling (lower clocks, slower steps): check this slot's fans and "
        "airflow and the server's inlet temperature."
    )
    return Reason(ReasonKind.TEMPERATURE, level, text, detail)


def _held(chip: ChipSample, held: HeldMemory, in_container: bool) -> Reason:
    label = chip.identity.label
    elsewhere = (
        " or a process in another container (npu-smi lists only this container's processes)"
        if in_container
        else ""
    )
    detail = (
        f"no process is listed on {label} but {held.used_mib:.0f} MiB of {held.kind} are in use "
        f"(idle is about {held.idle_mib:.0f} MiB): leaked or zombie memory from a process that died without "
        f"freeing it{elsewhere}; find holders with `fuser -v /dev/davinci*`."
    )
    owner = chip.workload.owner if chip.workload is not None else None
    if owner is not None:
        seen = f" at {owner.last_seen:%H:%M:%S}" if owner.last_seen is not None else ""
        who = f"PID {owner.pid} ({owner.name or 'unnamed'}{', ' + owner.user if owner.user else ''})"
        detail += f" The last process npuwatch saw holding it was {who}{seen}."
    text = f"{held.used_mib / 1024:.1f} GiB {held.kind} held, no process"
    return Reason(ReasonKind.HBM_HELD, Level.WARNING, text, detail)


@dataclass(frozen=True)
class LinkVerdict:
    """The judge's word on one link of a chip: its ``state`` in the chip's light (a slow link on
    an idle chip is ``POWER_SAVING``), its ``level``, the ``word`` a view puts after the link
    (``narrow``, ``slow under load``) and a short ``text`` (no chip label): the alert's."""

    link: ChipLink
    state: LinkState
    level: Level
    word: str
    text: str


#: The level of each judged state; ``SLOW`` is a warning only under load (``link_verdict``).
LINK_LEVELS = {
    LinkState.UP: Level.OK,
    LinkState.POWER_SAVING: Level.OK,
    LinkState.SLOW: Level.WARNING,
    LinkState.NARROW: Level.WARNING,
    LinkState.DOWN: Level.WARNING,
    LinkState.ABSENT: Level.CRITICAL,  # the chip is lost (``lost_reason``)
    LinkState.UNKNOWN: Level.OK,
}


def chip_busy(chip: ChipSample, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Optional[bool]:
    """Whether the chip computes now (AI Core, or NPU Util where AI Core is not printed, at or
    above ``link_busy_aicore_percent``); ``None`` when neither is a current reading."""
    value = fresh(chip, "aicore_percent")
    if value is None:
        value = fresh(chip, "npu_util_percent")
    return None if value is None else value >= thresholds.link_busy_aicore_percent


def link_verdict(
    chip: ChipSample, link: ChipLink, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> LinkVerdict:
    """The one rule over links: narrow, down or gone counts whatever the chip does; below its
    maximum speed counts only while the chip is busy (idle, it is link power saving, by design;
    with the chip's activity not read, it is said and not counted)."""
    state, below = link.state, f"{link.title} {link.reason}"
    if state is LinkState.SLOW:
        busy = chip_busy(chip, thresholds)
        if busy is False:
            power_saving = LinkState.POWER_SAVING
            return LinkVerdict(
                link, power_saving, Level.OK, "power saving at idle", f"{below} at idle (power saving)"
            )
        if busy is None:
            word = "slow (the chip's activity not read)"
            return LinkVerdict(link, state, Level.OK, word, f"{below} (the chip's activity not read)")
        return LinkVerdict(link, state, Level.WARNING, "slow under load", f"{below} under load")
    word = state.value
    if state is LinkState.UP or state is LinkState.UNKNOWN:
        return LinkVerdict(link, state, LINK_LEVELS[state], word, f"{link.title} {link.detail}")
    return LinkVerdict(
        link, state, LINK_LEVELS[state], word, below if link.reason else f"{link.title} {word}"
    )


def chip_links(chip: ChipSample) -> Tuple[ChipLink, ...]:
    """The chip's links; for a chip that carries only its raw sysfs reading (built by hand, or
    read from a recording older than the links), that reading's record."""
    if chip.links or chip.pcie is None:
        return chip.links
    bus_id = chip.identity.bus_id
    return (pcie_record(chip.pcie, bus_id.lower() if bus_id else None),)


def link_verdicts(chip: ChipSample, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Tuple[LinkVerdict, ...]:
    """The judge's verdict on every link of ``chip``, in its order."""
    return tuple(link_verdict(chip, link, thresholds) for link in chip_links(chip))


def _link_reason(chip: ChipSample, verdict: LinkVerdict) -> Reason:
    link, label = verdict.link, chip.identity.label
    if verdict.state is LinkState.SLOW:
        what = f"runs at {link.detail} while the chip is busy: host↔device copies run slower"
    elif verdict.state is LinkState.NARROW:
        what = f"trained at {link.detail}: host↔device copies run slower"
    else:
        what = f"is {verdict.state.value}"
    hint = f"; {link.hint}" if link.hint else ""
    kind = ReasonKind.PCIE_DEGRADED if link.kind == KIND_PCIE else ReasonKind.LINK_DEGRADED
    return Reason(kind, verdict.level, verdict.text, f"{label}'s {link.title} link {what}{hint}.", link.kind)
