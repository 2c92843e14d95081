"""Provides the contract of a link enricher (LinkEnricher) and what the sampler gives it (EnrichInputs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from npuwatch.model import ChipSample
from npuwatch.probes.pci import PciInventory
from npuwatch.probes.sysroot import Sysroot


@dataclass(frozen=True)
class EnrichInputs:
    """What the sampler read this tick that an enricher may use: the machine's tree and its PCI
    scan (the one the chip tracker uses, rescanned every ``sampler.PCI_REFRESH_S``)."""

    sysroot: Sysroot
    pci: Optional[PciInventory]


class LinkEnricher(Protocol):
    """One kind of link: ``refresh`` reads the machine (slow; every ``refresh_s``, 0 for every
    tick), ``enrich`` adds the chip's link of that kind from what was read (cheap; every chip,
    every tick), leaving a chip it knows no link of as it is."""

    kind: str
    refresh_s: float

    def refresh(self, inputs: EnrichInputs) -> None: ...

    def enrich(self, chip: ChipSample) -> ChipSample: ...
