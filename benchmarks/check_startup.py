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
Tests never assert a wall-clock time (DESIGN §7); this prints the numbers.

Run: python benchmarks/check_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

from npuwatch.probes.sysroot_builder import SysrootBuilder

CAPTURE = next((Path(__file__).resolve().parent.parent / "tests" / "data" / "npu_smi").glob("001_*.txt"))
TARGET_MS = 150.0


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each command (default 21)")
    runs = parser.parse_args().runs
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
            print(f"npuwatch check failed on the benchmark tree: {sanity.stdout}{sanity.stderr}")
            return 1
        for argv in commands.values():  # warm the page cache and .pyc files
            wall_s(argv)
        times: Dict[str, List[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, argv in commands.items():
                times[name].append(wall_s(argv))
    median_ms = {name: statistics.median(values) * 1000 for name, values in times.items()}
    extra_ms = median_ms["npuwatch check"] - median_ms["python -c pass"] - median_ms["npu-smi (fake, alone)"]
    print(f"npuwatch check start-up, median of {runs} runs each (Python {sys.version.split()[0]})")
    print(f"  {'command':<24}{'median ms':>10}{'min ms':>9}")
    for name, values in times.items():
        print(f"  {name:<24}{median_ms[name]:>10.1f}{min(values) * 1000:>9.1f}")
    print(f"  output: {sanity.stdout.strip()}")
    imports_ms = median_ms["imports only"] - median_ms["python -c pass"]
    print(f"imports alone: {imports_ms:.1f} ms over bare Python")
    verdict = "within" if extra_ms < TARGET_MS else "OVER"
    print(f"extra = check - python - npu-smi = {extra_ms:.1f} ms ({verdict} the {TARGET_MS:.0f} ms target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
