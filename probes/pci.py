"""Provides scan_pci(): the Ascend PCI functions in Linux sysfs, with identity, driver and link."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Callable, Dict, Mapping, Optional, Tuple, TypeVar

from npuwatch import chip_families
from npuwatch.model import PcieLink
from npuwatch.probes.sysroot import Sysroot

#: Where the kernel lists every PCI function (driver-interfaces.md §5.2).
PCI_DEVICES_DIR = PurePosixPath("/sys/bus/pci/devices")

#: The name the Ascend PCIe host driver registers (module drv_pcie_host; driver-interfaces.md §2.3).
ASCEND_DRIVER = "devdrv_device_driver"

HUAWEI_VENDOR_ID = 0x19E5

#: OEM vendor IDs in the driver's own ID tables (devdrv_adapt.c ``g_devdrv_tbl``,
#: driver-interfaces.md §5.1).  The driver also lists 0xFFFF ("diversity"); such a function is
#: still found when it is bound to devdrv_device_driver.
OEM_VENDOR_IDS = frozenset({0x20C6, 0x203F, 0x20E9, 0x2092})

_T = TypeVar("_T")

_BDF = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_HEX = re.compile(r"^(?:0[xX])?([0-9a-fA-F]{1,16})$")
_INT = re.compile(r"^[+-]?[0-9]{1,19}$")
# "16.0 GT/s PCIe" (kernel ≥ 5.7) or "16 GT/s" (≤ 5.6); "Unknown"/"Unknown speed" → None.
_SPEED = re.compile(r"^([0-9]{1,4}(?:\.[0-9]{1,4})?)\s*GT/s\b")


@dataclass(frozen=True)
class PciFunction:
    """One Ascend PCI function: identity, chip count, bound driver and PCIe link health."""

    bdf: str  # as sysfs spells it: "0000:c1:00.0"
    vendor_id: Optional[int] = None
    device_id: Optional[int] = None
    subsystem_vendor_id: Optional[int] = None
    subsystem_device_id: Optional[int] = None
    class_code: Optional[int] = None
    revision: Optional[int] = None
    model: Optional[str] = None  # the family table's name for the device ID; None for an unknown one
    chips: int = 1
    driver: Optional[str] = None  # the bound driver's name; None when unbound
    is_virtual_function: bool = False
    link: PcieLink = field(default_factory=PcieLink)
    local_cpulist: Optional[str] = None  # "0-23,48-71", as the kernel prints it
    power_state: Optional[str] = None  # "D0", "D3cold" …; absent on older kernels
    upstream_bdf: Optional[str] = None  # the bridge or root port above this function
    upstream_max_speed_gt_s: Optional[float] = None
    upstream_max_width: Optional[int] = None
    #: Attribute name → why it is None ("missing or unreadable", "unparsable: '…'").
    unavailable: Mapping[str, str] = field(default_factory=dict)

    @property
    def bound(self) -> bool:
        """True when the Ascend driver (devdrv_device_driver) owns this function."""
        return self.driver == ASCEND_DRIVER

    @property
    def bus_id(self) -> str:
        """The address as npu-smi prints it (``0000:C1:00.0``)."""
        return self.bdf.upper()


@dataclass(frozen=True)
class PciInventory:
    """Every Ascend PCI function found, in sysfs (BDF) order, which is not NPU-ID order."""

    functions: Tuple[PciFunction, ...] = ()
    reason: Optional[str] = None  # why the scan saw nothing at all (no sysfs), else None

    @property
    def chip_count(self) -> int:
        """Chips behind the physical functions; SR-IOV VFs are skipped as host_sys_init.sh does."""
        return sum(f.chips for f in self.functions if not f.is_virtual_function)

    @property
    def unbound(self) -> Tuple[PciFunction, ...]:
        """Functions the Ascend driver does not own (probe failed, unbound, or vfio passthrough)."""
        return tuple(f for f in self.functions if not f.bound)

    def by_bus_id(self, bus_id: Optional[str]) -> Optional[PciFunction]:
        """The function at npu-smi's ``Bus-Id`` (``0000:C1:00.0``, any case; domain optional)."""
        wanted = normalize_bdf(bus_id)
        if wanted is None:
            return None
        return next((f for f in self.functions if f.bdf.lower() == wanted), None)


def normalize_bdf(bus_id: Optional[str]) -> Optional[str]:
    """``0000:C1:00.0`` or ``C1:00.0`` → ``0000:c1:00.0``; ``NA`` or a redacted ID → None."""
    if bus_id is None:
        return None
    text = bus_id.strip().lower()
    if text.count(":") == 1:
        text = "0000:" + text
    return text if _BDF.match(text) else None


def scan_pci(sysroot: Sysroot, previous: Optional[PciInventory] = None) -> PciInventory:
    """Find every Ascend function under ``/sys/bus/pci/devices``; never raises on a broken tree.

    With ``previous`` (an earlier scan of the same machine), a function found there with the same
    vendor, device and driver has only what can change read again: its link (speed, width, AER
    totals, presence) and power state; its identity, chip count, NUMA CPUs and upstream bridge are
    kept (one replaced or rebound reads a new vendor, device or driver and is read whole).  That is
    a third of a full scan's file reads: the sampler rescans every ``PCI_REFRESH_S``.
    """
    if not sysroot.exists(PCI_DEVICES_DIR):
        return PciInventory(reason=f"{PCI_DEVICES_DIR} is missing (sysfs not mounted?)")
    known = {function.bdf: function for function in previous.functions} if previous is not None else {}
    found = []
    for name in sysroot.listdir(PCI_DEVICES_DIR):
        function = _read_function(sysroot, name, known.get(name))
        if function is not None:
            found.append(function)
    return PciInventory(functions=tuple(found))


#: What a rescan reads again of a known function (``_read_link`` and the power state; its other
#: attributes are fixed while it stays bound).
_LIVE_ATTRIBUTES = frozenset(
    {
        "current_link_speed",
        "max_link_speed",
        "current_link_width",
        "max_link_width",
        "numa_node",
        "aer_dev_correctable",
        "aer_dev_nonfatal",
        "aer_dev_fatal",
        "power_state",
    }
)


def _read_function(sysroot: Sysroot, bdf: str, known: Optional[PciFunction] = None) -> Optional[PciFunction]:
    """The function at ``bdf`` if it is an Ascend one, else None; ``known``: the same function as
    an earlier scan read it, whose fixed facts are kept when it still has the same identity."""
    # Machine paths as plain strings: a scan reads ~18 files per function, and building each
    # path with pathlib cost more than reading the file.
    base = f"{PCI_DEVICES_DIR}/{bdf}"
    unavailable: Dict[str, str] = {}

    def attr_hex(name: str) -> Optional[int]:
        return _parse(sysroot.read_line(f"{base}/{name}"), _parse_hex, name, unavailable)

    vendor_id = attr_hex("vendor")
    device_id = attr_hex("device")
    driver = _driver_name(sysroot.readlink(f"{base}/driver"))
    if not _is_ascend(vendor_id, device_id, driver):
        return None
    if known is not None and (known.vendor_id, known.device_id, known.driver) == (
        vendor_id,
        device_id,
        driver,
    ):
        fixed = {name: why for name, why in known.unavailable.items() if name not in _LIVE_ATTRIBUTES}
        link = _read_link(sysroot, base, unavailable)
        power_state = _read_text_attr(sysroot, base, "power_state", unavailable)
        return replace(known, link=link, power_state=power_state, unavailable={**fixed, **unavailable})

    subsystem_device_id = attr_hex("subsystem_device")
    model = chip_families.pci_model(device_id)
    upstream = _upstream_dir(sysroot, base)
    upstream_bdf = upstream.name if upstream is not None else None
    upstream_speed = upstream_width = None
    if upstream is not None:
        upstream_speed = _parse_speed(sysroot.read_line(f"{upstream}/max_link_speed"))
        upstream_width = _parse_width(sysroot.read_line(f"{upstream}/max_link_width"))
    return PciFunction(
        bdf=bdf,
        vendor_id=vendor_id,
        device_id=device_id,
        subsystem_vendor_id=attr_hex("subsystem_vendor"),
        subsystem_device_id=subsystem_device_id,
        class_code=attr_hex("class"),
        revision=attr_hex("revision"),
        model=model,
        chips=chips_per_function(device_id, subsystem_device_id),
        driver=driver,
        # A VF carries a physfn link to its PF (driver-interfaces.md §5.2); a dangling one counts.
        is_virtual_function=sysroot.readlink(f"{base}/physfn") is not None,
        link=_read_link(sysroot, base, unavailable),
        local_cpulist=_read_text_attr(sysroot, base, "local_cpulist", unavailable),
        power_state=_read_text_attr(sysroot, base, "power_state", unavailable),
        upstream_bdf=upstream_bdf,
        upstream_max_speed_gt_s=upstream_speed,
        upstream_max_width=upstream_width,
        unavailable=unavailable,
    )


def _is_ascend(vendor_id: Optional[int], device_id: Optional[int], driver: Optional[str]) -> bool:
    # Vendor 0x19e5 alone is not enough (Huawei NICs and RAID cards share it), and OEM cards use
    # other vendor IDs with the same device IDs (driver-interfaces.md §5.1): match on the device
    # table, or trust the Ascend driver's own binding.
    if driver == ASCEND_DRIVER:
        return True
    known_device = chip_families.known_device_id(device_id)
    return known_device and (vendor_id == HUAWEI_VENDOR_ID or vendor_id in OEM_VENDOR_IDS)


def chips_per_function(device_id: Optional[int], subsystem_device_id: Optional[int]) -> int:
    """1, or 2 for a "1PF2P" function (a 310P Atlas 300I Duo: subsystem device 0x0110): the
    family table's rule (``ChipFamily.chips_per_function``)."""
    return chip_families.family_of(device_id=device_id).chips_per_function(subsystem_device_id)


def _read_link(sysroot: Sysroot, base: str, unavailable: Dict[str, str]) -> PcieLink:
    def attr(name: str, parser: Callable[[str], Optional[_T]]) -> Optional[_T]:
        return _parse(sysroot.read_line(f"{base}/{name}"), parser, name, unavailable)

    config = sysroot.read_bytes(f"{base}/config", 2)
    return PcieLink(
        current_speed_gt_s=attr("current_link_speed", _parse_speed),
        max_speed_gt_s=attr("max_link_speed", _parse_speed),
        current_width=attr("current_link_width", _parse_width),
        max_width=attr("max_link_width", _parse_width),
        numa_node=attr("numa_node", _parse_numa_node),
        aer_correctable_total=_read_aer(sysroot, base, "aer_dev_correctable", unavailable),
        aer_nonfatal_total=_read_aer(sysroot, base, "aer_dev_nonfatal", unavailable),
        aer_fatal_total=_read_aer(sysroot, base, "aer_dev_fatal", unavailable),
        # vendor/device files are cached at enumeration; config is read live, and a function that
        # fell off the bus answers all-ones (driver-interfaces.md §5.2).
        present=config != b"\xff\xff",
    )


def _read_aer(sysroot: Sysroot, base: str, name: str, unavailable: Dict[str, str]) -> Optional[int]:
    text = sysroot.read_text(f"{base}/{name}", limit=16384)
    if text is None:
        unavailable[name] = "missing or unreadable (kernel without AER, or device not AER-capable)"
        return None
    total = parse_aer_total(text)
    if total is None:
        unavailable[name] = f"unparsable: {_excerpt(text)}"
    return total


def parse_aer_total(text: str) -> Optional[int]:
    """The total of an ``aer_dev_*`` file: its ``TOTAL_ERR_*`` line, else the sum of its lines."""
    # Bit names changed across kernels ("Receiver Error" in 4.19, "RxErr" later) and can contain
    # spaces, so only the last token of each line is read (driver-interfaces.md §5.2).
    counts = []
    for line in text.splitlines():
        tokens = line.split()
        if len(tokens) < 2 or not _INT.match(tokens[-1]):
            continue
        value = int(tokens[-1])
        if value < 0:
            continue
        if tokens[0].startswith("TOTAL_ERR"):
            return value
        counts.append(value)
    return sum(counts) if counts else None


def _parse(
    text: Optional[str],
    parser: Callable[[str], Optional[_T]],
    name: str,
    unavailable: Dict[str, str],
) -> Optional[_T]:
    if text is None:
        unavailable[name] = "missing or unreadable"
        return None
    value = parser(text)
    if value is None:
        unavailable[name] = f"unparsable: {_excerpt(text)}"
    return value


def _read_text_attr(sysroot: Sysroot, base: str, name: str, unavailable: Dict[str, str]) -> Optional[str]:
    text = sysroot.read_line(f"{base}/{name}")
    if not text:
        unavailable[name] = "missing or unreadable"
        return None
    if not text.isprintable():
        unavailable[name] = f"unparsable: {_excerpt(text)}"
        return None
    return text


def _parse_hex(text: str) -> Optional[int]:
    match = _HEX.match(text.strip())
    return int(match.group(1), 16) if match else None


def _parse_speed(text: Optional[str]) -> Optional[float]:
    """GT/s from ``16.0 GT/s PCIe`` or ``16 GT/s``; ``Unknown``/``Unknown speed`` → None."""
    if text is None:
        return None
    match = _SPEED.match(text.strip())
    if match is None:
        return None
    value = float(match.group(1))
    return value if math.isfinite(value) and value > 0 else None


def _parse_width(text: Optional[str]) -> Optional[int]:
    # sysfs prints a bare "%u" ("16"); "x16" is lspci's spelling, not sysfs's (§5.2).
    if text is None:
        return None
    stripped = text.strip()
    if not stripped.isascii() or not stripped.isdigit() or len(stripped) > 3:
        return None
    return int(stripped)


def _parse_numa_node(text: str) -> Optional[int]:
    stripped = text.strip()
    if not _INT.match(stripped):
        return None
    value = int(stripped)
    return value if value >= 0 else None  # -1: the platform reports no NUMA affinity


def _driver_name(link_text: Optional[str]) -> Optional[str]:
    # The link reads "../../../../bus/pci/drivers/devdrv_device_driver"; its last part is the name.
    if not link_text:
        return None
    name = link_text.rstrip("/").rsplit("/", 1)[-1]
    return name or None


def _upstream_dir(sysroot: Sysroot, base: str) -> Optional[PurePosixPath]:
    """The machine path of the bridge above ``base``: the parent of its real path (§5.3)."""
    real = sysroot.realpath(base)
    if sysroot.is_live:
        machine = PurePosixPath(str(real))
    else:
        root = Path(os.path.realpath(sysroot.root))
        try:
            machine = PurePosixPath("/") / PurePosixPath(real.relative_to(root).as_posix())
        except ValueError:  # a link that leaves the tree: nothing of this machine to read
            return None
    parent = machine.parent
    # A function directly on a root bus sits under "pci0000:00", which is no bridge.
    return parent if _BDF.match(parent.name) else None


def _excerpt(text: str) -> str:
    cleaned = text.strip()
    return repr(cleaned[:40] + ("…" if len(cleaned) > 40 else ""))
