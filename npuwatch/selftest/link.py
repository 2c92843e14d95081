"""Provides the PCIe link behind a self-tested device, its theoretical GB/s, and the copy verdict."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npuwatch.model import pcie_speed_label
from npuwatch.probes.pci import PciFunction, scan_pci
from npuwatch.probes.runtime.protocol import Step, StepStatus
from npuwatch.probes.sysroot import Sysroot
from npuwatch.selftest.report import DeviceRun, StepResult

#: A copy below this share of the link's theoretical rate is a warning (runtime-and-doctor.md §3 step 8).
MIN_LINK_RATIO = 0.5
#: Above this the numbers cannot be right (events or sysfs are wrong).
MAX_LINK_RATIO = 1.1


def lane_gb_s(speed_gt_s: float) -> float:
    """Usable GB/s of one lane in one direction (runtime-and-doctor.md §6.6: Gen4 ≈ 1.97 GB/s).

    Gen1/2 encode 8b/10b, Gen3–5 128b/130b; Gen6 (64 GT/s PAM4) carries 242 of every 256 FLIT bytes.
    """
    if speed_gt_s <= 5.0:
        return speed_gt_s * 8 / 10 / 8
    if speed_gt_s <= 32.0:
        return speed_gt_s * 128 / 130 / 8
    return speed_gt_s * 242 / 256 / 8


@dataclass(frozen=True)
class LinkInfo:
    """The link a device's host copies cross, as sysfs reports it, and how it was matched to the device."""

    bdf: str
    speed_gt_s: float
    width: int
    max_speed_gt_s: Optional[float]
    max_width: Optional[int]
    basis: str  # why this link belongs to the device

    @property
    def peak_gb_s(self) -> float:
        """Theoretical one-direction GB/s: lane rate × width."""
        return round(lane_gb_s(self.speed_gt_s) * self.width, 2)

    @property
    def label(self) -> str:
        """``PCIe Gen4 x16``."""
        return f"PCIe {pcie_speed_label(self.speed_gt_s)} x{self.width}"

    @property
    def degraded(self) -> bool:
        """Trained below its maximum speed or width."""
        slow = self.max_speed_gt_s is not None and self.speed_gt_s < self.max_speed_gt_s
        return slow or (self.max_width is not None and self.width < self.max_width)


def find_link(sysroot: Sysroot, device: int, environ: Mapping[str, str]) -> Tuple[Optional[LinkInfo], str]:
    """The link for logical ``device``, or None and why not."""
    chips: List[PciFunction] = []
    for function in scan_pci(sysroot).functions:
        if (
            not function.is_virtual_function
            and function.link.current_speed_gt_s
            and function.link.current_width
        ):
            chips += [function] * function.chips
    if not chips:
        return None, "no Ascend PCIe link readable in sysfs"
    shapes = {(f.link.current_speed_gt_s, f.link.current_width) for f in chips}
    if len(shapes) == 1:
        return _info(chips[0], f"every Ascend link ({len(set(f.bdf for f in chips))}) trains the same"), ""
    # Links differ: map the logical ID to a chip only where the mapping is plain (no remapping by a
    # container runtime, which sysfs does not show).
    if environ.get("ASCEND_VISIBLE_DEVICES") is not None:
        return (
            None,
            "links differ and ASCEND_VISIBLE_DEVICES remaps devices: cannot tell which is this device's",
        )
    visible = environ.get("ASCEND_RT_VISIBLE_DEVICES")
    index = device
    if visible is not None:
        ids = [int(part) for part in visible.split(",") if part.strip().isdigit()]
        if device >= len(ids):
            return None, "links differ and ASCEND_RT_VISIBLE_DEVICES does not name this device"
        index = ids[device]
    if index >= len(chips):
        return None, "links differ and this device has no PCI function in bus order"
    return _info(chips[index], f"chip {index} in PCI bus order (assumed to be logical device {device})"), ""


def _info(function: PciFunction, basis: str) -> LinkInfo:
    link = function.link
    assert link.current_speed_gt_s is not None and link.current_width is not None
    return LinkInfo(
        function.bdf, link.current_speed_gt_s, link.current_width, link.max_speed_gt_s, link.max_width, basis
    )


def judge_copies(run: DeviceRun, link: Optional[LinkInfo], why_none: str) -> DeviceRun:
    """Add the link's peak and the ratio to the H2D/D2H results; a slow or impossible rate warns."""
    if run.facts.get("run_mode") == "device":
        link, why_none = None, "RC mode: host and device share the board's memory, so these are memory copies"
    steps = tuple(
        _judge(result, link, why_none) if result.step in (Step.COPY_H2D, Step.COPY_D2H) else result
        for result in run.steps
    )
    return replace(run, steps=steps)


def _judge(result: StepResult, link: Optional[LinkInfo], why_none: str) -> StepResult:
    best = result.metrics.get("best_gb_s")
    if result.status not in (StepStatus.PASS, StepStatus.WARN) or not isinstance(best, (int, float)):
        return result
    metrics: Dict[str, Any] = dict(result.metrics)
    if link is None:
        metrics.update(link=None, link_note=why_none)
        return replace(
            result, metrics=metrics, detail=f"{result.detail}; no link peak to compare ({why_none})"
        )
    ratio = round(best / link.peak_gb_s, 3)
    metrics.update(
        link={"bdf": link.bdf, "label": link.label, "peak_gb_s": link.peak_gb_s, "basis": link.basis},
        ratio_to_link=ratio,
    )
    warnings = list(result.warnings)
    if ratio < MIN_LINK_RATIO:
        note = f"{best} GB/s is only {ratio:.0%} of the {link.peak_gb_s} GB/s {link.label} carries"
        note += f" (expected ≥ {MIN_LINK_RATIO:.0%})"
        if link.degraded and link.max_speed_gt_s and link.max_width:
            best_shape = f"{pcie_speed_label(link.max_speed_gt_s)} x{link.max_width}"
            note += f"; the link trained below its maximum, {best_shape}: reseat the card or check the slot"
        warnings.append(note)
    elif ratio > MAX_LINK_RATIO:
        warnings.append(
            f"{best} GB/s is more than {link.label} can carry ({link.peak_gb_s} GB/s): "
            "event timing or sysfs is wrong"
        )
    status = StepStatus.WARN if warnings else result.status
    detail = f"{result.detail}; {ratio:.0%} of {link.label} ({link.peak_gb_s} GB/s)"
    return replace(result, metrics=metrics, warnings=tuple(warnings), status=status, detail=detail)
