"""Provides AlertTracker: the alerts a user should act on, from Snapshots, with hysteresis."""

from __future__ import annotations

import enum
import functools
import threading
from dataclasses import dataclass
from typing import Dict, Iterator, Optional, Sequence, Set, Tuple, Union

from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds
from npuwatch.judge.rules import Reason, ReasonKind, chip_links, judge_snapshot
from npuwatch.model import ChipSample, Level, MetricStatus, ProbeReport, Snapshot, WorkloadClass
from npuwatch.source_info import SourceInfo
from npuwatch.text_safety import first_clause, shorten

ChipKey = Tuple[int, int]
AlertKey = Tuple[Union[str, int], ...]


@functools.total_ordering
class Severity(enum.Enum):
    """How urgent an alert is; members compare INFO < WARNING < CRITICAL."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for INFO, 1 for WARNING, 2 for CRITICAL."""
        return _RANKS[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank


_RANKS = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class AlertKind(enum.Enum):
    """What an alert is about."""

    HEALTH = "health"
    TEMPERATURE = "temperature"
    HBM_HELD = "hbm-held"
    INPUT_BOUND = "input-bound"
    THROTTLING = "throttling"
    PCIE_DEGRADED = "pcie-degraded"
    LINK_DEGRADED = "link-degraded"  # a link of another kind: its key word is the link's kind
    DEVICE_LOST = "device-lost"
    NPU_SMI = "npu-smi"  # the chip source (npu-smi or DCMI): the name predates DCMI, a stable value
    BACKEND = "backend"  # the chosen backend did not read the sample (auto fell back to npu-smi)


@dataclass(frozen=True)
class Alert:
    """One thing to act on: a stable ``key``, a one-line ``message`` and a ``detail`` sentence."""

    key: AlertKey
    severity: Severity
    kind: AlertKind
    message: str
    detail: str
    chip: Optional[ChipKey] = None


#: Ends the message of a failing or hung chip source (npu-smi, DCMI): the doctor's checks find why.
DOCTOR_POINTER = " — run `npuwatch doctor`"

#: Every per-chip alert key but the links' (each link's key word is its kind: ``pcie``).
_CHIP_KINDS = ("health", "temperature", "hbm-held", "input-bound", "throttling", "device-lost")
#: The link reasons: judged from sysfs and the like, so they count even while the source fails.
_LINK_REASONS = (ReasonKind.PCIE_DEGRADED, ReasonKind.LINK_DEGRADED)


@dataclass(frozen=True)
class _Finding:
    """A condition seen in this update, and after how many consecutive updates it shows."""

    alert: Alert
    raise_after: int


@dataclass
class _State:
    alert: Alert
    hits: int = 0
    misses: int = 0
    shown: bool = False
    since_s: float = 0.0  # the time of the first sample of the current run of hits or misses


@dataclass(frozen=True)
class Hysteresis:
    """How many consecutive samples a condition must hold to show, and be gone to clear.

    A sample is a distinct snapshot time: a view that refreshes (or a replay at half speed
    that shows) the same sample twice counts it once.  ``raise_after_s`` / ``clear_after_s``
    add a span of sample time the run must also cover (0: the counts alone decide), so a
    condition can settle in seconds of samples whatever the interval.
    """

    raise_after: int = 2
    clear_after: int = 3
    raise_after_s: float = 0.0
    clear_after_s: float = 0.0

    def __post_init__(self) -> None:
        if min(self.raise_after, self.clear_after) < 1:
            raise ValueError("raise_after and clear_after must be at least 1")
        if not (self.raise_after_s >= 0.0 and self.clear_after_s >= 0.0):  # NaN too
            raise ValueError("raise_after_s and clear_after_s must be at least 0")


#: The severity of an alert for a reason of each level (an unknown health is worth a look, not
#: an alarm: the chip source's own alert says when nothing can be read).
_SEVERITY = {
    Level.WARNING: Severity.WARNING,
    Level.UNKNOWN: Severity.WARNING,
    Level.CRITICAL: Severity.CRITICAL,
}
_KINDS = {
    ReasonKind.HEALTH: AlertKind.HEALTH,
    ReasonKind.TEMPERATURE: AlertKind.TEMPERATURE,
    ReasonKind.HBM_HELD: AlertKind.HBM_HELD,
    ReasonKind.PCIE_DEGRADED: AlertKind.PCIE_DEGRADED,
    ReasonKind.LINK_DEGRADED: AlertKind.LINK_DEGRADED,
    ReasonKind.DEVICE_LOST: AlertKind.DEVICE_LOST,
}
#: The alert key word of each kind (links keep their older short key).
_KEYS = {kind: kind.value for kind in AlertKind} | {AlertKind.PCIE_DEGRADED: "pcie"}


class AlertTracker:
    """Turns each Snapshot into the alerts to show, raising and clearing them with hysteresis.

    The conditions are the judge's reasons (``npuwatch.judge``), so the alert line says what the
    chip's colour, ``check`` and ``/healthz`` say.  A condition shows after holding for
    ``raise_after`` consecutive samples (1 for a chip whose health is not OK, for a lost device
    and for a failing or hung chip source) and goes after ``clear_after`` consecutive samples
    without it (``Hysteresis``: a sample is a distinct snapshot time, however often a view
    refreshes).  A chip that cannot be judged in a sample (the source failed, its values are
    stale) neither counts nor clears: the source's alert says why.
    """

    def __init__(
        self, thresholds: Thresholds = DEFAULT_THRESHOLDS, hysteresis: Hysteresis = Hysteresis()
    ) -> None:
        self.thresholds = thresholds
        self.hysteresis = hysteresis
        self._lock = threading.Lock()
        self._states: Dict[AlertKey, _State] = {}
        self._shown: Tuple[Alert, ...] = ()
        self._last_s: Optional[float] = None  # the time of the last sample counted

    @property
    def alerts(self) -> Tuple[Alert, ...]:
        """The alerts the last ``update`` returned."""
        return self._shown

    def update(self, snapshot: Snapshot) -> Tuple[Alert, ...]:
        """Judge ``snapshot`` and return the alerts to show, most severe first, then by NPU/chip.

        Hysteresis counts samples, not calls: a snapshot taken at the time of the last one
        counted (a refresh, a replay slower than the recording) returns the alerts shown, and
        time going back (a replay seeking back) starts afresh, as the workload judge does.
        """
        present = {chip.identity.key for chip in snapshot.chips}
        now_s = snapshot.taken_at.timestamp()
        hysteresis = self.hysteresis
        with self._lock:
            if self._last_s is not None and now_s <= self._last_s:
                if now_s == self._last_s:
                    return self._shown  # the same sample again: it counted already
                self._states.clear()
            self._last_s = now_s
            findings, judged = self._judge(snapshot)
            for key, finding in findings.items():
                state = self._states.setdefault(key, _State(finding.alert))
                if state.misses or not state.hits:
                    state.since_s = now_s
                state.alert, state.hits, state.misses = finding.alert, state.hits + 1, 0
                held = finding.raise_after == 1 or now_s - state.since_s >= hysteresis.raise_after_s
                state.shown = state.shown or (state.hits >= finding.raise_after and held)
            for key in [k for k in self._states if k not in findings]:
                state = self._states[key]
                chip = state.alert.chip
                if chip is not None and chip in present and key not in judged:
                    continue  # not judged this sample (the source failed): hold, neither count nor clear
                if state.hits:
                    state.since_s = now_s
                state.hits, state.misses = 0, state.misses + 1
                gone = state.misses >= hysteresis.clear_after
                if not state.shown or (gone and now_s - state.since_s >= hysteresis.clear_after_s):
                    del self._states[key]
            shown = [s.alert for s in self._states.values() if s.shown]
            self._shown = tuple(sorted(shown, key=_order))
            return self._shown

    def _judge(self, snapshot: Snapshot) -> Tuple[Dict[AlertKey, _Finding], Set[AlertKey]]:
        """Every condition that holds now, and the keys that could be judged at all."""
        findings: Dict[AlertKey, _Finding] = {}
        judged: Set[AlertKey] = set()
        report = snapshot.chip_source_report
        if report is not None:
            finding = self._source(report, snapshot.described)
            if finding is not None:
                findings[finding.alert.key] = finding
        if snapshot.backend_note is not None:
            finding = self._fallback(snapshot.backend_note)
            findings[finding.alert.key] = finding
        judgements = judge_snapshot(snapshot, self.thresholds)
        # Chip values are current only when the source answered; otherwise its alert says why.
        answered = report is None or report.status is MetricStatus.OK
        buses: Set[Tuple[int, str, str]] = set()
        for chip in snapshot.chips:
            key = chip.identity.key
            reasons = judgements[key].reasons
            kinds = {reason.kind for reason in reasons}
            links = {(link.kind, *key) for link in chip_links(chip)} | {("pcie", *key)}
            if ReasonKind.DEVICE_LOST in kinds:
                judged.update((kind, *key) for kind in _CHIP_KINDS)  # its older alerts count as clear
                judged.update(links)
            elif answered and ReasonKind.STALE not in kinds:
                judged.update((kind, *key) for kind in _CHIP_KINDS)
                judged.update(links)
                for alert in _workload_alerts(chip):
                    findings[alert.key] = _Finding(alert, 1)  # the workload judge settled it already
            else:
                # Only the links can be judged; the source's alert says why the rest cannot.
                reasons = tuple(r for r in reasons if r.kind in _LINK_REASONS)
                judged.update((link.kind, *key) for link in chip_links(chip))
            for finding in self._chip_findings(chip, reasons, buses):
                findings[finding.alert.key] = finding
        return findings, judged

    def _chip_findings(
        self, chip: ChipSample, reasons: Sequence[Reason], buses: Set[Tuple[int, str, str]]
    ) -> Iterator[_Finding]:
        identity = chip.identity
        for reason in reasons:
            kind = _KINDS.get(reason.kind)
            if kind is None or (reason.kind in _LINK_REASONS and _seen_link(chip, reason.link, buses)):
                continue  # STALE is the source's alert; a 310P Duo's two chips share one link
            key: AlertKey = (reason.link or _KEYS[kind], *identity.key)
            alert = Alert(
                key,
                _SEVERITY[reason.level],
                kind,
                f"{identity.label} {reason.text}",
                reason.detail,
                identity.key,
            )
            # Held memory is a reason only once the workload judge settled the class (its window,
            # in seconds): the alert shows with the class, not a second window later.
            settled = kind is AlertKind.HBM_HELD and chip.workload is not None
            at_once = settled or kind in (AlertKind.HEALTH, AlertKind.DEVICE_LOST)
            yield _Finding(alert, 1 if at_once else self.hysteresis.raise_after)

    def _source(self, report: ProbeReport, source: SourceInfo) -> Optional[_Finding]:
        """The chip source's own alert, naming the source that read the chips (or failed to) as it
        declares itself (``Snapshot.described``: ``npu-smi``; ``DCMI`` when the driver's library
        read), whatever the failure's message says."""
        duration = report.duration_s
        slow_s = self.thresholds.source_slow_s
        title = source.title
        if report.status is MetricStatus.OK:
            if duration is None or duration <= slow_s:
                return None
            message = f"{title} slow: {duration:.1f} s"
            detail = (
                f"one {title} read took {duration:.1f} s (more than {slow_s:g} s): the driver is busy "
                f"or another tool polls it too; raise --interval or look for other {title} callers."
            )
            alert = Alert(("npu-smi",), Severity.WARNING, AlertKind.NPU_SMI, message, detail)
            return _Finding(alert, self.hysteresis.raise_after)  # one slow answer is no news
        if report.status is MetricStatus.TIMEOUT:
            took = "" if duration is None else f": killed after {duration:.1f} s"
            message = f"{title} hung{took}"
            detail = (
                f"{report.message or title + ' did not answer'}; the values shown are stale. The driver "
                "may be hung or busy: check `dmesg` for davinci/devdrv errors and run `npuwatch doctor`."
            )
        else:
            text = source.failure_text(report.message or report.status.value)
            message = first_clause(text, 60)
            detail = f"{text}; no chip can be read until it answers: run `npuwatch doctor`."
        # A failed read shows at once, from the first sample: until the source answers every value
        # is n/a or stale, and the doctor finds the cause (device nodes, driver, DCMI, a hang).
        message = f"{message}{DOCTOR_POINTER}"
        return _Finding(Alert(("npu-smi",), Severity.CRITICAL, AlertKind.NPU_SMI, message, detail), 1)

    def _fallback(self, note: str) -> _Finding:
        """The chosen backend did not read this sample (a hung, failing or short DCMI; a library
        held back): a note, not an alarm — the chips were read — that says why, once it lasts."""
        detail = f"{note}. `npuwatch doctor` checks the DCMI library; `--backend npu-smi` silences this."
        alert = Alert(("backend",), Severity.INFO, AlertKind.BACKEND, shorten(note, 90), detail)
        return _Finding(alert, self.hysteresis.raise_after)


def _workload_alerts(chip: ChipSample) -> Iterator[Alert]:
    """The workload judge's findings worth an alert: an input-bound job and a throttled chip."""
    workload = chip.workload
    if workload is None:
        return
    identity = chip.identity
    if workload.kind is WorkloadClass.INPUT_BOUND:
        detail = f"{identity.label} is input-bound ({workload.summary}): {workload.next_step}"
        key: AlertKey = ("input-bound", *identity.key)
        message = f"{identity.label} input-bound"
        yield Alert(key, Severity.WARNING, AlertKind.INPUT_BOUND, message, detail, identity.key)
    if workload.throttling is not None:
        detail = f"{identity.label}: {workload.summary}. {workload.next_step}"
        message = f"{identity.label} {workload.throttle_tag}"
        key = ("throttling", *identity.key)
        yield Alert(key, Severity.WARNING, AlertKind.THROTTLING, message, detail, identity.key)


def _seen_link(chip: ChipSample, kind: str, seen: Set[Tuple[int, str, str]]) -> bool:
    """True when an alert was made for this link already (a 310P Duo's chips share one)."""
    shared = next((link.shared_by for link in chip_links(chip) if link.kind == kind), None)
    if shared is None:
        return False
    link = (chip.identity.npu_id, kind, shared)
    if link in seen:
        return True
    seen.add(link)
    return False


def summary_line(alerts: Sequence[Alert], width: int) -> str:
    """The most severe alerts that fit in ``width`` characters: ``⚠ NPU 3 Alarm · … · +2 more``."""
    if width <= 0:
        return ""
    if not alerts:
        return "no alerts"[:width]
    ordered = sorted(alerts, key=_order)
    messages = [a.message for a in ordered]
    for count in range(len(messages), 0, -1):
        rest = len(messages) - count
        line = "⚠ " + " · ".join(messages[:count]) + (f" · +{rest} more" if rest else "")
        if len(line) <= width:
            return line
    # Not even the first fits whole: cut it and keep the count of the others when there is room.
    rest = len(messages) - 1
    tail = f" · +{rest} more" if rest else ""
    room = width - len("⚠ ") - len(tail)
    if room >= 2:
        return "⚠ " + shorten(messages[0], room) + tail
    return ("⚠ " + shorten(messages[0], max(1, width - 2)))[:width]


def _order(alert: Alert) -> Tuple[int, int, ChipKey, str]:
    """Most severe first; within a severity machine-wide alerts, then by NPU/chip."""
    chip = alert.chip
    return (-alert.severity.rank, 0 if chip is None else 1, chip or (0, 0), alert.kind.value)
