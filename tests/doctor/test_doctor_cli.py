"""`npuwatch doctor` end to end through the CLI: the simulator's scenarios, JSON, options, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

from npuwatch.doctor.registry import CHECK_MODULES

IDS = [name.replace("_", "-") for name in CHECK_MODULES]


def doctor(*args: str) -> Tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "npuwatch", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/nonexistent"},
    )
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc.returncode, proc.stdout, proc.stderr


def doctor_json(*args: str) -> Tuple[int, Dict[str, Dict[str, object]], Dict[str, object]]:
    code, out, _ = doctor("--json", *args)
    document = json.loads(out)
    assert document["schema"] == "npuwatch/doctor/v1"
    assert document["exit_code"] == code
    return code, {r["id"]: r for r in document["results"]}, document


def test_list_names_every_check_in_run_order():
    code, out, _ = doctor("--list")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == IDS


def test_healthy_demo_passes():
    code, results, _ = doctor_json("--demo")
    bad = {i: (r["status"], r["summary"]) for i, r in results.items() if r["status"] not in ("pass", "skip")}
    assert bad == {}
    assert code == 0
    assert list(results) == IDS
    assert results["pci-devices"]["status"] == "pass"
    assert results["chip-health"]["status"] == "pass"


def test_json_results_follow_the_contract():
    _, results, document = doctor_json("--demo", "a3")
    assert document["has_hardware"] is True
    for result in results.values():
        assert {"id", "status", "summary", "details", "hint"} <= set(result)
        assert result["status"] in ("pass", "warn", "fail", "skip", "error")
        assert isinstance(result["details"], list)
        if result["status"] in ("warn", "fail"):
            assert result["hint"], result


@pytest.mark.parametrize(
    ("scenario", "failing", "words", "exit_code"),
    [
        ("no-driver", "driver-bound", ["devdrv_device_driver"], 2),
        ("no-driver", "device-nodes", ["/dev/davinci"], 2),
        ("container-missing-nodes", "container-mounts", ["--device /dev/davinci_manager"], 2),
        ("container-missing-nodes", "npu-smi", ["-8005"], 2),
        ("chip-alarm", "chip-health", ["NPU 3", "Alarm"], 2),
        ("pcie-degraded", "pcie-link", ["x8"], 1),
    ],
)
def test_broken_scenarios_name_the_failing_check_with_a_fix(scenario, failing, words, exit_code):
    code, results, _ = doctor_json("--demo", scenario, "--timeout", "2")
    result = results[failing]
    assert result["status"] == ("fail" if exit_code == 2 else "warn"), result
    text = f"{result['summary']} {result['hint']} {' '.join(result['details'])}"
    for word in words:
        assert word in text, (word, result)
    assert result["hint"]
    assert code == exit_code


def test_hung_npu_smi_is_a_failure_not_a_hang():
    code, results, _ = doctor_json("--demo", "npu-smi-hang", "--timeout", "1")
    assert code == 2
    assert results["npu-smi"]["status"] == "fail"
    assert "1 s" in results["npu-smi"]["summary"]
    assert results["chip-health"]["status"] == "skip"


def test_text_report_groups_and_hints():
    code, out, _ = doctor("--demo", "chip-alarm")
    assert code == 2
    sections = [
        line for line in out.splitlines() if line in ("Hardware", "Driver", "CANN", "Frameworks", "Container")
    ]
    assert sections == ["Hardware", "Driver", "CANN", "Frameworks", "Container"]
    assert "fix:" in out
    assert out.rstrip().endswith("(exit 2)")


def test_only_and_skip_choose_checks():
    code, results, _ = doctor_json("--demo", "--only", "pci-devices,chip-health")
    assert list(results) == ["pci-devices", "chip-health"]
    assert code == 0
    _, results, _ = doctor_json("--demo", "--skip", "chip-health")
    assert "chip-health" not in results and len(results) == len(IDS) - 1


@pytest.mark.parametrize("args", [["--only", "no-such-check"], ["--replay", "/etc/hostname"]])
def test_bad_options_exit_64(args: List[str]):
    code, _, err = doctor(*args)
    assert code == 64
    assert "npuwatch:" in err


def test_machine_without_npu_says_so_and_skips_hardware(tmp_path):
    code, out, _ = doctor("--root", str(tmp_path))
    assert "No Ascend NPU was found on this machine" in out
    _, results, document = doctor_json("--root", str(tmp_path))
    assert document["has_hardware"] is False
    assert results["pci-devices"]["status"] == "fail"
    for check in ("driver-bound", "device-nodes", "chip-health", "pcie-link"):
        assert results[check]["status"] == "skip", check
    assert code == 2


def test_a_container_without_npu_skips_the_mount_check_instead_of_asking_for_davinci0(tmp_path):
    (tmp_path / ".dockerenv").write_text("")
    _code, out, _ = doctor("--root", str(tmp_path))
    assert "No Ascend NPU was found on this machine" in out
    assert "--device /dev/davinci0" not in out
    _, results, _ = doctor_json("--root", str(tmp_path))
    assert results["container-mounts"]["status"] == "skip"
    assert results["container-mounts"]["summary"] == "no Ascend NPU on this machine"
