"""Provides Machine: what the doctor's checks read, each fact read once and shared between checks."""

from __future__ import annotations

import threading
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, TypeVar, Union

from npuwatch.probes.container import ContainerInfo, detect_container
from npuwatch.probes.devices import DevNodes, scan_dev
from npuwatch.probes.install_files import (
    AscendInstallInfo,
    DriverVersionInfo,
    FirmwareVersionInfo,
    find_cann_homes,
    find_driver_dir,
    find_firmware_dir,
    parse_driver_version_info,
    parse_firmware_version_info,
    read_install_info,
)
from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S, NpuSmi, NpuSmiError, NpuSmiFailure, NpuSmiOutput
from npuwatch.probes.npu_smi_table import InfoTable, parse_info
from npuwatch.probes.pci import PciInventory, scan_pci
from npuwatch.probes.sysroot import Sysroot

if TYPE_CHECKING:
    from npuwatch.probes.python_env import PythonEnv

_T = TypeVar("_T")


class Machine:
    """The machine under diagnosis: a ``Sysroot`` (with its environment) and its npu-smi.

    Facts are read lazily and cached, so ten checks that need the PCI scan or ``npu-smi info``
    cost one read.  Each fact has its own lock: a check abandoned at its timeout while reading
    one fact does not block the checks that need another.
    """

    def __init__(
        self,
        sysroot: Sysroot,
        npu_smi: Optional[Path],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        verbose: bool = False,
    ) -> None:
        self.sysroot = sysroot
        self.npu_smi_path = npu_smi
        self.timeout_s = timeout_s
        self.verbose = verbose
        self._values: Dict[str, Any] = {}
        self._locks: Dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __repr__(self) -> str:
        return f"Machine({self.sysroot!r}, npu_smi={str(self.npu_smi_path)!r})"

    @property
    def environ(self) -> Any:
        """The machine's environment variables (a mapping)."""
        return self.sysroot.environ

    def _cached(self, key: str, read: Callable[[], _T]) -> _T:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = read()
            return self._values[key]

    # ---------------------------------------------------------------- hardware and /dev

    def pci(self) -> PciInventory:
        """The Ascend PCI functions in sysfs."""
        return self._cached("pci", lambda: scan_pci(self.sysroot))

    def dev(self) -> DevNodes:
        """The Ascend nodes under /dev."""
        return self._cached("dev", lambda: scan_dev(self.sysroot))

    def container(self) -> ContainerInfo:
        """Whether this is a container, and which."""
        return self._cached("container", lambda: detect_container(self.sysroot))

    def has_hardware(self) -> bool:
        """Whether any NPU is visible: an Ascend PCI function or a ``/dev/davinciN`` node."""
        return bool(self.pci().functions) or bool(self.dev().davinci_ids)

    # ---------------------------------------------------------------- install files

    def install_info(self) -> Optional[AscendInstallInfo]:
        """``/etc/ascend_install.info``, or ``None`` when absent."""
        return self._cached("install_info", lambda: read_install_info(self.sysroot))

    def driver_dir(self) -> PurePosixPath:
        """The driver's install folder (``Driver_Install_Path_Param``/driver or the default)."""
        return self._cached("driver_dir", lambda: find_driver_dir(self.sysroot))

    def driver_info(self) -> Optional[DriverVersionInfo]:
        """The driver's ``version.info``, or ``None`` when it cannot be read."""

        def read() -> Optional[DriverVersionInfo]:
            text = self.sysroot.read_text(self.driver_dir() / "version.info")
            return None if text is None else parse_driver_version_info(text)

        return self._cached("driver_info", read)

    def firmware_dir(self) -> PurePosixPath:
        """The firmware's install folder."""
        return self._cached("firmware_dir", lambda: find_firmware_dir(self.sysroot))

    def firmware_info(self) -> Optional[FirmwareVersionInfo]:
        """The firmware's ``version.info``, or ``None`` when it cannot be read."""

        def read() -> Optional[FirmwareVersionInfo]:
            text = self.sysroot.read_text(self.firmware_dir() / "version.info")
            return None if text is None else parse_firmware_version_info(text)

        return self._cached("firmware_info", read)

    def cann_homes(self) -> Tuple[PurePosixPath, ...]:
        """Every CANN toolkit home found, in the order of runtime-and-doctor.md §6.3."""
        return self._cached("cann_homes", lambda: find_cann_homes(self.sysroot))

    # ---------------------------------------------------------------- npu-smi

    def npu_smi(self) -> NpuSmi:
        """An ``NpuSmi`` with this machine's path and timeout."""
        return NpuSmi(self.npu_smi_path, timeout_s=self.timeout_s)

    def npu_smi_info(self) -> Union[NpuSmiOutput, NpuSmiFailure]:
        """``npu-smi info`` run once: its output, or the explained failure."""

        def call() -> Union[NpuSmiOutput, NpuSmiFailure]:
            try:
                return self.npu_smi().info()
            except NpuSmiError as exc:
                return exc.failure

        return self._cached("npu_smi_info", call)

    def info_table(self) -> Optional[InfoTable]:
        """The parsed ``npu-smi info`` table, or ``None`` when npu-smi gave none."""

        def parse() -> Optional[InfoTable]:
            output = self.npu_smi_info()
            return parse_info(output.text) if isinstance(output, NpuSmiOutput) else None

        return self._cached("info_table", parse)

    # ---------------------------------------------------------------- Python

    def python(self) -> PythonEnv:
        """The Python environment the user's jobs run in (packages, modules, version)."""
        from npuwatch.probes.python_env import PythonEnv

        return self._cached("python", lambda: PythonEnv.for_sysroot(self.sysroot))
