"""Provides AlertTracker: the alerts a user should act on, from Snapshots, with hysteresis."""

from __future__ import annotations

import enum
import functools
import threading
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from npuwatch.model import ChipSample, Health, MetricStatus, NpuProcess, PcieLink, ProbeReport, Snapshot

ChipKey = Tuple[int, int]
AlertKey = Tuple[Union[str, int], ...]

#: The words of chip_state.VANISHED, the note a chip gets when npu-smi stops listing it.
#: Matched as text because this module imports only the model (it is shared by every view).
LOST_MARK = "no longer lists this chip"

# Temperature limits (°C) by npu-smi model-name prefix; first match wins.  Huawei publishes no
# throttle point for the chip sensor npu-smi reads (none found in the npu-smi or DCMI docs nor
# in MindCluster), so these are conservative defaults: data-centre accelerators with HBM
# commonly start throttling around 85-90 °C, so the 910A/910B/A3/950 family warns at 85 °C;
# the 310 family (passively cooled inference cards and edge modules) warns at 80 °C.
# Override with ``AlertTracker(temperature_limit_c=...)``.
_TEMPERATURE_LIMITS_C: Tuple[Tuple[str, float], ...] = (("310", 80.0), ("Ascend310", 80.0))
DEFAULT_TEMPERATURE_LIMIT_C = 85.0


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
    PCIE_DEGRADED = "pcie-degraded"
    DEVICE_LOST = "device-lost"
    NPU_SMI = "npu-smi"


@dataclass(frozen=True)
class Alert:
    """One thing to act on: a stable ``key``, a one-line ``message`` and a ``detail`` sentence."""

    key: AlertKey
    severity: Severity
    kind: AlertKind
    message: str
    detail: str
    chip: Optional[ChipKey] = None


def default_temperature_limit_c(model_name: Optional[str]) -> float:
    """The temperature (°C) from which a chip npu-smi names ``model_name`` risks throttling."""
    name = (model_name or "").strip()
    return next(
        (c for prefix, c in _TEMPERATURE_LIMITS_C if name.startswith(prefix)), DEFAULT_TEMPERATURE_LIMIT_C
    )


#: Ends the message of a failing or hung npu-smi: the doctor's checks find why.
DOCTOR_POINTER = " — run `npuwatch doctor`"

#: The per-chip alert keys judged from npu-smi's table, and all per-chip keys.
_NPU_SMI_KINDS = ("health", "temperature", "hbm-held", "input-bound", "device-lost")
_CHIP_KINDS = (*_NPU_SMI_KINDS, "pcie")


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


class AlertTracker:
    """Turns each Snapshot into the alerts to show, raising and clearing them with hysteresis.

    A condition shows after holding for ``raise_after`` consecutive updates (1 for a chip whose
    health is not OK, for a lost device and for npu-smi failing or hung) and goes after
    ``clear_after`` consecutive updates without it.  A condition that cannot be judged in an
    update (npu-smi failed, so chip values are stale or absent) neither counts nor clears: the
    npu-smi alert says why.
    """

    def __init__(
        self,
        *,
        raise_after: int = 2,
        clear_after: int = 3,
        temperature_limit_c: Optional[float] = None,
        temperature_band_c: float = 5.0,
        temperature_critical_over_c: float = 10.0,
        hbm_idle_floor_mib: int = 4096,
        hbm_idle_fraction: float = 1 / 16,
        hbm_held_min_mib: int = 2048,
        aicore_idle_percent: float = 5.0,
        host_busy_percent: float = 80.0,
        input_bound_after: int = 3,
        npu_smi_slow_s: float = 2.0,
    ) -> None:
        if min(raise_after, clear_after, input_bound_after) < 1:
            raise ValueError("raise_after, clear_after and input_bound_after must be at least 1")
        self.raise_after = raise_after
        self.clear_after = clear_after
        self.temperature_limit_c = temperature_limit_c
        self.temperature_band_c = temperature_band_c
        self.temperature_critical_over_c = temperature_critical_over_c
        # 910B idles at ~3 GB (32 GB parts) / ~4 GB (64 GB parts) of HBM with nothing running
        # (shared/reference/driver-interfaces.md; captures 022: 2654 MiB, 003/093/100: ~3.4 GiB,
        # 037 950DT: 4856 of 98304 MiB); 310P DDR idles lower (049: 927 MiB).
        self.hbm_idle_floor_mib = hbm_idle_floor_mib
        self.hbm_idle_fraction = hbm_idle_fraction
        self.hbm_held_min_mib = hbm_held_min_mib
        self.aicore_idle_percent = aicore_idle_percent
        self.host_busy_percent = host_busy_percent
        self.input_bound_after = input_bound_after
        self.npu_smi_slow_s = npu_smi_slow_s
        self._lock = threading.Lock()
        self._states: Dict[AlertKey, _State] = {}
        self._shown: Tuple[Alert, ...] = ()

    @property
    def alerts(self) -> Tuple[Alert, ...]:
        """The alerts the last ``update`` returned."""
        return self._shown

    def update(self, snapshot: Snapshot) -> Tuple[Alert, ...]:
        """Judge ``snapshot`` and return the alerts to show, most severe first, then by NPU/chip."""
        present = {chip.identity.key for chip in snapshot.chips}
        with self._lock:
            findings, judged = self._judge(snapshot)
            for key, finding in findings.items():
                state = self._states.setdefault(key, _State(finding.alert))
                state.alert, state.hits, state.misses = finding.alert, state.hits + 1, 0
                state.shown = state.shown or state.hits >= finding.raise_after
            for key in [k for k in self._states if k not in findings]:
                state = self._states[key]
                chip = state.alert.chip
                if chip is not None and chip in present and key not in judged:
                    continue  # not judged this update (npu-smi failed): hold, neither count nor clear
                state.hits, state.misses = 0, state.misses + 1
                if not state.shown or state.misses >= self.clear_after:
                    del self._states[key]
            shown = [s.alert for s in self._states.values() if s.shown]
            self._shown = tuple(sorted(shown, key=_order))
            return self._shown

    def _judge(self, snapshot: Snapshot) -> Tuple[Dict[AlertKey, _Finding], Set[AlertKey]]:
        """Every condition that holds now, and the keys that could be judged at all."""
        findings: Dict[AlertKey, _Finding] = {}
        judged: Set[AlertKey] = set()
        report = snapshot.probe("npu-smi")
        if report is not None:
            finding = self._npu_smi(report)
            if finding is not None:
                findings[finding.alert.key] = finding
        # Chip values are current only when npu-smi answered; otherwise its alert says why.
        answered = report is None or report.status is MetricStatus.OK
        processes: Dict[ChipKey, List[NpuProcess]] = {}
        for process in snapshot.processes:
            processes.setdefault((process.npu_id, process.chip_id), []).append(process)
        buses: Set[Tuple[int, str]] = set()
        for chip in snapshot.chips:
            key = chip.identity.key
            lost = _lost_reason(chip)
            if lost is not None:
                # A lost chip has no other condition: its older alerts count as clear.
                judged.update((kind, *key) for kind in _CHIP_KINDS)
                alert = _lost(chip, lost)
                findings[alert.key] = _Finding(alert, 1)
                continue
            if chip.pcie is not None:
                judged.add(("pcie", *key))
                degraded = _pcie_degraded(chip, chip.pcie, buses)
                if degraded is not None:
                    findings[degraded.key] = _Finding(degraded, self.raise_after)
            if answered:
                judged.update((kind, *key) for kind in _NPU_SMI_KINDS)
                for finding in self._chip_findings(chip, processes.get(key, []), snapshot):
                    findings[finding.alert.key] = finding
        return findings, judged

    def _chip_findings(
        self,
        chip: ChipSample,
        processes: Sequence[NpuProcess],
        snapshot: Snapshot,
    ) -> Iterator[_Finding]:
        if chip.health is not Health.OK:
            yield _Finding(_health(chip), 1)
        temperature = self._temperature(chip)
        if temperature is not None:
            yield _Finding(temperature, self.raise_after)
        held = self._hbm_held(chip, processes, snapshot)
        if held is not None:
            yield _Finding(held, self.raise_after)
        bound = self._input_bound(chip, processes)
        if bound is not None:
            yield _Finding(bound, self.input_bound_after)

    def _npu_smi(self, report: ProbeReport) -> Optional[_Finding]:
        duration = report.duration_s
        if report.status is MetricStatus.OK:
            if duration is None or duration <= self.npu_smi_slow_s:
                return None
            message = f"npu-smi slow: {duration:.1f} s"
            detail = (
                f"`npu-smi info` took {duration:.1f} s (more than {self.npu_smi_slow_s:g} s): the driver is "
                "busy or another tool polls it too; raise --interval or look for other npu-smi callers."
            )
            alert = Alert(("npu-smi",), Severity.WARNING, AlertKind.NPU_SMI, message, detail)
            return _Finding(alert, self.raise_after)  # one slow answer is no news
        if report.status is MetricStatus.TIMEOUT:
            took = "" if duration is None else f": killed after {duration:.1f} s"
            message = f"npu-smi hung{took}"
            detail = (
                f"{report.message or 'npu-smi did not answer'}; the values shown are stale. The driver "
                "may be hung or busy: check `dmesg` for davinci/devdrv errors and run `npuwatch doctor`."
            )
        else:
            text = report.message or f"npu-smi failed ({report.status.value})"
            # The runner's messages name npu-smi already and put the explanation after a colon
            # ("npu-smi failed with DCMI error -8005 (…): …"): the line keeps the first clause.
            line = text if text.startswith("npu-smi") else f"npu-smi failed: {text}"
            head = line.split(": ", 1)[0]
            message = _shorten(head if len(line) > 60 and len(head) >= 20 else line, 60)
            detail = f"{text}; no chip can be read until it answers: run `npuwatch doctor`."
        # A failed read shows at once, from the first sample: until npu-smi answers every value
        # is n/a or stale, and the doctor finds the cause (device nodes, driver, DCMI, a hang).
        message = f"{message}{DOCTOR_POINTER}"
        return _Finding(Alert(("npu-smi",), Severity.CRITICAL, AlertKind.NPU_SMI, message, detail), 1)

    def _temperature(self, chip: ChipSample) -> Optional[Alert]:
        value = _fresh(chip, "temperature_c")
        if value is None:
            return None
        limit = self.temperature_limit_c
        if limit is None:
            limit = default_temperature_limit_c(chip.identity.name)
        key: AlertKey = ("temperature", *chip.identity.key)
        # A band: raise at the limit, hold until it falls below limit - band.
        state = self._states.get(key)
        threshold = limit - self.temperature_band_c if state is not None and state.shown else limit
        if value < threshold:
            return None
        critical = value >= limit + self.temperature_critical_over_c
        severity = Severity.CRITICAL if critical else Severity.WARNING
        label = chip.identity.label
        message = f"{label} {value:g} °C (limit {limit:g} °C)"
        detail = (
            f"{label} is at {value:g} °C, {'far ' if critical else ''}above the {limit:g} °C from which it "
            "risks throttling (lower clocks, slower steps): check this slot's fans and airflow and the "
            "server's inlet temperature."
        )
        return Alert(key, severity, AlertKind.TEMPERATURE, message, detail, chip.identity.key)

    def _hbm_held(
        self, chip: ChipSample, processes: Sequence[NpuProcess], snapshot: Snapshot
    ) -> Optional[Alert]:
        if processes:
            return None
        name = (chip.identity.name or "").strip()
        hbm = bool(chip.hbm_total_mib)
        if not hbm and name.startswith("310B"):
            # 310B is an SoC: its Memory-Usage is the board's RAM shared with Linux (039: 1797 of
            # 3513 MiB with no job), not memory a process can leak on the device.
            return None
        used = _fresh(chip, "hbm_used_mib" if hbm else "memory_used_mib")
        total = chip.hbm_total_mib if hbm else chip.memory_total_mib
        if used is None or not total:
            return None
        idle = max(float(self.hbm_idle_floor_mib), total * self.hbm_idle_fraction)
        if used - idle < self.hbm_held_min_mib:
            return None
        memory = "HBM" if hbm else "memory"
        label = chip.identity.label
        elsewhere = (
            " or a process in another container (npu-smi lists only this container's processes)"
            if snapshot.host is not None and snapshot.host.in_container
            else ""
        )
        detail = (
            f"npu-smi lists no process on {label} but {used:.0f} MiB of {memory} are in use (idle is about "
            f"{idle:.0f} MiB): leaked or zombie memory from a process that died without freeing it"
            f"{elsewhere}; find holders with `fuser -v /dev/davinci*`."
        )
        message = f"{label} {used / 1024:.1f} GiB {memory} held, no process"
        return Alert(
            ("hbm-held", *chip.identity.key),
            Severity.WARNING,
            AlertKind.HBM_HELD,
            message,
            detail,
            chip.identity.key,
        )

    def _input_bound(self, chip: ChipSample, processes: Sequence[NpuProcess]) -> Optional[Alert]:
        aicore = _fresh(chip, "aicore_percent")
        if aicore is None or aicore > self.aicore_idle_percent:
            return None
        busy = [p for p in processes if _cpu_percent(p) >= self.host_busy_percent]
        if not busy:
            return None
        top = max(busy, key=_cpu_percent)
        label = chip.identity.label
        process = f"PID {top.pid} ({top.name or 'unnamed'})"
        detail = (
            f"AI Core is at {aicore:g} % while {process} uses {_cpu_percent(top):g} % CPU: "
            "the host is busy but the NPU idles — the classic data-loading bottleneck; add data-loader "
            "workers, prefetch, or move preprocessing onto the NPU."
        )
        key: AlertKey = ("input-bound", *chip.identity.key)
        return Alert(
            key, Severity.WARNING, AlertKind.INPUT_BOUND, f"{label} input-bound", detail, chip.identity.key
        )


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
        return "⚠ " + _shorten(messages[0], room) + tail
    return ("⚠ " + _shorten(messages[0], max(1, width - 2)))[:width]


def _order(alert: Alert) -> Tuple[int, int, ChipKey, str]:
    """Most severe first; within a severity machine-wide alerts, then by NPU/chip."""
    chip = alert.chip
    return (-alert.severity.rank, 0 if chip is None else 1, chip or (0, 0), alert.kind.value)


def _fresh(chip: ChipSample, metric: str) -> Optional[float]:
    """The metric's value when it is a current reading (not stale, not absent)."""
    value = chip.metric(metric)
    note = chip.notes.get(metric)
    if value is None or (note is not None and note.status is MetricStatus.STALE):
        return None
    return value


def _lost_reason(chip: ChipSample) -> Optional[str]:
    reason = next((n.reason for n in chip.notes.values() if LOST_MARK in n.reason), None)
    if reason is None and chip.pcie is not None and not chip.pcie.present:
        reason = "its PCI config space reads ff ff: the device fell off the bus (check `dmesg`)"
    return reason


def _lost(chip: ChipSample, reason: str) -> Alert:
    label = chip.identity.label
    off_bus = "ff ff" in reason or (chip.pcie is not None and not chip.pcie.present)
    message = f"{label} off the PCIe bus" if off_bus else f"{label} lost"
    detail = f"{label} ({chip.identity.bus_id or 'no Bus-Id'}): {reason}; jobs on it have failed."
    key: AlertKey = ("device-lost", *chip.identity.key)
    return Alert(key, Severity.CRITICAL, AlertKind.DEVICE_LOST, message, detail, chip.identity.key)


def _health(chip: ChipSample) -> Alert:
    identity = chip.identity
    label = identity.label
    query = f"`npu-smi info -t health -i {identity.npu_id} -c {identity.chip_id}`"
    if chip.health is Health.UNKNOWN:
        severity, message = Severity.WARNING, f"{label} health unknown"
        detail = (
            f"npu-smi answers but gives no health for {label}: it may be starting or failing; run {query}."
        )
    else:
        severity = Severity.WARNING if chip.health is Health.WARNING else Severity.CRITICAL
        message = f"{label} {chip.health.value}"
        if chip.errors:  # the codes npu-smi's health report gave (the sampler asks for them)
            more = len(chip.errors) - 1
            message += f" {chip.errors[0].text}" + (
                f" (+{more} code{'s' if more > 1 else ''})" if more else ""
            )
            codes = ", ".join(f"{e.code} ({e.meaning})" if e.meaning else e.code for e in chip.errors)
            why = f"error {codes}; {query} shows the report"
        else:
            why = f"{query} gives the error code"
        detail = (
            f"npu-smi reports {label} in {chip.health.value}: {why}; "
            "check `dmesg` and move jobs off a chip in Alarm or Critical."
        )
    return Alert(("health", *identity.key), severity, AlertKind.HEALTH, message, detail, identity.key)


def _cpu_percent(process: NpuProcess) -> float:
    return (process.host.cpu_percent if process.host is not None else None) or 0.0


def _pcie_degraded(chip: ChipSample, link: PcieLink, buses: Set[Tuple[int, str]]) -> Optional[Alert]:
    """The alert for a link below its maximum, once per PCI function (310P Duo chips share one)."""
    if not link.degraded:
        return None
    identity = chip.identity
    if identity.bus_id is not None:
        bus = (identity.npu_id, identity.bus_id.lower())
        if bus in buses:
            return None
        buses.add(bus)
    key: AlertKey = ("pcie", *identity.key)
    parts: List[str] = []
    narrow = (
        link.current_width is not None and link.max_width is not None and link.current_width < link.max_width
    )
    if narrow:
        parts.append(f"x{link.current_width} of x{link.max_width}")
    if (
        link.current_speed_gt_s is not None
        and link.max_speed_gt_s is not None
        and link.current_speed_gt_s < link.max_speed_gt_s
    ):
        parts.append(f"{link.current_speed_gt_s:g} of {link.max_speed_gt_s:g} GT/s")
    label = chip.identity.label
    where = f" (`lspci -vv -s {chip.identity.bus_id}`)" if chip.identity.bus_id else ""
    if narrow:
        detail = (
            f"{label}'s PCIe link trained at {', '.join(parts)}: host↔device copies run slower; reseat "
            f"the card, check the slot or riser and the BIOS link settings{where}."
        )
    else:
        # A lower speed alone can be link power management at idle; it matters under load.
        detail = (
            f"{label}'s PCIe link runs at {parts[0]}: link power saving at idle can do this, but if it "
            f"stays under load host↔device copies are slower; check the slot and BIOS settings{where}."
        )
    severity = Severity.WARNING if narrow else Severity.INFO
    message = f"{label} PCIe {', '.join(parts)}"
    return Alert(key, severity, AlertKind.PCIE_DEGRADED, message, detail, chip.identity.key)


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
