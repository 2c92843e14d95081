"""Provides ``InstallTree``: a simulated machine's driver, CANN and Python installs, with shared
libraries that really load (``loadable_library``)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Dict, Iterable, Mapping, Optional

from npuwatch.probes.sysroot_builder.tree import MachinePath, TreeWriter

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


class InstallTree(TreeWriter):
    """The install-files side of ``SysrootBuilder``."""

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
