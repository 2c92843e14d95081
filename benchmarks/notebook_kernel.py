"""Measures the notebook view's cost: a Jupyter kernel's CPU % and RSS with `%npuwatch --demo a3` live.

Run: python benchmarks/notebook_kernel.py [--seconds 60] [--idle-seconds 10] [--warmup 5]

A real kernel (``jupyter_client``, the ``python3`` spec run by this interpreter) loads the
extension, then sits idle for ``--idle-seconds``: its CPU then is the baseline (heartbeat, the
IOPub thread).  Then ``%npuwatch --demo a3 --interval 1`` starts the live view; after the warm-up
the kernel process's own CPU time (psutil, user + system) is read over ``--seconds``, reported
as it is, nothing subtracted.  The fake npu-smi runs as the kernel's children and is not counted,
as in the dashboard benchmark.  This script plays the frontend: it reads every IOPub message
(the widget updates) as they come, so nothing queues up in the kernel.
Tests never assert a wall-clock time (docs/design.md §7); this prints the numbers.
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

import psutil


@dataclass(frozen=True)
class NotebookFigures:
    """The kernel process's own cost, idle and with the live view running."""

    idle_seconds: float
    idle_cpu_percent: float  # of one core: the kernel with the extension loaded, no view
    seconds: float
    view_cpu_percent: float  # of one core: the same kernel with the 16-chip view at 1 s
    rss_peak_mb: float  # MiB, the kernel while the view runs, sampled once a second
    iopub_messages_per_s: float  # what the view sends the frontend


def _execute(client: Any, code: str, timeout_s: float = 120.0) -> None:
    """Run one cell; raise with the traceback if it failed."""
    errors: list = []

    def hook(message: dict) -> None:
        if message["msg_type"] == "error":
            errors.append("\n".join(message["content"]["traceback"]))

    reply = client.execute_interactive(code, timeout=timeout_s, output_hook=hook)
    if reply["content"]["status"] != "ok" or errors:
        raise RuntimeError(f"the kernel failed to run {code!r}: {''.join(errors)}")


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _watch(client: Any, process: psutil.Process, seconds: float) -> Tuple[float, float, float, int]:
    """(elapsed s, own CPU s, RSS peak bytes, IOPub messages) over ``seconds``, draining IOPub."""
    before, started = _cpu_s(process), time.monotonic()
    rss_peak, messages, next_rss = 0, 0, started
    while True:
        now = time.monotonic()
        if now - started >= seconds:
            break
        if now >= next_rss:
            rss_peak = max(rss_peak, process.memory_info().rss)
            next_rss += 1.0
        try:
            client.get_iopub_msg(timeout=min(0.2, max(0.01, started + seconds - now)))
            messages += 1
        except queue.Empty:
            pass
    return time.monotonic() - started, _cpu_s(process) - before, rss_peak, messages


def _drain(client: Any) -> None:
    while True:
        try:
            client.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            return


def measure_notebook(
    seconds: float = 60.0, idle_seconds: float = 10.0, warmup_s: float = 5.0, scenario: str = "a3"
) -> NotebookFigures:
    """Start a kernel, measure it idle, then with the live view; always shut the kernel down."""
    from jupyter_client.manager import start_new_kernel

    # The kernel's stderr carries ipykernel's plain-TCP warning: noise in a benchmark's output.
    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=120, stderr=subprocess.DEVNULL)
    try:
        process = psutil.Process(manager.provisioner.pid)  # type: ignore[union-attr]
        _execute(client, "%load_ext npuwatch\nimport npuwatch.notebook, ipywidgets")
        _drain(client)
        time.sleep(min(2.0, warmup_s))
        idle_elapsed, idle_cpu, _, _ = _watch(client, process, idle_seconds)
        # The magic's result is the cell's value, so the view is displayed as a frontend shows it.
        _execute(
            client, f"view = get_ipython().run_line_magic('npuwatch', '--demo {scenario} --interval 1')\nview"
        )
        _watch(client, process, warmup_s)
        elapsed, cpu, rss_peak, messages = _watch(client, process, seconds)
        _execute(client, "view.stop()")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return NotebookFigures(
        idle_seconds=idle_elapsed,
        idle_cpu_percent=100 * idle_cpu / idle_elapsed,
        seconds=elapsed,
        view_cpu_percent=100 * cpu / elapsed,
        rss_peak_mb=rss_peak / 2**20,
        iopub_messages_per_s=messages / elapsed,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="view running (default 60)")
    parser.add_argument("--idle-seconds", type=float, default=10.0, help="baseline, no view (default 10)")
    parser.add_argument("--warmup", type=float, default=5.0, help="view running before measuring (default 5)")
    parser.add_argument("--scenario", default="a3")
    args = parser.parse_args(argv)
    figures = measure_notebook(args.seconds, args.idle_seconds, args.warmup, args.scenario)
    print(f"npuwatch notebook view in a Jupyter kernel · --demo {args.scenario} · 1 s interval")
    idle, view = figures.idle_cpu_percent, figures.view_cpu_percent
    print(f"  kernel idle (extension loaded)  {idle:6.2f} % of one core over {figures.idle_seconds:.0f} s")
    print(f"  kernel with the live view       {view:6.2f} % of one core over {figures.seconds:.0f} s")
    print(f"  kernel RSS peak                 {figures.rss_peak_mb:6.1f} MiB")
    print(f"  IOPub messages to the frontend  {figures.iopub_messages_per_s:6.1f} per second")
    return 0


if __name__ == "__main__":
    sys.exit(main())
