"""Check driver-bound: every Ascend PCI function is owned by the Ascend driver (devdrv_device_driver)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import List, Optional, Tuple

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned
from npuwatch.probes.pci import ASCEND_DRIVER

_DRIVER_DIR = PurePosixPath("/sys/bus/pci/drivers") / ASCEND_DRIVER

_NOT_LOADED_HINT = (
    "load the Ascend driver: `lsmod | grep drv_` should list drv_pcie_host and friends; if it "
    "lists nothing, reinstall the driver package (`./Ascend-hdk-<chip>-npu-driver_<version>_linux-"
    "<arch>.run --full --install-for-all`) and reboot; after a kernel upgrade the driver must be "
    "reinstalled for the new kernel"
)


def _ascend_modules(machine: Machine) -> Optional[Tuple[str, ...]]:
    """The loaded ``drv_*`` kernel modules, or ``None`` when /proc/modules cannot be read."""
    text = machine.sysroot.read_text("/proc/modules", limit=1 << 20)
    if text is None:
        return None
    names = (line.split(" ", 1)[0] for line in text.splitlines())
    return tuple(name for name in names if name.startswith("drv_") or name.startswith("ascend"))


def run(machine: Machine) -> Finding:
    """List the functions the Ascend driver does not own, by BDF."""
    functions = machine.pci().functions
    if not functions:
        return skipped("no Ascend PCI function to check (an SoC board, or /sys is hidden)")
    unbound = [function for function in functions if not function.bound]
    if not unbound:
        return passed(f"all {len(functions)} Ascend PCI functions are bound to {ASCEND_DRIVER}")
    details: List[str] = [
        f"{function.bdf}: " + (f"bound to {function.driver}" if function.driver else "no driver bound")
        for function in unbound
    ]
    modules = _ascend_modules(machine)
    if modules is not None:
        details.append("kernel modules loaded: " + (", ".join(modules) if modules else "no drv_* module"))
    driver_loaded = machine.sysroot.exists(_DRIVER_DIR) or bool(modules)
    addresses = ", ".join(function.bdf for function in unbound)
    without = [function for function in unbound if function.driver is None]
    if not without:  # every one is held by another driver on purpose (vfio-pci for a VM)
        names = ", ".join(sorted({function.driver or "" for function in unbound}))
        return warned(
            f"{len(unbound)} of {len(functions)} functions are bound to {names}, not {ASCEND_DRIVER}: "
            + addresses,
            f"this host cannot use them (passed through to a VM?); to use them here, remove them from "
            f"{names} (e.g. `driverctl unset-override {unbound[0].bdf}` or the vfio-pci.ids= kernel "
            "option) and reboot",
            details,
        )
    if not driver_loaded:
        return failed(
            f"the Ascend driver ({ASCEND_DRIVER}) is not loaded: {len(without)} of {len(functions)} "
            "functions have no driver "
            f"({addresses})",
            _NOT_LOADED_HINT,
            details,
        )
    return failed(
        f"{len(unbound)} of {len(functions)} Ascend PCI functions are not bound to {ASCEND_DRIVER}: "
        + addresses,
        "the driver is loaded but could not take these devices: read why with `dmesg | grep -i "
        f"-e devdrv -e {unbound[0].bdf}` (a failed card, or firmware that does not match the driver), "
        "then reboot; if it persists reinstall the driver and firmware",
        details,
    )


CHECK = Check(
    id="driver-bound",
    group=Group.DRIVER,
    title="every Ascend PCI function is bound to the Ascend driver",
    run=run,
    requires=("pci-devices",),
    needs_hardware=True,
)
