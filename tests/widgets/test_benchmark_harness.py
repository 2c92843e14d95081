"""benchmarks/dashboard.py ends every dashboard it started, even one that ignores the hang-up."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import psutil

HARNESS = Path(__file__).resolve().parents[2] / "benchmarks" / "dashboard.py"


def test_a_dashboard_that_ignores_hangup_and_terminate_is_still_ended() -> None:
    spec = importlib.util.spec_from_file_location("bench_dashboard", HARNESS)
    assert spec is not None and spec.loader is not None
    harness = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = harness  # its dataclasses look their module up
    spec.loader.exec_module(harness)
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\n"
            "for s in (signal.SIGHUP, signal.SIGTERM): signal.signal(s, signal.SIG_IGN)\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline().strip() == "ready"
        harness.end_process(psutil.Process(stubborn.pid), grace_s=0.5)
        assert stubborn.wait(timeout=10) is not None
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait()
