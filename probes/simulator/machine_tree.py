"""Provides ``build_tree``: a scenario's machine written as a sysroot tree (PCI, /dev, install
files, container markers, its Python), and ``SimulatedProcessLookup``: the demo's processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Tuple, Union

from npuwatch.model import ProcessHostInfo
from npuwatch.probes.host import FoundProcess
from npuwatch.probes.simulator.dynamics import process_cpu_percent
from npuwatch.probes.simulator.fake_npu_smi import elapsed_s
from npuwatch.probes.simulator.scenarios import ProcessSpec, Scenario, Versions

if TYPE_CHECKING:
    from npuwatch.probes.sysroot_builder import SysrootBuilder


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
