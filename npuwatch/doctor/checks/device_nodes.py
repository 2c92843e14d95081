"""Check device-nodes: /dev/davinciN per chip and the davinci_manager, devmm_svm, hisi_hdc nodes."""

from __future__ import annotations

from typing import List, Sequence, Tuple

from npuwatch.doctor.facts import device_flags, required_manager_nodes
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed
from npuwatch.probes.devices import DEV_DIR, MANAGER_NODES, UNREADABLE_DEV_HINT, DevNodes
from npuwatch.probes.visible_devices import parse_docker_visible

_HOST_HINT = (
    "the driver creates these nodes when it loads: check `lsmod | grep drv_` and "
    "`dmesg | grep -i devdrv`; reinstall the driver package (`./Ascend-hdk-<chip>-npu-driver_"
    "<version>_linux-<arch>.run --full --install-for-all`) and reboot"
)


def id_ranges(ids: Sequence[int]) -> str:
    """``(0, 1, 2, 5)`` → ``0-2, 5``."""
    ordered = sorted(set(ids))
    parts: List[str] = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        parts.append(str(ordered[start]) if start == end else f"{ordered[start]}-{ordered[end]}")
        start = end + 1
    return ", ".join(parts)


def _missing(dev: DevNodes, names: Sequence[str]) -> Tuple[str, ...]:
    return tuple(name for name in names if not dev.has(name))


def _problems(dev: DevNodes) -> List[str]:
    return [f"{node.path} {node.problem}" for node in dev.nodes.values() if node.problem]


def run(machine: Machine) -> Finding:
    """Count the chip nodes against the chips, and look for the manager nodes."""
    dev = machine.dev()
    if dev.unreadable:  # /dev is there: its nodes may be too, this user cannot list them
        message, _ = machine.cannot_read(DEV_DIR)
        return failed(
            f"{message}: the device nodes cannot be listed", UNREADABLE_DEV_HINT, [dev.reason or message]
        )
    chips = machine.pci().chip_count
    in_container = machine.container().in_container
    davinci = dev.davinci_ids
    missing = _missing(dev, required_manager_nodes(machine))
    details = [
        f"/dev/davinciN: {id_ranges(davinci) if davinci else 'none'}"
        + (f" for {chips} chips on the PCI bus" if chips else ""),
        "manager nodes: " + ", ".join(f"{n} {'present' if dev.has(n) else 'MISSING'}" for n in MANAGER_NODES),
        *_problems(dev),
    ]
    if dev.reason:
        details.append(dev.reason)
    if not davinci or missing:
        return _fail_missing(davinci, missing, chips, in_container, details)
    if chips and len(davinci) < chips:
        return _fewer(machine, davinci, chips, in_container, details)
    summary = f"{len(davinci)} /dev/davinciN ({id_ranges(davinci)}) and " + ", ".join(
        required_manager_nodes(machine)
    )
    return passed(summary, details)


def _fail_missing(
    davinci: Tuple[int, ...], missing: Tuple[str, ...], chips: int, in_container: bool, details: List[str]
) -> Finding:
    what: List[str] = []
    if not davinci:
        what.append("every /dev/davinciN")
    what.extend(f"/dev/{name}" for name in missing)
    where = "in this container" if in_container else "on this host"
    summary = f"missing {where}: {', '.join(what)}"
    if not in_container:
        return failed(summary, _HOST_HINT, details)
    wanted = list(missing)
    if not davinci:
        wanted = ["davinci0", *wanted]
    hint = f"start the container with {device_flags(wanted)}"
    if not davinci:
        known = f" (this machine has {chips}: 0-{chips - 1})" if chips > 1 else ""
        hint += f", adding one --device /dev/davinciN per NPU it should use{known}"
    hint += (
        "; with Kubernetes the Ascend device plugin adds them: check its pod and the pod's resource request"
    )
    return failed(summary, hint, details)


def _fewer(
    machine: Machine, davinci: Tuple[int, ...], chips: int, in_container: bool, details: List[str]
) -> Finding:
    count = f"{len(davinci)} of {chips} chips have a /dev/davinciN node"
    if in_container:
        raw = machine.environ.get("ASCEND_VISIBLE_DEVICES")
        visible, unreadable = parse_docker_visible(raw or "")
        if raw and not unreadable and set(visible) == set(davinci):
            details.append(f"ASCEND_VISIBLE_DEVICES={raw} gives this container exactly these chips")
            return passed(f"{count}: the {len(davinci)} this container was given", details)
        # `docker run --device /dev/davinci3` is the usual way to hand one chip to a job:
        # a container seeing some of the host's chips is healthy, not a warning.
        absent = [n for n in range(chips) if n not in davinci][:4]
        details.append(
            "to give it more, add "
            f"{device_flags([f'davinci{n}' for n in absent])} (or set ASCEND_VISIBLE_DEVICES with the "
            "Ascend Docker Runtime)"
        )
        return passed(f"{count}: this container was given {id_ranges(davinci)}", details)
    return failed(
        f"only {count}: some chips did not come up",
        "a chip failed to initialise: look for it with `dmesg | grep -i devdrv` and `npu-smi info`; "
        "reboot, and if it persists reinstall the driver and firmware",
        details,
    )


CHECK = Check(
    id="device-nodes",
    group=Group.DRIVER,
    title="the NPU device nodes exist: /dev/davinciN per chip and the manager nodes",
    run=run,
    needs_hardware=True,
)
