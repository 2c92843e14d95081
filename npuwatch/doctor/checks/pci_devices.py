"""Check pci-devices: the Ascend PCI functions are present and answer on the bus."""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional, Sequence

from npuwatch.chip_families import family_of
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, warned
from npuwatch.probes.pci import PCI_DEVICES_DIR, PciFunction

_NONE_HINT = (
    "check that the host sees the card with `lspci -d 19e5:`; in a VM, pass the NPU through "
    "(vfio-pci); on bare metal, check the card is seated and its slot enabled in the BIOS"
)


def model_name(function: PciFunction) -> str:
    """The chip family of ``function``, or its device ID when the table does not know it."""
    if function.model:
        return function.model
    if function.device_id is not None:
        return f"Ascend device 0x{function.device_id:04x}"
    return "Ascend device (unreadable ID)"


def describe(function: PciFunction) -> str:
    """One evidence line: address, model, IDs, driver and NUMA node."""
    ids = ""
    if function.vendor_id is not None and function.device_id is not None:
        ids = f" ({function.vendor_id:04x}:{function.device_id:04x})"
    chips = f", {function.chips} chips" if function.chips > 1 else ""
    vf = ", virtual function" if function.is_virtual_function else ""
    driver = f"driver {function.driver}" if function.driver else "no driver bound"
    numa = "" if function.link.numa_node is None else f", NUMA node {function.link.numa_node}"
    return f"{function.bdf} {model_name(function)}{ids}{chips}{vf}, {driver}{numa}"


def summarize_models(functions: Sequence[PciFunction]) -> str:
    """``8 × Ascend 910B (8 chips)``; several models are joined with ``, ``."""
    counts: Dict[str, List[int]] = OrderedDict()
    for function in functions:
        entry = counts.setdefault(model_name(function), [0, 0])
        entry[0] += 1
        entry[1] += function.chips
    parts = []
    for name, (count, chips) in counts.items():
        plural = "" if chips == 1 else "s"
        parts.append(f"{count} × {name} ({chips} chip{plural})")
    return ", ".join(parts)


def _soc_board(machine: Machine) -> Optional[str]:
    """The SoC npu-smi names (``310B4``) when every chip it lists is one board SoC (a family whose
    memory is the board's: the 310B), else ``None``."""
    if machine.npu_smi_path is None and machine.npu_smi_withheld is None:
        return None
    table = machine.info_table()
    names = {(chip.identity.name or "").strip() for chip in table.chips} if table is not None else set()
    if len(names) == 1 and family_of(next(iter(names))).shared_memory:
        return next(iter(names))
    return None


def run(machine: Machine) -> Finding:
    """Find the Ascend functions; none at all fails, a dead function fails."""
    inventory = machine.pci()
    functions = inventory.functions
    blocked = machine.unreadable(PCI_DEVICES_DIR) if not functions else None
    if blocked is not None:
        message, hint = machine.cannot_read(blocked)
        return warned(
            f"{message}: the Ascend PCI functions cannot be listed",
            f"{hint}; or check the card from a shell that can: `lspci -d 19e5:`",
            [f"{blocked} is not readable by this user", "npu-smi and the device nodes are checked apart"],
        )
    if not functions:
        davinci = machine.dev().davinci_ids
        if davinci:
            nodes = ", ".join(f"/dev/davinci{n}" for n in davinci)
            soc = _soc_board(machine)
            if soc is not None:
                return passed(
                    f"Ascend {soc} SoC board (npu-smi): no PCIe endpoint to find, as expected",
                    [
                        f"npu-smi names a {soc}: a board SoC (Atlas 200I DK A2) has no PCI function",
                        f"device nodes: {nodes}",
                    ],
                )
            return warned(
                "no Ascend PCI function in sysfs, but the NPU device nodes exist",
                "expected on an SoC board (Atlas 200I A2 / Ascend 310B has no PCIe endpoint) or where "
                "/sys is hidden; on a PCIe server, check the host with `lspci -d 19e5:`",
                [
                    f"device nodes: {nodes}",
                    inventory.reason or "no Ascend function under /sys/bus/pci/devices",
                ],
            )
        details = [inventory.reason or "no function under /sys/bus/pci/devices has an Ascend device ID"]
        details.append("no /dev/davinciN device node")
        return failed("no Ascend NPU on this machine", _NONE_HINT, details)
    details = [describe(function) for function in functions]
    dead = [function for function in functions if not function.link.present]
    if dead:
        addresses = ", ".join(function.bdf for function in dead)
        return failed(
            f"{len(dead)} of {len(functions)} Ascend PCI functions fell off the bus: {addresses}",
            "the device stopped answering (its config space reads ff ff): look for AER or link-down "
            "errors with `dmesg | grep -i -e aer -e devdrv` and `lspci -vv -s "
            f"{dead[0].bdf}`, then reboot; if it happens again, reseat or replace the card",
            details,
        )
    physical = [function for function in functions if not function.is_virtual_function]
    virtual = len(functions) - len(physical)
    if not physical:  # a VM given SR-IOV virtual functions only
        return passed(f"{virtual} Ascend virtual functions: {summarize_models(functions)}", details)
    extra = f", plus {virtual} virtual functions" if virtual else ""
    return passed(f"{summarize_models(physical)}{extra}", details)


CHECK = Check(
    id="pci-devices",
    group=Group.HARDWARE,
    title="Ascend PCI functions are present and answer on the bus",
    run=run,
    runs_npu_smi=True,  # with no PCI function, npu-smi tells an SoC board (310B) from a hidden bus
)
