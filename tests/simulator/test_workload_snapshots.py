"""``npuwatch snapshot --json --demo <scenario>`` after the onset says what each chip is limited by.

The issue's "Done when", end to end through the command line: the demo's fake DCMI library (the
default backend of a demo) and ``--backend npu-smi`` where the class's inputs exist there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List, Optional

import pytest

Chip = Dict[str, Any]


def _snapshot(scenario: str, at_s: float, backend: Optional[str] = None) -> Dict[str, Any]:
    command = [sys.executable, "-m", "npuwatch", "snapshot", "--json", "--demo", scenario]
    if backend is not None:
        command += ["--backend", backend]
    env = {**os.environ, "NPUWATCH_SIM_NOW": str(at_s)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    data: Dict[str, Any] = json.loads(done.stdout)
    assert data["backend"] == (backend or "dcmi")
    return data


def _chips(data: Dict[str, Any]) -> Dict[int, Chip]:
    return {chip["npu_id"]: chip for chip in data["chips"]}


def _explained(chip: Chip, kind: str) -> Dict[str, Any]:
    """The chip's workload, checked to be ``kind`` with evidence, a summary and a next step."""
    workload: Dict[str, Any] = chip["workload"]
    assert workload is not None, chip
    assert workload["class"] == kind, (chip["npu_id"], workload)
    assert workload["evidence"] and workload["summary"] and workload["next_step"]
    assert workload["next_step"].endswith(".")
    return workload


def _classes(data: Dict[str, Any]) -> List[str]:
    return [chip["workload"]["class"] for chip in data["chips"]]


def test_throttling_flags_npu2_thermal_and_npu5_power_with_their_numbers() -> None:
    chips = _chips(_snapshot("throttling", 40))
    hot = _explained(chips[2], "compute-bound")
    assert hot["throttling"] == "thermal"
    evidence = hot["evidence"]
    assert evidence["aicore_freq_mhz"] < evidence["aicore_rated_freq_mhz"] == 1800
    assert evidence["temperature_c"] >= evidence["temperature_limit_c"] == 85
    assert "fans" in hot["next_step"] and "throttled (thermal)" in hot["summary"]
    capped = _explained(chips[5], "compute-bound")
    assert capped["throttling"] == "power"
    assert capped["evidence"]["power_w"] >= 0.95 * capped["evidence"]["rated_power_w"]
    assert capped["evidence"]["aicore_freq_mhz"] == 1500
    assert "power" in capped["next_step"]
    assert all(chips[n]["workload"]["throttling"] is None for n in chips if n not in (2, 5))


def test_memory_bound_every_chip_with_its_bandwidth_as_evidence() -> None:
    for chip in _snapshot("memory-bound", 40)["chips"]:
        workload = _explained(chip, "memory-bound")
        assert workload["evidence"]["hbm_bandwidth_percent"] >= 80
        assert 25 <= workload["evidence"]["aicore_percent"] <= 50
        assert "HBM bandwidth" in workload["summary"] and workload["needs_dcmi"] == []


def test_memory_bound_says_it_needs_dcmi_through_npu_smi() -> None:
    for chip in _snapshot("memory-bound", 40, "npu-smi")["chips"]:
        workload = chip["workload"]
        assert workload["class"] != "memory-bound"  # npu-smi has no HBM bandwidth to see it
        assert "memory-bound" in workload["needs_dcmi"]


def test_aicpu_fallback_on_npus_0_to_3_and_idle_elsewhere() -> None:
    data = _snapshot("aicpu-fallback", 40)
    assert _classes(data) == ["aicpu-bound"] * 4 + ["idle"] * 4
    workload = _explained(_chips(data)[0], "aicpu-bound")
    assert workload["evidence"]["aicpu_percent"] >= 60 and workload["evidence"]["aicore_percent"] <= 10
    assert "msprof" in workload["next_step"] and "AI CPU" in workload["summary"]


@pytest.mark.parametrize("backend", [None, "npu-smi"])
def test_input_bound_every_rank_names_its_busy_process(backend: Optional[str]) -> None:
    data = _snapshot("input-bound", 40, backend)
    pids = {p["npu_id"]: p["pid"] for p in data["processes"]}
    for npu_id, chip in _chips(data).items():
        workload = _explained(chip, "input-bound")
        assert workload["evidence"]["host_cpu_percent"] >= 300
        assert workload["evidence"]["pid"] == pids[npu_id]
        assert "data-loader" in workload["next_step"]


def test_hbm_leak_npus_0_and_1_hold_memory_with_no_process() -> None:
    data = _snapshot("hbm-leak", 40)
    assert _classes(data) == ["idle-holding-hbm"] * 2 + ["idle"] * 2 + ["compute-bound"] * 4
    workload = _explained(_chips(data)[0], "idle-holding-hbm")
    assert workload["evidence"]["hbm_used_mib"] > workload["evidence"]["idle_hbm_mib"] + 40_000
    assert not [p for p in data["processes"] if p["npu_id"] < 4]


def test_error_code_npu6_gives_huaweis_handling_class_and_what_to_do() -> None:
    for backend in (None, "npu-smi"):
        chips = _chips(_snapshot("error-code", 40, backend))
        assert chips[6]["health"] == "Alarm"
        (error,) = chips[6]["error_codes"]
        assert (error["code"], error["handling"]) == ("80E18005", "restart-npu")
        assert "parity" in error["text"] and "reset" in error["action"]
        assert all(not chips[n]["error_codes"] for n in chips if n != 6)
        assert chips[6]["workload"]["class"] == "idle"  # its job died with the fault


def test_training_reads_compute_bound_between_stalls_and_input_bound_in_one() -> None:
    assert _classes(_snapshot("910b-training", 120)) == ["compute-bound"] * 8
    stalled = _snapshot("910b-training", 150)
    assert _classes(stalled) == ["input-bound"] * 8
    assert all(c["workload"]["evidence"]["host_cpu_percent"] >= 300 for c in stalled["chips"])
