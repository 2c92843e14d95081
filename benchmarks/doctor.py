"""Measures how long `npuwatch doctor` takes on a healthy simulated 16-chip machine (target < 5 s).

Run: python benchmarks/doctor.py [--runs N]   (numbers are from this machine, this run)

Each run is the whole command as a user types it, `npuwatch doctor --demo a3 --json`, so it
includes starting Python and building the simulated tree; the checks' own time (the report's
``duration_s``) is printed beside it.  The fake npu-smi is a Python script, so every call it
answers costs a Python start-up that a real npu-smi does not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import List


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scenario", default="a3")
    options = parser.parse_args()
    walls: List[float] = []
    checks: List[float] = []
    slowest = ""
    for _ in range(options.runs):
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "npuwatch", "doctor", "--demo", options.scenario, "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        walls.append(time.perf_counter() - started)
        document = json.loads(proc.stdout)
        checks.append(document["duration_s"])
        top = max(document["results"], key=lambda r: r["duration_s"])
        slowest = f"{top['id']} {top['duration_s']:.3f} s"
        print(f"exit {proc.returncode}", file=sys.stderr)
    print(f"npuwatch doctor --demo {options.scenario}: {options.runs} runs")
    print(f"  whole command  median {statistics.median(walls):.2f} s  max {max(walls):.2f} s")
    print(f"  checks only    median {statistics.median(checks):.2f} s  max {max(checks):.2f} s")
    print(f"  slowest check in the last run: {slowest}")
    print("  target: under 5 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
