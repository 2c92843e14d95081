"""Provides the container-mounts check: a container holds the driver, npu-smi, DCMI and device nodes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import List, Optional, Sequence

from npuwatch.doctor.facts import physical_ids, required_manager_nodes
from npuwatch.doctor.machine import Machine, ProcessPlace
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned
from npuwatch.probes.devices import MANAGER_NODES, DevNodes
from npuwatch.probes.install_files import INSTALL_INFO
from npuwatch.probes.npu_smi import NPU_SMI_PATHS
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.visible_devices import DOCKER_VISIBLE, RT_VISIBLE, parse_docker_visible

DCMI_DIR = PurePosixPath("/usr/local/dcmi")

#: What each management node is for (driver-interfaces.md §1), for the report's details.
_NODE_ROLES = {
    "davinci_manager": "DCMI's management endpoint; without it npu-smi fails with -8005",
    "devmm_svm": "shared virtual memory between host and NPU",
    "hisi_hdc": "the host–device channel",
}

#: At most this many ``--device /dev/davinciN`` flags are suggested (a range typo is not a machine).
_MAX_CHIP_FLAGS = 16

#: CAP_SYS_ADMIN (include/uapi/linux/capability.h): docker grants it only to --privileged.
_CAP_SYS_ADMIN = 21
_LISTED_PROCESSES = 16

KUBERNETES_NOTE = (
    "Kubernetes: the Ascend device plugin (MindCluster ascend-device-plugin, or HAMi) adds these "
    "devices and mounts when the pod requests NPUs (e.g. `huawei.com/Ascend910: 1`); with the "
    f"Ascend Docker Runtime, `{DOCKER_VISIBLE}` picks the chips and the runtime mounts the driver "
    "lib64, /usr/local/dcmi and npu-smi with them (its base.list)"
)


@dataclass(frozen=True)
class Missing:
    """One thing the container lacks, and the ``docker run`` option that adds it."""

    name: str  # "/dev/hisi_hdc"
    flag: str  # "--device /dev/hisi_hdc"
    why: str  # what breaks without it, and what was found instead


def _is_file(sysroot: Sysroot, path: PurePosixPath) -> bool:
    return os.path.isfile(sysroot.path(path))


def _found_instead(sysroot: Sysroot, path: PurePosixPath) -> str:
    """Why ``path`` does not count: docker makes an empty folder for a host path that is missing."""
    if os.path.isdir(sysroot.path(path)):
        return f"{path} is a directory (the host had nothing at that path when the container started)"
    return f"{path} is missing"


def missing_nodes(
    dev: DevNodes, docker_visible: Optional[str], required: Sequence[str] = MANAGER_NODES
) -> List[Missing]:
    """The device nodes a container needs (runtime-and-doctor.md §7.3) that it lacks."""
    found: List[Missing] = []
    if not dev.davinci_ids and not dev.vdavinci_ids:
        ids: Sequence[int] = (0,)
        if docker_visible:
            ids = parse_docker_visible(docker_visible)[0] or ids
        for number in ids[:_MAX_CHIP_FLAGS]:
            found.append(
                Missing(
                    f"/dev/davinci{number}",
                    f"--device /dev/davinci{number}",
                    "no /dev/davinciN chip node: add one --device per chip (`ls /dev/davinci*` on the host)",
                )
            )
    for name in MANAGER_NODES:
        if dev.has(name) or name not in required:
            continue
        node = dev.node(name)
        seen = (
            f"/dev/{name} {node.problem}" if node is not None and node.problem else f"/dev/{name} is missing"
        )
        found.append(Missing(f"/dev/{name}", f"--device /dev/{name}", f"{seen}: {_NODE_ROLES[name]}"))
    return found


def missing_files(machine: Machine) -> List[Missing]:
    """The host files a container needs (driver userland, DCMI, npu-smi, install info) that it lacks."""
    sysroot = machine.sysroot
    driver = machine.driver_dir()
    found: List[Missing] = []
    if not _is_file(sysroot, DCMI_DIR / "libdcmi.so"):
        seen = _found_instead(sysroot, DCMI_DIR / "libdcmi.so")
        found.append(
            Missing(str(DCMI_DIR), f"-v {DCMI_DIR}:{DCMI_DIR}", f"{seen}: npu-smi and DCMI clients need it")
        )
    explicit = machine.npu_smi_path
    if not any(_is_file(sysroot, PurePosixPath(p)) for p in NPU_SMI_PATHS) and not (
        explicit is not None and os.path.isfile(explicit)
    ):
        seen = _found_instead(sysroot, PurePosixPath(NPU_SMI_PATHS[0]))
        found.append(
            Missing(
                NPU_SMI_PATHS[0],
                f"-v {NPU_SMI_PATHS[0]}:{NPU_SMI_PATHS[0]}",
                f"{seen}: `npu-smi: command not found` (on some hosts it is {NPU_SMI_PATHS[1]})",
            )
        )
    hal = driver / "lib64/driver/libascend_hal.so"
    if not _is_file(sysroot, hal):
        found.append(
            Missing(
                f"{driver}/lib64",
                f"-v {driver}/lib64/:{driver}/lib64/",
                f"{hal} is missing: `libascend_hal.so: cannot open shared object file`, "
                "torch_npu fails to load",
            )
        )
    if not _is_file(sysroot, driver / "version.info"):
        seen = _found_instead(sysroot, driver / "version.info")
        found.append(
            Missing(
                f"{driver}/version.info",
                f"-v {driver}/version.info:{driver}/version.info",
                f"{seen}: the driver version cannot be read",
            )
        )
    info = machine.install_info()
    if info is None or info.driver_install_path is None:
        seen = (
            _found_instead(sysroot, INSTALL_INFO)
            if info is None
            else f"{INSTALL_INFO} lacks Driver_Install_Path_Param"
        )
        why = f"{seen}: set_env.sh then leaves the driver's libraries off LD_LIBRARY_PATH"
        libraries = str(driver / "lib64/driver")
        entries = [entry.rstrip("/") for entry in (machine.environ.get("LD_LIBRARY_PATH") or "").split(":")]
        if libraries not in entries:
            why += f" (here it lacks {libraries})"
        found.append(Missing(str(INSTALL_INFO), f"-v {INSTALL_INFO}:{INSTALL_INFO}", why))
    return found


def _capabilities_privileged(sysroot: Sysroot) -> bool:
    """Whether CapEff holds CAP_SYS_ADMIN, which docker grants only with ``--privileged``."""
    for line in (sysroot.read_text("/proc/self/status", limit=65536) or "").splitlines():
        if line.startswith("CapEff:"):
            try:
                return bool(int(line.split(":", 1)[1].strip(), 16) >> _CAP_SYS_ADMIN & 1)
            except ValueError:
                return False
    return False


def shared_chips(machine: Machine, dev: DevNodes, evidence: Sequence[str] = ()) -> Optional[Finding]:
    """A privileged-style container that sees every chip while other containers use them (§10 row 14)."""
    environ = machine.environ
    if (environ.get(DOCKER_VISIBLE) or "").strip() or (environ.get(RT_VISIBLE) or "").strip():
        return None  # restricted to chosen chips
    if len(dev.davinci_ids) < 2:
        return None
    host_chips = machine.pci().chip_count
    every_chip = host_chips > 0 and len(dev.davinci_ids) >= host_chips
    privileged = _capabilities_privileged(machine.sysroot)
    if not (every_chip or privileged):
        return None
    table = machine.info_table()
    if table is None:
        return None
    container = machine.container()
    elsewhere = (ProcessPlace.ELSEWHERE, ProcessPlace.MAYBE_ELSEWHERE)
    foreign = [p for p in table.processes if machine.process_place(p) in elsewhere]
    if not foreign:
        return None
    phys = physical_ids(machine, dev)
    busy = {phys[p.npu_id, p.chip_id] for p in foreign if (p.npu_id, p.chip_id) in phys}
    free = [n for n in dev.davinci_ids if n not in busy] if phys else []
    who = "this privileged container" if privileged else "this container"
    seen = f"all {host_chips} NPUs of the host" if every_chip else f"{len(dev.davinci_ids)} NPUs"
    summary = (
        f"{who} sees {seen} and npu-smi lists {len(foreign)} "
        f"process{'es' if len(foreign) != 1 else ''} on them that are not in this container"
    )
    start = "recreate it without --privileged and with only your chips"
    if free:
        logical = ",".join(str(dev.davinci_ids.index(n)) for n in free)
        hint = (
            f"{start}: `docker run --runtime ascend -e {DOCKER_VISIBLE}={','.join(map(str, free))} …` "
            f"(Ascend Docker Runtime); meanwhile `export {RT_VISIBLE}={logical}` keeps jobs here "
            "off the busy chips"
        )
    else:
        hint = (
            f"{start}: `docker run --runtime ascend -e {DOCKER_VISIBLE}=<your chips' IDs> …` "
            "(Ascend Docker Runtime), or one `--device /dev/davinciN` per chip; every chip here is in use"
        )
    details = [
        f"NPU {p.npu_id} chip {p.chip_id}: PID {p.pid} {p.name or '?'}"
        + (f" ({p.npu_memory_mib} MiB)" if p.npu_memory_mib is not None else "")
        for p in foreign[:_LISTED_PROCESSES]
    ]
    if len(foreign) > _LISTED_PROCESSES:
        details.append(f"… and {len(foreign) - _LISTED_PROCESSES} more")
    if every_chip:
        details.append(f"/dev holds a node for each of the host's {host_chips} chips (PCI)")
    if privileged:
        details.append("CapEff holds CAP_SYS_ADMIN: the container runs with --privileged")
    if container.host_pid_namespace is False:
        details.append(
            "npu-smi prints host PIDs: if these are this container's own jobs, ignore this warning"
        )
    details.append(
        f"no {DOCKER_VISIBLE} or {RT_VISIBLE} limits which chips jobs here use (vllm-ascend #6942)"
    )
    return warned(summary, hint, details + list(evidence))


def run(machine: Machine) -> Finding:
    """In a container: every mount and node an NPU job needs, and no other tenant's chips in view."""
    container = machine.container()
    if not container.in_container:
        return skipped("not in a container")
    kind = container.runtime or "container"
    dev = machine.dev()
    required = required_manager_nodes(machine)
    missing = missing_nodes(dev, machine.environ.get(DOCKER_VISIBLE), required) + missing_files(machine)
    evidence = [f"container: {line}" for line in container.evidence]
    if missing:
        engine = "podman" if container.runtime == "podman" else "docker"
        flags = " ".join(m.flag for m in missing)
        details = [f"missing: {m.why}" for m in missing] + evidence
        options = (machine.environ.get("ASCEND_RUNTIME_OPTIONS") or "").upper()
        if "NODRV" in options:
            details.append(
                "ASCEND_RUNTIME_OPTIONS has NODRV: the Ascend Docker Runtime did not mount the driver"
            )
        details.append(KUBERNETES_NOTE)
        return failed(
            f"{kind} container lacks {', '.join(m.name for m in missing)}",
            f"recreate the container with `{engine} run {flags} …`",
            details,
        )
    shared = shared_chips(machine, dev, evidence)
    if shared is not None:
        return shared
    chips = len(dev.davinci_ids) + len(dev.vdavinci_ids)
    return passed(
        f"{kind} container has the driver userland, npu-smi, DCMI and device nodes ({chips} "
        f"chip{'s' if chips != 1 else ''})",
        [f"driver: {machine.driver_dir()}", *evidence],
    )


CHECK = Check(
    id="container-mounts",
    group=Group.CONTAINER,
    title="a container has the driver, npu-smi, DCMI and device nodes, and no other tenant's chips",
    run=run,
    # Without any NPU there is nothing to mount: asking for /dev/davinci0 would be a false alarm.
    needs_hardware=True,
    runs_npu_smi=True,
)
