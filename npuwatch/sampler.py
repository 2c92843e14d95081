"""Provides Sampler: one npu-smi call per tick + cached slow facts → a Snapshot, and its History."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, FrozenSet, List, Mapping, Optional, Tuple

from npuwatch.history import History
from npuwatch.model import (
    CHIP_METRICS,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    NpuProcess,
    PcieLink,
    ProbeReport,
    Snapshot,
    Versions,
)
from npuwatch.probes.host import HostProbe
from npuwatch.probes.install_files import read_versions
from npuwatch.probes.npu_smi import NpuSmiFailure
from npuwatch.probes.npu_smi_table import InfoTable
from npuwatch.probes.pci import PciInventory, normalize_bdf, scan_pci
from npuwatch.probes.sysroot import Sysroot
from npuwatch.sources import ChipSource, SourceReading

#: A value older than this is not shown as current any more (DESIGN §3: stale ≤ 10 s).
STALE_AFTER_S = 10.0
#: Slow facts: PCI inventory and links, install/version files.
PCI_REFRESH_S = 10.0
VERSIONS_REFRESH_S = 60.0


class Sampler:
    """Combines the chip source, sysfs and the host into Snapshots; calls never overlap.

    Use ``Sampler.create(...)`` for the usual wiring (live, ``demo=``, ``replay=``), or build
    one from parts in tests.  ``sample()`` is thread-safe: a second caller waits for the
    running sample instead of starting another npu-smi.
    """

    def __init__(
        self,
        source: ChipSource,
        sysroot: Sysroot,
        host: Optional[HostProbe] = None,
        *,
        interval_s: float = 1.0,
        devices: Optional[FrozenSet[int]] = None,
        history: Optional[History] = None,
        clock: Callable[[], float] = time.time,
        on_close: Optional[Callable[[], None]] = None,
    ) -> None:
        self.source = source
        self.sysroot = sysroot
        self.host = host
        self.interval_s = interval_s
        self.devices = devices
        self.history = history if history is not None else History()
        self._clock = clock
        self._on_close = on_close
        self._lock = threading.Lock()
        self._last_good: Optional[Tuple[InfoTable, float]] = None
        self._pci: Optional[Tuple[PciInventory, float]] = None
        self._versions: Optional[Tuple[Versions, float]] = None
        self._pci_duration_s = 0.0
        self._links: Mapping[str, PcieLink] = {}

    @classmethod
    def create(cls, **options: Any) -> Sampler:
        """Wire a sampler for this machine, a ``demo`` scenario or a ``replay`` capture."""
        from npuwatch.wiring import build_sampler

        return build_sampler(**options)

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
            snapshot = self._sample_locked()
        self.history.add(snapshot)
        return snapshot

    def _sample_locked(self) -> Snapshot:
        now = self._clock()
        reading = self.source.read()
        chips, processes, warnings = self._chips(reading, now)
        inventory, pci_report = self._inventory(now)
        links = self._links
        chips = [self._with_pcie(chip, links) for chip in chips]
        if self.devices is not None:
            chips = [c for c in chips if c.identity.npu_id in self.devices]
            processes = [p for p in processes if p.npu_id in self.devices]
        probes = [_npu_smi_report(reading), pci_report]
        host_info = None
        if self.host is None:
            processes = [replace(p, host_unavailable=_NO_HOST) for p in processes]
        else:
            started = time.monotonic()
            host_info = self.host.sample()
            processes = list(self.host.enrich(processes))
            probes.append(ProbeReport("host", MetricStatus.OK, time.monotonic() - started))
        if reading.table is None and not chips and inventory.functions:
            warnings.append(
                f"{len(inventory.functions)} Ascend PCI function(s) present "
                f"({_models(inventory)}) but no chip data could be read"
            )
        return Snapshot(
            taken_at=datetime.fromtimestamp(now, tz=timezone.utc),
            source=self.source.label,
            versions=self._versions_now(reading, now),
            chips=tuple(chips),
            processes=tuple(processes),
            host=host_info,
            warnings=tuple(warnings),
            probes=tuple(probes),
        )

    # --- chips: fresh, stale, or failed ---------------------------------------------------

    def _chips(
        self, reading: SourceReading, now: float
    ) -> Tuple[List[ChipSample], List[NpuProcess], List[str]]:
        if reading.table is not None:
            self._last_good = (reading.table, now)
            return (
                list(reading.table.chips),
                list(reading.table.processes),
                list(reading.table.warnings),
            )
        failure = reading.failure
        assert failure is not None  # a reading has a table or a failure
        warnings = [f"npu-smi: {failure.message} — {failure.hint}"]
        if self._last_good is None:
            return [], [], warnings
        table, taken = self._last_good
        age_s = now - taken
        if age_s <= STALE_AFTER_S:
            return (
                [_stale(chip, failure, age_s) for chip in table.chips],
                list(table.processes),
                warnings,
            )
        return [_failed(chip, failure) for chip in table.chips], [], warnings

    def _inventory(self, now: float) -> Tuple[PciInventory, ProbeReport]:
        if self._pci is None or now - self._pci[1] >= PCI_REFRESH_S:
            started = time.monotonic()
            inventory = scan_pci(self.sysroot)
            self._pci = (inventory, now)
            self._links = {f.bdf.lower(): f.link for f in inventory.functions}
            self._pci_duration_s = time.monotonic() - started
        inventory = self._pci[0]
        message = f"{len(inventory.functions)} Ascend PCI function(s)"
        return inventory, ProbeReport("sysfs", MetricStatus.OK, self._pci_duration_s, message)

    def _with_pcie(self, chip: ChipSample, links: Mapping[str, PcieLink]) -> ChipSample:
        bdf = normalize_bdf(chip.identity.bus_id)
        link = links.get(bdf) if bdf else None
        return chip if link is None else replace(chip, pcie=link)

    def _versions_now(self, reading: SourceReading, now: float) -> Versions:
        if self._versions is None or now - self._versions[1] >= VERSIONS_REFRESH_S:
            self._versions = (read_versions(self.sysroot), now)
        installed = self._versions[0]
        table = reading.table or (self._last_good[0] if self._last_good else None)
        if table is None:
            return installed
        return replace(
            installed,
            npu_smi=table.npu_smi_version,
            driver=installed.driver or table.driver_version,
        )


_NO_HOST = "no host probe for this source (a replayed capture holds no host details)"


def _stale(chip: ChipSample, failure: NpuSmiFailure, age_s: float) -> ChipSample:
    reason = f"{failure.message}; showing the value from {age_s:.0f} s ago"
    notes = dict(chip.notes)
    for metric in CHIP_METRICS:
        if getattr(chip, metric) is not None:
            notes[metric] = MetricNote(MetricStatus.STALE, reason)
    return replace(chip, notes=notes)


def _failed(chip: ChipSample, failure: NpuSmiFailure) -> ChipSample:
    note = MetricNote(failure.kind.metric_status, failure.message)
    return ChipSample(
        identity=chip.identity,
        health=Health.UNKNOWN,
        notes={metric: note for metric in CHIP_METRICS},
    )


def _npu_smi_report(reading: SourceReading) -> ProbeReport:
    if reading.failure is None:
        return ProbeReport("npu-smi", MetricStatus.OK, reading.duration_s)
    return ProbeReport(
        "npu-smi", reading.failure.kind.metric_status, reading.duration_s, reading.failure.message
    )


def _models(inventory: PciInventory) -> str:
    counts: dict[str, int] = {}
    for function in inventory.functions:
        model = function.model or f"device {function.device_id or 0:#06x}"
        counts[model] = counts.get(model, 0) + 1
    return ", ".join(f"{model} ×{n}" for model, n in sorted(counts.items()))
