"""Provides the chip-family table: one row per Ascend family, every fact a rule or a view needs.

A family is found from what a source read: the PCI device ID when there is one, else the chip
name npu-smi or DCMI printed (``910B3``, ``Ascend910``, ``310P3``, ``950DT``).  Every number
names its source, or says "our default" where Huawei publishes none.  Nothing else in npuwatch
holds a per-family number or tests a chip's name: a new family is one row here.

This module is in the model layer: it imports only the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import FrozenSet, Mapping, Optional, Tuple

#: Huawei publishes no throttle point for the chip sensor npu-smi and DCMI read, so the
#: temperature levels are our defaults (see ``TEMPERATURE_SOURCE``).
TEMPERATURE_SOURCE = "our default (Huawei publishes no throttle point for this sensor)"
_HOT_C, _HOT_310_C, _CRITICAL_OVER_C = 85.0, 80.0, 10.0


@dataclass(frozen=True)
class ChipFamily:
    """One Ascend chip family and what npuwatch knows of it."""

    key: str  # a stable word: ``910b``, ``a3``, ``310p`` …
    title: str  # as the README's tables name it
    soc: Optional[str]  # CANN's operator-kernel folder (``ascend910b``)
    #: PCI device IDs (vendor 0x19e5) of the family's functions.
    pci_device_ids: FrozenSet[int] = frozenset()
    #: A regular expression matched (case-insensitive, anywhere) against the chip name a source read.
    name_pattern: str = ""
    memory_kind: Optional[str] = None  # HBM, DDR
    #: True when the chip's memory is the board's RAM shared with Linux (an SoC board).
    shared_memory: bool = False
    temperature_warning_c: float = _HOT_C
    temperature_critical_c: float = _HOT_C + _CRITICAL_OVER_C
    rated_power_w: Optional[float] = None  # one chip's rating; None: none published
    #: A card's rating by how many of this family's chips it carries (1: Atlas 300I Pro; 2: Duo).
    card_power_w: Mapping[int, float] = field(default_factory=dict)
    #: What a chip's power reading covers: ``chip`` or ``card`` (the whole board's, per card).
    power_scope: str = "chip"
    #: The device nodes (``/dev/…``) a host or container with this family needs besides davinciN.
    device_nodes: Tuple[str, ...] = ("davinci_manager", "devmm_svm", "hisi_hdc")
    #: What an idle chip of this family holds of its memory (driver and runtime reservations).
    idle_memory_mib: Optional[int] = None
    rated_aicore_mhz: Optional[int] = None  # AI Core's rated clock, when a source does not read it
    #: Where each number above comes from, by field name ("our default" where none is published).
    sources: Mapping[str, str] = field(default_factory=dict)

    def card_rated_power_w(self, chips_on_card: int) -> Optional[float]:
        """The rating of a card carrying ``chips_on_card`` of this family's chips, if published."""
        return self.card_power_w.get(chips_on_card)


OTHER = ChipFamily(key="other", title="any other chip", soc=None, sources={"rated_power_w": "none published"})

#: The table; the first row whose PCI ID or name pattern matches wins.
FAMILIES: Tuple[ChipFamily, ...] = (
    ChipFamily(
        key="a3",
        title="Atlas A3 (Ascend910, per die)",
        soc="ascend910_93",
        pci_device_ids=frozenset({0xD803, 0xD804}),
        name_pattern=r"^(Ascend)?910_?93|910C|^Ascend910$",
        memory_kind="HBM",
        sources={"rated_power_w": "none published (power is per card)"},
    ),
    ChipFamily(
        key="910b",
        title="Ascend 910B (910B1-B4)",
        soc="ascend910b",
        pci_device_ids=frozenset({0xD802}),
        name_pattern=r"910B",
        memory_kind="HBM",
        rated_power_w=400.0,
        idle_memory_mib=3400,
        sources={
            "rated_power_w": "910B family ~400 W (third-party figures)",
            "idle_memory_mib": (
                "captures: ~2.6 GiB idle on 32 GiB parts (022), ~3.3 GiB on 64 GiB (003/093/100)"
            ),
        },
    ),
    ChipFamily(
        key="910",
        title="Ascend 910 (910A, ProA, ProB)",
        soc="ascend910",
        pci_device_ids=frozenset({0xD801}),
        name_pattern=r"910",
        memory_kind="HBM",
        rated_power_w=310.0,
        sources={"rated_power_w": "Ascend 910 310 W, Huawei launch material"},
    ),
    ChipFamily(
        key="950",
        title="Ascend 950",
        soc="ascend950",
        pci_device_ids=frozenset({0xD806, 0xD807, 0xD808}),
        name_pattern=r"950",
        memory_kind="HBM",
        sources={"rated_power_w": "none published"},
    ),
    ChipFamily(
        key="310p",
        title="Ascend 310P (Atlas 300I Pro/Duo)",
        soc="ascend310p",
        pci_device_ids=frozenset({0xD500, 0xD501}),
        name_pattern=r"310P",
        memory_kind="DDR",
        temperature_warning_c=_HOT_310_C,
        temperature_critical_c=_HOT_310_C + _CRITICAL_OVER_C,
        rated_power_w=72.0,
        card_power_w={1: 72.0, 2: 150.0},
        sources={
            "rated_power_w": "Atlas 300I Pro card 72 W",
            "card_power_w": "Atlas 300I Pro 72 W; Atlas 300I Duo 150 W (press reports)",
        },
    ),
    ChipFamily(
        key="310b",
        title="Ascend 310B (Atlas 200I A2)",
        soc="ascend310b",
        pci_device_ids=frozenset({0xD105}),
        name_pattern=r"310B",
        memory_kind="DDR",
        shared_memory=True,
        temperature_warning_c=_HOT_310_C,
        temperature_critical_c=_HOT_310_C + _CRITICAL_OVER_C,
        rated_power_w=24.0,
        device_nodes=("davinci_manager", "hisi_hdc"),
        sources={"rated_power_w": "Atlas 200I DK A2 board 24 W typical"},
    ),
    ChipFamily(
        key="310",
        title="Ascend 310",
        soc="ascend310",
        pci_device_ids=frozenset({0xD100}),
        name_pattern=r"310",
        memory_kind="DDR",
        temperature_warning_c=_HOT_310_C,
        temperature_critical_c=_HOT_310_C + _CRITICAL_OVER_C,
        rated_power_w=8.0,
        sources={"rated_power_w": "Ascend 310 chip 8 W"},
    ),
)


@lru_cache(maxsize=256)
def family_of(name: Optional[str] = None, device_id: Optional[int] = None) -> ChipFamily:
    """The family of a chip a source named ``name`` or whose PCI function has ``device_id``
    (the ID wins); ``OTHER`` when neither is known (looked up for every chip each tick: cached)."""
    if device_id is not None:
        for family in FAMILIES:
            if device_id in family.pci_device_ids:
                return family
    text = (name or "").strip()
    if text:
        for family in FAMILIES:
            if family.name_pattern and re.search(family.name_pattern, text, re.IGNORECASE):
                return family
    return OTHER
