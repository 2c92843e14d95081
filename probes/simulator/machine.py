"""Provides Simulation: a scenario built as a sysroot tree with a fake npu-smi inside it.

The tree is written by ``machine_tree.build_tree`` in a folder ``demo_folders`` picks; this
module starts, forks (``PendingSimulation``) and ends a demo.
"""

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
from typing import Dict, Mapping, NoReturn, Optional, Tuple, Type, cast

from npuwatch.probes.simulator.catalog import get_scenario, list_scenarios
from npuwatch.probes.simulator.default import DEFAULT_SCENARIO
from npuwatch.probes.simulator.demo_folders import (
    DEMO_PREFIX,
    OWNER_FILE,
    RAM_FOLDER,
    RAM_FOLDER_MIN_FREE,
    demo_folder,
    sweep_stale_demo_trees,
)
from npuwatch.probes.simulator.fake_npu_smi import STATE_FILE, elapsed_s
from npuwatch.probes.simulator.machine_tree import CANN_PYTHON_DEPS, SimulatedProcessLookup, build_tree
from npuwatch.probes.simulator.scenarios import Scenario
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.tree_trust import TRUST_VARIABLE

__all__ = [
    "CANN_PYTHON_DEPS",
    "DEMO_PREFIX",
    "OWNER_FILE",
    "RAM_FOLDER",
    "RAM_FOLDER_MIN_FREE",
    "PendingSimulation",
    "SimulatedProcessLookup",
    "Simulation",
    "build_tree",
    "demo_folder",
    "list_scenarios",
    "sweep_stale_demo_trees",
]

NPU_SMI_PATH = PurePosixPath("/usr/local/bin/npu-smi")

_SCRIPT = """#!{python}
# npuwatch demo: a simulated npu-smi (scenario {scenario}); see npuwatch.probes.simulator.
import sys
from pathlib import Path

from npuwatch.probes.simulator.fake_npu_smi import main

sys.exit(main(sys.argv[1:], Path({directory!r})))
"""


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
    from npuwatch.probes.simulator.dcmi_fake.install import install as install_fake_dcmi

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
