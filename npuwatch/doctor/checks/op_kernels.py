"""Check op-kernels: operator kernel binaries are installed for this machine's SoC.

Without them the runtime works (malloc, copies) but the first operator fails with 561003 / "Op X
does not has any binary" (runtime-and-doctor.md §10 row 23).  The SoC comes from the PCI device
IDs, else from npu-smi's chip names (``npuwatch.probes.soc``).

Assumption (§14 item 4, unverified on hardware): CANN 8.5+ ships the operators as split ``ops``
packages (ops-math, ops-nn, …, bundled as ``Ascend-cann-<chip>-ops``) that still install their
binaries under ``<T>/opp/built-in/op_impl/ai_core/tbe/kernel/<soc>/``, as the ≤ 8.3 kernels
package did (§2.1); so the same folder is checked for every version and only the fix differs.

Third-party op packages (vllm-ascend, LMCache-Ascend) compile their own operators for one SoC
and record it in ``_build_info.py`` (``npuwatch.probes.build_info``); built for another chip's
SoC (``ascend910b1`` on a 310P Duo) their operators fail at run time with "the socversion … of
bin package does not match", so the SoC they name must be one of this machine's.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import List, Optional, Set, Tuple

from npuwatch.chip_families import (
    ChipFamily,
    family_of_build_device_type,
    family_of_soc,
    family_of_soc_version,
    soc_version_of_chip,
)
from npuwatch.doctor.facts import (
    DOWNLOAD_PAGE,
    active_home,
    cann_arch,
    home_version,
    release,
)
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped
from npuwatch.probes.build_info import BuildInfo, read_build_infos
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


def _built_for(info: BuildInfo) -> Tuple[str, ChipFamily]:
    """What a build-info file names (``ascend910b1``, ``device type A2``) and its family."""
    if info.soc_version is not None:
        return info.soc_version, family_of_soc_version(info.soc_version)
    return f"device type {info.device_type}", family_of_build_device_type(info.device_type)


def _this_soc_version(machine: Machine, socs: List[str]) -> str:
    """The ``SOC_VERSION`` a build for this machine is given (``Ascend310P3``), from npu-smi's
    chip names; a placeholder saying where to read it when they do not name it."""
    table = machine.info_table()
    for chip in table.chips if table is not None else ():
        version = soc_version_of_chip(chip.identity.name)
        if version and family_of_soc_version(version).soc in socs:
            return version
    return "<this chip's SoC version: `npu-smi info -t board -i 0 -c 0` Chip Name>"


def build_mismatches(machine: Machine, socs: List[str]) -> Tuple[List[str], List[Tuple[BuildInfo, str]]]:
    """Detail lines for every known op package's build info, and those built for another chip
    (each with what it names)."""
    details: List[str] = []
    wrong: List[Tuple[BuildInfo, str]] = []
    for info in read_build_infos(machine.python()):
        if info.problem is not None:
            details.append(
                f"{info.path}: could not read which chip {info.package} was built for ({info.problem})"
            )
            continue
        named, family = _built_for(info)
        if family.soc is None:
            details.append(f"{info.path}: {info.package} built for {named}, a chip npuwatch does not know")
        elif family.soc in socs:
            details.append(f"{info.path}: {info.package} built for {named} ({family.title})")
        else:
            details.append(
                f"{info.path}: {info.package} built for {named} ({family.title}), not this machine's"
            )
            wrong.append((info, named))
    return details, wrong


def _mismatch_words(machine: Machine, socs: List[str], wrong: List[Tuple[BuildInfo, str]]) -> Tuple[str, str]:
    """The summary and the fix for packages built for another chip (``wrong``)."""
    chips = ", ".join(socs)
    summary = "; ".join(f"{info.package} was built for {named}" for info, named in wrong)
    fixes = []
    version = _this_soc_version(machine, socs)
    families = [family_of_soc(soc) for soc in socs]
    for info, _ in wrong:
        suffix = families[0].vllm_ascend_image_suffix if len(families) == 1 else None
        if info.package == "vllm-ascend" and info.version and suffix is not None:
            image = f"the image built for this chip (`quay.io/ascend/vllm-ascend:v{info.version}{suffix}`)"
        else:
            image = f"the {info.package} image built for this chip ({', '.join(f.title for f in families)})"
        fixes.append(
            f"{info.package}: use {image}, or rebuild it from source with "
            f"`SOC_VERSION={version} pip install .`"
        )
    return (
        f"{summary}, but this machine's chips are {chips}: its operators fail with "
        "`the socversion … of bin package does not match`",
        "; ".join(fixes),
    )


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
    builds, wrong = build_mismatches(machine, socs)
    details.extend(builds)
    missing = [soc for soc in socs if soc not in installed]
    builds_summary, builds_fix = _mismatch_words(machine, socs, wrong) if wrong else ("", "")
    if not missing and wrong:
        return failed(builds_summary, builds_fix, details)
    if not missing:
        return passed(f"operator kernels installed for {', '.join(socs)}", details)
    arch = cann_arch(machine, home)
    commands = " and ".join(install_command(soc, version, arch, home) for soc in missing)
    kind = "ops package" if version is not None and release(version) >= (8, 5) else "kernels package"
    other = f" (installed for {', '.join(installed)} only)" if installed else ""
    return failed(
        f"no operator kernels for {', '.join(missing)} in {kernel_root}{other}: every operator fails with "
        "561003 `Op X does not has any binary`" + (f"; and {builds_summary}" if wrong else ""),
        f"install the {kind} for this chip, same version as CANN {version or ''}".rstrip()
        + f": download it from {DOWNLOAD_PAGE} and run {commands}"
        + (f"; then {builds_fix}" if wrong else ""),
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
