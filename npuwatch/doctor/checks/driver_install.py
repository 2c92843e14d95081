"""Check driver-install: the driver userland is installed, loads, and its install record is sound."""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath
from typing import List

from npuwatch.doctor.facts import version_key
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import (
    Check,
    Finding,
    Group,
    Problem,
    Status,
    combine,
    skipped,
)
from npuwatch.probes.install_files import INSTALL_INFO
from npuwatch.probes.library_load import load_libraries

#: What CANN opens first (runtime-and-doctor.md §6.1).
HAL = PurePosixPath("lib64/driver/libascend_hal.so")

#: The driver's library folders, as set_env.sh puts them on LD_LIBRARY_PATH (§7.1).
LIBRARY_DIRS = ("lib64", "lib64/common", "lib64/driver")

#: Loading one library in a child takes ~30 ms; the check as a whole has 3 s (docs/design.md §2.3).
LOAD_TIMEOUT_S = 2.0

_INSTALL_HINT = (
    "install the driver package for this chip from hiascend.com: "
    "`./Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --full --install-for-all`, then reboot"
)

_MOUNT_HINT = (
    "mount the host's driver into the container: "
    "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64 "
    "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info "
    "-v /etc/ascend_install.info:/etc/ascend_install.info"
)


def run(machine: Machine) -> Finding:
    """Read version.info and ascend_install.info, and dlopen libascend_hal.so in a child."""
    driver_dir = machine.driver_dir()
    info = machine.driver_info()
    install = machine.install_info()
    hal = driver_dir / HAL
    sysroot = machine.sysroot
    has_hal = sysroot.exists(hal)
    in_container = machine.container().in_container
    blocked = machine.unreadable(driver_dir / "version.info") if info is None else None
    if info is None and install is None and not has_hal and not blocked and not machine.has_hardware():
        return skipped("no Ascend NPU and no Ascend driver on this machine")
    details = [f"driver folder: {driver_dir}"]
    problems: List[Problem] = []
    if blocked is not None and not has_hal:
        message, hint = machine.cannot_read(blocked)
        problems.append(
            Problem(Status.FAIL, f"{message}: the driver may be installed, but this user cannot use it", hint)
        )
    elif info is None and not has_hal:
        where = "in this container" if in_container else "on this machine"
        problems.append(
            Problem(
                Status.FAIL,
                f"the Ascend driver is not installed {where}: no {driver_dir}/version.info, no {hal.name}",
                _MOUNT_HINT if in_container else _INSTALL_HINT,
            )
        )
    else:
        problems += _version_problems(machine, driver_dir, details, in_container)
        problems += _library_problems(machine, driver_dir, details, in_container)
    problems += _install_info_problems(machine, driver_dir, details, in_container)
    version = info.version if info is not None else "?"
    loads = f"{hal.name} loads" if machine.runs_tree_code else f"{hal.name} not loaded (untrusted tree)"
    return combine(problems, f"driver {version} at {driver_dir}; {loads}", details)


def _version_problems(
    machine: Machine, driver_dir: PurePosixPath, details: List[str], in_container: bool
) -> List[Problem]:
    info = machine.driver_info()
    path = driver_dir / "version.info"
    blocked = machine.unreadable(path) if info is None else None
    if blocked is not None:
        message, hint = machine.cannot_read(blocked)
        return [Problem(Status.WARN, f"{message}: the driver version cannot be checked", hint)]
    if info is None:
        hint = (
            "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info"
            if in_container
            else "reinstall the driver: " + _INSTALL_HINT
        )
        return [Problem(Status.WARN, f"{path} is missing: the driver version cannot be checked", hint)]
    details.append(f"{path}: Version={info.version}, Innerversion={info.inner_version}")
    if info.version is None:
        return [
            Problem(Status.WARN, f"{path} has no Version= line", "reinstall the driver: " + _INSTALL_HINT)
        ]
    return _image_userland(machine, path, info.version, details) if in_container else []


def _image_userland(machine: Machine, path: PurePosixPath, version: str, details: List[str]) -> List[Problem]:
    """Issue 29 item 6: a container whose image brought its own driver userland (``version.info``)
    while the kernel driver is the host's, which npu-smi reports (``Version:`` in its header): the
    userland must be the host's (runtime-and-doctor.md §7.3)."""
    table = machine.info_table()
    host = table.versions.driver if table is not None else None
    if host is None:
        return []
    details.append(f"the host's driver (npu-smi's Version:): {host}")
    if version_key(host) == version_key(version):
        return []
    older = "older than" if version_key(version) < version_key(host) else "not"
    return [
        Problem(
            Status.FAIL,
            f"this container's driver userland ({path}: {version}) is {older} the host's driver {host} "
            "(npu-smi): the image brought its own driver libraries, which must match its kernel driver",
            "use the host's driver libraries instead of the image's: " + _MOUNT_HINT.split(": ", 1)[1],
        )
    ]


def _library_problems(
    machine: Machine, driver_dir: PurePosixPath, details: List[str], in_container: bool
) -> List[Problem]:
    sysroot = machine.sysroot
    hal = driver_dir / HAL
    fix = _MOUNT_HINT if in_container else "reinstall the driver: " + _INSTALL_HINT
    if not sysroot.exists(hal):
        return [Problem(Status.FAIL, f"{hal} is missing: CANN and torch_npu cannot start", fix)]
    if not machine.runs_tree_code:
        details.append(f"{hal}: not loaded: the tree is not trusted (--trust-root loads it)")
        return []
    folders = [sysroot.path(driver_dir / folder) for folder in LIBRARY_DIRS]
    real = str(sysroot.path(hal))
    error = load_libraries([real], folders, LOAD_TIMEOUT_S)[real]
    if error is not None:
        error = error.replace(real, str(hal))  # the machine's path, as on the machine itself
        details.append(f"loading {hal}: {error}")
        return [Problem(Status.FAIL, f"{hal.name} does not load: {error}", fix)]
    details.append(f"{hal} loads")
    return []


def _on_library_path(machine: Machine, driver_dir: PurePosixPath) -> bool:
    wanted = posixpath.normpath(str(driver_dir / "lib64/driver"))
    entries = (machine.environ.get("LD_LIBRARY_PATH") or "").split(":")
    return any(entry and posixpath.normpath(entry) == wanted for entry in entries)


def _install_info_problems(
    machine: Machine, driver_dir: PurePosixPath, details: List[str], in_container: bool
) -> List[Problem]:
    install = machine.install_info()
    problems: List[Problem] = []
    # Without Driver_Install_Path_Param, set_env.sh leaves the driver off LD_LIBRARY_PATH (§10 row 31):
    # harmless when something else already put it there, fatal otherwise.
    on_path = _on_library_path(machine, driver_dir)
    missing_status = Status.WARN if on_path else Status.FAIL
    consequence = (
        "CANN's set_env.sh cannot find the driver"
        if on_path
        else f"CANN's set_env.sh cannot find the driver, and {driver_dir}/lib64/driver is not on "
        "LD_LIBRARY_PATH"
    )
    if install is None:
        hint = (
            "-v /etc/ascend_install.info:/etc/ascend_install.info"
            if in_container
            else "reinstall the driver (its installer writes the file), or write "
            f"`Driver_Install_Path_Param={driver_dir.parent}` into {INSTALL_INFO}"
        )
        problems.append(Problem(missing_status, f"{INSTALL_INFO} is missing: {consequence}", hint))
        return problems
    details.append(
        f"{INSTALL_INFO}: Driver_Install_Path_Param={install.driver_install_path}, "
        f"Driver_Install_Status={install.driver_install_status}"
    )
    path = install.driver_install_path
    if path is None:
        problems.append(
            Problem(
                missing_status,
                f"{INSTALL_INFO} has no Driver_Install_Path_Param: {consequence}",
                f"add `Driver_Install_Path_Param={driver_dir.parent}` to {INSTALL_INFO} "
                "(the folder that holds driver/), or reinstall the driver",
            )
        )
    elif any(char.isspace() for char in path):
        problems.append(
            Problem(
                Status.FAIL,
                f"the driver is installed under a path with spaces ({path!r}): set_env.sh splits it "
                "and libascend_hal.so is not found",
                "reinstall the driver into a path without spaces: `./Ascend-hdk-<chip>-npu-driver_<version>_"
                "linux-<arch>.run --full --install-path=/usr/local/Ascend`",
            )
        )
    status = install.driver_install_status
    if status is not None and status.lower() != "complete":
        problems.append(
            Problem(
                Status.FAIL,
                f"the driver installation did not complete (Driver_Install_Status={status})",
                "run the driver installer again: "
                + _INSTALL_HINT
                + "; its log is /var/log/ascend_seclog/ascend_install.log",
            )
        )
    return problems


CHECK = Check(
    id="driver-install",
    group=Group.DRIVER,
    title="the driver userland is installed and loads; its install record is complete",
    run=run,
    runs_npu_smi=True,  # in a container, npu-smi's Version: is the host's driver to compare with
)
