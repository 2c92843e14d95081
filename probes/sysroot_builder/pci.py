"""Provides ``PciTree``: a simulated machine's PCI functions in sysfs (config space, link, AER
counters, root ports, driver binding)."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path, PurePosixPath
from typing import Dict, Mapping, Optional, Tuple

from npuwatch.probes.pci import ASCEND_DRIVER
from npuwatch.probes.sysroot_builder.tree import Content, TreeWriter

_BDF = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")

#: AER bit names of ``aer_dev_*`` by kernel era (drivers/pci/pcie/aer.c; 4.19 spelled them out).
#: The builder puts the whole count on the first name and closes with the TOTAL line, as the
#: kernel prints it; the probe trusts only TOTAL (driver-interfaces.md §5.2).
_AER_NAMES: Mapping[str, Mapping[str, Tuple[str, ...]]] = {
    "new": {
        "correctable": ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr"),
        "nonfatal": ("CmpltTO", "Undefined", "DLP", "TLP", "UnsupReq", "MalfTLP"),
        "fatal": ("SDES", "Undefined", "DLP", "TLP", "RxOF", "MalfTLP"),
    },
    "old": {
        "correctable": ("Receiver Error", "Bad TLP", "Bad DLLP", "RELAY_NUM Rollover"),
        "nonfatal": ("Completion Timeout", "Undefined", "Data Link Protocol", "Poisoned TLP"),
        "fatal": ("Surprise Down Error", "Undefined", "Data Link Protocol", "Malformed TLP"),
    },
}
_AER_TOTALS = {"correctable": "COR", "nonfatal": "NONFATAL", "fatal": "FATAL"}

#: The Gen4 maximum in the spelling of a dead link's speed (kernels ≤ 5.6 omit "PCIe", §5.2).
_MAX_FOR_UNKNOWN = {"Unknown": "16.0 GT/s PCIe", "Unknown speed": "16 GT/s"}


class PciTree(TreeWriter):
    """The PCI side of ``SysrootBuilder``."""

    def add_pci_function(
        self,
        bdf: str,
        device_id: int,
        vendor_id: int = 0x19E5,
        subsystem_vendor_id: int = 0x0200,
        subsystem_device_id: int = 0x0100,
        numa_node: Optional[int] = 0,
        current_speed: Optional[str] = "16.0 GT/s PCIe",
        max_speed: Optional[str] = None,
        current_width: Optional[int] = 16,
        max_width: Optional[int] = 16,
        bound: bool = True,
        present: bool = True,
        aer: Optional[Tuple[int, int, int]] = (0, 0, 0),
        virtual_function: bool = False,
        root_port: Optional[str] = None,
        *,
        driver: str = ASCEND_DRIVER,
        class_code: int = 0x120000,
        revision: Optional[int] = None,
        aer_style: str = "new",
        physfn: Optional[str] = None,
        upstream_max_speed: Optional[str] = None,
        upstream_max_width: Optional[int] = None,
        local_cpulist: Optional[str] = None,
    ) -> Path:
        """Write one PCI function as Linux lays it out; returns its folder in the tree.

        Speeds are the kernel's text (``"16.0 GT/s PCIe"``, old kernels ``"16 GT/s"``,
        ``"Unknown"``); ``None`` leaves the file out, as does ``aer=None``.  ``max_speed``
        defaults to ``current_speed``, or Gen4 in the same spelling when that is ``Unknown``
        (the maximum is cached at enumeration); pass both for a slowed link.  ``aer`` is
        (correctable, nonfatal, fatal) totals; ``aer_style`` ``"new"`` names bits ``RxErr``,
        ``"old"`` ``Receiver Error``.  ``root_port`` defaults to one derived from the bus;
        ``""`` puts the function straight on the root bus.  ``present=False`` makes ``config``
        read ``ff ff`` (fell off the bus).  ``bound=False`` leaves out the ``driver`` link;
        ``driver`` names another driver (``vfio-pci``).  A ``virtual_function`` gets a
        ``physfn`` link to ``physfn`` (default: function 0 of the same device).
        """
        domain, bus, slot, _ = _split_bdf(bdf)
        if max_speed is None:  # the maximum is cached at enumeration: it survives a dead link
            max_speed = _MAX_FOR_UNKNOWN.get(current_speed or "", current_speed)
        if revision is None:
            revision = 0x71 if virtual_function else 0x20  # §5.1: 0x71 marks SR-IOV/mdev VFs
        parent = _parent_dir(domain, bus, root_port)
        if _BDF.match(parent.name):  # a root port, not the host bridge itself
            upstream_width = max_width if upstream_max_width is None else upstream_max_width
            self._write_root_port(
                parent,
                {
                    "max_link_speed": upstream_max_speed or max_speed,
                    "max_link_width": upstream_width,
                    "current_link_speed": current_speed,
                    "current_link_width": current_width,
                },
            )
        device = parent / bdf
        files: Dict[str, Content] = {
            "vendor": f"0x{vendor_id:04x}\n",
            "device": f"0x{device_id:04x}\n",
            "subsystem_vendor": f"0x{subsystem_vendor_id:04x}\n",
            "subsystem_device": f"0x{subsystem_device_id:04x}\n",
            "class": f"0x{class_code:06x}\n",
            "revision": f"0x{revision:02x}\n",
            "numa_node": f"{-1 if numa_node is None else numa_node}\n",
            "enable": "1\n",
            "power_state": "D0\n",
            "config": _config_space(
                vendor_id,
                device_id,
                (subsystem_vendor_id, subsystem_device_id),
                (class_code & 0xFFFFFF) << 8 | (revision & 0xFF),
            )
            if present
            else b"\xff" * 64,
        }
        optional = {
            "current_link_speed": current_speed,
            "max_link_speed": max_speed,
            "current_link_width": current_width,
            "max_link_width": max_width,
        }
        files.update({name: f"{value}\n" for name, value in optional.items() if value is not None})
        if local_cpulist is None and numa_node is not None and numa_node >= 0:
            local_cpulist = f"{numa_node * 48}-{numa_node * 48 + 47}"  # Kunpeng 920: 48 per node
        if local_cpulist is not None:
            files["local_cpulist"] = f"{local_cpulist}\n"
        if aer is not None:
            files.update(_aer_files(aer, aer_style))
        if self.path(device).is_dir():  # rewriting a function replaces it, leaving no stale file
            shutil.rmtree(self.path(device))
        folder = self._write_device(device, files)
        if bound:
            self.bind_driver(bdf, driver)
        else:
            self.unbind_driver(bdf)
        if virtual_function:
            pf = physfn or f"{domain}:{bus}:{slot}.0"
            if pf == bdf:
                raise ValueError(f"a VF cannot be its own physfn: {bdf}")
            self.symlink(device / "physfn", device.parent / pf)
        return folder

    def add_raw_pci_function(
        self, bdf: str, files: Mapping[str, Content], root_port: Optional[str] = None
    ) -> Path:
        """Write exactly ``files`` (name → content) for ``bdf``: for broken and partial devices."""
        domain, bus, _, _ = _split_bdf(bdf)
        return self._write_device(_parent_dir(domain, bus, root_port) / bdf, files)

    def bind_driver(self, bdf: str, driver: str = ASCEND_DRIVER) -> None:
        """Link ``bdf`` and ``driver`` both ways, as the kernel does when a probe succeeds."""
        self.unbind_driver(bdf)
        device = self._device_path(bdf)
        drivers = PurePosixPath("/sys/bus/pci/drivers") / driver
        self.path(drivers).mkdir(parents=True, exist_ok=True)
        self.symlink(device / "driver", drivers)
        self.symlink(drivers / bdf, device)

    def unbind_driver(self, bdf: str) -> None:
        """Remove the driver links of ``bdf`` (what ``echo BDF > …/unbind`` leaves behind)."""
        link = self.path(self._device_path(bdf)) / "driver"
        if link.is_symlink():
            link.unlink()
        for back in self.path("/sys/bus/pci/drivers").glob(f"*/{bdf}"):
            if back.is_symlink():
                back.unlink()

    def _device_path(self, bdf: str) -> PurePosixPath:
        link = self.path(PurePosixPath("/sys/bus/pci/devices") / bdf)
        if not link.is_symlink():
            raise ValueError(f"no PCI function {bdf} in {self.root}")
        real = Path(os.path.realpath(link)).relative_to(os.path.realpath(self.root))
        return PurePosixPath("/") / real.as_posix()

    def _write_device(self, device: PurePosixPath, files: Mapping[str, Content]) -> Path:
        folder = self.path(device)
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            self.write_file(device / name, content, mode=0o444)
        self.symlink(PurePosixPath("/sys/bus/pci/devices") / device.name, device)
        return folder

    def _write_root_port(self, port: PurePosixPath, link: Mapping[str, object]) -> None:
        files: Dict[str, Content] = {
            "vendor": "0x19e5\n",
            "device": "0xa120\n",  # HiSilicon Kunpeng 920 root port
            "class": "0x060400\n",
            "aer_rootport_total_err_cor": "0\n",
            "aer_rootport_total_err_fatal": "0\n",
            "aer_rootport_total_err_nonfatal": "0\n",
        }
        files.update({name: f"{value}\n" for name, value in link.items() if value is not None})
        self.path(port).mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            self.write_file(port / name, content, mode=0o444)


def _split_bdf(bdf: str) -> Tuple[str, str, str, str]:
    match = _BDF.match(bdf)
    if match is None:
        raise ValueError(f"not a sysfs BDF (0000:c1:00.0, lower case): {bdf!r}")
    return match.group(1), match.group(2), match.group(3), match.group(4)


def _parent_dir(domain: str, bus: str, root_port: Optional[str]) -> PurePosixPath:
    """The folder a function on ``bus`` sits in: ``/sys/devices/pciDDDD:BB[/<root port>]``.

    By default the root bus is ``bus`` rounded down to 0x40 and the port's slot the remainder,
    which gives adjacent buses distinct ports (c1 → c0:01.0, c2 → c0:02.0) as on Kunpeng servers,
    where every NPU hangs off its own root port; a function on a root bus gets none.
    """
    if root_port is None:
        number = int(bus, 16)
        root_bus = number & 0xC0
        if number == root_bus:
            return PurePosixPath("/sys/devices") / f"pci{domain}:{bus}"
        root_port = f"{domain}:{root_bus:02x}:{(number - root_bus) & 0x1F:02x}.0"
    if not root_port:
        return PurePosixPath("/sys/devices") / f"pci{domain}:{bus}"
    port_domain, port_bus, _, _ = _split_bdf(root_port)
    return PurePosixPath("/sys/devices") / f"pci{port_domain}:{port_bus}" / root_port


def _config_space(vendor_id: int, device_id: int, subsystem: Tuple[int, int], class_rev: int) -> bytes:
    """The first 64 bytes of a type-0 config header, little-endian as the hardware returns it."""
    config = bytearray(64)
    struct.pack_into("<HHHH", config, 0, vendor_id, device_id, 0x0406, 0x0010)  # MEM|BM, caps
    struct.pack_into("<I", config, 8, class_rev)  # offset 8: revision, then the 24-bit class code
    struct.pack_into("<HH", config, 0x2C, *subsystem)
    config[0x34] = 0x40  # capability list pointer
    return bytes(config)


def _aer_files(totals: Tuple[int, int, int], style: str) -> Dict[str, str]:
    names = _AER_NAMES.get(style)
    if names is None:
        raise ValueError(f"unknown AER style {style!r}; 'new' or 'old'")
    files = {}
    for kind, total in zip(("correctable", "nonfatal", "fatal"), totals):
        lines = [f"{name} {total if i == 0 else 0}" for i, name in enumerate(names[kind])]
        lines.append(f"TOTAL_ERR_{_AER_TOTALS[kind]} {total}")
        files[f"aer_dev_{kind}"] = "\n".join(lines) + "\n"
    return files
