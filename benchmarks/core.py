"""Measures the core's cost: parsing an `npu-smi info` table, and one sampler tick without npu-smi.

Run: python benchmarks/core.py   (prints a table; numbers are from this machine, this run)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

from npuwatch.probes.host import HostProbe
from npuwatch.probes.npu_smi_table import parse_info
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.sampler import Sampler
from npuwatch.sources import SourceReading

CAPTURES = Path(__file__).resolve().parent.parent / "tests" / "data" / "npu_smi"


def capture(number: str) -> str:
    return next(CAPTURES.glob(f"{number}_*.txt")).read_text()


def per_call_us(
    fn: Callable[[], object], clock: Callable[[], float], repeat: int = 7, number: int = 200
) -> float:
    """Best-of-median: the median over `repeat` rounds of the mean of `number` calls, in µs."""
    rounds: List[float] = []
    for _ in range(repeat):
        started = clock()
        for _ in range(number):
            fn()
        rounds.append((clock() - started) / number * 1e6)
    return statistics.median(rounds)


class TextSource:
    """The live source minus the subprocess: parses the same text every tick."""

    label = "npu-smi"

    def __init__(self, text: str) -> None:
        self.text = text

    def read(self) -> SourceReading:
        return SourceReading(parse_info(self.text), None, 0.0)


def with_live_processes(text: str, pids: List[int]) -> str:
    """The capture with its process rows pointing at live host processes (named `sleep`)."""
    table = parse_info(text)
    for process, pid in zip(dict.fromkeys(p.pid for p in table.processes), pids):
        text = text.replace(f" {process} ", f" {str(pid).ljust(len(str(process)))} ")
    names = {p.name for p in table.processes if p.name}
    for name in names:
        text = text.replace(f" {name} ", f" {'sleep'.ljust(len(name))} ")
    return text


def tree_for(table_text: str, root: Path) -> None:
    """PCI functions for every Bus-Id in the table, so the tick merges real PCIe links."""
    builder = SysrootBuilder(root)
    for chip in parse_info(table_text).chips:
        if chip.identity.bus_id:
            builder.add_pci_function(chip.identity.bus_id.lower(), device_id=0xD802)
    builder.add_dev_nodes(range(len(parse_info(table_text).chips)))


def main() -> int:
    rows = []
    for label, number in (("1 chip (092)", "092"), ("8 chips (001)", "001"), ("16 chips (100)", "100")):
        text = capture(number)
        wall = per_call_us(lambda t=text: parse_info(t), time.perf_counter)
        rows.append((f"parse `npu-smi info`, {label}", wall, "µs wall per table", 1000.0))
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(16)]
    for label, number in (("8 chips, 15 processes", "001"), ("16 chips, 8 processes", "100")):
        text = with_live_processes(capture(number), [p.pid for p in sleepers])
        with tempfile.TemporaryDirectory() as tmp:
            tree_for(text, Path(tmp))
            sampler = Sampler(TextSource(text), Sysroot(tmp, environ={}), HostProbe(host_pid_namespace=True))
            sampler.sample()  # warm: PCI scan and versions are cached after the first tick
            cpu = per_call_us(sampler.sample, time.process_time, repeat=5, number=100)
        rows.append((f"sampler tick without npu-smi, {label}", cpu, "µs CPU per tick", 2000.0))
    for sleeper in sleepers:
        sleeper.kill()
        sleeper.wait()
    print(f"npuwatch core benchmark · Python {sys.version.split()[0]} · {sys.platform}")
    print(f"{'measure':<46} {'value':>10}  {'unit':<18} {'target':>8}  ratio")
    for name, value, unit, target in rows:
        print(f"{name:<46} {value:>10.1f}  {unit:<18} {target:>8.0f}  {value / target:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
