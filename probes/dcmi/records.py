"""Provides the plain records one DCMI read produces, the same on both sides of the worker's pipe.

The reader (in the worker process) fills them from the library's answers, already in npuwatch's
units (W, °C, MiB, MHz, %, V); the chip source (in npuwatch's process) turns them into
``ChipSample``s and statuses.  A value the library did not give is absent from ``values`` and
its return code is in ``codes`` (a DCMI ``-8xxx`` code, or ``SYMBOL_MISSING`` when the library
lacks the function).  Frozen, picklable, standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple

#: The code a read records when the library has no such function (MindCluster's own
#: "FUNCTION_NOT_FOUND", -99998: not a DCMI code).
SYMBOL_MISSING = -99998
#: ``dcmi_get_device_health``'s answer for a device that does not exist (0..3 are the alarm
#: levels).  Here, not in ``abi``, so the chip source in npuwatch's process needs no ctypes.
HEALTH_ABSENT = 0xFFFFFFFF
#: The code a read records when the library answered 0 but the value is impossible, checked as
#: MindCluster does: a temperature below -275 °C, a percentage outside 0..100, a voltage or a
#: power that cannot be (negative, or at least 2**31 raw units), a VDIE id of all zeros.
INVALID_VALUE = -99996


@dataclass(frozen=True)
class ChipRef:
    """Where a chip sits in DCMI's ID model (driver-interfaces.md §6.3)."""

    card_id: int  # npu-smi's "NPU ID"; not necessarily 0..N-1
    device_id: int  # npu-smi's "Chip" within the card
    logic_id: Optional[int] = None  # the runtime's device number (ACL, torch_npu)
    phy_id: Optional[int] = None  # /dev/davinci<phy_id>


@dataclass(frozen=True)
class ChipFacts:
    """What does not change while the chip runs: asked once (and again after a re-enumeration)."""

    ref: ChipRef
    chip_name: Optional[str] = None  # "910B3", "310P3" (npu-smi's Name)
    chip_type: Optional[str] = None  # "Ascend"
    chip_version: Optional[str] = None
    npu_name: Optional[str] = None  # chip_info_v2 only
    aicore_count: Optional[int] = None
    vdie_id: Optional[str] = None  # five words %08X joined by "-": a stable chip key
    bus_id: Optional[str] = None  # "0000:c1:00.0"
    pci_device_id: Optional[int] = None  # 0xd802
    board_id: Optional[int] = None
    product_type: Optional[str] = None
    aicore_rated_freq_mhz: Optional[int] = None
    #: The codes of the facts the library would not give (fact name → code).
    codes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessRecord:
    """One process on a chip as ``dcmi_get_device_resource_info`` lists it."""

    pid: int
    memory_bytes: int


@dataclass(frozen=True)
class ErrorCodeRecord:
    """One active error code with the library's text for it (``""`` when it gave none)."""

    code: int
    text: str = ""


@dataclass(frozen=True)
class ChipTick:
    """One chip's live values at one read."""

    ref: ChipRef
    #: ``dcmi_get_device_health`` as returned (0..3, ``0xFFFFFFFF`` absent), ``None`` if it failed.
    health: Optional[int] = None
    #: ChipSample field name → value in its unit (``power_w`` in W, ``hbm_used_mib`` in MiB …).
    values: Mapping[str, float] = field(default_factory=dict)
    #: ChipSample field name → the code that kept it from ``values``.
    codes: Mapping[str, int] = field(default_factory=dict)
    #: ``None`` when the process list could not be read (its code is ``codes["processes"]``).
    processes: Optional[Tuple[ProcessRecord, ...]] = None
    #: Empty both when the chip has none and when the list could not be read (then its code is
    #: ``codes["error_codes"]``).
    error_codes: Tuple[ErrorCodeRecord, ...] = ()
    #: ``values["power_w"]`` is the whole card's (board) power from ``dcmi_mcu_get_power_info``,
    #: put on the card's first chip because the chip's own power is not supported (310P).
    board_power: bool = False


@dataclass(frozen=True)
class Inventory:
    """What enumeration found: the library's and driver's versions and every NPU chip (MCUs skipped)."""

    dcmi_version: Optional[str] = None
    driver_version: Optional[str] = None
    chips: Tuple[ChipFacts, ...] = ()
    #: Cards whose chips could not be listed (card ID → code).
    card_codes: Mapping[int, int] = field(default_factory=dict)
    skipped_units: int = 0  # MCUs and other non-NPU units left out
    #: Library-wide reads that failed: "dcmi_version", "driver_version", "card_list" → code.
    codes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LibraryFailure:
    """Why ``libdcmi.so`` could not be loaded: the loader's own words and what to do about it."""

    message: str  # e.g. "libdrvdsmi_host.so: cannot open shared object file: No such file or directory"
    hint: str
    tried: Tuple[str, ...] = ()  # every path (or loader name) tried, in order
    #: No candidate existed at all (rather than one that exists and failed to load).
    not_found: bool = False
