"""Provides Simulation: a scenario built as a sysroot tree with a fake npu-smi inside it."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Dict, Mapping, NoReturn, Optional, Tuple, Type, Union, cast

from npuwatch.model import ProcessHostInfo
from npuwatch.probes.host import FoundProcess
from npuwatch.probes.simulator.catalog import get_scenario, list_scenarios
from npuwatch.probes.simulator.default import DEFAULT_SCENARIO
from npuwatch.probes.simulator.dynamics import process_cpu_percent
from npuwatch.probes.simulator.fake_npu_smi import STATE_FILE, elapsed_s
from npuwatch.probes.simulator.scenarios import ProcessSpec, Scenario, Versions
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.tree_trust import TRUST_VARIABLE

if TYPE_CHECKING:
    from npuwatch.probes.sysroot_builder import SysrootBuilder

__all__ = ["PendingSimulation", "SimulatedProcessLookup", "Simulation", "build_tree", "list_scenarios"]

NPU_SMI_PATH = PurePosixPath("/usr/local/bin/npu-smi")

#: The temp folders a demo makes (``<prefix><scenario>-XXXX``) and the file naming their owner's PID.
DEMO_PREFIX = "npuwatch-demo-"
OWNER_FILE = "owner.pid"
#: Where a demo's tree goes when no ``TMPDIR`` (``TEMP``, ``TMP``) names a folder: a RAM-backed
#: one, when the machine has one that allows executables and has room.  A tree is about 660 small
#: files written at start (over 0.2 s on some disks, tens of ms in RAM), and the DCMI demo rewrites
#: its state file every tick; the fake npu-smi runs from the tree and the fake libdcmi.so is loaded
#: from it, so a ``noexec`` folder is never used.
RAM_FOLDER = "/dev/shm"
#: The room the RAM folder must have left to be used (a tree takes about 10 MB).
RAM_FOLDER_MIN_FREE = 256 * 1024 * 1024
_TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")

_SCRIPT = """#!{python}
# npuwatch demo: a simulated npu-smi (scenario {scenario}); see npuwatch.probes.simulator.
import sys
from pathlib import Path

from npuwatch.probes.simulator.fake_npu_smi import main

sys.exit(main(sys.argv[1:], Path({directory!r})))
"""


class SimulatedProcessLookup:
    """``ProcessLookup`` for the scenario's PIDs: the demo's processes are not real host ones."""

    def __init__(self, scenario: Scenario, started_at: float, seed: int) -> None:
        self.scenario = scenario
        self.started_at = started_at
        self.seed = seed
        self._by_pid: Dict[int, ProcessSpec] = {p.pid: p for p in scenario.processes}

    def _running(self, pid: int, now_s: float) -> Optional[Tuple[ProcessSpec, float]]:
        spec = self._by_pid.get(pid)
        if spec is None:
            return None
        since = now_s - spec.start_s
        if since < 0:
            return None
        if spec.period_s is not None:
            since = since % spec.period_s
        if spec.duration_s is not None and since >= spec.duration_s:
            return None
        return spec, now_s - since  # the demo second it (last) started

    def lookup(self, pid: int) -> Union[FoundProcess, str]:
        """The simulated task name, user, command, CPU %, RSS and start time of ``pid``."""
        now_s = elapsed_s(self.started_at)  # one instant for the whole answer
        found = self._running(pid, now_s)
        if found is None:
            return f"no process {pid} on this host (it exited, or it lives in another PID namespace)"
        spec, started_s = found
        info = ProcessHostInfo(
            user=spec.user,
            command=spec.command,
            cpu_percent=process_cpu_percent(spec, now_s, self.seed),
            rss_bytes=spec.rss_mib * 1024 * 1024,
            start_time_s=self.started_at + started_s,
            children=0,  # a simulated job is one process: its load is its own CPU %
            children_cpu_percent=0.0,
        )
        return FoundProcess(spec.name, info)


def _release(version: str) -> Tuple[int, ...]:
    """``8.1.RC1`` → ``(8, 1)``: the leading numbers, compared as numbers, not text."""
    numbers = []
    for part in version.split("."):
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers)


def build_tree(scenario: Scenario, root: Path) -> SysrootBuilder:
    """Write the scenario's machine (PCI, /dev, install files, container markers) under ``root``."""
    from npuwatch.probes.soc import soc_from_device_id
    from npuwatch.probes.sysroot_builder import SysrootBuilder

    builder = SysrootBuilder(root)
    numa = {0: 0, 1: 0, 2: 1, 3: 1}
    for pci in scenario.pci:
        bus = int(pci.bdf.split(":")[1], 16)
        builder.add_pci_function(
            pci.bdf,
            pci.device_id,
            subsystem_device_id=pci.subsystem_device_id,
            numa_node=numa.get(bus >> 6, 0),
            current_speed=pci.current_speed,
            max_speed=pci.max_speed,
            current_width=pci.current_width,
            max_width=pci.max_width,
            bound=scenario.driver_bound,
        )
    davinci = scenario.davinci_ids
    if davinci is None:
        davinci = tuple(chip.phy_id for chip in scenario.chips)
    builder.add_dev_nodes(davinci, managers=scenario.manager_nodes)
    if scenario.container is not None:
        builder.mark_container(scenario.container, host_pid=scenario.host_pid_namespace)
    else:
        builder.set_host_pid_namespace(scenario.host_pid_namespace)
    versions = scenario.versions
    # The range real 25.x/26.x drivers accept reaches the 7.8 firmware of the newest scenarios.
    builder.install_driver(versions.driver, firmware=versions.firmware, compatible_fw="[7.0.0,7.8.99]")
    layout = "cann" if _release(versions.cann) >= (8, 5) else "toolkit"  # CANN 8.5 moved the tree
    socs = {soc_from_device_id(pci.device_id) for pci in scenario.pci}
    builder.install_cann(versions.cann, layout, sourced=True, kernel_socs=sorted(s for s in socs if s))
    _install_python(builder, versions)
    return builder


#: What CANN's operator compiler imports (runtime-and-doctor.md §10 row 8), as pip names.
CANN_PYTHON_DEPS = (
    ("decorator", "5.1.1", "decorator"),
    ("sympy", "1.12", "sympy"),
    ("cffi", "1.16.0", "cffi"),
    ("protobuf", "4.25.3", "google.protobuf"),
    ("attrs", "23.2.0", "attr"),
    ("PyYAML", "6.0.1", "yaml"),
    ("psutil", "5.9.8", "psutil"),
    ("numpy", "1.26.4", "numpy"),
    ("scipy", "1.12.0", "scipy"),
    ("requests", "2.31.0", "requests"),
    ("absl-py", "2.1.0", "absl"),
)


def _install_python(builder: SysrootBuilder, versions: Versions) -> None:
    """The machine's Python: CANN's compiler dependencies and, when set, torch with torch_npu."""
    for name, version, module in CANN_PYTHON_DEPS:
        builder.install_python_package(name, version, modules=[module])
    if versions.torch is not None:
        builder.install_python_package(
            "torch", versions.torch, modules=["torch"],
            files={"torch/version.py": f"__version__ = '{versions.torch}'\ncuda = None\n"},
        )  # fmt: skip
    if versions.torch_npu is not None:
        builder.install_python_package("torch_npu", versions.torch_npu, modules=["torch_npu"])


class Simulation:
    """A running demo machine: its tree, its fake npu-smi, environment and process lookup.

    Use ``Simulation.start(name)``; ``close()`` (or leaving a ``with`` block) removes the tree.
    """

    def __init__(self, scenario: Scenario, root: Path, environ: Mapping[str, str], seed: int,
                 started_at: float, owns_root: bool) -> None:  # fmt: skip
        self.scenario = scenario
        self.root = root
        self.seed = seed
        self.started_at = started_at
        self.npu_smi = root / str(NPU_SMI_PATH).lstrip("/")
        # This process built the tree, so it trusts it: the trust is in the environment handed to
        # open_machine, never a file in the tree a copy could carry (probes.tree_trust).
        self.environ: Dict[str, str] = {**environ, TRUST_VARIABLE: "1"}
        self.process_lookup = SimulatedProcessLookup(scenario, started_at, seed)
        #: The DCMI library to load (a path, ``python:<module>``), ``None`` when the machine has none.
        self.dcmi_library: Optional[str] = None
        #: What that library is: "fake libdcmi.so (C, built with cc)", the stand-in and why, or none.
        self.dcmi_kind = "none"
        self._owns_root = owns_root
        self._temp_dir: Optional[Path] = root.parent if owns_root else None

    @classmethod
    def start(
        cls,
        scenario: str = DEFAULT_SCENARIO,
        workdir: Optional[Path] = None,
        seed: int = 0,
        started_at: Optional[float] = None,
    ) -> Simulation:
        """Build ``scenario`` (a name from ``list_scenarios()``) in ``workdir`` or a temp dir.

        ``started_at`` is the epoch second at which the scenario clock reads 0 (default: now
        minus the scenario's ``lead_in_s``); ``seed`` varies the noise.
        """
        chosen = get_scenario(scenario)  # ValueError listing the names, before any I/O
        owns_root = workdir is None
        if workdir is None:
            sweep_stale_demo_trees()  # the demo folder, and the default temp folder when it differs
            root = _make_demo_folder(chosen) / "root"
        else:
            root = Path(workdir)
        begun = time.time() - chosen.lead_in_s if started_at is None else started_at
        try:
            built = _fill(chosen, root, begun, seed)
        except BaseException:
            if owns_root:
                shutil.rmtree(root.parent, ignore_errors=True)
            raise
        return cls._of(chosen, root, built, seed, begun, owns_root)

    @classmethod
    def begin(cls, scenario: str = DEFAULT_SCENARIO, seed: int = 0) -> PendingSimulation:
        """Start building ``scenario`` in a temp dir in a child process; ``wait()`` gives the
        ``Simulation``.  The tree's writes then run beside the caller's own work (the dashboard
        imports its toolkit meanwhile) instead of competing with it for the interpreter.

        Where a child cannot be forked safely (no ``fork``, or other threads already run), the
        tree is built by ``wait()`` itself, as ``start`` builds it.  ``ValueError`` for an
        unknown scenario, before anything is written.
        """
        chosen = get_scenario(scenario)
        return PendingSimulation(chosen, seed)

    @classmethod
    def _of(cls, chosen: Scenario, root: Path, built: _Built, seed: int, begun: float,
            owns_root: bool) -> Simulation:  # fmt: skip
        environ, library, kind = built
        simulation = cls(chosen, root, environ, seed, begun, owns_root)
        simulation.dcmi_library, simulation.dcmi_kind = library, kind
        return simulation

    def sysroot(self) -> Sysroot:
        """A ``Sysroot`` over the tree with the simulated machine's environment."""
        return Sysroot(self.root, environ=dict(self.environ))

    def elapsed_s(self) -> float:
        """Seconds since the demo started (or the frozen ``NPUWATCH_SIM_NOW``)."""
        return elapsed_s(self.started_at)

    def close(self) -> None:
        """Remove the temporary tree (a ``workdir`` given by the caller is left in place)."""
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], *rest: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Simulation({self.scenario.name!r}, root={str(self.root)!r})"


#: What filling a tree gives, plain data (a forked builder sends it): the machine's environment
#: (with the DCMI library's), the library to load and what it is.
_Built = Tuple[Dict[str, str], Optional[str], str]


def _make_demo_folder(chosen: Scenario) -> Path:
    """A new temp folder for a demo's tree, naming this process as its owner."""
    temp = Path(tempfile.mkdtemp(prefix=f"{DEMO_PREFIX}{chosen.name}-", dir=demo_folder()))
    (temp / OWNER_FILE).write_text(f"{os.getpid()}\n")
    return temp


def _fill(chosen: Scenario, root: Path, begun: float, seed: int) -> _Built:
    """Write the scenario's machine, its fake npu-smi and its DCMI library under ``root``."""
    from npuwatch.probes.dcmi.fake.install import install as install_fake_dcmi

    builder = build_tree(chosen, root)
    state = {"scenario": chosen.name, "started_at": begun, "seed": seed}
    builder.write_file(NPU_SMI_PATH.parent / STATE_FILE, json.dumps(state) + "\n")
    directory = builder.path(NPU_SMI_PATH.parent)
    script = _SCRIPT.format(python=sys.executable, scenario=chosen.name, directory=str(directory))
    builder.install_executable(NPU_SMI_PATH, script)
    dcmi = install_fake_dcmi(chosen, root, directory, begun, seed)
    return {**builder.environ, **dcmi.environ}, dcmi.library, dcmi.kind


class PendingSimulation:
    """A demo machine being built by a forked child; ``wait()`` hands over the ``Simulation``.

    The temp folder is made (and named after this process) before the child starts, so
    ``close()`` can always remove it: it ends a child still writing and reaps it.  Use
    ``close()`` on every path; after ``wait()`` succeeded it does nothing (the ``Simulation``
    owns the tree then).  What building raised in the child is raised by ``wait()``.
    """

    def __init__(self, chosen: Scenario, seed: int) -> None:
        self._chosen = chosen
        self._seed = seed
        self._begun = time.time() - chosen.lead_in_s
        self._temp: Optional[Path] = None
        self._pid: Optional[int] = None
        self._pipe: Optional[int] = None
        self._temp = _make_demo_folder(chosen)
        try:
            if _may_fork():
                self._fork()
        except BaseException:
            self.close()
            raise

    def _fork(self) -> None:
        assert self._temp is not None
        reader, writer = os.pipe()
        try:
            pid = os.fork()
        except BaseException:
            os.close(reader)
            os.close(writer)
            raise
        if pid == 0:  # the child: never returns
            os.close(reader)
            _child_fill(writer, self._chosen, self._temp / "root", self._begun, self._seed)
        os.close(writer)
        self._pid, self._pipe = pid, reader

    def wait(self) -> Simulation:
        """The built ``Simulation`` (it owns the tree from here); raises what building raised."""
        if self._temp is None:
            raise RuntimeError("this demo machine was closed before it was taken")
        root = self._temp / "root"
        try:
            if self._pid is None:
                sweep_stale_demo_trees()
                built = _fill(self._chosen, root, self._begun, self._seed)
            else:
                built = self._child_result()
        except BaseException:
            self.close()
            raise
        self._temp = None  # handed over
        return Simulation._of(self._chosen, root, built, self._seed, self._begun, owns_root=True)

    def _child_result(self) -> _Built:
        assert self._pipe is not None
        chunks = []
        while True:
            chunk = os.read(self._pipe, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        status = self._reap()
        try:
            outcome, value = pickle.loads(b"".join(chunks))
        except Exception:  # nothing (the child was killed) or an answer that does not load
            raise RuntimeError(
                f"building the simulated machine {self._chosen.name!r} failed: its builder process "
                f"ended without an answer ({_status_text(status)})"
            ) from None
        if outcome != "ok":
            raise value
        return cast(_Built, value)

    def _reap(self) -> int:
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        if self._pid is None:
            return 0
        pid, self._pid = self._pid, None
        while True:
            try:
                return os.waitpid(pid, 0)[1]
            except ChildProcessError:
                return 0
            except InterruptedError:
                continue

    def close(self) -> None:
        """End a child still building, reap it and remove the tree, unless ``wait()`` took it."""
        if self._pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
        self._reap()
        if self._temp is not None:
            shutil.rmtree(self._temp, ignore_errors=True)
            self._temp = None


def _may_fork() -> bool:
    """Whether a child can be forked safely: ``fork`` exists and no other thread runs (a fork
    beside a running thread may copy a lock that thread holds)."""
    import threading

    return hasattr(os, "fork") and threading.active_count() == 1


def _child_fill(writer: int, chosen: Scenario, root: Path, begun: float, seed: int) -> NoReturn:
    """The forked child: fill ``root``, send ``("ok", built)`` or ``("error", exception)``, exit.

    ``os._exit`` always: the parent's exit handlers and buffered output are the parent's.
    """
    code = 1
    try:
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)  # the parent cleans up; the child just ends
        try:
            sweep_stale_demo_trees()
            payload: Tuple[str, object] = ("ok", _fill(chosen, root, begun, seed))
        except BaseException as exc:
            payload = ("error", exc)
        try:
            data = pickle.dumps(payload)
        except Exception:
            data = pickle.dumps(("error", RuntimeError(f"{type(payload[1]).__name__}: {payload[1]}")))
        with os.fdopen(writer, "wb") as pipe:
            pipe.write(data)
        code = 0
    finally:
        os._exit(code)


def _status_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def demo_folder(environ: Optional[Mapping[str, str]] = None, ram_folder: Optional[str] = None) -> Path:
    """The folder a demo's temporary tree goes in: the temp folder the user named (``TMPDIR``,
    ``TEMP``, ``TMP``), else ``ram_folder`` (``RAM_FOLDER``) when it is usable (a folder we
    may write in, not ``noexec``, with ``RAM_FOLDER_MIN_FREE`` left), else the default temp folder."""
    env = os.environ if environ is None else environ
    ram = RAM_FOLDER if ram_folder is None else ram_folder
    named = any(env.get(name) for name in _TEMP_VARIABLES)
    if not named and _usable_ram_folder(ram):
        return Path(ram)
    return Path(tempfile.gettempdir())


def _usable_ram_folder(folder: str) -> bool:
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):  # absent, or no statvfs (not POSIX)
        return False
    noexec = getattr(os, "ST_NOEXEC", 8)  # Linux's MS_NOEXEC: the flag statvfs reports
    return (
        os.path.isdir(folder)
        and os.access(folder, os.W_OK | os.X_OK)
        and not info.f_flag & (noexec | os.ST_RDONLY)
        and info.f_bavail * info.f_frsize >= RAM_FOLDER_MIN_FREE
    )


def sweep_stale_demo_trees(folder: Optional[Path] = None) -> None:
    """Remove demo trees a killed npuwatch left in ``folder``, else in the demo folder and the
    default temp folder (``kill -9`` skips its cleanup).

    Only this user's trees that name their owner, and only when that owner is gone or is no
    longer an npuwatch: a running demo's tree, a folder without the owner file and another
    user's tree are never touched.
    """
    folders = (
        [folder] if folder is not None else list(dict.fromkeys((demo_folder(), Path(tempfile.gettempdir()))))
    )
    for where in folders:
        try:
            candidates = list(where.glob(f"{DEMO_PREFIX}*"))
        except OSError:
            continue
        for tree in candidates:
            if _is_stale(tree):
                shutil.rmtree(tree, ignore_errors=True)


def _is_stale(tree: Path) -> bool:
    try:
        info = tree.lstat()
        if not tree.is_dir() or tree.is_symlink() or info.st_uid != os.getuid():
            return False
        pid = int((tree / OWNER_FILE).read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return pid != os.getpid() and not _is_npuwatch(pid)


def _is_npuwatch(pid: int) -> bool:
    """Whether ``pid`` runs and is an npuwatch (a recycled PID of another program does not count)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (or hidden): trust that the PID lives
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    return b"npuwatch" in cmdline or b"pytest" in cmdline or b"python" in cmdline
