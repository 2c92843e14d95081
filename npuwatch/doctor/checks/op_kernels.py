"""Check op-kernels: operator kernel binaries are installed for this machine's SoC.

Without them the runtime works (malloc, copies) but the first operator fails with 561003 / "Op X
does not has any binary" (runtime-and-doctor.md §10 row 23).  The SoC comes from the PCI device
IDs, else from npu-smi's chip names (``npuwatch.probes.soc``).

Assumption (§14 item 4, unverified on hardware): CANN 8.5+ ships the operators as split ``ops``
packages (ops-math, ops-nn, …, bundled as ``Ascend-cann-<chip>-ops``) that still install their
binaries under ``<T>/opp/built-in/op_impl/ai_core/tbe/kernel/<soc>/``, as the ≤ 8.3 kernels
package did (§2.1); so the same folder is checked for every version and only the fix differs.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import List, Optional, Set

from npuwatch.chip_families import family_of_soc
from npuwatch.doctor.facts import (
    DOWNLOAD_PAGE,
    active_home,
    cann_arch,
    home_version,
    release,
)
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped
from npuwatch.probes.install_files import DEFAULT_ASCEND_ROOT, parse_version_cfg
from npuwatch.probes.soc import soc_from_chip_name, soc_from_device_id

#: Where one SoC's operator binaries live inside a CANN home (runtime-and-doctor.md §2.1, §6.2).
KERNEL_DIR = PurePosixPath("opp/built-in/op_impl/ai_core/tbe/kernel")


def machine_socs(machine: Machine) -> List[str]:
    """The SoC kernel folders this machine needs (``ascend910b`` …): PCI first, then npu-smi."""
    found: Set[str] = set()
    for function in machine.pci().functions:
        soc = soc_from_device_id(function.device_id)
        if soc:
            found.add(soc)
    if not found and machine.dev().davinci_ids:  # an SoC board (310B) has no PCI function
        table = machine.info_table()
        for chip in table.chips if table is not None else ():
            soc = soc_from_chip_name(chip.identity.name)
            if soc:
                found.add(soc)
    return sorted(found)


def package_chip(soc: str) -> str:
    """The chip part of a package name: ``ascend910b`` → ``910b``, ``ascend910_93`` → ``A3`` (the
    family table's ``package_chip``; a folder it does not know loses its ``ascend``)."""
    known = family_of_soc(soc).package_chip
    return known or (soc[len("ascend") :] if soc.startswith("ascend") else soc)


def install_command(soc: str, version: Optional[str], arch: str, home: PurePosixPath) -> str:
    """The package that installs ``soc``'s kernels for this CANN, and how to run it."""
    shown = version or "<version>"
    chip = package_chip(soc)
    if version is not None and release(version) >= (8, 5):
        package = f"Ascend-cann-{chip}-ops_{shown}_linux-{arch}.run"
    elif chip == "A3":  # ≤ 8.3 names the A3 kernels package differently
        package = f"Atlas-A3-cann-kernels_{shown}_linux-{arch}.run"
    else:
        package = f"Ascend-cann-kernels-{chip}_{shown}_linux-{arch}.run"
    prefix = home.parent.parent if home.parent.name == "ascend-toolkit" else home.parent
    where = "" if str(prefix) == DEFAULT_ASCEND_ROOT else f" --install-path={prefix}"
    return f"`bash {package} --install{where}`"


def run(machine: Machine) -> Finding:
    """Each SoC's kernel folder exists and is not empty."""
    home = active_home(machine)
    if home is None:
        return skipped("no CANN install found (see cann-install)")
    if not machine.has_hardware():
        return skipped("no Ascend NPU detected: which SoC's operator kernels are needed is unknown")
    socs = machine_socs(machine)
    if not socs:
        return skipped("the NPU's SoC is unknown (unrecognised PCI device ID and npu-smi chip name)")
    kernel_root = home / KERNEL_DIR
    listdir = machine.sysroot.listdir
    installed = [entry for entry in listdir(kernel_root) if listdir(kernel_root / entry)]
    version = home_version(machine, home)
    details = [
        f"SoC: {', '.join(socs)}",
        f"{kernel_root}: kernels for {', '.join(installed) or 'no SoC'}",
    ]
    cfg = machine.sysroot.read_text(home / "version.cfg")
    if cfg is not None:
        kernel = parse_version_cfg(cfg).public_version("opp_kernel")
        if kernel:
            details.append(f"version.cfg: opp_kernel {kernel}")
    missing = [soc for soc in socs if soc not in installed]
    if not missing:
        return passed(f"operator kernels installed for {', '.join(socs)}", details)
    arch = cann_arch(machine, home)
    commands = " and ".join(install_command(soc, version, arch, home) for soc in missing)
    kind = "ops package" if version is not None and release(version) >= (8, 5) else "kernels package"
    other = f" (installed for {', '.join(installed)} only)" if installed else ""
    return failed(
        f"no operator kernels for {', '.join(missing)} in {kernel_root}{other}: every operator fails with "
        "561003 `Op X does not has any binary`",
        f"install the {kind} for this chip, same version as CANN {version or ''}".rstrip()
        + f": download it from {DOWNLOAD_PAGE} and run {commands}",
        details,
    )


CHECK = Check(
    id="op-kernels",
    group=Group.CANN,
    title="operator kernels are installed for this machine's SoC",
    run=run,
    requires=("cann-install",),
    runs_npu_smi=True,  # only where no PCI function names the SoC (an SoC board)
)
