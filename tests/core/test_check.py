"""Tests for `npuwatch check`: every scenario's verdict, --json, limits, --devices, broken npu-smi."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from npuwatch.check_command import add_arguments, run
from npuwatch.cli import EXIT_USAGE, main
from npuwatch.errors import UsageError
from npuwatch.health import _node_problems, check_health, check_source, judge_chips
from npuwatch.judge import Thresholds
from npuwatch.model import ChipIdentity, ChipSample, Health
from npuwatch.probes.devices import MANAGER_NODES, DevNode, DevNodes
from npuwatch.probes.npu_smi import NpuSmi
from npuwatch.probes.simulator import Simulation
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.verdict import ChipCheck, HealthVerdict, Problem, Reason
from tests.conftest import CAPTURES, REPO, capture_text

HEALTHY = {
    "910b-training": 8,
    "a3": 16,
    "310p-duo": 4,
    "pcie-degraded": 8,  # a degraded link is the doctor's business, not the health check's
    "950": 8,
    "idle": 8,
    "910b-wide": 8,
    # DCMI broken, npu-smi working: auto falls back, npu-smi alone never looks at DCMI.
    "dcmi-hang": 8,
    "dcmi-crash": 8,
    "dcmi-permission": 8,
    "dcmi-missing": 8,
    # What a chip is limited by is not a health problem; a throttling chip is warm, not past its limit.
    "throttling": 8,
    "memory-bound": 8,
    "aicpu-fallback": 8,
    "input-bound": 8,
    "hbm-leak": 8,
}
HEALTHY_LINE = re.compile(r"^healthy: (\d+)/(\d+) chips OK, max (\d+) °C$")


@pytest.fixture(autouse=True)
def trusted_trees(monkeypatch):
    """These trees carry a fake npu-smi the checks mean to run: trust them (NPUWATCH_TRUST_ROOT=1)."""
    monkeypatch.setenv("NPUWATCH_TRUST_ROOT", "1")


def check(capsys, *argv: str) -> tuple[int, str, str]:
    """`npuwatch check ARGV` through the real command line (needs cli.py's wiring of `check`)."""
    code = main(["check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def the_line(out: str) -> str:
    lines = out.splitlines()
    assert len(lines) == 1, out
    return lines[0]


def write_npu_smi(builder: SysrootBuilder, body: str) -> Path:
    return builder.install_executable("/usr/local/bin/npu-smi", f"#!/bin/sh\n{body}\n")


@pytest.fixture
def machine(tmp_path) -> SysrootBuilder:
    """A tree with eight chips' device nodes and no npu-smi yet."""
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes(range(8))
    return builder


def cat_capture(builder: SysrootBuilder, number: str, health: str = "exit 1") -> None:
    """npu-smi prints capture NUMBER for `info`; `info -t health …` runs ``health``."""
    path = builder.write_file("/capture.txt", capture_text(number))
    write_npu_smi(builder, f'if [ "$#" -gt 1 ]; then {health}; fi\ncat {path}')


# --- every simulator scenario ------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "chips"), HEALTHY.items())
def test_healthy_scenarios_exit_0_with_the_line(scenario, chips, capsys):
    code, out, err = check(capsys, "--demo", scenario)
    match = HEALTHY_LINE.match(the_line(out))
    assert code == 0, out + err
    assert match is not None, out
    assert int(match.group(1)) == int(match.group(2)) == chips
    assert 20 < int(match.group(3)) < 90
    assert err == ""


def test_chip_alarm_names_the_chip_and_its_error_code(capsys):
    code, out, err = check(capsys, "--demo", "chip-alarm")
    line = the_line(out)
    assert code == 1
    assert line.startswith("unhealthy: NPU 3 chip 0 Alarm (80E01801 → restart-business) — 7/8 chips OK, max ")
    assert "npu-smi info -t health -i 3 -c 0" in err
    assert "Huawei's handling of the code is restart-business: restart the job" in err


def test_error_code_scenario_says_what_huawei_does_with_the_code(capsys):
    code, out, err = check(capsys, "--demo", "error-code")
    assert code == 1
    assert the_line(out).startswith("unhealthy: NPU 6 chip 0 Alarm (80E18005 → restart-npu) — 7/8 chips OK")
    assert "Huawei's handling of the code is restart-npu: stop the jobs on it and reset the chip" in err


def test_npu_smi_hang_is_cut_at_the_timeout(capsys):
    code, out, err = check(capsys, "--demo", "npu-smi-hang", "--timeout", "0.5")
    assert code == 1
    assert the_line(out) == "unhealthy: npu-smi did not answer within 0.5 s and was killed"
    assert "dmesg" in err
    assert "Traceback" not in out + err


def test_no_driver_names_the_missing_nodes_and_the_dcmi_error(capsys):
    code, out, _ = check(capsys, "--demo", "no-driver")
    assert code == 1
    assert the_line(out) == (
        "unhealthy: no /dev/davinciN node; /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc missing; "
        "npu-smi failed with DCMI error -8005 (INNER_ERR)"
    )


def test_container_missing_nodes_names_the_manager_nodes(capsys):
    code, out, err = check(capsys, "--demo", "container-missing-nodes")
    assert code == 1
    assert the_line(out) == (
        "unhealthy: /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc missing; "
        "npu-smi failed with DCMI error -8005 (INNER_ERR)"
    )
    assert "--device /dev/davinci_manager" in err


def test_every_scenario_exits_0_or_1_and_never_2(capsys):
    from npuwatch.probes.simulator import list_scenarios

    for scenario, _ in list_scenarios():
        code, out, err = check(capsys, "--demo", scenario, "--timeout", "0.5")
        assert code == (0 if scenario in HEALTHY else 1), scenario
        assert re.match(r"^(un)?healthy: \S", the_line(out)), out
        assert "Traceback" not in err


# --- --json --------------------------------------------------------------------------------------


def test_json_healthy_document(capsys):
    code, out, _ = check(capsys, "--demo", "310p-duo", "--json")
    doc = json.loads(out)
    assert code == 0
    assert set(doc) == {
        "schema", "healthy", "exit_code", "line", "source", "chips_ok", "chips_total",
        "max_temperature_c", "problems", "chips", "selftest", "duration_s", "notes",
        "backend", "backend_note",
    }  # fmt: skip
    assert doc["backend"] in ("dcmi", "npu-smi")
    assert doc["backend_note"] is None
    assert doc["schema"] == "npuwatch/check/v1"
    assert doc["healthy"] is True
    assert doc["exit_code"] == 0
    assert doc["source"] == "demo:310p-duo"
    assert doc["chips_ok"] == doc["chips_total"] == 4
    assert doc["problems"] == []
    assert doc["selftest"] is None
    assert doc["max_temperature_c"] == max(c["temperature_c"] for c in doc["chips"])
    assert [(c["npu_id"], c["chip_id"]) for c in doc["chips"]] == [(2, 0), (2, 1), (5, 0), (5, 1)]
    first = doc["chips"][0]
    assert set(first) == {
        "npu_id",
        "chip_id",
        "name",
        "health",
        "temperature_c",
        "max_temp_c",
        "error_codes",
        "ok",
        "level",
        "reasons",
    }
    assert (first["name"], first["health"], first["max_temp_c"], first["ok"]) == ("310P3", "OK", 90.0, True)
    assert doc["line"].startswith("healthy: 4/4 chips OK, max ")


def test_json_unhealthy_document_lists_each_problem_with_its_reason(capsys):
    code, out, err = check(capsys, "--demo", "chip-alarm", "--json")
    doc = json.loads(out)
    assert code == 1
    assert err == ""  # --json keeps the hint inside the document
    assert doc["healthy"] is False
    assert doc["exit_code"] == 1
    assert (doc["chips_ok"], doc["chips_total"]) == (7, 8)
    (problem,) = doc["problems"]
    assert problem["reason"] == "chip-health"
    assert problem["message"] == "NPU 3 chip 0 Alarm (80E01801 → restart-business)"
    assert (problem["npu_id"], problem["chip_id"]) == (3, 0)
    assert "npu-smi info -t health -i 3 -c 0" in problem["hint"]
    chip3 = next(c for c in doc["chips"] if c["npu_id"] == 3)
    assert chip3["health"] == "Alarm"
    assert chip3["error_codes"] == ["80E01801"]


def test_json_for_an_environment_problem(capsys):
    code, out, _ = check(capsys, "--demo", "no-driver", "--json")
    doc = json.loads(out)
    assert code == 1
    assert [p["reason"] for p in doc["problems"]] == ["device-nodes", "device-nodes", "npu-smi"]
    assert doc["chips"] == [] and doc["chips_total"] == 0
    assert doc["max_temperature_c"] is None
    assert "DCMI internal error" in doc["problems"][-1]["hint"]


# --- temperature ---------------------------------------------------------------------------------


def test_default_limits_per_chip_family():
    critical = {
        name: Thresholds().temperature_limits_c(name)[1]
        for name in ("910B3", "Ascend910", "Ascend950DT", "910", "310P3", "310B4", None)
    }
    assert critical == {
        "910B3": 95.0,
        "Ascend910": 95.0,
        "Ascend950DT": 95.0,
        "910": 95.0,
        "310P3": 90.0,
        "310B4": 90.0,
        None: 95.0,
    }


def test_max_temp_below_the_current_temperature_is_unhealthy(capsys):
    code, out, err = check(capsys, "--demo", "910b-training", "--max-temp", "20")
    line = the_line(out)
    assert code == 1
    assert re.match(
        r"^unhealthy: NPU 0 chip 0 \d+ °C \(critical limit 20 °C\); "
        r"NPU 1 chip 0 \d+ °C \(critical limit 20 °C\); "
        r"NPU 2 chip 0 \d+ °C \(critical limit 20 °C\); \+5 more — 0/8 chips OK, max \d+ °C$",
        line,
    ), line
    assert "fans" in err


def test_max_temp_above_the_current_temperature_is_healthy(capsys):
    code, out, _ = check(capsys, "--demo", "910b-training", "--max-temp", "89.5")
    assert code == 0
    assert HEALTHY_LINE.match(the_line(out))


def test_a_hot_chip_fails_at_its_family_default(machine, capsys):
    # Capture 001 with NPU 0 at 97 °C: 2 °C over the 910 family's 95 °C.
    hot = capture_text("001").replace(
        "| OK            | 135.9       39 ", "| OK            | 135.9       97 ", 1
    )
    path = machine.write_file("/capture.txt", hot)
    write_npu_smi(machine, f"cat {path}")
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out) == "unhealthy: NPU 0 chip 0 97 °C (critical limit 95 °C) — 7/8 chips OK, max 97 °C"


# --- --devices -----------------------------------------------------------------------------------


def test_devices_limits_the_chips(capsys):
    code, out, _ = check(capsys, "--demo", "910b-training", "--devices", "0,1")
    assert code == 0
    assert the_line(out).startswith("healthy: 2/2 chips OK, max ")


def test_devices_without_the_alarmed_chip_are_healthy(capsys):
    code, out, _ = check(capsys, "--demo", "chip-alarm", "--devices", "0,1,2,4")
    assert code == 0
    assert the_line(out).startswith("healthy: 4/4 chips OK")


def test_devices_with_the_alarmed_chip_are_unhealthy(capsys):
    code, out, _ = check(capsys, "--demo", "chip-alarm", "--devices", "2,3")
    assert code == 1
    line = the_line(out)
    assert line.startswith("unhealthy: NPU 3 chip 0 Alarm (80E01801 → restart-business) — 1/2 chips OK")


@pytest.mark.parametrize(("backend", "lister"), [("npu-smi", "npu-smi"), ("dcmi", "DCMI")])
def test_a_device_the_source_does_not_list_is_unhealthy(capsys, backend, lister):
    code, out, _ = check(capsys, "--demo", "310p-duo", "--devices", "2,3", "--backend", backend)
    assert code == 1
    assert the_line(out).startswith(f"unhealthy: NPU 3 not listed by {lister} (it lists 2,5) — 2/2 chips OK")


# --- npu-smi missing, broken, or printing garbage ---------------------------------------------------


def test_missing_npu_smi_is_unhealthy_with_a_clear_message(machine, capsys):
    code, out, err = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out) == "unhealthy: npu-smi was not found"
    assert "install the Ascend driver" in err
    assert "Traceback" not in err


def test_npu_smi_path_that_does_not_exist(machine, capsys):
    code, out, _ = check(capsys, "--root", str(machine.root), "--npu-smi", "/nonexistent/npu-smi")
    assert code == 1
    assert the_line(out) == "unhealthy: npu-smi not found at /nonexistent/npu-smi"


def test_npu_smi_that_is_not_executable(machine, capsys):
    machine.write_file("/usr/local/bin/npu-smi", "not a program\n", mode=0o644)
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out).startswith("unhealthy: npu-smi at ")
    assert the_line(out).endswith("has no execute permission")


def test_npu_smi_printing_garbage(machine, capsys):
    write_npu_smi(machine, "echo 'Segmentation fault (core dumped)? no: just garbage'")
    code, out, err = check(capsys, "--root", str(machine.root))
    assert code == 1
    # The chip source's verdict, the same the dashboard and /healthz give (it used to say
    # "npu-smi info lists no chip" here alone).
    assert the_line(out) == "unhealthy: npu-smi printed no chip table"
    assert "Traceback" not in err


def test_npu_smi_failing_with_an_exit_code(machine, capsys):
    write_npu_smi(machine, "echo 'something broke' >&2; exit 3")
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out) == "unhealthy: npu-smi exited with code 3: something broke"


def test_the_error_code_query_failing_keeps_the_verdict(machine, capsys):
    cat_capture(machine, "041", health="echo 'ret is -8020'; exit 1")  # a 310B4 in Alarm
    machine.path("/dev/devmm_svm").unlink()  # 310B SoC boards have no devmm_svm
    for n in range(1, 8):  # and one chip: the other nodes would be chips npu-smi does not list
        machine.path(f"/dev/davinci{n}").unlink()
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out) == "unhealthy: NPU 0 chip 0 Alarm — 0/1 chips OK, max 65 °C"


def test_error_code_queries_share_one_short_budget(machine, capsys):
    # Three chips in Alarm whose `-t health` query hangs: one query uses the budget, none follows.
    alarms = capture_text("001").replace("| OK            |", "| Alarm         |", 3)
    path = machine.write_file("/capture.txt", alarms)
    log = machine.path("/calls.log")
    write_npu_smi(machine, f'if [ "$#" -gt 1 ]; then echo "$*" >> {log}; exec sleep 30; fi\ncat {path}')
    code, out, _ = check(capsys, "--root", str(machine.root), "--timeout", "0.5")
    assert code == 1
    assert the_line(out) == (
        "unhealthy: NPU 0 chip 0 Alarm; NPU 1 chip 0 Alarm; NPU 2 chip 0 Alarm — 5/8 chips OK, max 44 °C"
    )
    assert log.read_text().splitlines() == ["info -t health -i 0 -c 0"]


def test_devmm_svm_is_required_off_310b(machine, capsys):
    cat_capture(machine, "001")
    machine.path("/dev/devmm_svm").unlink()
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out).startswith("unhealthy: /dev/devmm_svm missing — 8/8 chips OK")


def test_a_directory_where_a_node_should_be(machine, capsys):
    # docker creates a directory when asked to bind-mount a device path the host lacks.
    cat_capture(machine, "001")
    machine.path("/dev/hisi_hdc").unlink()
    machine.path("/dev/hisi_hdc").mkdir()
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out).startswith("unhealthy: /dev/hisi_hdc is a directory, not a character device")


def test_nodes_this_user_cannot_open():
    # Built by hand: as root (CI containers) every node opens, whatever its mode.
    def node(name: str) -> DevNode:
        return DevNode(name, f"/dev/{name}", True, True, 0, 1000, "root", "HwHiAiUser", 0o660, False)

    names = ("davinci0", "davinci1", "davinci_manager", "devmm_svm", "hisi_hdc")
    nodes = DevNodes(davinci_ids=(0, 1), nodes={n: node(n) for n in names})
    (problem,) = _node_problems(nodes, MANAGER_NODES)
    assert problem.reason is Reason.DEVICE_NODES
    assert problem.message == (
        "no read/write access to /dev/davinci0, /dev/davinci1, /dev/davinci_manager … "
        "(root:HwHiAiUser mode 660)"
    )
    assert "HwHiAiUser" in problem.hint


# --- environment variables and other sources ------------------------------------------------------


def test_npuwatch_root_points_at_a_machine(monkeypatch, capsys):
    with Simulation.start("a3") as sim:
        monkeypatch.setenv("NPUWATCH_ROOT", str(sim.root))
        code, out, _ = check(capsys)
    assert code == 0
    assert the_line(out).startswith("healthy: 16/16 chips OK")


def test_npuwatch_npu_smi_and_timeout(machine, monkeypatch, capsys):
    script = write_npu_smi(machine, "sleep 30")
    monkeypatch.setenv("NPUWATCH_NPU_SMI", str(script))
    monkeypatch.setenv("NPUWATCH_TIMEOUT", "0.3")
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert code == 1
    assert the_line(out) == "unhealthy: npu-smi did not answer within 0.3 s and was killed"


def test_a_bad_npuwatch_timeout_is_unhealthy_not_a_crash(monkeypatch, capsys):
    monkeypatch.setenv("NPUWATCH_TIMEOUT", "soon")
    code, out, err = check(capsys, "--demo")
    assert code == 1
    assert the_line(out) == "unhealthy: NPUWATCH_TIMEOUT='soon' is not a number of seconds"
    assert "NPUWATCH_TIMEOUT=5" in err


def test_a_root_option_that_does_not_exist_is_a_usage_error_like_in_every_command(tmp_path, capsys):
    code, out, err = check(capsys, "--root", str(tmp_path / "nowhere"))
    assert code == EXIT_USAGE
    assert out == ""
    assert f"--root {tmp_path / 'nowhere'}: no such directory" in err


def test_replay_judges_a_capture(capsys):
    code, out, _ = check(capsys, "--replay", str(next(CAPTURES.glob("001_*.txt"))))
    assert code == 0
    assert the_line(out) == "healthy: 8/8 chips OK, max 44 °C"
    code, out, _ = check(capsys, "--replay", str(next(CAPTURES.glob("035_*.txt"))))
    assert code == 1
    assert the_line(out) == "unhealthy: npu-smi failed with DCMI error -8005 (INNER_ERR)"


def test_contradicting_options_are_a_usage_error(capsys):
    code, _, err = check(capsys, "--demo", "idle", "--root", "/")
    assert code == EXIT_USAGE
    assert "--demo brings its own machine" in err


def test_an_internal_error_is_one_line_and_exit_1(monkeypatch, capsys):
    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("npuwatch.check_command.check_health", broken)
    code, out, err = check(capsys, "--demo", "idle")
    assert code == 1
    assert the_line(out) == "unhealthy: internal error in npuwatch check: RuntimeError('boom')"
    assert "Traceback" not in err


# --- --selftest ------------------------------------------------------------------------------------

FAKE_RUNTIME = REPO / "tests" / "fakes" / "runtime"  # fake acl / torch_npu with fault injection


@pytest.fixture
def fake_runtime(monkeypatch):
    """The self-test's child imports the fake pyACL (two devices) from PYTHONPATH."""
    monkeypatch.setenv("PYTHONPATH", str(FAKE_RUNTIME))
    for name in [n for n in os.environ if n.startswith("NPUWATCH_FAKE_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_selftest_passing_keeps_the_check_healthy(machine, fake_runtime, capsys):
    cat_capture(machine, "001")
    code, out, _ = check(capsys, "--root", str(machine.root), "--selftest", "--json")
    doc = json.loads(out)
    assert code == 0, doc["line"]
    assert doc["line"] == "healthy: 8/8 chips OK, max 44 °C, self-test passed"
    assert doc["selftest"]["schema"] == "npuwatch/selftest/v1"
    assert doc["selftest"]["status"] == "pass"
    assert [d["device"] for d in doc["selftest"]["devices"]] == [0, 1]


def test_selftest_failing_is_unhealthy(machine, fake_runtime, capsys):
    cat_capture(machine, "001")
    fake_runtime.setenv("NPUWATCH_FAKE_FAULT", "memcpy:507033")
    code, out, err = check(capsys, "--root", str(machine.root), "--selftest")
    assert code == 1
    assert the_line(out).startswith(
        "unhealthy: self-test failed: device 0 copy H2D: acl.rt.memcpy_async(kind=1) returned 507033"
    )
    assert the_line(out).endswith(" — 8/8 chips OK, max 44 °C")
    assert "npuwatch selftest" in err


def test_selftest_without_a_runtime_is_unhealthy(machine, fake_runtime, capsys):
    # A probe that asks for --selftest in an image without CANN must not pass silently.
    cat_capture(machine, "001")
    fake_runtime.setenv("NPUWATCH_FAKE_HIDE", "acl,torch_npu")
    code, out, _ = check(capsys, "--root", str(machine.root), "--selftest")
    assert code == 1
    assert the_line(out).startswith("unhealthy: self-test skipped: import runtime: ")


def test_selftest_with_warnings_is_healthy(machine, monkeypatch, capsys):
    cat_capture(machine, "001")
    from npuwatch.probes.runtime.protocol import Step, StepStatus
    from npuwatch.selftest import DeviceRun, SelftestReport, StepResult

    warned = StepResult(Step.SET_DEVICE, StepStatus.WARN, 0.1, "slow", warnings=("slow",))
    report = SelftestReport("quick", "auto", "all", (DeviceRun(0, "acl", (warned,), 0.1),), 0.1, 60.0)
    calls = []

    def run_selftest(**kwargs):
        calls.append(kwargs)
        return report

    monkeypatch.setattr("npuwatch.selftest.run_selftest", run_selftest)
    code, out, _ = check(capsys, "--root", str(machine.root), "--selftest", "--devices", "1,0")
    assert code == 0
    assert the_line(out) == "healthy: 2/2 chips OK, max 39 °C, self-test passed with warnings"
    # The runtime numbers devices its own way: --devices (NPU IDs) does not narrow the self-test.
    assert calls[0]["devices"] == "all" and calls[0]["level"] == "quick"
    assert calls[0]["sysroot"].root == machine.root


def test_selftest_on_a_demo_machine_is_skipped_and_unhealthy(capsys):
    code, out, _ = check(capsys, "--demo", "idle", "--selftest", "--json")
    doc = json.loads(out)
    assert code == 1
    assert doc["problems"][0]["reason"] == "selftest"
    assert doc["problems"][0]["message"].startswith("self-test skipped: --demo idle simulates npu-smi")
    assert doc["selftest"]["status"] == "skip"


def test_selftest_is_not_run_on_a_machine_already_unhealthy(monkeypatch, capsys):
    def run_selftest(**_kwargs):
        raise AssertionError("the self-test must not run")

    monkeypatch.setattr("npuwatch.selftest.run_selftest", run_selftest)
    code, out, _ = check(capsys, "--demo", "chip-alarm", "--selftest")
    assert code == 1
    assert "self-test" not in out


# --- the verdict's line, unit level ----------------------------------------------------------------


def _chip(npu: int, temperature: int, health: Health = Health.OK) -> ChipCheck:
    return judge_chips([ChipSample(ChipIdentity(npu, 0, "910B3"), health, temperature_c=temperature)])[0]


def test_line_names_three_problems_and_counts_the_rest():
    problems = tuple(Problem(Reason.CHIP_HEALTH, f"NPU {n} chip 0 Critical") for n in range(5))
    chips = tuple(_chip(n, 40, Health.CRITICAL) for n in range(5))
    verdict = HealthVerdict(problems=problems, chips=chips)
    assert verdict.line == (
        "unhealthy: NPU 0 chip 0 Critical; NPU 1 chip 0 Critical; NPU 2 chip 0 Critical; +2 more "
        "— 0/5 chips OK, max 40 °C"
    )
    assert verdict.exit_code == 1


def test_line_without_known_temperatures():
    verdict = HealthVerdict(chips=(ChipCheck(0, 0, "310P3", Health.OK, None, 90.0),))
    assert verdict.line == "healthy: 1/1 chips OK"
    assert verdict.max_temperature_c is None
    assert verdict.exit_code == 0


def test_check_health_in_process(tmp_path):
    with Simulation.start("chip-alarm", workdir=tmp_path / "root") as sim:
        verdict = check_health(Sysroot(sim.root), check_source(NpuSmi(sim.npu_smi, timeout_s=5)), devices=[3])
    assert not verdict.healthy
    assert [(p.reason, p.npu_id) for p in verdict.problems] == [(Reason.CHIP_HEALTH, 3)]
    assert verdict.chips[0].error_codes == ("80E01801",)


# --- run(args) without the CLI: what cli.py's wiring relies on ---------------------------------


def bare_parser() -> argparse.ArgumentParser:
    """The shared option names cli.py gives every sub-command, plus check's own."""
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    parser.add_argument("--demo", nargs="?", const="910b-training")
    parser.add_argument("--root")
    parser.add_argument("--npu-smi", dest="npu_smi")
    parser.add_argument("--devices", type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--timeout", type=float)
    add_arguments(parser)
    return parser


def test_run_reads_missing_attributes_as_defaults(capsys):
    code = run(bare_parser().parse_args(["--demo", "idle", "--max-temp", "90"]), environ={})
    assert code == 0
    assert HEALTHY_LINE.match(the_line(capsys.readouterr().out))
    code = run(argparse.Namespace(), environ={"NPUWATCH_ROOT": "/nonexistent-root"})
    assert code == 1
    assert (
        the_line(capsys.readouterr().out)
        == "unhealthy: NPUWATCH_ROOT=/nonexistent-root: no such directory (give the folder a machine's "
        "files are read from, such as /)"
    )


def test_run_refuses_an_unknown_scenario_as_every_command_does():
    # The one rule (npuwatch.feeds): a usage error, which the CLI prints and exits 64 for.
    with pytest.raises(UsageError, match="unknown demo scenario 'bogus'"):
        run(argparse.Namespace(demo="bogus"), environ={})


def test_max_temp_rejects_nonsense():
    with pytest.raises(SystemExit):
        bare_parser().parse_args(["--max-temp", "hot"])


# --- start-up: the import graph stays tiny -------------------------------------------------------

HEAVY = (
    "textual", "rich", "ipywidgets", "IPython", "psutil",
    "npuwatch.sampler", "npuwatch.history", "npuwatch.replay", "npuwatch.doctor", "npuwatch.widgets",
    "npuwatch.selftest", "npuwatch.probes.simulator.machine", "npuwatch.probes.npu_smi.reports",
)  # fmt: skip


def test_check_loads_no_ui_library_and_no_sampler(machine):
    cat_capture(machine, "001")
    code = (
        "import sys; from npuwatch.cli import main; "
        f"code = main(['check', '--root', {str(machine.root)!r}]); "
        f"print(code, [m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def test_python_m_npuwatch_check(machine):
    cat_capture(machine, "001")
    out = subprocess.run(
        [sys.executable, "-m", "npuwatch", "check", "--root", str(machine.root)],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "healthy: 8/8 chips OK, max 44 °C\n"
    assert out.stderr == ""


def test_a_950_needs_no_devmm_svm(machine, capsys):
    # MindCluster does not mount /dev/devmm_svm for the 950 (docs/reference/driver-interfaces.md §1).
    cat_capture(machine, "037")
    machine.path("/dev/devmm_svm").unlink()
    code, out, _ = check(capsys, "--root", str(machine.root))
    assert (code, the_line(out)) == (0, "healthy: 8/8 chips OK, max 50 °C")


def _held_on_npu0(with_process_table: bool) -> str:
    """Capture 022 (910B4, 32 GiB, idle at 2654 MiB) with 20 GiB held on NPU 0, its process table
    kept ("No running processes found") or cut off (a source that read none)."""
    text = capture_text("022").replace("0    / 0          2654 / 32768", "0    / 0          20480/ 32768", 1)
    if not with_process_table:
        cut = "| NPU     Chip" if "| NPU     Chip" in text else "| No running"
        text = text[: text.index(cut)]
    return text


@pytest.mark.parametrize("with_process_table", [True, False])
def test_held_memory_is_judged_only_where_a_process_table_was_read(machine, capsys, with_process_table):
    path = machine.write_file("/capture.txt", _held_on_npu0(with_process_table))
    write_npu_smi(machine, f'if [ "$#" -gt 1 ]; then exit 1; fi\ncat {path}')
    _, out, _ = check(capsys, "--root", str(machine.root), "--json")
    chips = {(c["npu_id"], c["chip_id"]): c for c in json.loads(out)["chips"]}
    reasons = chips[(0, 0)]["reasons"]
    if with_process_table:
        assert any("held" in reason for reason in reasons), reasons
    else:  # no table read: "no process listed" is not "no process"
        assert not any("held" in reason for reason in reasons), reasons
