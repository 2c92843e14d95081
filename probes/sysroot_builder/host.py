"""Provides ``HostTree``: a simulated machine's device nodes, PID namespace and container markers."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Iterable

from npuwatch.probes.container import HOST_PID_NAMESPACE_INODE
from npuwatch.probes.sysroot_builder.tree import TreeWriter

#: A private PID namespace's inode, as a container shows it (any number but the host's will do).
CONTAINER_PID_NAMESPACE_INODE = 4026532513
#: /proc/devices as the driver fills it (the majors are arbitrary; the names are the driver's).
_PROC_DEVICES = "Character devices:\n236 devdrv-cdev\n237 hisi_davinci_intf\n238 hisi_hdc\n239 devmm_svm\n"


class HostTree(TreeWriter):
    """The ``/dev``, ``/proc`` and container side of ``SysrootBuilder``."""

    def add_dev_nodes(
        self,
        davinci_ids: Iterable[int],
        managers: bool = True,
        *,
        vdavinci_ids: Iterable[int] = (),
        extra: Iterable[str] = (),
        mode: int = 0o660,
    ) -> None:
        """Create ``/dev/davinciN`` (and the manager nodes) as regular files: mknod needs root.

        ``extra`` adds more names (``davinci_manager_docker``); ``mode`` sets their permissions.
        """
        names = [f"davinci{n}" for n in davinci_ids] + [f"vdavinci{n}" for n in vdavinci_ids]
        if managers:
            names += ["davinci_manager", "devmm_svm", "hisi_hdc"]
            self.write_file("/proc/devices", _PROC_DEVICES)
        names += list(extra)
        self.path("/dev").mkdir(parents=True, exist_ok=True)
        for name in names:
            self.write_file(PurePosixPath("/dev") / name, b"", mode=mode)

    def set_host_pid_namespace(self, host: bool) -> None:
        """Make ``/proc/self/ns/pid`` read as the host's PID namespace, or a private one."""
        inode = HOST_PID_NAMESPACE_INODE if host else CONTAINER_PID_NAMESPACE_INODE
        link = self.path("/proc/self/ns/pid")
        link.parent.mkdir(parents=True, exist_ok=True)
        self._replace_link(link, f"pid:[{inode}]")  # the kernel's text, not a path

    def mark_container(self, kind: str = "docker", host_pid: bool = False) -> None:
        """Leave the markers ``kind`` leaves: docker, podman, kubernetes, containerd or cri-o."""
        cid = "3f4e8a9b1c2d" * 5 + "0a1b"
        cgroups = {
            "docker": f"12:memory:/docker/{cid}\n0::/system.slice/docker-{cid}.scope\n",
            "podman": f"0::/machine.slice/libpod-{cid}.scope\n",
            "kubernetes": f"0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-{cid}.scope\n",
            "containerd": f"0::/system.slice/cri-containerd-{cid}.scope\n",
            "cri-o": f"0::/system.slice/crio-{cid}.scope\n",
        }
        if kind not in cgroups:
            raise ValueError(f"unknown container kind {kind!r}; one of {sorted(cgroups)}")
        self.write_file("/proc/1/cgroup", cgroups[kind])
        if kind == "docker":
            self.write_file("/.dockerenv", "")
        elif kind == "podman":
            self.write_file("/run/.containerenv", 'engine="podman-4.9.4"\n')
            self.environ["container"] = "podman"
        elif kind == "kubernetes":
            self.environ["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
        self.set_host_pid_namespace(host_pid)
