"""Provides SysrootBuilder: writes a fake machine (sysfs, /dev, install files) for tests, demos."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path, PurePosixPath
from typing import Dict, Iterable, Mapping, Optional, Tuple, Union

from npuwatch.probes.container import HOST_PID_NAMESPACE_INODE
from npuwatch.probes.pci import ASCEND_DRIVER
from npuwatch.probes.sysroot import Sysroot

Content = Union[str, bytes]
MachinePath = Union[str, PurePosixPath]

_BDF = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")

#: A private PID namespace's inode, as a container shows it (any number but the host's will do).
CONTAINER_PID_NAMESPACE_INODE = 4026532513

#: AER bit names of ``aer_dev_*`` by kernel era (drivers/pci/pcie/aer.c; 4.19 spelled them out).
#: The builder puts the whole count on the first name and closes with the TOTAL line, as the
#: kernel prints it; the probe trusts only TOTAL (driver-interfaces.md §5.2).
_AER_NAMES: Mapping[str, Mapping[str, Tuple[str, ...]]] = {
    "new": {
        "correctable": ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr"),
        "nonfatal": ("CmpltTO", "Undefined", "DLP", "TLP", "UnsupReq", "MalfTLP"),
        "fatal": ("SDES", "Undefined", "DLP", "TLP", "RxOF", "MalfTLP"),
    },
    "old": {
        "correctable": ("Receiver Error", "Bad TLP", "Bad DLLP", "RELAY_NUM Rollover"),
        "nonfatal": ("Completion Timeout", "Undefined", "Data Link Protocol", "Poisoned TLP"),
        "fatal": ("Surprise Down Error", "Undefined", "Data Link Protocol", "Malformed TLP"),
    },
}
_AER_TOTALS = {"correctable": "COR", "nonfatal": "NONFATAL", "fatal": "FATAL"}

#: The Gen4 maximum in the spelling of a dead link's speed (kernels ≤ 5.6 omit "PCIe", §5.2).
_MAX_FOR_UNKNOWN = {"Unknown": "16.0 GT/s PCIe", "Unknown speed": "16 GT/s"}

#: /proc/devices as the driver fills it (the majors are arbitrary; the names are the driver's).
_PROC_DEVICES = "Character devices:\n236 devdrv-cdev\n237 hisi_davinci_intf\n238 hisi_hdc\n239 devmm_svm\n"

_DRIVER_VERSION_INFO = """\
Version={version}
ascendhal_version=7.35.19
aicpu_version=1.0
tdt_version=1.0
log_version=1.0
prof_version=2.0
dvppkernels_version=1.1
tsfw_version=1.0
Innerversion={inner_version}
compatible_version=[V100R001C13],[V100R001C15],[V100R001C17],[V100R001C21]
compatible_version_fw={compatible_fw}
package_version={version}
"""

_ASCEND_INSTALL_INFO = """\
UserName=HwHiAiUser
UserGroup=HwHiAiUser
Firmware_Install_Type=full
Firmware_Install_Path_Param={path}
Driver_Install_Type=full
Driver_Install_Path_Param={path}
Driver_Install_For_All={for_all}
Driver_Install_Mode=normal
Driver_Install_Status={status}
"""

#: The driver userland (runtime-and-doctor.md §6.1): libascend_hal is what CANN loads first.
DRIVER_LIBRARIES = (
    "lib64/driver/libascend_hal.so",
    "lib64/driver/libdrvdsmi_host.so",
    "lib64/common/libc_sec.so",
)

#: The CANN libraries the doctor loads (§12 row 9).
CANN_LIBRARIES = ("libascendcl.so", "libhccl.so", "libopapi.so", "libnnopbase.so")

#: Where operator kernels for one SoC live inside a CANN home (§6.2, §12 row 14).
KERNEL_DIR = PurePosixPath("opp/built-in/op_impl/ai_core/tbe/kernel")

#: The site-packages of a simulated machine's Python.
PYTHON_SITE = PurePosixPath("/usr/local/lib/python3.10/site-packages")

_TOOLKIT_INSTALL_INFO = """\
package_name=Ascend-cann-toolkit
version={version}
innerversion={inner_version}
compatible_version=[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21]
arch={arch}
os=linux
path={path}
"""


class SysrootBuilder:
    """Writes one simulated machine under ``root``: every link relative, so a tree can be copied.

    ``environ`` collects the machine's environment (``KUBERNETES_SERVICE_HOST``, a sourced CANN);
    ``sysroot()`` hands out a ``Sysroot`` with both.
    """

    def __init__(self, root: Union[str, Path]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.environ: Dict[str, str] = {}

    def __repr__(self) -> str:
        return f"SysrootBuilder({str(self.root)!r})"

    def sysroot(self) -> Sysroot:
        """A Sysroot over this tree with a copy of ``environ``."""
        return Sysroot(self.root, environ=dict(self.environ))

    def path(self, machine_path: MachinePath) -> Path:
        """Where the machine path ``/etc/x`` lives in the tree."""
        return self.root / str(machine_path).lstrip("/")

    def write_file(self, machine_path: MachinePath, content: Content, mode: int = 0o644) -> Path:
        """Write ``content`` (text or bytes) at ``machine_path``, making parent folders.

        A file or link already there is replaced (also a read-only 0444 sysfs file, as a non-root
        user).  Written with the system calls themselves, folders made only when missing: a demo
        machine is some 500 files, built while the dashboard starts.
        """
        target = self.path(machine_path)
        name = str(target)
        data = content.encode("utf-8") if isinstance(content, str) else content
        fd = _create(name)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        return target

    def install_executable(self, machine_path: MachinePath, text: str) -> Path:
        """Write a script (e.g. a fake ``/usr/local/bin/npu-smi``) with mode 755."""
        return self.write_file(machine_path, text, mode=0o755)

    def symlink(self, machine_path: MachinePath, target: MachinePath) -> Path:
        """Link ``machine_path`` to the machine path ``target`` with a relative link."""
        link = self.path(machine_path)
        link.parent.mkdir(parents=True, exist_ok=True)
        relative = os.path.relpath(self.path(target), link.parent)
        return self._replace_link(link, relative)

    def add_pci_function(
        self,
        bdf: str,
        device_id: int,
        vendor_id: int = 0x19E5,
        subsystem_vendor_id: int = 0x0200,
        subsystem_device_id: int = 0x0100,
        numa_node: Optional[int] = 0,
        current_speed: Optional[str] = "16.0 GT/s PCIe",
        max_speed: Optional[str] = None,
        current_width: Optional[int] = 16,
        max_width: Optional[int] = 16,
        bound: bool = True,
        present: bool = True,
        aer: Optional[Tuple[int, int, int]] = (0, 0, 0),
        virtual_function: bool = False,
        root_port: Optional[str] = None,
        *,
        driver: str = ASCEND_DRIVER,
        class_code: int = 0x120000,
        revision: Optional[int] = None,
        aer_style: str = "new",
        physfn: Optional[str] = None,
        upstream_max_speed: Optional[str] = None,
        upstream_max_width: Optional[int] = None,
        local_cpulist: Optional[str] = None,
    ) -> Path:
        """Write one PCI function as Linux lays it out; returns its folder in the tree.

        Speeds are the kernel's text (``"16.0 GT/s PCIe"``, old kernels ``"16 GT/s"``,
        ``"Unknown"``); ``None`` leaves the file out, as does ``aer=None``.  ``max_speed``
        defaults to ``current_speed``, or Gen4 in the same spelling when that is ``Unknown``
        (the maximum is cached at enumeration); pass both for a slowed link.  ``aer`` is
        (correctable, nonfatal, fatal) totals; ``aer_style`` ``"new"`` names bits ``RxErr``,
        ``"old"`` ``Receiver Error``.  ``root_port`` defaults to one derived from the bus;
        ``""`` puts the function straight on the root bus.  ``present=False`` makes ``config``
        read ``ff ff`` (fell off the bus).  ``bound=False`` leaves out the ``driver`` link;
        ``driver`` names another driver (``vfio-pci``).  A ``virtual_function`` gets a
        ``physfn`` link to ``physfn`` (default: function 0 of the same device).
        """
        domain, bus, slot, _ = _split_bdf(bdf)
        if max_speed is None:  # the maximum is cached at enumeration: it survives a dead link
            max_speed = _MAX_FOR_UNKNOWN.get(current_speed or "", current_speed)
        if revision is None:
            revision = 0x71 if virtual_function else 0x20  # §5.1: 0x71 marks SR-IOV/mdev VFs
        parent = _parent_dir(domain, bus, root_port)
        if _BDF.match(parent.name):  # a root port, not the host bridge itself
            upstream_width = max_width if upstream_max_width is None else upstream_max_width
            self._write_root_port(
                parent,
                {
                    "max_link_speed": upstream_max_speed or max_speed,
                    "max_link_width": upstream_width,
                    "current_link_speed": current_speed,
                    "current_link_width": current_width,
                },
            )
        device = parent / bdf
        files: Dict[str, Content] = {
            "vendor": f"0x{vendor_id:04x}\n",
            "device": f"0x{device_id:04x}\n",
            "subsystem_vendor": f"0x{subsystem_vendor_id:04x}\n",
            "subsystem_device": f"0x{subsystem_device_id:04x}\n",
            "class": f"0x{class_code:06x}\n",
            "revision": f"0x{revision:02x}\n",
            "numa_node": f"{-1 if numa_node is None else numa_node}\n",
            "enable": "1\n",
            "power_state": "D0\n",
            "config": _config_space(
                vendor_id,
                device_id,
                (subsystem_vendor_id, subsystem_device_id),
                (class_code & 0xFFFFFF) << 8 | (revision & 0xFF),
            )
            if present
            else b"\xff" * 64,
        }
        optional = {
            "current_link_speed": current_speed,
            "max_link_speed": max_speed,
            "current_link_width": current_width,
            "max_link_width": max_width,
        }
        files.update({name: f"{value}\n" for name, value in optional.items() if value is not None})
        if local_cpulist is None and numa_node is not None and numa_node >= 0:
            local_cpulist = f"{numa_node * 48}-{numa_node * 48 + 47}"  # Kunpeng 920: 48 per node
        if local_cpulist is not None:
            files["local_cpulist"] = f"{local_cpulist}\n"
        if aer is not None:
            files.update(_aer_files(aer, aer_style))
        if self.path(device).is_dir():  # rewriting a function replaces it, leaving no stale file
            shutil.rmtree(self.path(device))
        folder = self._write_device(device, files)
        if bound:
            self.bind_driver(bdf, driver)
        else:
            self.unbind_driver(bdf)
        if virtual_function:
            pf = physfn or f"{domain}:{bus}:{slot}.0"
            if pf == bdf:
                raise ValueError(f"a VF cannot be its own physfn: {bdf}")
            self.symlink(device / "physfn", device.parent / pf)
        return folder

    def add_raw_pci_function(
        self, bdf: str, files: Mapping[str, Content], root_port: Optional[str] = None
    ) -> Path:
        """Write exactly ``files`` (name → content) for ``bdf``: for broken and partial devices."""
        domain, bus, _, _ = _split_bdf(bdf)
        return self._write_device(_parent_dir(domain, bus, root_port) / bdf, files)

    def bind_driver(self, bdf: str, driver: str = ASCEND_DRIVER) -> None:
        """Link ``bdf`` and ``driver`` both ways, as the kernel does when a probe succeeds."""
        self.unbind_driver(bdf)
        device = self._device_path(bdf)
        drivers = PurePosixPath("/sys/bus/pci/drivers") / driver
        self.path(drivers).mkdir(parents=True, exist_ok=True)
        self.symlink(device / "driver", drivers)
        self.symlink(drivers / bdf, device)

    def unbind_driver(self, bdf: str) -> None:
        """Remove the driver links of ``bdf`` (what ``echo BDF > …/unbind`` leaves behind)."""
        link = self.path(self._device_path(bdf)) / "driver"
        if link.is_symlink():
            link.unlink()
        for back in self.path("/sys/bus/pci/drivers").glob(f"*/{bdf}"):
            if back.is_symlink():
                back.unlink()

    def _device_path(self, bdf: str) -> PurePosixPath:
        link = self.path(PurePosixPath("/sys/bus/pci/devices") / bdf)
        if not link.is_symlink():
            raise ValueError(f"no PCI function {bdf} in {self.root}")
        real = Path(os.path.realpath(link)).relative_to(os.path.realpath(self.root))
        return PurePosixPath("/") / real.as_posix()

    def _write_device(self, device: PurePosixPath, files: Mapping[str, Content]) -> Path:
        folder = self.path(device)
        folder.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            self.write_file(device / name, content, mode=0o444)
        self.symlink(PurePosixPath("/sys/bus/pci/devices") / device.name, device)
        return folder

    def _write_root_port(self, port: PurePosixPath, link: Mapping[str, object]) -> None:
        files: Dict[str, Content] = {
            "vendor": "0x19e5\n",
            "device": "0xa120\n",  # HiSilicon Kunpeng 920 root port
            "class": "0x060400\n",
            "aer_rootport_total_err_cor": "0\n",
            "aer_rootport_total_err_fatal": "0\n",
            "aer_rootport_total_err_nonfatal": "0\n",
        }
        files.update({name: f"{value}\n" for name, value in link.items() if value is not None})
        self.path(port).mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            self.write_file(port / name, content, mode=0o444)

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

    def install_driver(
        self,
        version: str,
        firmware: Optional[str] = None,
        compatible_fw: str = "[7.0.0,7.7.99]",
        *,
        install_path: str = "/usr/local/Ascend",
        inner_version: str = "V100R001C21SPC002B220",
        for_all: bool = False,
        status: str = "complete",
        userland: bool = True,
    ) -> Path:
        """Write ``driver/version.info`` (+ firmware's) and ``/etc/ascend_install.info``.

        Same key=value shape as the captures tests/data/npu_smi/018 and 019.  ``userland``
        also installs the driver's libraries (``lib64/driver/libascend_hal.so`` …) and
        ``/usr/local/dcmi``, as loadable stand-ins (see ``install_library``).
        """
        base = PurePosixPath(install_path)
        if userland:
            for library in DRIVER_LIBRARIES:
                self.install_library(base / "driver" / library)
            self.install_library("/usr/local/dcmi/libdcmi.so")
            self.write_file("/usr/local/dcmi/dcmi_interface_api.h", "/* DCMI API (simulated) */\n")
        info = self.write_file(
            base / "driver/version.info",
            _DRIVER_VERSION_INFO.format(
                version=version, inner_version=inner_version, compatible_fw=compatible_fw
            ),
        )
        self.write_file(
            "/etc/ascend_install.info",
            _ASCEND_INSTALL_INFO.format(path=install_path, for_all="yes" if for_all else "no", status=status),
        )
        if firmware is not None:
            self.write_file(
                base / "firmware/version.info",
                f"Version={firmware}\nfirmware_version=1.0\npackage_version={version}\n"
                f"compatible_version_drv=[{version},{version}.]\n",
            )
        return info

    def install_cann(
        self,
        version: str,
        layout: str = "toolkit",
        *,
        arch: str = "aarch64",
        inner_version: str = "V100R001C21SPC001B238",
        sourced: bool = False,
        libraries: bool = True,
        kernel_socs: Iterable[str] = (),
    ) -> PurePosixPath:
        """Install CANN's marker files; returns the toolkit home (``ASCEND_HOME_PATH``).

        ``layout="toolkit"`` is ≤ 8.3 (``ascend-toolkit/<v>``, ``latest -> <v>``);
        ``"cann"`` is 8.5+ (``cann-<v>``, ``cann -> cann-<v>``, ``ascend-toolkit/latest ->
        ../cann``).  ``sourced=True`` also puts what ``set_env.sh`` exports into ``environ``.
        ``libraries`` installs ``CANN_LIBRARIES`` and pyACL; ``kernel_socs`` (``ascend910b`` …)
        the operator-kernel folders for those SoCs.
        """
        ascend = PurePosixPath("/usr/local/Ascend")
        if layout == "toolkit":
            versioned = ascend / "ascend-toolkit" / version
            home = ascend / "ascend-toolkit/latest"
            self.symlink(home, versioned)
            set_env = ascend / "ascend-toolkit/set_env.sh"
        elif layout == "cann":
            versioned = ascend / f"cann-{version}"
            home = ascend / "cann"
            self.symlink(home, versioned)
            self.symlink(ascend / "ascend-toolkit/latest", home)
            set_env = versioned / "set_env.sh"
            self.write_file(versioned / "runtime/version.info", f"Version={version}\n")
        else:
            raise ValueError(f"unknown CANN layout {layout!r}; 'toolkit' or 'cann'")
        platform = versioned / f"{arch}-linux"
        self.write_file(
            platform / "ascend_toolkit_install.info",
            _TOOLKIT_INSTALL_INFO.format(
                version=version, inner_version=inner_version, arch=arch, path=platform
            ),
        )
        self.write_file(
            versioned / "version.cfg",
            f"runtime_running_version=[7.7.0.1.238:{version}]\n"
            f"toolkit_running_version=[7.7.0.1.238:{version}]\n",
        )
        for folder in ("lib64", "opp/built-in", "python/site-packages", "bin"):
            self.path(versioned / folder).mkdir(parents=True, exist_ok=True)
        if libraries:
            for library in CANN_LIBRARIES:
                self.install_library(versioned / "lib64" / library)
            self.install_library(versioned / "python/site-packages/acl.so")  # pyACL
        for soc in kernel_socs:
            self.write_file(versioned / KERNEL_DIR / soc / "config.ini", f"[{soc}]\n# simulated\n")
        exports = _set_env_exports(home, arch)
        script = "".join(f'export {name}="{value}"\n' for name, value in exports.items())
        self.install_executable(set_env, "#!/bin/bash\n# written by npuwatch's simulator\n" + script)
        if sourced:
            for name, value in exports.items():
                before = self.environ.get(name)
                self.environ[name] = (
                    value.replace(f"${name}", before) if before else value.replace(f":${name}", "")
                )
        return home

    def install_library(self, machine_path: MachinePath, *, broken: bool = False) -> Path:
        """A shared library that really loads (a copy of this host's libm), or a ``broken`` one.

        A tree's libraries are opened with ``dlopen`` by the doctor like a live machine's; a
        broken one is text, so the loader's own error (glibc: "file too short") is what is shown.
        """
        if broken:
            return self.write_file(machine_path, "not a shared library (simulated damage)\n", mode=0o755)
        target = self.path(machine_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.is_file():
            target.unlink()
        shutil.copyfile(loadable_library(), target)
        target.chmod(0o755)
        return target

    def install_python_package(
        self,
        name: str,
        version: str,
        *,
        site: MachinePath = PYTHON_SITE,
        modules: Iterable[str] = (),
        files: Optional[Mapping[str, str]] = None,
    ) -> PurePosixPath:
        """An installed distribution: ``<name>-<version>.dist-info`` plus importable modules.

        ``modules`` become ``<module>/__init__.py``; ``files`` maps a path inside ``site`` to its
        text (``{"torch/version.py": "cuda = '12.1'"}``).  Nothing is executed by the doctor:
        it reads metadata and finds modules as ``importlib`` would, without importing them.
        """
        base = PurePosixPath(str(site))
        folder = re.sub(r"[-_.]+", "_", name)
        self.write_file(
            base / f"{folder}-{version}.dist-info" / "METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        )
        for module in modules:
            self.write_file(base / module.replace(".", "/") / "__init__.py", f'"""{name} (simulated)."""\n')
        for relative, text in (files or {}).items():
            self.write_file(base / relative, text)
        return base

    @staticmethod
    def _replace_link(link: Path, text: str) -> Path:
        if link.is_symlink() or link.is_file():
            link.unlink()
        os.symlink(text, link)
        return link


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _create(name: str) -> int:
    """A new file at ``name`` open for writing, replacing a file or link there and making its
    folders when they are missing."""
    try:
        return os.open(name, _NEW_FILE, 0o600)
    except FileExistsError:
        os.unlink(name)  # a directory there raises, as writing into it would
    except FileNotFoundError:
        os.makedirs(os.path.dirname(name), exist_ok=True)
    return os.open(name, _NEW_FILE, 0o600)


def loadable_library() -> Path:
    """A small shared library of this host that ``dlopen`` accepts: libm as this process mapped it.

    /proc/self/maps names the exact file the loader chose, so the copy matches the host's
    architecture and C library; ``FileNotFoundError`` when none can be found (not Linux).
    """
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = [line.split()[-1] for line in maps if "/lib" in line]
    except OSError:
        paths = []
    for wanted in ("libm.so", "libm-", "libz.so", "libdl.so"):
        for path in paths:
            if wanted in os.path.basename(path) and os.path.isfile(path):
                return Path(path)
    raise FileNotFoundError("no shared library of this host to copy (is this Linux?)")


def _split_bdf(bdf: str) -> Tuple[str, str, str, str]:
    match = _BDF.match(bdf)
    if match is None:
        raise ValueError(f"not a sysfs BDF (0000:c1:00.0, lower case): {bdf!r}")
    return match.group(1), match.group(2), match.group(3), match.group(4)


def _parent_dir(domain: str, bus: str, root_port: Optional[str]) -> PurePosixPath:
    """The folder a function on ``bus`` sits in: ``/sys/devices/pciDDDD:BB[/<root port>]``.

    By default the root bus is ``bus`` rounded down to 0x40 and the port's slot the remainder,
    which gives adjacent buses distinct ports (c1 → c0:01.0, c2 → c0:02.0) as on Kunpeng servers,
    where every NPU hangs off its own root port; a function on a root bus gets none.
    """
    if root_port is None:
        number = int(bus, 16)
        root_bus = number & 0xC0
        if number == root_bus:
            return PurePosixPath("/sys/devices") / f"pci{domain}:{bus}"
        root_port = f"{domain}:{root_bus:02x}:{(number - root_bus) & 0x1F:02x}.0"
    if not root_port:
        return PurePosixPath("/sys/devices") / f"pci{domain}:{bus}"
    port_domain, port_bus, _, _ = _split_bdf(root_port)
    return PurePosixPath("/sys/devices") / f"pci{port_domain}:{port_bus}" / root_port


def _config_space(vendor_id: int, device_id: int, subsystem: Tuple[int, int], class_rev: int) -> bytes:
    """The first 64 bytes of a type-0 config header, little-endian as the hardware returns it."""
    config = bytearray(64)
    struct.pack_into("<HHHH", config, 0, vendor_id, device_id, 0x0406, 0x0010)  # MEM|BM, caps
    struct.pack_into("<I", config, 8, class_rev)  # offset 8: revision, then the 24-bit class code
    struct.pack_into("<HH", config, 0x2C, *subsystem)
    config[0x34] = 0x40  # capability list pointer
    return bytes(config)


def _aer_files(totals: Tuple[int, int, int], style: str) -> Dict[str, str]:
    names = _AER_NAMES.get(style)
    if names is None:
        raise ValueError(f"unknown AER style {style!r}; 'new' or 'old'")
    files = {}
    for kind, total in zip(("correctable", "nonfatal", "fatal"), totals):
        lines = [f"{name} {total if i == 0 else 0}" for i, name in enumerate(names[kind])]
        lines.append(f"TOTAL_ERR_{_AER_TOTALS[kind]} {total}")
        files[f"aer_dev_{kind}"] = "\n".join(lines) + "\n"
    return files


def _set_env_exports(home: PurePosixPath, arch: str) -> Dict[str, str]:
    """What set_env.sh exports (runtime-and-doctor.md §7.1), with the toolkit home filled in."""
    driver = "/usr/local/Ascend/driver"
    return {
        "ASCEND_TOOLKIT_HOME": str(home),
        "ASCEND_HOME_PATH": str(home),
        "ASCEND_AICPU_PATH": str(home),
        "ASCEND_OPP_PATH": f"{home}/opp",
        "TOOLCHAIN_HOME": f"{home}/toolkit",
        "LD_LIBRARY_PATH": f"{driver}/lib64:{driver}/lib64/common:{driver}/lib64/driver:"
        f"{home}/lib64:{home}/lib64/plugin/opskernel:{home}/lib64/plugin/nnengine:"
        f"{home}/opp/built-in/op_impl/ai_core/tbe/op_tiling/lib/linux/{arch}:$LD_LIBRARY_PATH",
        "PYTHONPATH": f"{home}/python/site-packages:{home}/opp/built-in/op_impl/ai_core/tbe:$PYTHONPATH",
        "PATH": f"{home}/bin:{home}/compiler/ccec_compiler/bin:$PATH",
    }
