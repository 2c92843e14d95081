"""Check driver-cann-compat: the installed CANN supports this NPU driver (Ascend HDK) version.

Two sources: the CANN ↔ HDK table of Huawei's release notes (``HDK_TABLE``), and the
machine-readable lists in the install files — the toolkit's ``compatible_version`` names the
driver Innerversions (``V100R001Cnn``) it accepts, the driver's names the CANN ones
(runtime-and-doctor.md §8.2).  A driver older than every HDK the table lists for this CANN fails
(§10 row 22: 207019 / 207000 "feature not support"); otherwise the install files speak for the
installed pair before the table does: a driver CANN's own list names passes, and so does a (newer)
driver whose own list names this CANN; one listed nowhere is "untested" (warn).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from npuwatch.doctor.facts import (
    active_home,
    home_version,
    toolkit_info,
    version_key,
    version_matches,
)
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned


@dataclass(frozen=True)
class HdkSupport:
    """One row of the CANN ↔ driver table: CANN release lines and the HDK lines they support."""

    cann: Tuple[str, ...]  # release lines: "8.5.0" is 8.5.0 only, "9.0" any 9.0.x
    drivers: Tuple[str, ...]  # HDK lines, newest first: the first is the one to recommend
    source: str


#: Sources: runtime-and-doctor.md §8.2, which cites Ascend's ascend-deployer version json (8.0–8.3),
#: MindIE 2.1.RC1 release notes (8.2.RC1), hiascend canncommercial/850 release notes (8.5.0), and
#: gitcode/GitHub hicann/release-management 9.0.1/ and 9.1.0/release-notes(_en).md (8.5.2, 9.x:
#: "9.1.X does not work with 25.0.X"; 9.0.1 adds 26.0.RC3).  Most specific CANN line first.
HDK_TABLE: Tuple[HdkSupport, ...] = (
    HdkSupport(
        ("9.1",),
        ("26.1", "26.0", "25.7.RC1", "25.5", "25.3", "25.2"),
        "CANN 9.1.0 release notes: 9.1.X works with HDK 25.2.X–26.1.0, not with 25.0.X",
    ),
    HdkSupport(
        ("8.5.2", "9.0"),
        ("26.1", "26.0", "25.7.RC1", "25.5", "25.3", "25.2", "25.0"),
        "CANN 9.1.0 release notes: 8.5.2 and 9.0.X work with HDK 25.0.X–26.1.0",
    ),
    HdkSupport(("8.5.0",), ("25.5", "25.3", "25.2", "25.0"), "CANN 8.5.0 release notes (canncommercial/850)"),
    HdkSupport(("8.3.RC1",), ("25.3.RC1",), "Ascend ascend-deployer version json"),
    HdkSupport(
        ("8.2.RC1",),
        ("25.2.0", "25.0.RC1", "24.1.0", "24.1.RC3", "24.1.RC2"),
        "Ascend ascend-deployer; MindIE 2.1.RC1 release notes",
    ),
    HdkSupport(("8.1.RC1",), ("25.0.RC1",), "Ascend ascend-deployer version json"),
    HdkSupport(("8.0.RC1",), ("24.1.RC1",), "Ascend ascend-deployer version json"),
)

_INNER = re.compile(r"^(V\d+R\d+C\d+)", re.IGNORECASE)


def hdk_row(cann_version: str) -> Optional[HdkSupport]:
    """The table row for ``cann_version``, or ``None`` when the table does not cover it."""
    for row in HDK_TABLE:
        if any(version_matches(cann_version, line) for line in row.cann):
            return row
    return None


def inner_prefix(inner_version: Optional[str]) -> Optional[str]:
    """``V100R001C21SPC002B220`` → ``V100R001C21`` (what compatible_version lists)."""
    found = _INNER.match(inner_version or "")
    return found.group(1).upper() if found else None


def cann_for_driver(driver_version: str) -> List[str]:
    """CANN lines the table says support ``driver_version`` (for the reverse advice)."""
    return [
        "/".join(row.cann)
        for row in HDK_TABLE
        if any(version_matches(driver_version, d) for d in row.drivers)
    ]


def _upgrade_hint(row: HdkSupport, driver: str) -> str:
    recommended = row.drivers[0]
    others = ", ".join(row.drivers[1:])
    alternatives = cann_for_driver(driver)
    switch = f"; or use a CANN this driver supports ({', '.join(alternatives)})" if alternatives else ""
    return (
        f"upgrade the NPU driver and firmware (Ascend HDK) to {recommended}.x"
        + (f" (also supported: {others})" if others else "")
        + ": `bash Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --upgrade`, then "
        f"`bash Ascend-hdk-<chip>-npu-firmware_<version>.run --upgrade` and reboot{switch}"
    )


def run(machine: Machine) -> Finding:
    """Release notes' minimum (too old fails), then CANN's compatible_version list, then the table."""
    home = active_home(machine)
    if home is None:
        return skipped("no CANN install found (see cann-install)")
    cann = home_version(machine, home)
    if cann is None:
        return skipped(f"the version of CANN at {home} is unknown (see cann-install)")
    driver_info = machine.driver_info()
    path = machine.driver_dir() / "version.info"
    if driver_info is None or not driver_info.version:
        why = "is missing" if driver_info is None else "has no Version="
        return skipped(f"the driver's {path} {why}: nothing to compare CANN {cann} with (see driver-install)")
    driver = driver_info.version
    toolkit = toolkit_info(machine, home)
    driver_inner = inner_prefix(driver_info.inner_version)
    cann_inner = inner_prefix(toolkit.inner_version if toolkit else None)
    accepts_drivers = ", ".join(toolkit.compatible_versions) if toolkit else ""
    details = [
        f"CANN {cann} at {home}: innerversion {toolkit.inner_version if toolkit else '(no install info)'}, "
        f"accepts drivers {accepts_drivers or '(not listed)'}",
        f"driver {driver} ({path}): Innerversion {driver_info.inner_version}, accepts CANN "
        f"{', '.join(driver_info.compatible_versions) or '(not listed)'}",
    ]
    row = hdk_row(cann)
    if row is not None:
        details.append(f"release notes: CANN {cann} supports HDK {', '.join(row.drivers)} ({row.source})")
        oldest = min(row.drivers, key=version_key)
        listed_by_notes = any(version_matches(driver, line) for line in row.drivers)
        if not listed_by_notes and version_key(driver) < version_key(oldest):
            # Release notes naming a newer minimum are the one verdict a list does not overrule: a real
            # 8.5.0 toolkit still lists V100R001C15 (captures 018, 020) yet needs HDK 25.0 (§10 row 22).
            return failed(
                f"driver {driver} is too old for CANN {cann} (it needs HDK {oldest} or newer): expect "
                "207019/207000 `feature not support` or 507033 at device open",
                _upgrade_hint(row, driver),
                details,
            )
    # Then the install files' lists before the table: CANN naming this driver's Innerversion is
    # CANN's own word, whatever the driver's list (or our table) says of the CANN.
    listed = toolkit is not None and driver_inner is not None and driver_inner in toolkit.compatible_versions
    if listed:
        if (
            cann_inner is not None
            and driver_info.compatible_versions
            and (cann_inner not in driver_info.compatible_versions)
        ):
            details.append(
                f"the driver's compatible_version does not name CANN's innerversion {cann_inner}; "
                "CANN's own list decides"
            )
        return passed(f"driver {driver} is listed as compatible by CANN {cann}'s install info", details)
    if row is not None and any(version_matches(driver, line) for line in row.drivers):
        return passed(f"driver {driver} is supported by CANN {cann} (release notes)", details)
    if cann_inner is not None and cann_inner in driver_info.compatible_versions:
        # A driver newer than this CANN names it in its own list: CANN's older list cannot name a
        # driver released after it, so the driver's word is the table for this pair (issue 29).
        return passed(
            f"driver {driver} lists CANN {cann} (innerversion {cann_inner}) as compatible in its "
            "version.info",
            details,
        )
    if toolkit is not None and toolkit.compatible_versions:
        why = f"CANN's compatible_version does not list the driver's Innerversion {driver_inner}"
    else:
        why = "neither the release-notes table nor the install info covers this pair"
    if row is not None:
        hint = (
            f"this pair is untested: if jobs fail with 207000/507033, install an HDK CANN {cann} lists; "
            + _upgrade_hint(row, driver)
        )
    else:
        hint = (
            f"check the HDK versions listed in CANN {cann}'s release notes (hiascend.com, CANN → release "
            "notes → version compatibility) and install one: `bash Ascend-hdk-<chip>-npu-driver_<version>_"
            "linux-<arch>.run --upgrade`"
        )
    return warned(f"driver {driver} with CANN {cann} is untested: {why}", hint, details)


CHECK = Check(
    id="driver-cann-compat",
    group=Group.CANN,
    title="the installed CANN supports this NPU driver (Ascend HDK) version",
    run=run,
    requires=("cann-install",),
)
