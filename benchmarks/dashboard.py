"""Measures the dashboard's own cost: CPU % of one core and RSS over 60 s on the 16-chip A3 demo.

Run: python benchmarks/dashboard.py [--seconds 60] [--scenario a3] [--warmup 5]
     python benchmarks/dashboard.py --against OTHER_VENV/bin/npuwatch [--rounds 4] [--seconds 30]
The dashboard runs in a real terminal (a detached tmux session, 200×50) at a 1 s interval.
With ``--against``, this interpreter's npuwatch and the other one run in turns (A B A B …) and
each round's ratio is printed: a machine's speed drifts with its load, so only figures taken
side by side compare (old code vs new code: install the old one in its own venv).
Its own CPU time is read from /proc via psutil; the fake npu-smi runs as child processes,
whose CPU is not counted (that is the "npu-smi process itself", a cost npu-smi has anyway).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import List, Optional, Sequence, Tuple

import psutil

CPU_TARGET_PERCENT = 3.0
RSS_TARGET_MB = 120.0


@dataclass(frozen=True)
class DashboardFigures:
    """The dashboard process's own cost over ``seconds`` of a live ``--demo`` at a 1 s interval."""

    scenario: str
    seconds: float
    cpu_percent: float  # of one core, the dashboard's own process
    rss_peak_mb: float  # MiB, sampled once a second


def find_dashboard(session_pid: int, deadline_s: float) -> psutil.Process:
    """The npuwatch process inside the tmux pane (the pane's shell runs it)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pane = psutil.Process(session_pid)
        for proc in [pane, *pane.children(recursive=True)]:
            try:
                if "npuwatch" in " ".join(proc.cmdline()) and "npu-smi" not in " ".join(proc.cmdline()):
                    return proc
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.2)
    raise RuntimeError("the dashboard did not start")


def measure_dashboard(
    seconds: float = 60.0, scenario: str = "a3", warmup_s: float = 5.0, script: Optional[Path] = None
) -> DashboardFigures:
    """Run the dashboard in a detached 200×50 tmux session and read its CPU and RSS with psutil.

    ``script`` is the ``npuwatch`` to run; by default this interpreter's.
    """
    if shutil.which("tmux") is None:
        raise RuntimeError("tmux is needed (apt-get install tmux)")
    script = script or Path(sys.executable).parent / "npuwatch"
    # A socket of its own per run: a server killed by the previous run may still be exiting.
    socket = f"npuwatch-bench-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", socket]
    command = f"{script} --demo {scenario} --interval 1"
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", command], check=True)
    where = subprocess.run([*tmux, "display-message", "-p", "#{socket_path}"], capture_output=True, text=True)
    dashboard: Optional[psutil.Process] = None
    try:
        pane = subprocess.run([*tmux, "list-panes", "-F", "#{pane_pid}"], capture_output=True, text=True)
        dashboard = find_dashboard(int(pane.stdout.split()[0]), 30.0)
        time.sleep(warmup_s)
        before = dashboard.cpu_times()
        started = time.monotonic()
        rss_peak = 0
        while time.monotonic() - started < seconds:
            rss_peak = max(rss_peak, dashboard.memory_info().rss)
            time.sleep(1.0)
        after = dashboard.cpu_times()
        elapsed = time.monotonic() - started
    except psutil.NoSuchProcess:
        raise RuntimeError(f"the dashboard ({script}) exited during the measurement") from None
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        if dashboard is not None:
            end_process(dashboard)
        if where.stdout.strip():  # tmux leaves the socket file of a killed server behind
            Path(where.stdout.strip()).unlink(missing_ok=True)
    cpu_s = (after.user - before.user) + (after.system - before.system)
    return DashboardFigures(scenario, elapsed, 100 * cpu_s / elapsed, rss_peak / 2**20)


def end_process(process: psutil.Process, grace_s: float = 3.0) -> None:
    """End a dashboard its tmux server left running (the hang-up is a request: one that does not
    exit within ``grace_s`` is terminated, then killed), so no run outlives the benchmark."""
    try:
        process.wait(grace_s)
        return
    except psutil.TimeoutExpired:
        pass
    except psutil.NoSuchProcess:
        return
    for stop in (process.terminate, process.kill):
        try:
            stop()
            process.wait(grace_s)
            return
        except psutil.TimeoutExpired:
            continue
        except psutil.NoSuchProcess:
            return


def compare(
    against: Path, rounds: int, seconds: float, scenario: str, warmup_s: float
) -> List[Tuple[DashboardFigures, DashboardFigures]]:
    """``rounds`` pairs of runs, ``against`` first then this interpreter's npuwatch, each pair printed."""
    pairs = []
    for number in range(1, rounds + 1):
        other = measure_dashboard(seconds, scenario, warmup_s, against)
        this = measure_dashboard(seconds, scenario, warmup_s)
        pairs.append((other, this))
        print(
            f"round {number}: against {other.cpu_percent:.2f}%  this {this.cpu_percent:.2f}%  "
            f"ratio {this.cpu_percent / other.cpu_percent:.2f}  (load {os.getloadavg()[0]:.2f})",
            flush=True,
        )
    return pairs


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--scenario", default="a3")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument(
        "--against", type=Path, help="another npuwatch (e.g. the old code's venv) to run in turns"
    )
    parser.add_argument("--rounds", type=int, default=4, help="pairs of runs with --against")
    args = parser.parse_args(argv)
    if args.against is not None:
        try:
            pairs = compare(args.against, args.rounds, args.seconds, args.scenario, args.warmup)
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None
        ratios = [this.cpu_percent / other.cpu_percent for other, this in pairs]
        print(f"median ratio this/against over {len(pairs)} rounds: {median(ratios):.2f}")
        return 0
    try:
        figures = measure_dashboard(args.seconds, args.scenario, args.warmup)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None
    print(
        f"npuwatch dashboard benchmark · --demo {figures.scenario} · 1 s interval · {figures.seconds:.0f} s"
    )
    print(f"{'measure':<40} {'value':>10}  target")
    print(
        f"{'CPU, % of one core (own process)':<40} {figures.cpu_percent:>9.2f}%  < {CPU_TARGET_PERCENT:.0f}%"
    )
    print(f"{'RSS peak':<40} {figures.rss_peak_mb:>8.1f} MB  < {RSS_TARGET_MB:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
