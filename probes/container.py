"""Provides detect_container(): is npuwatch in a container, on what evidence, and whose PIDs?"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional, Tuple

from npuwatch.probes.sysroot import Sysroot

#: The inode of the kernel's initial PID namespace (PROC_PID_INIT_INO = 0xEFFFFFFC in
#: include/linux/proc_ns.h).  It is fixed at build time, so a link text of ``pid:[4026531836]``
#: means this process sees the host's PIDs, and any other number means a private PID namespace.
HOST_PID_NAMESPACE_INODE = 4026531836

_NS_LINK = re.compile(r"^pid:\[([0-9]{1,20})\]$")

#: Words in /proc/1/cgroup that name a container runtime, with the runtime they stand for.
#: cgroup v1 paths read "/docker/<id>" or "/kubepods/…"; v2 systemd scopes read
#: "docker-<id>.scope", "cri-containerd-<id>.scope", "crio-<id>.scope", "libpod-<id>.scope".
_CGROUP_WORDS = (
    ("kubepods", "kubernetes"),
    ("libpod", "podman"),
    ("docker", "docker"),
    ("containerd", "containerd"),
    ("crio", "cri-o"),
)


@dataclass(frozen=True)
class ContainerInfo:
    """What the filesystem and environment say about containment."""

    in_container: bool
    evidence: Tuple[str, ...] = ()  # one line per marker found, e.g. "/.dockerenv exists"
    runtime: Optional[str] = None  # "docker", "podman", "kubernetes", "containerd", "cri-o" …
    #: True: this process sees the host's PIDs, so npu-smi's PIDs can be looked up here;
    #: False: a private PID namespace; None: /proc/self/ns/pid could not be read.
    host_pid_namespace: Optional[bool] = None
    pid_namespace: Optional[str] = None  # the link text, "pid:[4026531836]"


def detect_container(sysroot: Sysroot) -> ContainerInfo:
    """Collect every container marker; one is enough for ``in_container``.  Never raises."""
    evidence: List[str] = []
    runtimes: List[str] = []

    def found(line: str, runtime: Optional[str]) -> None:
        evidence.append(line)
        if runtime is not None and runtime not in runtimes:
            runtimes.append(runtime)

    if sysroot.exists("/.dockerenv"):
        found("/.dockerenv exists", "docker")
    if sysroot.exists("/run/.containerenv"):
        found("/run/.containerenv exists", "podman")
    cgroup = sysroot.read_text("/proc/1/cgroup", limit=65536) or ""
    # A private cgroup namespace (the cgroup v2 default) shows only "0::/": no evidence either way.
    for word, runtime in _CGROUP_WORDS:
        if word in cgroup:
            found(f"/proc/1/cgroup mentions {word}", runtime)
    if sysroot.getenv("KUBERNETES_SERVICE_HOST"):
        found("KUBERNETES_SERVICE_HOST is set", "kubernetes")
    engine = (sysroot.getenv("container") or "").strip()
    if engine:  # podman, systemd-nspawn and LXC set container=<engine> for the payload
        found(f"container={engine} is set", engine if engine.isprintable() else None)

    link_text = sysroot.readlink("/proc/self/ns/pid")
    host_pid = pid_namespace_is_host(link_text)
    if host_pid is False:
        found(f"PID namespace {link_text} is not the host's", None)
    return ContainerInfo(
        in_container=bool(evidence),
        evidence=tuple(evidence),
        runtime=_main_runtime(runtimes),
        host_pid_namespace=host_pid,
        pid_namespace=link_text,
    )


def pid_namespace_is_host(link_text: Optional[str]) -> Optional[bool]:
    """``pid:[4026531836]`` → True, another ``pid:[N]`` → False, unreadable or garbage → None."""
    if link_text is None:
        return None
    match = _NS_LINK.match(link_text.strip())
    if match is None:
        return None
    return int(match.group(1)) == HOST_PID_NAMESPACE_INODE


def _main_runtime(runtimes: List[str]) -> Optional[str]:
    # Kubernetes runs pods on containerd or cri-o, and docker's cgroup paths mention containerd
    # too, so the orchestrator wins over the engine and an engine over its shim.
    for preferred in ("kubernetes", "podman", "docker"):
        if preferred in runtimes:
            return preferred
    return runtimes[0] if runtimes else None
