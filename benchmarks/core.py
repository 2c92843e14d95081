"""Measures the core's cost: parsing an `npu-smi info` table, and one sampler tick without npu-smi.

Run: python benchmarks/core.py [--quick]   (prints a table; numbers are from this machine, this run)

Parse cost is wall time per table for captures of 1, 8 and 16 chips and for a 64-chip table the
simulator renders (the A3 demo machine four times over, as a 4-node A3 super-pod's npu-smi would
print it if one host saw them all).  The tick is the sampler's CPU time per ``sample()`` with a
source that parses a fixed table instead of running npu-smi: the parse, the PCIe merge, the host
probe and its psutil reads for every process row (pointed at live ``sleep`` processes), history.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, List, Tuple

from npuwatch.chip_source import SourceReading
from npuwatch.probes.host import HostProbe
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.sampler import Sampler

CAPTURES = Path(__file__).resolve().parent.parent / "tests" / "data" / "npu_smi"
PARSE_TARGET_US = 1000.0  # a 16-chip table
TICK_TARGET_US = 2000.0  # CPU per tick


@dataclass(frozen=True)
class ParseFigure:
    """Wall time to parse one table of ``chips`` chips."""

    label: str
    chips: int
    us_per_table: float


@dataclass(frozen=True)
class TickFigure:
    """CPU time of one sampler tick, npu-smi's own process excluded."""

    label: str
    chips: int
    processes: int
    cpu_us_per_tick: float


@dataclass(frozen=True)
class CoreFigures:
    """Every parse and tick figure of one run."""

    parse: Tuple[ParseFigure, ...]
    ticks: Tuple[TickFigure, ...]


def capture(number: str) -> str:
    return next(CAPTURES.glob(f"{number}_*.txt")).read_text()


def table_64_chips(elapsed_s: float = 300.0) -> str:
    """A 64-chip A3 table from the simulator: the `a3` scenario's 16 chips and 9 processes × 4."""
    from npuwatch.probes.simulator.catalog import get_scenario
    from npuwatch.probes.simulator.dynamics import machine_state
    from npuwatch.probes.simulator.render import render_info

    a3 = get_scenario("a3")
    chips = tuple(
        replace(
            chip,
            npu_id=chip.npu_id + 8 * node,
            phy_id=chip.phy_id + 16 * node,
            bus_id=f"{0x10 + node:04X}{chip.bus_id[4:]}",  # a PCI domain per node: Bus-Ids stay unique
        )
        for node in range(4)
        for chip in a3.chips
    )
    processes = tuple(
        replace(process, pid=process.pid + 100_000 * node, npu_id=process.npu_id + 8 * node)
        for node in range(4)
        for process in a3.processes
    )
    scenario = replace(a3, name="a3-x4", chips=chips, pci=(), processes=processes)
    return render_info(machine_state(scenario, elapsed_s))


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
    probe_name = "npu-smi"
    provides_details = False
    provides_processes = True
    provides_logic_ids = False

    def __init__(self, text: str) -> None:
        self.text = text

    def chip_details(self, npu_id: int, chip_id: int) -> None:
        return None

    def read(self) -> SourceReading:
        return SourceReading(parse_info(self.text).to_reading(), None, 0.0)


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


def measure_parse(quick: bool = False) -> Tuple[ParseFigure, ...]:
    tables = [
        ("1 chip (capture 092)", capture("092")),
        ("8 chips (capture 001)", capture("001")),
        ("16 chips (capture 100)", capture("100")),
        ("64 chips (simulated A3 × 4)", table_64_chips()),
    ]
    figures: List[ParseFigure] = []
    for label, text in tables:
        chips = len(parse_info(text).chips)
        number = max(10, (50 if quick else 200) * 8 // max(chips, 8))
        wall = per_call_us(lambda t=text: parse_info(t), time.perf_counter, 5 if quick else 7, number)
        figures.append(ParseFigure(label, chips, wall))
    return tuple(figures)


def measure_ticks(quick: bool = False) -> Tuple[TickFigure, ...]:
    figures: List[TickFigure] = []
    sleepers = [subprocess.Popen(["sleep", "600"]) for _ in range(16)]
    try:
        for label, number in (("8 chips (capture 001)", "001"), ("16 chips (capture 100)", "100")):
            text = with_live_processes(capture(number), [p.pid for p in sleepers])
            table = parse_info(text)
            with tempfile.TemporaryDirectory() as tmp:
                tree_for(text, Path(tmp))
                sampler = Sampler(
                    TextSource(text), Sysroot(tmp, environ={}), HostProbe(host_pid_namespace=True)
                )
                sampler.sample()  # warm: PCI scan and versions are cached after the first tick
                calls = 30 if quick else 100
                cpu = per_call_us(sampler.sample, time.process_time, repeat=5, number=calls)
            figures.append(TickFigure(label, len(table.chips), len(table.processes), cpu))
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    return tuple(figures)


def measure_core(quick: bool = False) -> CoreFigures:
    """Parse cost at 1, 8, 16 and 64 chips; sampler tick CPU at 8 and 16 chips."""
    return CoreFigures(parse=measure_parse(quick), ticks=measure_ticks(quick))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    figures = measure_core(parser.parse_args().quick)
    rows = [
        (f"parse `npu-smi info`, {p.label}", p.us_per_table, "µs wall per table", None) for p in figures.parse
    ]
    rows[2] = (*rows[2][:3], PARSE_TARGET_US)
    rows += [
        (
            f"sampler tick, {t.label}, {t.processes} processes",
            t.cpu_us_per_tick,
            "µs CPU per tick",
            TICK_TARGET_US,
        )
        for t in figures.ticks
    ]
    print(f"npuwatch core benchmark · Python {sys.version.split()[0]} · {sys.platform}")
    print(f"{'measure':<58} {'value':>9}  {'unit':<18} {'target':>7}  ratio")
    for name, value, unit, target in rows:
        ratio = f"{value / target:.2f}" if target else ""
        shown = f"{target:.0f}" if target else "—"
        print(f"{name:<58} {value:>9.1f}  {unit:<18} {shown:>7}  {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
