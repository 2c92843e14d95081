"""Provides the chip-family table: one row per Ascend family, every fact a rule or a view needs.

A family is found from what a source read: the PCI device ID when there is one, else the chip
name npu-smi or DCMI printed (``910B3``, ``Ascend910``, ``310P3``, ``950DT``).  Every number
names its source, or says "our default" where Huawei publishes none.  Nothing else in npuwatch
holds a per-family number or tests a chip's name: a new family is one row here.

The bare name ``Ascend910`` is an Atlas A3 die: npu-smi prints A3 dies so (captures 007, 043,
088, 100: each with the ``Phy-ID`` column of a two-die card), while a 910A prints ``910A``,
``910ProB`` or ``910PremiumA`` (capture 004).  The spaced ``Ascend 910`` is the Ascend 910's
name in the PCI inventory and board reports.  When the PCI device ID is known it decides.

This module is in the model layer: it imports only the standard library.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple

#: Huawei publishes no throttle point for the chip sensor npu-smi and DCMI read (none in the
#: npu-smi or DCMI manuals nor in MindCluster), so the temperature levels are our defaults:
#: data-centre accelerators with HBM commonly start throttling around 85-90 °C, so the 910
#: family and the 950 warn at 85 °C; the 310 family (passively cooled inference cards and edge
#: modules) warns at 80 °C.  Critical is 10 °C above the warning: far into throttling, where
#: a health probe should send the job elsewhere.
TEMPERATURE_SOURCE = "our default (Huawei publishes no throttle point for this sensor)"
_HOT_C, _HOT_310_C, CRITICAL_OVER_C = 85.0, 80.0, 10.0
_HOT_310_SOURCE = TEMPERATURE_SOURCE + "; 80 °C for the passively cooled 310 family"

#: What a chip's power reading covers (``ChipFamily.power_scope``); the words of ``source_info``.
POWER_SCOPE_CHIP, POWER_SCOPE_CARD = "chip", "card"

#: The management nodes an NPU process needs besides davinciN (driver-interfaces.md §1); a
#: family's ``device_nodes`` say which of them it has (a 310B SoC board has no devmm_svm).
MANAGER_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
_NODES_SOURCE = "driver-interfaces.md §1, runtime-and-doctor.md §6.5"
_PCI_SOURCE = "driver-interfaces.md §5.1 (devdrv_pci.h, dcmi_common.h)"
_NOT_PUBLISHED = "none published"
_BUILD_SOURCE = "vllm-ascend's setup.py (gen_build_info: SOC_VERSION → __device_type__)"
_IMAGE_SOURCE = "vllm-ascend's image tags on quay.io/ascend/vllm-ascend (<version>, -a3, -310p)"


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
    #: True when the chip is the board's own SoC (RC mode, an Atlas 200I A2): its memory is the
    #: board's RAM shared with Linux, and the board may have no PCI function at all.
    shared_memory: bool = False
    temperature_warning_c: float = _HOT_C
    temperature_critical_c: float = _HOT_C + CRITICAL_OVER_C
    rated_power_w: Optional[float] = None  # one chip's rating; None: none published
    #: A card's rating by how many of this family's chips it carries (1: Atlas 300I Pro; 2: Duo).
    card_power_w: Mapping[int, float] = field(default_factory=dict)
    #: What a chip's power reading covers: ``chip`` or ``card`` (the whole board's, per card).
    power_scope: str = POWER_SCOPE_CHIP
    #: The device nodes (``/dev/…``) a host or container with this family needs besides davinciN.
    device_nodes: Tuple[str, ...] = MANAGER_NODES
    #: What an idle chip of this family holds of its memory (driver and runtime reservations),
    #: measured on a part with ``typical_memory_mib``.
    idle_memory_mib: Optional[int] = None
    rated_aicore_mhz: Optional[int] = None  # AI Core's rated clock, when a source does not read it
    #: Where each number above comes from, by field name ("our default" where none is published).
    sources: Mapping[str, str] = field(default_factory=dict)
    #: The name the PCI inventory gives each device ID (``0xD804`` → ``Ascend 910B 2P``); an ID
    #: in ``pci_device_ids`` without one is named by ``title``.
    pci_models: Mapping[int, str] = field(default_factory=dict)
    typical_memory_mib: Optional[int] = None  # one chip's memory on the family's common part
    #: ``subsystem_device >> 4`` of a function that carries two chips ("1PF2P"), if the family has one.
    two_chip_subsystem: Optional[int] = None
    #: The chip part of CANN's kernel and ops package names (``Ascend-cann-kernels-910b``; ``A3``).
    package_chip: Optional[str] = None
    #: What vllm-ascend's build writes in ``_build_info.py`` as ``__device_type__`` for this family
    #: (its ``AscendDeviceType``: ``A2``, ``A3``, ``_310P``, ``A5``); older builds write the SoC
    #: version instead (``__soc_version__``, read by ``family_of_soc_version``).
    build_device_type: Optional[str] = None
    #: The tag suffix of vllm-ascend's images built for this family (``v0.10.0rc1-310p``; ``""``:
    #: the untagged image is this family's); ``None`` when none is published.
    vllm_ascend_image_suffix: Optional[str] = None

    def card_rated_power_w(self, chips_on_card: int) -> Optional[float]:
        """The rating of a card carrying ``chips_on_card`` of this family's chips, if published."""
        return self.card_power_w.get(chips_on_card)

    def rated_power_for_w(self, scope: str, chips_on_card: int = 1) -> Optional[float]:
        """The rating a power reading of ``scope`` (``chip`` or ``card``) compares with: a card's
        reading with the card's rating (a 310P Duo's board power with 150 W, not a chip's 72 W)."""
        if scope == POWER_SCOPE_CARD:
            card = self.card_rated_power_w(chips_on_card)
            if card is not None or chips_on_card != 1:
                return card
        return self.rated_power_w

    def chips_per_function(self, subsystem_device_id: Optional[int]) -> int:
        """1, or 2 for a "1PF2P" function (a 310P Atlas 300I Duo: subsystem device 0x0110)."""
        # devdrv_get_pdev_davinci_dev_num() in devdrv_pci.c tests subsystem_device >> 4 == 0x011
        # (driver-interfaces.md §5.1); the installer's host_sys_init.sh counts the same way.
        if self.two_chip_subsystem is not None and subsystem_device_id is not None:
            return 2 if subsystem_device_id >> 4 == self.two_chip_subsystem else 1
        return 1

    def pci_model(self, device_id: int) -> str:
        """The name of one of this family's PCI device IDs, as the PCI inventory shows it."""
        return self.pci_models.get(device_id, self.title)

    def source_of(self, name: str) -> str:
        """Where the field ``name`` comes from; "" when the row does not say."""
        return self.sources.get(name, "")


OTHER = ChipFamily(
    key="other",
    title="any other chip",
    soc=None,
    sources={
        "temperature_warning_c": TEMPERATURE_SOURCE,
        "temperature_critical_c": TEMPERATURE_SOURCE,
        "rated_power_w": _NOT_PUBLISHED,
        "device_nodes": _NODES_SOURCE,
    },
)


def _hot(source: str = TEMPERATURE_SOURCE) -> Mapping[str, str]:
    return {"temperature_warning_c": source, "temperature_critical_c": source, "device_nodes": _NODES_SOURCE}


#: The table; the first row whose PCI ID or name pattern matches wins (so ``910B`` and the A3
#: come before the catch-all ``910``, ``310P``/``310B`` before ``310``).
FAMILIES: Tuple[ChipFamily, ...] = (
    ChipFamily(
        key="a3",
        title="Atlas A3 (Ascend910, per die)",
        soc="ascend910_93",
        package_chip="A3",
        build_device_type="A3",
        vllm_ascend_image_suffix="-a3",
        pci_device_ids=frozenset({0xD803}),
        pci_models={0xD803: "Ascend 910_93 (A3)"},
        name_pattern=r"910_?93|910C|^Ascend910$",
        memory_kind="HBM",
        typical_memory_mib=65536,
        power_scope=POWER_SCOPE_CARD,
        idle_memory_mib=3419,
        sources={
            **_hot(),
            "build_device_type": _BUILD_SOURCE,
            "vllm_ascend_image_suffix": _IMAGE_SOURCE,
            "pci_device_ids": _PCI_SOURCE,
            "soc": "runtime-and-doctor.md §2.1, §6.2 (kernel folder ascend910_93 and its package)",
            "memory_kind": "runtime-and-doctor.md §11: 128 GB HBM per package of 2 dies",
            "typical_memory_mib": "65536 MiB per die (captures 007, 043, 100)",
            "rated_power_w": "none published (power is per card)",
            "card_power_w": _NOT_PUBLISHED,
            "power_scope": "npu-smi prints power on a card's first die, '-' on its second "
            "(captures 007, 043, 100)",
            "idle_memory_mib": "2874-3419 MiB of 65536 with no process (captures 007, 043, 088, 100)",
            "rated_aicore_mhz": _NOT_PUBLISHED,
        },
    ),
    ChipFamily(
        key="910b",
        title="Ascend 910B (910B1-B4)",
        soc="ascend910b",
        package_chip="910b",
        build_device_type="A2",
        vllm_ascend_image_suffix="",
        pci_device_ids=frozenset({0xD802, 0xD804, 0xD805}),
        pci_models={0xD802: "Ascend 910B", 0xD804: "Ascend 910B 2P", 0xD805: "Ascend 910B VF"},
        name_pattern=r"910B",
        memory_kind="HBM",
        typical_memory_mib=65536,
        rated_power_w=400.0,
        idle_memory_mib=3437,
        sources={
            **_hot(),
            "build_device_type": _BUILD_SOURCE,
            "vllm_ascend_image_suffix": _IMAGE_SOURCE,
            "pci_device_ids": _PCI_SOURCE + ": 0xd804 CLOUD_V2_2P, 0xd805 the SR-IOV VF",
            "soc": "runtime-and-doctor.md §2.1, §6.2 (kernel folder ascend910b and its package)",
            "memory_kind": "runtime-and-doctor.md §11: HBM2e",
            "typical_memory_mib": "64 GB on 910B1-B3 and B4-1, 32 GB on 910B4 (runtime-and-doctor.md §11)",
            "rated_power_w": "910B family ~400 W (third-party figures)",
            "card_power_w": "one chip per module: the chip's rating",
            "power_scope": "npu-smi prints one chip's power per NPU (captures 001, 022, 093)",
            "idle_memory_mib": "3314-3437 MiB of 65536 (captures 003, 008, 093); 2654-2828 of 32768 "
            "(022, 092)",
            "rated_aicore_mhz": "none published (capture 031's 910B1 reads 1800 MHz; bins differ)",
        },
    ),
    ChipFamily(
        key="910",
        title="Ascend 910 (910A, ProA, ProB)",
        soc="ascend910",
        package_chip="910",
        pci_device_ids=frozenset({0xD801}),
        pci_models={0xD801: "Ascend 910"},
        name_pattern=r"910",
        memory_kind="HBM",
        typical_memory_mib=32768,
        rated_power_w=310.0,
        idle_memory_mib=0,
        sources={
            **_hot(),
            "pci_device_ids": _PCI_SOURCE,
            "soc": "runtime-and-doctor.md §2.1, §6.2 (kernel folder ascend910 and its package)",
            "memory_kind": "runtime-and-doctor.md §11: 32 GB HBM",
            "typical_memory_mib": "runtime-and-doctor.md §11: 32 GB HBM (captures 004, 015: 32768 MiB)",
            "rated_power_w": "Ascend 910 310 W, Huawei launch material",
            "card_power_w": "one chip per card: the chip's rating",
            "power_scope": "npu-smi prints one chip's power per NPU (capture 004)",
            "idle_memory_mib": "0 MiB HBM with no process (captures 004, 015)",
            "rated_aicore_mhz": _NOT_PUBLISHED,
        },
    ),
    ChipFamily(
        key="950",
        title="Ascend 950",
        soc="ascend950",
        package_chip="950",
        build_device_type="A5",
        pci_device_ids=frozenset({0xD806, 0xD807, 0xD808}),
        pci_models={0xD806: "Ascend 950", 0xD807: "Ascend d807", 0xD808: "Ascend 350"},
        name_pattern=r"950",
        memory_kind="HBM",
        typical_memory_mib=98304,
        idle_memory_mib=4857,
        device_nodes=("davinci_manager", "hisi_hdc"),
        sources={
            **_hot(),
            "build_device_type": _BUILD_SOURCE,
            "device_nodes": "no devmm_svm: MindCluster does not mount it for Ascend910A5 (the 950; "
            "cdi/devnode.go, driver-interfaces.md §1)",
            "pci_device_ids": _PCI_SOURCE + "; 0xd807 (CLOUD_V5) and 0xd808 (ASCEND350, the Atlas 350 "
            "card's) counted here: unverified",
            "soc": "ascend950 inferred from the product name, unverified (runtime-and-doctor.md §14 item 4)",
            "memory_kind": "npu-smi's HBM column (captures 037, 082)",
            "typical_memory_mib": "98304 MiB on a 950DT (capture 037); 131072 on a 950PR (082)",
            "rated_power_w": _NOT_PUBLISHED,
            "card_power_w": _NOT_PUBLISHED,
            "power_scope": "npu-smi prints one chip's power per NPU (capture 037)",
            "idle_memory_mib": "4855-4857 MiB of 98304 with no process (capture 037); 5239 of 131072 (082)",
            "rated_aicore_mhz": _NOT_PUBLISHED,
        },
    ),
    ChipFamily(
        key="310p",
        title="Ascend 310P (Atlas 300I Pro/Duo)",
        soc="ascend310p",
        package_chip="310p",
        build_device_type="_310P",
        vllm_ascend_image_suffix="-310p",
        pci_device_ids=frozenset({0xD500, 0xD501}),
        pci_models={0xD500: "Ascend 310P", 0xD501: "Ascend 310P"},
        two_chip_subsystem=0x011,
        name_pattern=r"310P",
        memory_kind="DDR",
        typical_memory_mib=24576,
        temperature_warning_c=_HOT_310_C,
        temperature_critical_c=_HOT_310_C + CRITICAL_OVER_C,
        rated_power_w=72.0,
        card_power_w={1: 72.0, 2: 150.0},
        power_scope=POWER_SCOPE_CARD,
        idle_memory_mib=1805,
        sources={
            **_hot(_HOT_310_SOURCE),
            "build_device_type": _BUILD_SOURCE,
            "vllm_ascend_image_suffix": _IMAGE_SOURCE,
            "pci_device_ids": _PCI_SOURCE,
            "two_chip_subsystem": "driver-interfaces.md §5.1: subsystem_device >> 4 == 0x011 is 1PF2P",
            "soc": "runtime-and-doctor.md §2.1, §6.2 (kernel folder ascend310p and its package)",
            "memory_kind": "LPDDR4X (runtime-and-doctor.md §11); npu-smi prints Memory-Usage only (044, 049)",
            "typical_memory_mib": "24 GB on an Atlas 300I Pro (runtime-and-doctor.md §11); 48 GB per chip "
            "on a Duo (capture 044)",
            "rated_power_w": "Atlas 300I Pro card 72 W",
            "card_power_w": "Atlas 300I Pro 72 W; Atlas 300I Duo 150 W (press reports)",
            "power_scope": "the board's: DCMI reads an Atlas 300I Duo's board power on its first chip "
            "(issue 28 item 6); npu-smi prints NA (capture 044)",
            "idle_memory_mib": "927-1805 MiB of 21527-23054 with no process (captures 049, 051, 052)",
            "rated_aicore_mhz": "none published (the doc's npu-smi -t common reads 1080 MHz, capture 061)",
        },
    ),
    ChipFamily(
        key="310b",
        title="Ascend 310B (Atlas 200I A2)",
        soc="ascend310b",
        package_chip="310b",
        pci_device_ids=frozenset({0xD105}),
        pci_models={0xD105: "Ascend 310B"},
        name_pattern=r"310B",
        memory_kind="DDR",
        shared_memory=True,
        typical_memory_mib=4096,
        temperature_warning_c=_HOT_310_C,
        temperature_critical_c=_HOT_310_C + CRITICAL_OVER_C,
        rated_power_w=24.0,
        power_scope=POWER_SCOPE_CARD,
        device_nodes=("davinci_manager", "hisi_hdc"),
        rated_aicore_mhz=500,
        sources={
            **_hot(_HOT_310_SOURCE),
            "pci_device_ids": _PCI_SOURCE + " (EP mode; in RC mode the board has no PCI function)",
            "soc": "runtime-and-doctor.md §2.1, §6.2 (kernel folder ascend310b and its package)",
            "shared_memory": "an SoC board: Memory-Usage is Linux's RAM (capture 039: 1797 of 3513 MiB idle)",
            "memory_kind": "LPDDR4X (runtime-and-doctor.md §11)",
            "typical_memory_mib": "4 GB on the Atlas 200I DK A2 (capture 039); 8 and 16 GB boards "
            "exist (041)",
            "rated_power_w": "Atlas 200I DK A2 board 24 W typical",
            "card_power_w": "one SoC per board: the board's rating",
            "power_scope": "the board's (the 24 W rating is the board's)",
            "device_nodes": "no devmm_svm on an SoC board (driver-interfaces.md §1)",
            "idle_memory_mib": "none: the board's RAM, shared with Linux, is not judged",
            "rated_aicore_mhz": "1 AI Core at 500 MHz, Atlas 200I DK A2 product doc "
            "(runtime-and-doctor.md §11)",
        },
    ),
    ChipFamily(
        key="310",
        title="Ascend 310",
        soc="ascend310",
        package_chip="310",
        pci_device_ids=frozenset({0xD100}),
        pci_models={0xD100: "Ascend 310"},
        name_pattern=r"310",
        memory_kind="DDR",
        typical_memory_mib=8192,
        temperature_warning_c=_HOT_310_C,
        temperature_critical_c=_HOT_310_C + CRITICAL_OVER_C,
        rated_power_w=8.0,
        sources={
            **_hot(_HOT_310_SOURCE),
            "pci_device_ids": _PCI_SOURCE,
            "soc": "runtime-and-doctor.md §2.1, §6.2 (kernel folder ascend310 and its package)",
            "memory_kind": "LPDDR4X (runtime-and-doctor.md §11)",
            "typical_memory_mib": "8 GB per chip on the Atlas 300I, unverified (runtime-and-doctor.md §11)",
            "rated_power_w": "Ascend 310 chip 8 W",
            "card_power_w": "none published for the 4-chip Atlas 300I (model 3000)",
            "power_scope": "our default (no capture)",
            "idle_memory_mib": "no capture: our default allowance",
            "rated_aicore_mhz": _NOT_PUBLISHED,
        },
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


def family_of_soc(soc: Optional[str]) -> ChipFamily:
    """The family whose operator-kernel folder is ``soc`` (``ascend910b``); ``OTHER`` if none."""
    return next((family for family in FAMILIES if soc and family.soc == soc), OTHER)


def family_of_soc_version(soc_version: Optional[str]) -> ChipFamily:
    """The family of a SoC version as builds record it (``ascend910b1``, ``Ascend910B3``,
    ``ASCEND310P3``, ``Ascend910_9391``): the family whose kernel folder is its longest prefix,
    case-insensitive (``ascend910_93…`` is an A3, ``ascend910b…`` a 910B before ``ascend910…``);
    ``OTHER`` if none."""
    text = (soc_version or "").strip().lower()
    rows = [family for family in FAMILIES if family.soc and text.startswith(family.soc)]
    return max(rows, key=lambda family: len(family.soc or ""), default=OTHER)


def family_of_build_device_type(device_type: Optional[str]) -> ChipFamily:
    """The family vllm-ascend's ``__device_type__`` (``A2``, ``_310P`` …) names; ``OTHER`` if none."""
    text = (device_type or "").strip().upper()
    return next((family for family in FAMILIES if text and family.build_device_type == text), OTHER)


def soc_version_of_chip(name: Optional[str]) -> Optional[str]:
    """The SoC version a build for the chip npu-smi names ``name`` is given (``310P3`` →
    ``Ascend310P3``), when ``Ascend`` + the name is one; ``None`` when the name does not say it
    (an A3 die prints ``Ascend910``: its SoC version, ``Ascend910_93xx``, is not in the name)."""
    text = (name or "").strip()
    if not text:
        return None
    version = text if text.lower().startswith("ascend") else f"Ascend{text}"
    family = family_of(text)
    if family.soc is None or family_of_soc_version(version) is not family:
        return None
    return version if len(version) > len(family.soc) else None


def known_device_id(device_id: Optional[int]) -> bool:
    """True when ``device_id`` is one of the table's Ascend PCI device IDs."""
    return device_id is not None and device_id in family_of(device_id=device_id).pci_device_ids


def pci_model(device_id: Optional[int]) -> Optional[str]:
    """The PCI inventory's name for an Ascend ``device_id`` (``Ascend 910B``), ``None`` if unknown."""
    if device_id is None or not known_device_id(device_id):
        return None
    return family_of(device_id=device_id).pci_model(device_id)


def required_device_nodes(families: Iterable[ChipFamily]) -> Tuple[str, ...]:
    """The device nodes a machine with chips of ``families`` needs besides davinciN; with no
    family known (an SoC board in RC mode has no PCI function), the nodes every family needs."""
    rows = tuple(families)
    if rows:
        return tuple(name for name in MANAGER_NODES if any(name in row.device_nodes for row in rows))
    every = (OTHER, *FAMILIES)
    return tuple(name for name in MANAGER_NODES if all(name in row.device_nodes for row in every))


def idle_allowance_mib(family: ChipFamily, total_mib: int) -> Optional[int]:
    """What an idle chip of ``family`` with ``total_mib`` of memory holds, from the family's
    measured idle figure (scaled up on a part larger than the one it was measured on); ``None``
    when the family has no figure."""
    idle = family.idle_memory_mib
    if idle is None:
        return None
    if family.typical_memory_mib and total_mib > family.typical_memory_mib:
        return int(idle * total_mib / family.typical_memory_mib)
    return idle


def critical_limits_text() -> str:
    """The critical temperatures per family for ``check --max-temp``'s help: ``95 °C for A3/910B …``."""
    by_limit: Dict[float, List[str]] = {}
    for family in (*FAMILIES, OTHER):
        name = "any other chip" if family is OTHER else "A3" if family.key == "a3" else family.key.upper()
        by_limit.setdefault(family.temperature_critical_c, []).append(name)
    limits = sorted(by_limit.items(), reverse=True)
    return ", ".join(f"{limit:g} °C for {'/'.join(names)}" for limit, names in limits)


def _cell(value: object) -> str:
    return "—" if value is None else str(value)


def limits_table() -> str:
    """The README's table of every family's limits (Markdown), written from ``FAMILIES``."""
    lines = [
        "| family | PCI device IDs | chip name matches | warning | critical | rated power (chip / card) "
        "| power read per | idle memory | power source |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in (*FAMILIES, OTHER):
        ids = ", ".join(f"`{i:04x}`" for i in sorted(row.pci_device_ids)) or "—"
        # A pipe inside a Markdown table cell is escaped, code span or not.
        escaped = row.name_pattern.replace("|", "\\|")
        pattern = f"`{escaped}`" if escaped else "(anything else)"
        chip_w = "—" if row.rated_power_w is None else f"{row.rated_power_w:g} W"
        cards = ", ".join(f"{n} chips: {w:g} W" for n, w in sorted(row.card_power_w.items()) if n > 1)
        power = f"{chip_w} / {cards}" if cards else chip_w
        idle = "—" if row.idle_memory_mib is None else f"{row.idle_memory_mib} MiB"
        if row.idle_memory_mib is not None and row.typical_memory_mib:
            idle += f" of {row.typical_memory_mib}"
        lines.append(
            f"| {row.title} | {ids} | {pattern} | {row.temperature_warning_c:g} °C "
            f"| {row.temperature_critical_c:g} °C | {power} | {row.power_scope} | {idle} "
            f"| {_cell(row.source_of('rated_power_w'))} |"
        )
    return "\n".join(lines)
