"""Test helpers for doctor checks: a healthy simulated machine to break one piece at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Optional

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding
from npuwatch.probes.simulator import Simulation
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder

NPU_SMI = "/usr/local/bin/npu-smi"


class TestMachine:
    """A simulated machine (``Simulation``) whose tree and environment a test may change.

    ``builder`` writes into the tree; ``environ`` is the machine's environment (a copy of what
    the simulator's ``set_env.sh`` exported); ``machine()`` gives a fresh ``Machine`` each call.
    """

    __test__ = False  # not a pytest class

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.root = sim.root
        self.builder = SysrootBuilder(sim.root)
        self.environ: Dict[str, str] = dict(sim.environ)
        self.npu_smi: Optional[Path] = sim.npu_smi

    def machine(self, *, timeout_s: float = 5.0, environ: Optional[Mapping[str, str]] = None) -> Machine:
        """A Machine over the tree, with ``environ`` (default: this machine's) and its npu-smi."""
        env = dict(self.environ if environ is None else environ)
        return Machine(Sysroot(self.root, environ=env), self.npu_smi, timeout_s=timeout_s)

    def run(self, check: Check, **options: object) -> Finding:
        """Run one check's function directly (no engine) on a fresh Machine."""
        return check.run(self.machine(**options))  # type: ignore[arg-type]

    def scripted_npu_smi(
        self, stdout: str = "", stderr: str = "", exit_code: int = 0, sleep_s: float = 0.0
    ) -> Path:
        """Replace npu-smi by a script that prints ``stdout``/``stderr`` and exits ``exit_code``."""
        out = self.builder.write_file("/usr/local/bin/npu-smi.stdout", stdout)
        err = self.builder.write_file("/usr/local/bin/npu-smi.stderr", stderr)
        script = "#!/bin/sh\n"
        if sleep_s:
            script += f"sleep {sleep_s}\n"
        script += f"cat '{out}'\ncat '{err}' >&2\nexit {exit_code}\n"
        self.npu_smi = self.builder.install_executable(NPU_SMI, script)
        return self.npu_smi

    def remove(self, machine_path: str) -> None:
        """Delete a file, link or folder of the tree."""
        import shutil

        target = self.builder.path(machine_path)
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            shutil.rmtree(target)


def simulated(tmp_path: Path, scenario: str = "910b-training") -> TestMachine:
    """A healthy (or ``scenario``) simulated machine built under ``tmp_path``."""
    sim = Simulation.start(scenario, workdir=tmp_path / "root", started_at=1_700_000_000.0)
    return TestMachine(sim)
