"""Provides PcieEnricher: each chip's PCIe link from the sampler's PCI scan (Linux PCI sysfs).

The chip is matched to its PCI function by the source's Bus-Id; the raw reading stays
``ChipSample.pcie`` (the JSON's ``pcie``) and the record is a ``ChipLink`` of kind ``pcie``.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional

from npuwatch.chip_link import KIND_PCIE, pcie_record
from npuwatch.links.enricher import EnrichInputs
from npuwatch.model import ChipSample, PcieLink
from npuwatch.probes.pci import PciInventory, normalize_bdf


class PcieEnricher:
    """The PCIe link of every chip whose Bus-Id names a function of the latest PCI scan."""

    kind = KIND_PCIE
    #: Every tick, but it reads nothing itself: it takes each new PCI scan of the sampler's (its
    #: cadence is the scan's, ``sampler.PCI_REFRESH_S``), so sysfs is walked once for the tracker,
    #: the machine's chip count and the links.
    refresh_s = 0.0

    def __init__(self) -> None:
        self._scan: Optional[PciInventory] = None
        self._links: Mapping[str, PcieLink] = {}
        self._by_bus: Dict[str, Optional[PcieLink]] = {}  # the source's Bus-Id → its link, per scan

    def refresh(self, inputs: EnrichInputs) -> None:
        if inputs.pci is self._scan:
            return
        self._scan = inputs.pci
        functions = inputs.pci.functions if inputs.pci is not None else ()
        self._links = {function.bdf.lower(): function.link for function in functions}
        self._by_bus = {}

    def enrich(self, chip: ChipSample) -> ChipSample:
        bus_id = chip.identity.bus_id
        if bus_id is None or not self._links:
            return chip
        if bus_id in self._by_bus:
            link = self._by_bus[bus_id]
        else:
            bdf = normalize_bdf(bus_id)
            link = self._by_bus[bus_id] = self._links.get(bdf) if bdf else None
        if link is None:
            return chip
        return chip.with_pcie(link).with_link(pcie_record(link, normalize_bdf(bus_id)))
