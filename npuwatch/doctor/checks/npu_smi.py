"""Check npu-smi: npu-smi is found and answers ``npu-smi info`` in time; its DCMI errors explained."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import List, Optional

from npuwatch.doctor import facts
from npuwatch.doctor.facts import device_flags, reboot_first
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, warned
from npuwatch.probes.devices import MANAGER_NODES
from npuwatch.probes.npu_smi import FailureKind, NpuSmiFailure, NpuSmiOutput
from npuwatch.probes.tree_trust import SAVED_INFO, TRUST_HINT

_CONTAINER_NOT_FOUND_HINT = (
    "mount npu-smi and what it loads from the host: -v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi "
    "-v /usr/local/dcmi:/usr/local/dcmi -v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64"
)

_HOST_NOT_FOUND_HINT = (
    "npu-smi comes with the driver (/usr/local/bin/npu-smi or /usr/local/sbin/npu-smi): install the driver "
    "package (`./Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --full`), or point npuwatch at "
    "another copy with --npu-smi PATH"
)


def _output_lines(failure: NpuSmiFailure) -> List[str]:
    lines = [line.strip() for line in failure.output.splitlines() if line.strip()]
    return [f"npu-smi printed: {line}" for line in lines[:4]]


def run(machine: Machine) -> Finding:
    """Run (or reuse) ``npu-smi info`` and explain what went wrong."""
    path = machine.npu_smi_path
    in_container = machine.container().in_container
    withheld = machine.npu_smi_withheld
    if path is None and withheld is not None:  # an untrusted tree: its npu-smi is never run
        what = f"running the tree's npu-smi ({withheld.program or 'none in the tree'})"
        if withheld.saved is None:
            return facts.not_trusted(machine, what, [f"no saved output at {SAVED_INFO}"]) or failed(
                f"{what} was held back", TRUST_HINT
            )
    elif path is None:
        where = "in this container" if in_container else "on this machine"
        hint = _CONTAINER_NOT_FOUND_HINT if in_container else _HOST_NOT_FOUND_HINT
        return failed(
            f"npu-smi was not found {where}", hint, ["looked in /usr/local/bin, /usr/local/sbin and PATH"]
        )
    result = machine.npu_smi_info()
    if isinstance(result, NpuSmiOutput):
        return _answered(machine, result)
    details = [f"npu-smi: {path or SAVED_INFO}", *_output_lines(result)]
    if result.exit_code is not None:
        details.append(f"exit code {result.exit_code}")
    return _explain(machine, result, details, in_container)


def _answered(machine: Machine, output: NpuSmiOutput) -> Finding:
    table = machine.info_table()
    details = [f"npu-smi: {machine.npu_smi_path}", f"`npu-smi info` took {output.duration_s:.2f} s"]
    if output.note:  # an untrusted tree's saved output, not npu-smi run now
        details = [output.note]
    if table is None or not table.chips:
        warnings = list(table.warnings) if table is not None else []
        return warned(
            "npu-smi answered but listed no chip",
            "run `npu-smi info` by hand; if it shows chips, save its output to a file and report it "
            "with `npuwatch snapshot --replay FILE --json`",
            details + warnings[:4],
        )
    version = table.versions.npu_smi or "(version not printed)"
    if table.versions.driver:
        details.append(f"driver version (npu-smi header): {table.versions.driver}")
    unlisted = machine.unreported_chips()
    if unlisted is not None:
        # A warning, not a failure: chip-health (which needs this check) fails for the chips.
        return warned(f"{unlisted.message}: its table misses chips", unlisted.hint, details)
    if output.note:
        return passed(
            f"the tree's saved `npu-smi info` (npu-smi {version}): {len(table.chips)} chips", details
        )
    return passed(
        f"npu-smi {version} answered in {output.duration_s:.1f} s, {len(table.chips)} chips", details
    )


def _explain(machine: Machine, failure: NpuSmiFailure, details: List[str], in_container: bool) -> Finding:
    kind = failure.kind
    if kind is FailureKind.TIMEOUT:
        return failed(f"npu-smi did not answer within {machine.timeout_s:g} s", failure.hint, details)
    if kind is FailureKind.NOT_FOUND:
        hint = _CONTAINER_NOT_FOUND_HINT if in_container else _HOST_NOT_FOUND_HINT
        return failed(failure.message, hint, details)
    if kind is FailureKind.PERMISSION:
        return _permission(machine, failure, details, machine.npu_smi_path)
    if failure.dcmi_code == -8005 and not in_container:
        root_only = _root_only(machine, failure, details)
        if root_only is not None:
            return root_only
    if failure.dcmi_code == -8005:
        return _inner_error(machine, failure, details, in_container)
    if failure.dcmi_code == -8020:
        return failed(
            "npu-smi failed with DCMI error -8020: the device is held by another process or container",
            "find the owner on the host with `npu-smi info` (process table) or, as root, `fuser -v "
            "/dev/davinci*`; stop it, or give this job another NPU",
            details,
        )
    return failed(failure.message, failure.hint, details)


def _root_only(machine: Machine, failure: NpuSmiFailure, details: List[str]) -> Optional[Finding]:
    """-8005 for a normal user whose device nodes all open: DCMI is root-only here (§10 row 28).

    hw-native-sys/simpler PR #2043 (the source §10 row 28 cites) shows the text on such a host:
    ``dcmi module initialize failed. ret is -8005``, exit 187.  The driver is fine: root gets data.
    """
    user = facts.machine_user(machine)
    if user.is_root:
        return None
    dev = machine.dev()
    nodes = [node for node in dev.nodes.values() if node.usable]
    if not dev.davinci_ids or any(not dev.has(name) for name in MANAGER_NODES):
        return None
    if not nodes or not all(facts.may_open(node, user) for node in nodes):
        return None
    name = user.name or f"uid {user.uid}"
    info = machine.install_info()
    group = (info.user_group if info is not None else None) or facts.DRIVER_GROUP
    return failed(
        f"npu-smi failed with DCMI error -8005 for {name} while every device node opens: "
        "DCMI is restricted to root on this host",
        f"the driver is fine (root gets data: `sudo npu-smi info`); to let {name} use DCMI, add it to the "
        f"driver's group: `sudo usermod -aG {group} {user.name or '$USER'}`, then log in again; or install "
        "the driver with `--install-for-all` (`./Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run "
        "--full --install-for-all`)",
        [*details, f"{name} (uid {user.uid}) can open all {len(nodes)} device nodes"],
    )


def _permission(
    machine: Machine, failure: NpuSmiFailure, details: List[str], path: Optional[Path] = None
) -> Finding:
    user = facts.machine_user(machine)
    if failure.exit_code is None and path is not None:
        return _not_executable(failure, details, path, user)
    if user.is_root:
        return failed(failure.message, failure.hint, details)
    # Some DCMI queries are root-only while the runtime works for HwHiAiUser members (§10 row 28).
    return warned(
        f"npu-smi is refused to {user.name or 'uid ' + str(user.uid)} (DCMI can be restricted to root); "
        "jobs may still run",
        "run the DCMI parts as root: `sudo npu-smi info`, `sudo npuwatch doctor`; for device access "
        "join the group: `sudo usermod -aG HwHiAiUser $USER`, then log in again",
        [*details, failure.message],
    )


def _not_executable(
    failure: NpuSmiFailure, details: List[str], path: Path, user: facts.UserIdentity
) -> Finding:
    """The file could not be started at all (EACCES): no DCMI call was made, so say why exactly."""
    try:
        info = os.stat(path)
    except OSError:
        return failed(failure.message, failure.hint, details)
    mode = stat.S_IMODE(info.st_mode)
    owner = f"uid {info.st_uid}, gid {info.st_gid}"
    details = [*details, f"mode {stat.filemode(info.st_mode)} ({mode:04o}), {owner}"]
    if not mode & 0o111:
        return failed(
            f"npu-smi at {path} has no execute permission (mode {mode:04o})",
            f"restore its mode: `sudo chmod 755 {path}` (the driver installs it executable; a copy "
            "or a mount lost the bits), then `npu-smi info`",
            details,
        )
    if user.is_root:
        return failed(
            f"npu-smi at {path} cannot be run even by root: its file system is mounted noexec",
            f"check with `findmnt -T {path}` and remount it (or mount npu-smi into the container) "
            "without `noexec`",
            details,
        )
    return failed(
        failure.message,
        "run it as root (`sudo npu-smi info`, `sudo npuwatch doctor`), or join its group: "
        "`sudo usermod -aG HwHiAiUser $USER`, then log in again",
        details,
    )


def _inner_error(machine: Machine, failure: NpuSmiFailure, details: List[str], in_container: bool) -> Finding:
    dev = machine.dev()
    missing = [name for name in MANAGER_NODES if not dev.has(name)]
    if missing:
        nodes = ", ".join(f"/dev/{name}" for name in missing)
        verb = "is" if len(missing) == 1 else "are"
        summary = f"npu-smi failed with DCMI error -8005 because {nodes} {verb} missing"
        if in_container:
            hint = f"start the container with {device_flags(missing)} (or run it with --privileged)"
        else:
            hint = (
                "the driver did not create its manager nodes: check `lsmod | grep drv_` and `dmesg | grep -i "
                "devdrv`; reinstall the driver and reboot"
            )
            hint = reboot_first(machine, hint, details)
        return failed(summary, hint, details)
    if in_container:
        return failed(
            "npu-smi failed with DCMI error -8005 (the device nodes are present)",
            "the driver libraries mounted into the container must be the host's own "
            "(-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64 "
            "-v /usr/local/dcmi:/usr/local/dcmi), "
            "and the NPU must not be held by another container: run `npu-smi info` on the host",
            details,
        )
    hint = (
        "the driver's userland does not match its kernel module, or the device is held: check "
        "`cat /usr/local/Ascend/driver/version.info` and `dmesg | grep -i devdrv`; "
        "reinstall the driver and reboot"
    )
    return failed(
        "npu-smi failed with DCMI error -8005 (DCMI internal error)",
        reboot_first(machine, hint, details),
        details,
    )


CHECK = Check(
    id="npu-smi",
    group=Group.DRIVER,
    title="npu-smi is found and answers within its timeout",
    run=run,
    needs_hardware=True,
    runs_npu_smi=True,
)
