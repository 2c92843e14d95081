"""What the DCMI worker does before npuwatch's first tick: init, inventory, then the demo's refresh
function imported (not called), so the first tick does not pay for those imports."""

from __future__ import annotations

import time
from pathlib import Path

from npuwatch.probes.dcmi.worker import Worker, WorkerTick
from tests.conftest import REPO

DEADLINE_S = 30.0


def test_the_refresh_function_is_imported_before_the_first_tick_and_called_only_by_ticks(
    tmp_path: Path,
) -> None:
    log = tmp_path / "refresh.log"
    environ = {
        "PYTHONPATH": str(REPO),
        "STANDIN_MODE": "ok",
        "STANDIN_MARK": str(tmp_path / "mark"),
        "NPUWATCH_FAKE_DCMI_REFRESH": "tests.dcmi.refresh_probe:refresh",
        "REFRESH_PROBE_LOG": str(log),
    }
    with Worker(None, "/", 10.0, environ, opener="tests.dcmi.standin:open_reader") as worker:
        worker.start()
        deadline = time.monotonic() + DEADLINE_S
        while not log.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # a call, if one were made unasked, would be logged by now
        assert log.read_text().splitlines() == ["imported"]
        for _ in range(2):
            assert isinstance(worker.tick(), WorkerTick)
    assert log.read_text().splitlines() == ["imported", "refreshed", "refreshed"]


def test_a_tick_reports_the_cpu_its_refresh_function_took_and_none_without_one(tmp_path: Path) -> None:
    environ = {"PYTHONPATH": str(REPO), "STANDIN_MODE": "ok", "STANDIN_MARK": str(tmp_path / "mark")}
    refreshing = {
        **environ,
        "NPUWATCH_FAKE_DCMI_REFRESH": "tests.dcmi.refresh_probe:refresh",
        "REFRESH_PROBE_LOG": str(tmp_path / "refresh.log"),
    }
    for env, reported in ((refreshing, True), (environ, False)):
        with Worker(None, "/", 10.0, env, opener="tests.dcmi.standin:open_reader") as worker:
            tick = worker.tick()
            assert isinstance(tick, WorkerTick)
            assert ("refresh_cpu_s" in tick.timings) is reported
            assert tick.timings.get("refresh_cpu_s", 1.0) > 0
