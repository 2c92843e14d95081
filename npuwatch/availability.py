"""Provides the verdicts on whether a machine has NPUs and whether a snapshot read any."""

from __future__ import annotations

from typing import Optional

from npuwatch.model import MetricStatus, Snapshot
from npuwatch.probes.npu_smi import find_npu_smi
from npuwatch.probes.pci import scan_pci
from npuwatch.probes.sysroot import Sysroot

NEXT_STEPS = (
    "run `npuwatch doctor` to find out why, or `npuwatch --demo` to see npuwatch on a simulated machine"
)


def machine_has_npu(sysroot: Sysroot, npu_smi: Optional[str] = None) -> bool:
    """True when this machine shows any sign of an Ascend NPU (npu-smi or an Ascend PCI function)."""
    return find_npu_smi(sysroot, npu_smi) is not None or bool(scan_pci(sysroot).functions)


def no_data_reason(snapshot: Snapshot) -> Optional[str]:
    """Why ``snapshot`` holds no fresh NPU data, with the next step; ``None`` when it has data."""
    report = snapshot.chip_source_report
    failed = report is not None and report.status is not MetricStatus.OK
    if snapshot.chips and not failed:
        return None
    described = snapshot.described  # the source that read the chips, as it declares itself
    source = described.title
    if failed:
        assert report is not None
        cause = described.failure_text(report.message or report.status.value)
    elif report is not None and report.found:
        cause = f"none of the {report.found} chip(s) {source} lists matches --devices"
    else:
        cause = f"the {source} output holds no chip rows"
    sysfs = snapshot.probe("sysfs")
    if sysfs is not None and sysfs.found == 0 and failed:
        cause = f"no Ascend PCI device, and {cause}"
    elif snapshot.chips and failed:
        cause = f"{len(snapshot.chips)} chip(s) known, but {cause}"
    return f"no NPU could be read: {cause}. Next: {NEXT_STEPS}."
