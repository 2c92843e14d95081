"""Measures what `npuwatch check` costs on top of a bare Python start, without npu-smi's own time.

`npuwatch check` runs every few seconds in every container, so its start-up is the product's
cost there.  This script times, in one run and interleaved (so drift hits every command alike),
the median wall time of N runs each of:

  python      ``python -c pass``: the interpreter's own start, the floor any Python tool pays;
  check       ``npuwatch check --root TREE``: the real command on a sysroot tree with eight chips'
              device nodes, whose ``/usr/local/bin/npu-smi`` is a two-line shell script that
              ``cat``s a real capture (tests/data/npu_smi/001, 8 × 910B2);
  npu-smi     that script run alone, started from Python the way the check's runner starts it.

    extra = check − python − npu-smi

is npuwatch's own cost: imports, argument parsing, the /dev scan, parsing the table, the verdict.
The fake npu-smi's cost is subtracted because a real npu-smi's time is the driver's, the same
for any tool that asks it (on real machines it dominates: 0.1-1 s).  The target is < 150 ms.
Tests never assert a wall-clock time (docs/design.md §7); this prints the numbers.

It also counts the modules each start loads (``-X importtime``): ``check`` against ``python -c pass``.

Run: python benchmarks/check_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from npuwatch.probes.sysroot_builder import SysrootBuilder

CAPTURE = next((Path(__file__).resolve().parent.parent / "tests" / "data" / "npu_smi").glob("001_*.txt"))
TARGET_MS = 150.0


@dataclass(frozen=True)
class CommandTime:
    """One command's wall times over the run, in ms."""

    name: str
    median_ms: float
    min_ms: float


@dataclass(frozen=True)
class StartupFigures:
    """What ``npuwatch check`` costs over a bare interpreter, measured in one run."""

    runs: int
    commands: Tuple[CommandTime, ...]
    python_ms: float  # median of ``python -c pass``
    check_ms: float  # median of ``npuwatch check``
    npu_smi_ms: float  # median of the fake npu-smi alone
    imports_ms: float  # ``import npuwatch.cli, npuwatch.check_command`` over bare Python
    extra_ms: float  # check − python − npu-smi: npuwatch's own cost
    python_modules: int  # modules ``python -c pass`` imports
    check_modules: int  # modules ``npuwatch check`` imports
    npuwatch_modules: int  # of those, npuwatch's own
    output: str  # the check's verdict line


def build_tree(root: Path) -> Path:
    """Eight chips' device nodes and an npu-smi that prints capture 001; returns the script."""
    builder = SysrootBuilder(root)
    builder.add_dev_nodes(range(8))
    capture = builder.write_file("/capture.txt", CAPTURE.read_text())
    return builder.install_executable("/usr/local/bin/npu-smi", f"#!/bin/sh\nexec cat {capture}\n")


def check_command(root: Path) -> List[str]:
    """The console script users put in HEALTHCHECKs; ``python -m npuwatch`` when it is not installed."""
    script = Path(sys.executable).parent / "npuwatch"
    head = [str(script)] if script.exists() else [sys.executable, "-m", "npuwatch"]
    return [*head, "check", "--root", str(root)]


def wall_s(argv: Sequence[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def imported_modules(argv: Sequence[str]) -> List[str]:
    """The modules a command imports, from ``PYTHONPROFILEIMPORTTIME`` (works for console scripts)."""
    env: Mapping[str, str] = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in out.stderr.splitlines() if line.startswith("import time:")]
    return [line.rsplit("|", 1)[-1].strip() for line in lines[1:]]  # the first is the header


def measure_startup(runs: int = 21) -> StartupFigures:
    """Median wall times of the four commands, interleaved, and their module counts."""
    with tempfile.TemporaryDirectory(prefix="npuwatch-check-bench-") as temp:
        root = Path(temp) / "root"
        npu_smi = build_tree(root)
        commands: Dict[str, List[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "npuwatch check": check_command(root),
            "npu-smi (fake, alone)": [str(npu_smi), "info"],
            "imports only": [sys.executable, "-c", "import npuwatch.cli, npuwatch.check_command"],
        }
        sanity = subprocess.run(commands["npuwatch check"], capture_output=True, text=True, check=False)
        if sanity.returncode != 0:
            raise RuntimeError(f"npuwatch check failed on the benchmark tree: {sanity.stdout}{sanity.stderr}")
        for argv in commands.values():  # warm the page cache and .pyc files
            wall_s(argv)
        times: Dict[str, List[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                times[name].append(wall_s(argv) * 1000)
        python_modules = imported_modules(commands["python -c pass"])
        check_modules = imported_modules(commands["npuwatch check"])
    median_ms = {name: statistics.median(values) for name, values in times.items()}
    return StartupFigures(
        runs=runs,
        commands=tuple(CommandTime(name, median_ms[name], min(times[name])) for name in commands),
        python_ms=median_ms["python -c pass"],
        check_ms=median_ms["npuwatch check"],
        npu_smi_ms=median_ms["npu-smi (fake, alone)"],
        imports_ms=median_ms["imports only"] - median_ms["python -c pass"],
        extra_ms=median_ms["npuwatch check"]
        - median_ms["python -c pass"]
        - median_ms["npu-smi (fake, alone)"],
        python_modules=len(python_modules),
        check_modules=len(check_modules),
        npuwatch_modules=sum(1 for name in check_modules if name.split(".")[0] == "npuwatch"),
        output=sanity.stdout.strip(),
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (default 21)")
    runs = parser.parse_args(argv).runs
    try:
        figures = measure_startup(runs)
    except RuntimeError as exc:
        print(exc)
        return 1
    print(f"npuwatch check start-up, median of {runs} runs each (Python {sys.version.split()[0]})")
    print(f"  {'command':<24}{'median ms':>10}{'min ms':>9}")
    for command in figures.commands:
        print(f"  {command.name:<24}{command.median_ms:>10.1f}{command.min_ms:>9.1f}")
    print(f"  output: {figures.output}")
    print(f"imports alone: {figures.imports_ms:.1f} ms over bare Python")
    print(
        f"modules imported: {figures.check_modules} by check ({figures.npuwatch_modules} npuwatch), "
        f"{figures.python_modules} by python -c pass"
    )
    verdict = "within" if figures.extra_ms < TARGET_MS else "OVER"
    extra = f"{figures.extra_ms:.1f} ms ({verdict} the {TARGET_MS:.0f} ms target)"
    print(f"extra = check - python - npu-smi = {extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
