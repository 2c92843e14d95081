"""Check pcie-link: every NPU's PCIe link trained at its maximum speed and width."""

from __future__ import annotations

from typing import List, Optional

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, passed, skipped, warned
from npuwatch.probes.pci import PciFunction


def _gt_s(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:g} GT/s"


def describe(function: PciFunction) -> str:
    """``x8 of x16, 16 of 32 GT/s`` (only the parts below their maximum), as the live views say it."""
    return function.link.describe()


def _slot_limit(function: PciFunction) -> Optional[str]:
    """What the upstream port allows when it is less than the card's own maximum."""
    link = function.link
    notes = []
    width = function.upstream_max_width
    if width is not None and link.max_width is not None and width < link.max_width:
        notes.append(f"x{width}")
    speed = function.upstream_max_speed_gt_s
    if speed is not None and link.max_speed_gt_s is not None and speed < link.max_speed_gt_s:
        notes.append(_gt_s(speed))
    if not notes:
        return None
    return f"the slot's port {function.upstream_bdf} supports at most {', '.join(notes)}"


def _at_slot_limit(function: PciFunction) -> bool:
    """True when the link runs exactly as fast and wide as the slot allows."""
    link = function.link
    widths = [x for x in (link.max_width, function.upstream_max_width) if x is not None]
    width_cap = min(widths) if widths else None
    speeds = [x for x in (link.max_speed_gt_s, function.upstream_max_speed_gt_s) if x is not None]
    speed_cap = min(speeds) if speeds else None
    width_ok = width_cap is None or link.current_width is None or link.current_width >= width_cap
    speed_ok = speed_cap is None or link.current_speed_gt_s is None or link.current_speed_gt_s >= speed_cap
    return width_ok and speed_ok


def run(machine: Machine) -> Finding:
    """Compare current and maximum link speed and width, function by function."""
    functions = [
        f for f in machine.pci().functions if f.link.present and not f.is_virtual_function
    ]  # VFs share their PF's link; a dead function is pci-devices' finding
    readable = [
        f for f in functions if f.link.current_width is not None or f.link.current_speed_gt_s is not None
    ]
    if not readable:
        return skipped("no PCIe link attributes in sysfs (an SoC board, a VM, or an old kernel)")
    degraded = [f for f in readable if f.link.degraded]
    if not degraded:
        link = readable[0].link
        summary = f"{len(readable)} links at their maximum"
        if len({(f.link.current_width, f.link.current_speed_gt_s) for f in readable}) == 1:
            summary += f" (x{link.current_width}, {_gt_s(link.current_speed_gt_s)})"
        return passed(summary)
    details: List[str] = []
    for function in degraded:
        line = f"{function.bdf}: {describe(function)}"
        limit = _slot_limit(function)
        if limit:
            line += f" ({limit})"
        details.append(line)
    first = degraded[0]
    summary = (
        f"{first.bdf} PCIe link runs at {describe(first)}"
        if len(degraded) == 1
        else f"{len(degraded)} PCIe links below their maximum: " + "; ".join(details)
    )
    if len(degraded) == 1 and _slot_limit(first):
        summary += f" ({_slot_limit(first)})"
    return warned(summary, _hint(degraded), details)


def _hint(degraded: List[PciFunction]) -> str:
    first = degraded[0]
    inspect = f"`lspci -vv -s {first.bdf} | grep -e LnkCap -e LnkSta`"
    if all(_at_slot_limit(f) for f in degraded):
        return (
            f"the slot, not the card, limits the link: move the card to a full-speed x16 slot (or riser), "
            f"or check the slot's bifurcation and link settings in the BIOS; inspect with {inspect}"
        )
    hint = (
        "host↔device copies run slower: reseat the card, check the slot, riser and cables, and the BIOS PCIe "
        f"settings (link speed Auto or the card's generation); inspect with {inspect}"
    )
    if not any(f.link.narrow for f in degraded):
        hint += "; a lower speed alone can be link power saving at idle: check again while a job runs"
    return hint


CHECK = Check(
    id="pcie-link",
    group=Group.HARDWARE,
    title="every NPU's PCIe link runs at its maximum speed and width",
    run=run,
    needs_hardware=True,
)
