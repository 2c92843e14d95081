"""Provides Machine: what the doctor's checks read, each fact read once and shared between checks."""

from __future__ import annotations

import grp
import os
import pwd
import re
import stat
import threading
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Tuple, TypeVar, Union

from npuwatch.chip_source import ChipReading, SourceReading
from npuwatch.machine_chips import machine_chips, unreported_chips
from npuwatch.model import NpuProcess
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
from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S, NpuSmi, NpuSmiFailure, NpuSmiOutput, Withheld
from npuwatch.probes.npu_smi.source import NpuSmiSource
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.pci import PCI_DEVICES_DIR, PciInventory, scan_pci
from npuwatch.probes.sysroot import Sysroot, cannot_read
from npuwatch.probes.tree_trust import runs_tree_code
from npuwatch.verdict import Problem

if TYPE_CHECKING:
    from npuwatch.probes.python_env import PythonEnv

_T = TypeVar("_T")


class ClosableSource(Protocol):
    """A chip source with a worker to end: the DCMI source (``npuwatch.probes.dcmi.source``)."""

    def read(self) -> SourceReading: ...

    def close(self) -> None: ...


#: Opens this machine's DCMI source: ``(machine, timeout_s, start_grace_s)``; tests script one.
DcmiOpener = Callable[["Machine", float, float], ClosableSource]

_CONTAINER_PID_COLUMN = re.compile(r"Process\s+id\s+in\s+container", re.IGNORECASE)


class ProcessPlace(Enum):
    """Where a process of npu-smi's table runs, seen from this (possibly containerised) process."""

    HERE = "here"  # in this container (or, on a host, in this mount namespace)
    ELSEWHERE = "elsewhere"  # certainly in another container
    MAYBE_ELSEWHERE = "maybe elsewhere"  # a private PID namespace, and nothing says it is ours
    UNKNOWN = "unknown"


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
        python: Optional[str] = None,
        dcmi_library: Optional[str] = None,
        dcmi_kind: Optional[str] = None,
        chip_backend: str = "auto",
        dcmi_opener: Optional[DcmiOpener] = None,
        npu_smi_withheld: Optional[Withheld] = None,
    ) -> None:
        self.sysroot = sysroot
        self.npu_smi_path = npu_smi
        #: An untrusted tree's npu-smi, not run: its saved output answers instead (``feeds.MachineHandle``).
        self.npu_smi_withheld = npu_smi_withheld
        self.timeout_s = timeout_s
        self.verbose = verbose
        #: ``--python PATH``: the interpreter to judge (a machine path), instead of the job's environment.
        self.python_path = python
        #: ``--dcmi-lib`` / ``NPUWATCH_DCMI_LIB`` (a path or ``python:<module>``); ``None``: search.
        self.dcmi_library = dcmi_library or sysroot.environ.get("NPUWATCH_DCMI_LIB") or None
        #: What that library is when it is not the driver's own (a demo's fake), for the report.
        self.dcmi_kind = dcmi_kind
        #: The backend npuwatch reads chips through here (``auto``, ``dcmi`` or ``npu-smi``).
        self.chip_backend = chip_backend  # validated by FeedOptions.chip_backend
        self._dcmi_opener = dcmi_opener
        self._dcmi_opened: List[ClosableSource] = []  # every DCMI source opened: close_dcmi() ends them
        self._values: Dict[str, Any] = {}
        self._locks: Dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def __repr__(self) -> str:
        return f"Machine({self.sysroot!r}, npu_smi={str(self.npu_smi_path)!r})"

    @property
    def environ(self) -> Any:
        """The machine's environment variables (a mapping)."""
        return self.sysroot.environ

    @property
    def runs_tree_code(self) -> bool:
        """Whether the machine's own programs and libraries may run: the live machine, or a
        ``--root`` tree trusted with ``--trust-root`` (``probes.tree_trust``)."""
        return runs_tree_code(self.sysroot.root, self.environ)

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
        """Whether any NPU may be here: an Ascend PCI function, a ``/dev/davinciN`` node, or a PCI
        folder or ``/dev`` this user cannot read (then nothing says there is none: the checks run)."""
        if self.pci().functions or self.dev().davinci_ids or self.dev().unreadable:
            return True
        return self.unreadable(PCI_DEVICES_DIR) is not None

    def unreadable(self, path: Union[str, PurePosixPath]) -> Optional[PurePosixPath]:
        """The first folder on the way to ``path`` (or ``path`` itself) this user may not read,
        or ``None`` when every step reads: ``path`` is there, or really absent.

        A driver installed without ``--install-for-all`` keeps its folders to root and its group:
        a file missing behind such a folder is "cannot read", never "not installed".
        """
        parts = PurePosixPath("/", str(path)).parts
        for depth in range(1, len(parts) + 1):
            step = PurePosixPath(*parts[:depth])
            real = self.sysroot.path(step)
            try:
                mode = os.stat(real).st_mode
            except OSError:
                return None  # absent (a step above it was readable)
            last = depth == len(parts)
            need = (os.X_OK | (os.R_OK if last else 0)) if stat.S_ISDIR(mode) else os.R_OK
            if not os.access(real, need):
                return step
        return None

    def cannot_read(self, blocked: PurePosixPath) -> Tuple[str, str]:
        """``cannot read X as this user (name)`` and what to do, for ``unreadable``'s answer."""
        uid = os.getuid()
        name = self.user_name(uid) or f"uid {uid}"
        info = self.install_info()
        group = (info.user_group if info is not None else None) or "HwHiAiUser"
        message = cannot_read(blocked, name)
        hint = (
            f"run as root (`sudo npuwatch doctor`), or add the user to the driver's group: "
            f"`sudo usermod -aG {group} {'$USER' if name.startswith('uid ') else name}`, "
            "then log in again; a driver installed without --install-for-all keeps its folders to root "
            "and that group: reinstall it with `--full --install-for-all` to open them to every user"
        )
        return message, hint

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
        return NpuSmi(self.npu_smi_path, timeout_s=self.timeout_s, withheld=self.npu_smi_withheld)

    def chip_source(self) -> NpuSmiSource:
        """The chip source the doctor reads chips through, as the sampler and ``check`` do: npu-smi
        with this machine's path and timeout; no logic-ID mapping, and error codes only when a
        check asks (``with_error_codes``), so the shared read costs one ``npu-smi info``."""
        return self._cached(
            "chip_source", lambda: NpuSmiSource(self.npu_smi(), logic_ids=False, error_codes=False)
        )

    def chip_reading(self) -> SourceReading:
        """The chip source read once: its reading, or its failure."""
        return self._cached("chip_reading", lambda: self.chip_source().read())

    def npu_smi_info(self) -> Union[NpuSmiOutput, NpuSmiFailure]:
        """``npu-smi info`` as it came (the chip source's one call): its output, or the explained
        failure, for the checks that explain npu-smi itself."""

        def call() -> Union[NpuSmiOutput, NpuSmiFailure]:
            self.chip_reading()
            raw = self.chip_source().last_call
            assert raw is not None  # the read above made the call
            return raw

        return self._cached("npu_smi_info", call)

    def info_table(self) -> Optional[ChipReading]:
        """The chips, processes and versions npu-smi gave (the chip source's reading); an empty
        reading, with the parser's warnings, when npu-smi answered without a chip table; ``None``
        when it gave none."""

        def read() -> Optional[ChipReading]:
            outcome = self.chip_reading()
            if outcome.reading is not None:
                return outcome.reading
            output = self.npu_smi_info()
            return parse_info(output.text).to_reading() if isinstance(output, NpuSmiOutput) else None

        return self._cached("info_table", read)

    def with_error_codes(self, reading: ChipReading, budget_s: float) -> ChipReading:
        """``reading`` with the error codes of its chips that are not OK, asked within ``budget_s``
        together: the chip source's own query, the one the dashboard and ``check`` use."""
        return self.chip_source().with_error_codes(reading, budget_s)

    def unreported_chips(self) -> Optional[Problem]:
        """Why npu-smi's table lists fewer chips than the machine has (PCI functions, device nodes,
        in a container its nodes), or ``None``: the rule ``npuwatch check`` and ``serve`` use."""

        def judge() -> Optional[Problem]:
            table = self.info_table()
            if table is None or not table.chips:
                return None
            container = self.container().in_container
            has = machine_chips(None if container else self.pci(), self.dev(), container)
            return unreported_chips(has, table.chips)

        return self._cached("unreported_chips", judge)

    def prints_container_pids(self) -> bool:
        """Whether ``npu-smi info`` has the ``Process id in container`` column (26.x, capture 008)."""
        output = self.npu_smi_info()
        return isinstance(output, NpuSmiOutput) and bool(_CONTAINER_PID_COLUMN.search(output.text))

    def process_place(self, process: NpuProcess) -> ProcessPlace:
        """Whether a process npu-smi lists runs in this container: one rule for every check.

        With the host's PIDs, the mount namespaces tell.  In a private PID namespace npu-smi's PIDs
        are the host's: ``Process id in container`` names our own process (its ``comm`` matches);
        ``NA`` there, with no such PID in this namespace, says it is another container's.
        """
        sysroot = self.sysroot
        host_pid = self.container().host_pid_namespace
        if host_pid is True:
            mine = sysroot.readlink("/proc/self/ns/mnt")
            theirs = sysroot.readlink(f"/proc/{process.pid}/ns/mnt")
            if mine is None or theirs is None:
                return ProcessPlace.UNKNOWN
            return ProcessPlace.HERE if mine == theirs else ProcessPlace.ELSEWHERE
        if host_pid is None:
            return ProcessPlace.UNKNOWN
        if process.container_pid is not None and process.name:
            comm = sysroot.read_line(f"/proc/{process.container_pid}/comm")
            if comm and (process.name.startswith(comm) or comm.startswith(process.name[:15])):
                return ProcessPlace.HERE
        if (
            process.container_pid is None
            and self.prints_container_pids()
            and not sysroot.lexists(f"/proc/{process.pid}")
        ):
            return ProcessPlace.ELSEWHERE
        return ProcessPlace.MAYBE_ELSEWHERE

    def fresh_chip_reading(self, timeout_s: float) -> SourceReading:
        """``npu-smi info`` read again now (not the cached reading), within ``timeout_s``: to compare
        with another backend's reading taken a moment before."""
        source = NpuSmiSource(self.npu_smi().with_timeout(timeout_s), logic_ids=False, error_codes=False)
        return source.read()

    # ---------------------------------------------------------------- DCMI

    def dcmi_first_read(self, timeout_s: float, start_grace_s: float) -> Tuple[ClosableSource, SourceReading]:
        """DCMI's source (``open_dcmi``) and its first read: made once, by whoever asks first.  The
        doctor asks as it begins, on a thread of its own (``doctor.command.diagnose``), so that a
        hung library's wait runs beside npu-smi's instead of after it (issue 27: one budget); the
        ``dcmi`` check then finds it done or under way.  ``close_dcmi()`` ends the source."""

        def read() -> Tuple[ClosableSource, SourceReading]:
            source = self.open_dcmi(timeout_s, start_grace_s)
            try:
                return source, source.read()
            except BaseException:  # a bug in the read: its worker ends here, the error goes on
                source.close()
                raise

        return self._cached("dcmi_first_read", read)

    def close_dcmi(self) -> None:
        """Close every DCMI source opened here (its worker killed, even mid-call); idempotent."""
        for source in list(self._dcmi_opened):
            source.close()

    def open_dcmi(self, timeout_s: float, start_grace_s: float) -> ClosableSource:
        """This machine's DCMI chip source, its worker process started now: one read is limited to
        ``timeout_s``, the worker's start to ``start_grace_s`` more.  Close it (``close_dcmi``
        closes every one opened)."""
        source = self._open_dcmi(timeout_s, start_grace_s)
        self._dcmi_opened.append(source)
        return source

    def _open_dcmi(self, timeout_s: float, start_grace_s: float) -> ClosableSource:
        if self._dcmi_opener is not None:
            return self._dcmi_opener(self, timeout_s, start_grace_s)
        from npuwatch.probes.dcmi.source import DcmiSource
        from npuwatch.probes.dcmi.worker import Worker

        environ = dict(self.environ)
        worker = Worker(
            self.dcmi_library, str(self.sysroot.root), timeout_s, environ, start_grace_s=start_grace_s
        )
        worker.start()
        return DcmiSource(worker, "dcmi")

    # ---------------------------------------------------------------- users

    def user_names(self) -> Dict[int, str]:
        """UID → name from the machine's ``/etc/passwd`` (the tree's, under ``--root``)."""

        def read() -> Dict[int, str]:
            names: Dict[int, str] = {}
            for line in (self.sysroot.read_text("/etc/passwd") or "").splitlines():
                fields = line.split(":")
                if len(fields) >= 3 and fields[2].isdigit():
                    names.setdefault(int(fields[2]), fields[0])
            return names

        return self._cached("user_names", read)

    def user_name(self, uid: int, fallback: Optional[str] = None) -> Optional[str]:
        """The machine's name for ``uid``: its /etc/passwd, then (live only) the user database,
        then ``fallback`` (live only: a tree's users are named by the tree alone, never by the
        host running npuwatch; issue 29 item 5)."""
        name = self.user_names().get(uid)
        if name is not None:
            return name
        if not self.sysroot.is_live:
            return None
        try:
            return pwd.getpwuid(uid).pw_name
        except (KeyError, OverflowError):
            return fallback

    def group_names(self) -> Dict[int, str]:
        """GID → name from the machine's ``/etc/group`` (the tree's, under ``--root``)."""

        def read() -> Dict[int, str]:
            names: Dict[int, str] = {}
            for line in (self.sysroot.read_text("/etc/group") or "").splitlines():
                fields = line.split(":")
                if len(fields) >= 3 and fields[2].isdigit():
                    names.setdefault(int(fields[2]), fields[0])
            return names

        return self._cached("group_names", read)

    def group_id(self, name: str) -> Optional[int]:
        """The GID the machine's ``/etc/group`` gives ``name`` (the tree's alone under ``--root``)."""
        found = [gid for gid, group in self.group_names().items() if group == name]
        if found or not self.sysroot.is_live:
            return found[0] if found else None
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            return None

    # ---------------------------------------------------------------- Python

    def python(self) -> PythonEnv:
        """The Python environment the user's jobs run in (packages, modules, version)."""
        from npuwatch.probes.python_env import PythonEnv

        return self._cached(
            "python", lambda: PythonEnv.for_sysroot(self.sysroot, interpreter=self.python_path)
        )
