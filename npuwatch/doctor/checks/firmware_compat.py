"""Check firmware-compat: the firmware version lies in a range of the driver's ``compatible_version_fw``."""

from __future__ import annotations

import re
from typing import Optional, Tuple

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned

_NUMBER = re.compile(r"^[0-9]+")

# Huawei's install order (runtime-and-doctor.md §8.3).
_ORDER = (
    "install order: firmware then driver on a first install, driver then firmware on an upgrade; "
    "reboot afterwards to activate the firmware"
)


def version_parts(text: str) -> Optional[Tuple[int, ...]]:
    """``7.3.0.1.231`` → ``(7, 3, 0, 1, 231)``, each part's leading digits (``rc1`` ends it), or None."""
    parts = []
    for piece in text.strip().split("."):
        match = _NUMBER.match(piece)
        if match is None:
            break
        parts.append(int(match.group(0)))
    return tuple(parts) if parts else None


def compare(version: Tuple[int, ...], bound: Tuple[int, ...]) -> int:
    """-1, 0, 1 comparing ``version`` with ``bound`` over the bound's parts only.

    ``[7.0.0,7.7.99]`` bounds a five-part firmware version such as ``7.7.99.1.231`` by its
    first three numbers: that firmware is inside the range, not above it.
    """
    head = version[: len(bound)] + (0,) * max(0, len(bound) - len(version))
    return (head > bound) - (head < bound)


def run(machine: Machine) -> Finding:
    """Compare the firmware's ``Version`` with the driver's range, number by number."""
    driver = machine.driver_info()
    if driver is None:
        return skipped("no driver version.info to compare the firmware with (see driver-install)")
    firmware = machine.firmware_info()
    firmware_path = machine.firmware_dir() / "version.info"
    if firmware is None or firmware.version is None:
        if machine.container().in_container:
            return skipped("the firmware folder is not mounted in this container: check on the host")
        if not machine.has_hardware():
            return skipped("no Ascend NPU, and no firmware version.info")
        return warned(
            f"the firmware version is unknown: {firmware_path} is missing or has no Version=",
            "read the running firmware with `npu-smi info -t board -i 0` (Firmware Version); to install "
            "the firmware package: `./Ascend-hdk-<chip>-npu-firmware_<version>.run --full`, then reboot",
            [f"driver {driver.version}: compatible_version_fw={driver.fields.get('compatible_version_fw')}"],
        )
    ranges = driver.compatible_firmware_ranges
    if not ranges:
        return skipped(
            f"driver {driver.version} does not declare a firmware range (no compatible_version_fw)"
        )
    details = [
        f"{firmware_path}: Version={firmware.version}",
        f"{machine.driver_dir() / 'version.info'}: Version={driver.version}, "
        f"compatible_version_fw={driver.fields.get('compatible_version_fw')}",
    ]
    shown = ", ".join(f"[{low}, {high}]" for low, high in ranges)
    found = version_parts(firmware.version)
    bounds = [(version_parts(low), version_parts(high)) for low, high in ranges]
    readable = [(low, high) for low, high in bounds if low is not None and high is not None]
    if found is None or not readable:
        return warned(
            f"cannot compare firmware {firmware.version} with {shown}",
            "compare them by hand with the compatibility table in the driver's release notes",
            details,
        )
    for (low_text, high_text), (low, high) in zip(ranges, bounds):
        if low is not None and high is not None and compare(found, low) >= 0 and compare(found, high) <= 0:
            among = f" (of {shown})" if len(ranges) > 1 else ""
            return passed(
                f"firmware {firmware.version} is within driver {driver.version}'s range "
                f"[{low_text}, {high_text}]{among}",
                details,
            )
    plural = "ranges" if len(ranges) > 1 else "range"
    where = f"firmware {firmware.version} is outside driver {driver.version}'s {plural} {shown}"
    if all(compare(found, high) > 0 for _, high in readable):
        return failed(
            f"{where}: the driver is too old for this firmware",
            "upgrade the driver to a release whose compatible_version_fw covers "
            f"{firmware.version}: `./Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --upgrade`; "
            + _ORDER,
            details,
        )
    return failed(
        f"{where}: the firmware is too old",
        "upgrade the firmware to one this driver accepts: "
        "`./Ascend-hdk-<chip>-npu-firmware_<version>.run --full` (driver and firmware from the same "
        f"release); {_ORDER}",
        details,
    )


CHECK = Check(
    id="firmware-compat",
    group=Group.DRIVER,
    title="the firmware version is one the driver accepts",
    run=run,
)
