"""Provides Sampler: one npu-smi call per tick + cached slow facts → a Snapshot, and its History."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import (
    TYPE_CHECKING,
    Callable,
    FrozenSet,
    Iterable,
    List,
    Optional,
    Set,
    Tuple,
    TypeVar,
)

from npuwatch.chip_source import ChipSource, SourceFailure, SourceReading, declared_info, reading_info
from npuwatch.chip_state import ChipTracker
from npuwatch.history import History
from npuwatch.judge.workload import WorkloadJudge
from npuwatch.links.registry import EnrichInputs, LinkEnrichers
from npuwatch.machine_chips import MachineChips, machine_chips, unreported_chips
from npuwatch.model import ChipSample, MetricStatus, ProbeReport, Snapshot, Versions
from npuwatch.plausible import capped, plausible
from npuwatch.polling_pause import is_paused
from npuwatch.probes.container import detect_container
from npuwatch.probes.devices import scan_dev
from npuwatch.probes.host import HostProbe
from npuwatch.probes.install_files import read_versions
from npuwatch.probes.pci import PciInventory, scan_pci
from npuwatch.probes.sysroot import Sysroot

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails  # the detail screen's records: not imported to sample

#: Slow facts: PCI inventory and links, install/version files.
PCI_REFRESH_S = 10.0
VERSIONS_REFRESH_S = 60.0
#: A snapshot carries at most this many warnings (distinct ones; the last says how many more).
MAX_WARNINGS = 20

_log = logging.getLogger("npuwatch")
T = TypeVar("T")


class Sampler:
    """Combines the chip source, sysfs and the host into Snapshots; calls never overlap.

    ``npuwatch.feeds.open_feed(FeedOptions(...))`` wires the usual ones (live, a demo, a
    replay); tests build one from parts.  ``sample()`` is thread-safe: concurrent callers take turns, so
    no two npu-smi calls ever run at once.  A replay has no ``sysroot``: nothing of the
    machine npuwatch runs on is mixed into a capture.
    """

    def __init__(
        self,
        source: ChipSource,
        sysroot: Optional[Sysroot],
        host: Optional[HostProbe] = None,
        *,
        interval_s: float = 1.0,
        devices: Optional[FrozenSet[int]] = None,
        history: Optional[History] = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_close: Optional[Callable[[], None]] = None,
        about: str = "",
    ) -> None:
        self.source = source
        #: What the data comes from beyond the label, for a view's banner: a demo's fake DCMI
        #: library (``chips through fake libdcmi.so (C, built with cc) …``); empty for a real machine.
        self.about = about
        self.sysroot = sysroot
        self.host = host
        self.interval_s = interval_s
        self.devices = devices
        self.history = history if history is not None else History.for_span(interval_s)
        self._clock = clock
        self._monotonic = monotonic
        self._on_close = on_close
        self._lock = threading.Lock()
        self._last: Optional[Snapshot] = None
        self._tracker = ChipTracker(source_name=source.probe_name)
        self._pci: Optional[Tuple[PciInventory, float, ProbeReport]] = None
        self._links = LinkEnrichers(monotonic=monotonic)  # each chip's links (npuwatch.links)
        self._has: Optional[MachineChips] = None  # the chips the machine has, with the PCI scan
        self._in_container: Optional[bool] = None
        self._versions: Optional[Tuple[Versions, float]] = None
        self._logged: Set[str] = set()
        self._workloads = WorkloadJudge()

    @property
    def label(self) -> str:
        """Where the data comes from: ``npu-smi``, ``demo:<scenario>`` or ``replay:<file>``."""
        return self.source.label

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release what the sampler owns (the demo's simulated machine)."""
        if self._on_close is not None:
            self._on_close()
            self._on_close = None

    def sample(self) -> Snapshot:
        """Take one Snapshot now and add it to the History."""
        with self._lock:
            if self._last is not None and is_paused():
                # A self-test is timing copies: polling the driver now would skew it.  Show the
                # last sample, marked, and leave a gap in the history.
                return replace(self._last, warnings=(*self._last.warnings, PAUSED_WARNING))
            snapshot = self._workloads.judge(self._sample_locked())
            self._last = snapshot
            self.history.add(snapshot)
        return snapshot

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """One chip's on-demand details from the source; ``None`` when it provides none (a replay).

        Holds the sampler's lock, so the source's queries never overlap a tick's.
        """
        if not self.source.provides_details:
            return None
        with self._lock:
            return self.source.chip_details(npu_id, chip_id)

    def _sample_locked(self) -> Snapshot:
        now, mono = self._clock(), self._monotonic()
        # The PCI tree first: a feed's first scan of it then runs while DCMI's worker starts.
        pci_reports: List[ProbeReport] = []
        inventory = self._inventory(mono, pci_reports)
        outcome = self.source.read()
        source_name = self.source.probe_name  # after the read: ``auto`` names the backend that read
        title = (outcome.source_info or declared_info(self.source)).title
        outcome = _empty_is_a_failure(outcome, self._has, title)
        info = reading_info(self.source, outcome)  # this tick's: a process table read or not
        self._tracker.source_name, self._tracker.title = source_name, title
        probes = [_source_report(source_name, outcome), *pci_reports]
        resolved = self._tracker.resolve(outcome, mono, inventory)
        warnings = resolved.warnings + self._unreported(outcome, probes)
        chips = self._with_links(resolved.chips, inventory, probes)
        processes = list(resolved.processes)
        if self.devices is not None:
            chips = [c for c in chips if c.identity.npu_id in self.devices]
            processes = [p for p in processes if p.npu_id in self.devices]
        chips, implausible = _plausible_chips(chips)
        warnings = capped((*warnings, *implausible), MAX_WARNINGS)
        host_info = None
        if self.host is None:
            processes = [replace(p, host_unavailable=_NO_HOST) for p in processes]
        else:
            host = self.host
            started = time.monotonic()
            host_info = self._guard("host", probes, host.sample, None)
            processes = list(self._guard("host", probes, lambda: host.enrich(processes), tuple(processes)))
            if host_info is not None:
                probes.append(ProbeReport("host", MetricStatus.OK, time.monotonic() - started))
        return Snapshot(
            taken_at=datetime.fromtimestamp(now, tz=timezone.utc),
            source=self.source.label,
            versions=self._versions_now(outcome, mono, probes),
            chips=tuple(chips),
            processes=tuple(processes),
            host=host_info,
            warnings=warnings,
            probes=tuple(probes),
            chip_source=source_name,
            backend_note=outcome.note,
            source_info=info,
        )

    def _guard(self, name: str, probes: List[ProbeReport], read: Callable[[], T], fallback: T) -> T:
        """Run one probe; a crash becomes an ``error`` report (logged once), never a lost tick."""
        try:
            return read()
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            if message not in self._logged:
                self._logged.add(message)
                _log.warning("probe %s failed: %s", name, message)
                _log.debug("probe %s failed", name, exc_info=True)  # the traceback only at DEBUG level
            probes.append(ProbeReport(name, MetricStatus.ERROR, None, message))
            return fallback

    def _inventory(self, mono: float, probes: List[ProbeReport]) -> Optional[PciInventory]:
        sysroot = self.sysroot
        if sysroot is None:
            return None
        if self._pci is None or mono - self._pci[1] >= PCI_REFRESH_S:
            started = time.monotonic()
            failures: List[ProbeReport] = []
            last = self._pci[0] if self._pci is not None else None
            inventory = self._guard("sysfs", failures, lambda: scan_pci(sysroot, last), PciInventory())
            if failures:
                report = failures[0]
            elif inventory.reason:
                elapsed = time.monotonic() - started
                report = ProbeReport("sysfs", MetricStatus.ERROR, elapsed, inventory.reason, found=0)
            else:
                found = len(inventory.functions)
                message = f"{found} Ascend PCI function(s)"
                report = ProbeReport("sysfs", MetricStatus.OK, time.monotonic() - started, message, found)
            self._pci = (inventory, mono, report)
            self._has = self._guard("devices", [], lambda: self._machine_chips(sysroot, inventory), None)
        probes.append(self._pci[2])
        return self._pci[0]

    def _machine_chips(self, sysroot: Sysroot, inventory: PciInventory) -> MachineChips:
        if self._in_container is None:
            self._in_container = detect_container(sysroot).in_container
        return machine_chips(inventory, scan_dev(sysroot), self._in_container)

    def _unreported(self, outcome: SourceReading, probes: List[ProbeReport]) -> Tuple[str, ...]:
        """A ``chips`` probe report and a warning when the source lists fewer chips than the machine
        has (``health.unreported_chips``: the rule of ``npuwatch check`` and the doctor)."""
        has = self._has
        if has is None or outcome.reading is None or self.devices is not None:
            return ()
        problem = unreported_chips(has, outcome.reading.chips, self.source.probe_name)
        if problem is None:
            return ()
        probes.append(ProbeReport("chips", MetricStatus.ERROR, None, problem.message, found=has.count))
        return (f"{problem.message} — {problem.hint}",)

    def _with_links(
        self, chips: Iterable[ChipSample], inventory: Optional[PciInventory], probes: List[ProbeReport]
    ) -> List[ChipSample]:
        """The chips with their links (the registry's enrichers, each on its cadence); a replay
        has no machine to read, its chips keep the links they were recorded with."""
        sysroot = self.sysroot
        if sysroot is None:
            return list(chips)
        links = self._links

        def guard(name: str, read: Callable[[], None]) -> None:
            self._guard(name, probes, read, None)

        links.refresh(EnrichInputs(sysroot, inventory), guard)
        return [links.enrich(chip) for chip in chips]

    def _versions_now(self, outcome: SourceReading, mono: float, probes: List[ProbeReport]) -> Versions:
        sysroot = self.sysroot
        if sysroot is not None and (self._versions is None or mono - self._versions[1] >= VERSIONS_REFRESH_S):
            self._versions = (
                self._guard("install-files", probes, lambda: read_versions(sysroot), Versions()),
                mono,
            )
        installed = self._versions[0] if self._versions is not None else Versions()
        reading = outcome.reading or self._tracker.last_reading
        if reading is None:
            return installed
        return _merged_versions(installed, reading.versions)


def _empty_is_a_failure(outcome: SourceReading, has: Optional[MachineChips], title: str) -> SourceReading:
    """A reading that lists no chip on a machine that has some (a library whose enumeration
    answers 0, a negative or an all-0xFF count) is a failed read: the chips sysfs shows stay, each
    with the reason, and the source's report is an error (``npuwatch_up`` 0, ``/healthz`` 503)."""
    reading = outcome.reading
    if reading is None or reading.chips or has is None or has.count <= 0:
        return outcome
    failure = SourceFailure(
        "no-chips",
        f"{title} lists no chip; the machine has {has.count} ({', '.join(has.evidence)})",
        "run `npu-smi info` by hand, check `dmesg | grep -i devdrv`, then `npuwatch doctor`",
    )
    return replace(outcome, reading=None, failure=failure)


def _plausible_chips(chips: Iterable[ChipSample]) -> Tuple[List[ChipSample], Tuple[str, ...]]:
    """The chips with impossible values set aside (``plausible``), and the warnings saying which."""
    kept: List[ChipSample] = []
    warnings: List[str] = []
    for chip in chips:
        checked, said = plausible(chip)
        kept.append(checked)
        warnings.extend(said)
    return kept, tuple(warnings)


PAUSED_WARNING = "polling paused while `npuwatch selftest` measures; showing the last sample"
_NO_HOST = "no host probe for this source (a replayed capture holds no host details)"


def _merged_versions(installed: Versions, source: Versions) -> Versions:
    """The install files' versions with the source's: the source's own version (npu-smi's header,
    the DCMI library's) always from the source, the driver's from the install files first."""
    return replace(
        installed,
        npu_smi=source.npu_smi,
        dcmi=source.dcmi,
        driver=installed.driver or source.driver,
        firmware=installed.firmware or source.firmware,
        cann=installed.cann or source.cann,
    )


def _source_report(name: str, outcome: SourceReading) -> ProbeReport:
    """The chip source's ProbeReport, named by its ``probe_name`` (``Snapshot.chip_source_report``)."""
    if outcome.failure is None:
        found = None if outcome.reading is None else len(outcome.reading.chips)
        return ProbeReport(
            name,
            MetricStatus.OK,
            outcome.duration_s,
            found=found,
            restarts=outcome.restarts,
            restarts_of=outcome.restarts_of,
        )
    failure = outcome.failure
    return ProbeReport(
        name,
        failure.metric_status,
        outcome.duration_s,
        failure.message,
        restarts=outcome.restarts,
        restarts_of=outcome.restarts_of,
    )
