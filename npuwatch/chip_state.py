"""Provides ChipTracker: turns each read into chips that are fresh, stale, failed or vanished."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from npuwatch.chip_source import ChipReading, SourceFailure, SourceReading, source_title
from npuwatch.model import (
    CHIP_METRICS,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    NpuProcess,
)
from npuwatch.probes.pci import PciInventory

#: A value older than this is not shown as current any more (docs/design.md §3: stale ≤ 10 s).
STALE_AFTER_S = 10.0


def vanished(source_name: str = "npu-smi", title: Optional[str] = None) -> str:
    """Why a chip seen before is missing from this reading of the source ``source_name`` (its
    probe name; ``title``, its ``SourceInfo.title``: the reason names the source that read the
    chips, DCMI or npu-smi)."""
    said = title or source_title(source_name)
    return (
        f"{said} no longer lists this chip: it may have dropped off the PCI bus, "
        "been reset, or been hidden from this container"
    )


VANISHED = vanished()  # npu-smi's
FELL_OFF_BUS = "its PCI config space reads ff ff: the device fell off the bus (check `dmesg`)"


@dataclass(frozen=True)
class Resolved:
    """The chips and processes of one tick, with the warnings the resolution raised."""

    chips: Tuple[ChipSample, ...]
    processes: Tuple[NpuProcess, ...]
    warnings: Tuple[str, ...]


class ChipTracker:
    """Remembers the last good reading and every chip seen, across ticks."""

    def __init__(
        self, stale_after_s: float = STALE_AFTER_S, source_name: str = "npu-smi", title: Optional[str] = None
    ) -> None:
        """``source_name``: the chip source's probe name, which its warnings start with;
        ``title``: how its reasons name it (its ``SourceInfo.title``; default, from the name)."""
        self.stale_after_s = stale_after_s
        self.source_name = source_name
        self.title = title
        self._last_good: Optional[Tuple[ChipReading, float]] = None
        self._seen: Dict[Tuple[int, int], ChipIdentity] = {}

    @property
    def last_reading(self) -> Optional[ChipReading]:
        """The most recent good reading, if any."""
        return None if self._last_good is None else self._last_good[0]

    def resolve(self, outcome: SourceReading, now_s: float, inventory: Optional[PciInventory]) -> Resolved:
        """Chips for this tick; ``now_s`` is a monotonic time, ``inventory`` the PCI view if any."""
        if outcome.reading is not None:
            return self._fresh(outcome.reading, now_s, inventory)
        failure = outcome.failure
        assert failure is not None  # a source reading has a reading or a failure
        warnings = (f"{self.source_name}: {failure.message} — {failure.hint}",)
        if self._last_good is not None:
            last, taken_s = self._last_good
            age_s = now_s - taken_s
            if age_s <= self.stale_after_s:
                chips = tuple(_stale(chip, failure, age_s) for chip in last.chips)
                return Resolved(chips, last.processes, warnings)
        if self._seen:
            chips = tuple(
                _failed(identity, failure.metric_status, failure.message) for identity in self._seen.values()
            )
            return Resolved(chips, (), warnings)
        return _from_pci(inventory, failure, warnings, self.title or source_title(self.source_name))

    def _fresh(self, reading: ChipReading, now_s: float, inventory: Optional[PciInventory]) -> Resolved:
        self._last_good = (reading, now_s)
        chips: List[ChipSample] = list(reading.chips)
        warnings: List[str] = list(reading.warnings)
        present = {chip.identity.key for chip in chips}
        for key, identity in sorted(self._seen.items()):
            if key in present:
                continue
            reason = vanished(self.source_name, self.title)
            function = inventory.by_bus_id(identity.bus_id) if inventory and identity.bus_id else None
            if function is not None and not function.link.present:
                reason = f"{reason}; {FELL_OFF_BUS}"
            chips.append(replace(_failed(identity, MetricStatus.ERROR, reason), lost_reason=reason))
            warnings.append(f"{identity.label} ({identity.bus_id or 'no Bus-Id'}): {reason}")
        for chip in reading.chips:
            self._seen[chip.identity.key] = chip.identity
        chips.sort(key=lambda chip: chip.identity.key)
        return Resolved(tuple(chips), reading.processes, tuple(warnings))


def _stale(chip: ChipSample, failure: SourceFailure, age_s: float) -> ChipSample:
    reason = f"{failure.message}; showing the value from {age_s:.0f} s ago"
    notes = dict(chip.notes)
    for metric in CHIP_METRICS:
        if getattr(chip, metric) is not None:
            notes[metric] = MetricNote(MetricStatus.STALE, reason)
    return replace(chip, notes=notes)


def _failed(identity: ChipIdentity, status: MetricStatus, reason: str) -> ChipSample:
    note = MetricNote(status, reason)
    return ChipSample(identity=identity, health=Health.UNKNOWN, notes={m: note for m in CHIP_METRICS})


def _from_pci(
    inventory: Optional[PciInventory], failure: SourceFailure, warnings: Tuple[str, ...], source: str
) -> Resolved:
    """Without any reading, list the chips PCI sysfs shows, every metric null with the failure.

    The source's NPU IDs are unknown here, so chips are numbered in PCI bus order and say so.
    """
    if inventory is None:
        return Resolved((), (), warnings)
    functions = [f for f in inventory.functions if not f.is_virtual_function]
    if not functions:
        return Resolved((), (), warnings)
    reason = f"{failure.message} (NPU IDs are positions in PCI bus order: {source} gave none)"
    chips = []
    for index, function in enumerate(functions):
        for chip_id in range(function.chips):
            identity = ChipIdentity(
                npu_id=index, chip_id=chip_id, name=function.model, bus_id=function.bus_id
            )
            chips.append(_failed(identity, failure.metric_status, reason))
    note = f"{len(functions)} Ascend PCI function(s) present, {source} gave no data: chips listed from sysfs"
    return Resolved(tuple(chips), (), (*warnings, note))
