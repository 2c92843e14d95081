"""The pyACL self-test against the fake pyACL: every step, each injected fault, cleanup, hangs, devices."""

from __future__ import annotations

import pytest

from npuwatch.probes.runtime.protocol import MAIN_STEPS, Step, StepStatus
from npuwatch.selftest import run_selftest
from npuwatch.selftest.report_json import to_dict
from tests.selftest.helpers import child_pids, fake_env, ledgers, live_members, unbalanced

ALL_STEPS = [Step.IMPORT, *MAIN_STEPS, Step.CLEANUP]


def test_pass_reports_every_step_with_timings_and_rates(tmp_path):
    report = run_selftest(devices=[0], environ=fake_env(tmp_path), timeout_s=30)
    (run,) = report.runs
    assert report.exit_code == 0, to_dict(report)
    assert run.device == 0 and run.backend == "acl"
    assert [r.step for r in run.steps] == ALL_STEPS
    assert all(r.status is StepStatus.PASS for r in run.steps)
    assert all(r.duration_s is not None and r.duration_s >= 0 for r in run.steps)
    for step in (Step.COPY_H2D, Step.COPY_D2H, Step.COPY_D2D):
        metrics = run.result(step).metrics
        assert metrics["best_gb_s"] > 0 and metrics["median_gb_s"] > 0
        assert metrics["bytes"] == 16 << 20
        assert len(metrics["sizes"][0]["samples_ms"]) == 3
    assert "verified" in run.result(Step.COPY_D2H).detail
    kernel = run.result(Step.KERNEL)
    assert kernel.metrics["elements"] == 1 << 20 and kernel.metrics["kernel_ms"] > 0
    assert "result verified" in kernel.detail
    # The fake's events tick in 1 µs: the measured resolution is a whole number of ticks (the
    # smallest gap between distinct readings; on a busy machine those can be several ticks apart).
    resolution_ticks = run.result(Step.EVENTS).metrics["resolution_ms"] / 0.001
    assert resolution_ticks >= 1 and resolution_ticks == pytest.approx(round(resolution_ticks))
    assert run.facts["soc_name"] == "Ascend910B3" and run.facts["device_count"] == 2
    (ledger,) = ledgers(tmp_path)
    assert unbalanced(ledger, kinds=(*ledger["opened"], "executor")) == {}
    assert ledger["errors"] == []


def test_all_devices_runs_one_child_per_device(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_DEVICE_COUNT="3")
    report = run_selftest("all", environ=env, timeout_s=30)
    assert [run.device for run in report.runs] == [0, 1, 2]
    assert report.exit_code == 0
    assert len({ledger["pid"] for ledger in ledgers(tmp_path)}) == 3
    assert report.summary == "3 devices: 3 passed"


def test_visible_devices_limit_all(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_DEVICE_COUNT="4", ASCEND_RT_VISIBLE_DEVICES="2")
    report = run_selftest("all", environ=env, timeout_s=30)
    assert [run.device for run in report.runs] == [0]


def test_a_device_that_is_not_visible_fails_at_the_count(tmp_path):
    report = run_selftest([5], environ=fake_env(tmp_path), timeout_s=30)
    (run,) = report.runs
    result = run.result(Step.DEVICE_COUNT)
    assert result.status is StepStatus.FAIL
    assert "device 5 is not visible" in result.detail and "0–1" in result.detail
    assert report.exit_code == 2
    assert run.result(Step.SET_DEVICE).status is StepStatus.NOT_RUN
    assert run.result(Step.CLEANUP).status is StepStatus.PASS  # acl.finalize still ran
    assert unbalanced(ledgers(tmp_path)[0]) == {}


@pytest.mark.parametrize(
    ("fault", "step", "code", "name", "in_fix"),
    [
        ("init:100000", Step.INIT, 100000, "ACL_ERROR_INVALID_PARAM", "report it"),
        ("set_device:507033", Step.SET_DEVICE, 507033, "ACL_ERROR_RT_DEV_SETUP_ERROR", "npu-smi"),
        (
            "malloc@3:207001",
            Step.ALLOCATE,
            207001,
            "ACL_ERROR_RT_MEMORY_ALLOCATION",
            "held by other processes",
        ),
        ("malloc_host:200000", Step.ALLOCATE, 200000, "ACL_ERROR_BAD_ALLOC", "npu-smi info"),
        ("memcpy:507001", Step.COPY_H2D, 507001, "ACL_ERROR_RT_TS_ERROR", "dmesg"),
        ("create_stream:207008", Step.CONTEXT_STREAM, 207008, "ACL_ERROR_RT_NO_STREAM_RESOURCE", "stale"),
        ("get_mem_info:507899", Step.MEMORY_INFO, 507899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR", "dmesg"),
        ("kernel:561003", Step.KERNEL, 561003, "ACLNN_ERR_INNER_FIND_KERNEL_ERROR", "Ascend-cann-kernels"),
        ("kernel_run:507015", Step.KERNEL, 507015, "ACL_ERROR_RT_AICORE_EXCEPTION", "upstream"),
        ("elapsed:107007", Step.COPY_H2D, 107007, "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL", "driver"),
    ],
)
def test_each_fault_names_the_step_explains_the_code_and_cleans_up(tmp_path, fault, step, code, name, in_fix):
    report = run_selftest([0], environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT=fault), timeout_s=30)
    (run,) = report.runs
    failed = [r for r in run.steps if r.status is StepStatus.FAIL]
    assert [r.step for r in failed] == [step], to_dict(report)
    error = failed[0].error
    assert (error.code, error.name) == (code, name)
    assert error.meaning and in_fix in error.fix
    assert error.call and error.message  # the failing call and acl.get_recent_err_msg()
    assert report.exit_code == 2
    cleanup = run.result(Step.CLEANUP)
    assert cleanup.status is StepStatus.PASS, cleanup
    (ledger,) = ledgers(tmp_path)
    kinds = [k for k in ledger["opened"] if k != "executor"]  # a failed launch leaves its executor
    assert unbalanced(ledger, kinds) == {} and ledger["errors"] == []


def test_a_kernel_failure_does_not_stop_event_timing(tmp_path):
    report = run_selftest([0], environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT="kernel:561003"), timeout_s=30)
    run = report.runs[0]
    assert run.result(Step.EVENTS).status is StepStatus.PASS
    assert "not installed" in run.result(Step.KERNEL).error.meaning


def test_set_device_failure_log_codes_are_explained(tmp_path):
    report = run_selftest(
        [0], environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT="set_device:507033"), timeout_s=30
    )
    error = report.runs[0].result(Step.SET_DEVICE).error
    assert ("E39009", "device status abnormal (heartbeat lost)") in error.log_codes


@pytest.mark.parametrize(
    ("fault", "step"),
    [
        ("memcpy@4:corrupt", Step.COPY_H2D),
        ("memcpy@7:corrupt", Step.COPY_D2H),
        ("kernel_run@2:corrupt", Step.KERNEL),
    ],
)
def test_corrupted_data_fails_the_step_that_verified_it(tmp_path, fault, step):
    report = run_selftest([0], environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT=fault), timeout_s=30)
    run = report.runs[0]
    failed = [r.step for r in run.steps if r.status is StepStatus.FAIL]
    assert failed[0] == step  # later copies that read the same memory fail too
    assert "differs" in run.result(step).detail or "wrong" in run.result(step).detail
    assert "dmesg" in run.result(step).error.fix
    assert run.result(Step.CLEANUP).status is StepStatus.PASS


def test_cleanup_failures_are_reported_and_the_rest_still_released(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_FAULT="destroy_stream:507000")
    report = run_selftest([0], environ=env, timeout_s=30)
    cleanup = report.runs[0].result(Step.CLEANUP)
    assert cleanup.status is StepStatus.FAIL and cleanup.error.code == 507000
    assert "acl.rt.destroy_stream" in cleanup.detail
    live = unbalanced(ledgers(tmp_path)[0])
    assert list(live) == ["stream"]  # only what failed to go


def test_hang_is_killed_at_the_timeout_naming_step_and_call_without_orphans(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_FAULT="synchronize:hang")
    report = run_selftest([0], environ=env, timeout_s=3)
    (run,) = report.runs
    assert run.timed_out and run.child_exit_code is None
    assert run.hung_in == "copy-h2d (acl.rt.synchronize_event)"
    hung = run.result(Step.COPY_H2D)
    assert hung.status is StepStatus.FAIL and "no answer within 3 s" in hung.detail
    assert run.result(Step.ALLOCATE).status is StepStatus.PASS  # the steps before it are kept
    assert report.exit_code == 2
    (pid,) = child_pids(tmp_path)
    assert live_members(pid) == []  # the child and its `sleep` helper died with the group


def test_hang_in_set_device(tmp_path):
    report = run_selftest([1], environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT="set_device:hang"), timeout_s=2)
    assert report.runs[0].hung_in == "set-device (acl.rt.set_device)"


def test_a_crash_names_the_step_and_keeps_the_stack(tmp_path):
    report = run_selftest(
        [0], environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT="set_device:crash"), timeout_s=30
    )
    run = report.runs[0]
    result = run.result(Step.SET_DEVICE)
    assert result.status is StepStatus.FAIL and "SIGSEGV" in result.detail
    assert "Segmentation fault" in run.stderr_tail
    assert report.exit_code == 2


def test_one_bad_device_among_all(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_FAULT="set_device:507033", NPUWATCH_FAKE_FAULT_DEVICES="1")
    report = run_selftest("all", environ=env, timeout_s=30)
    assert [(run.device, run.status) for run in report.runs] == [(0, StepStatus.PASS), (1, StepStatus.FAIL)]
    assert report.exit_code == 2


def test_init_failure_with_all_tests_no_device_in_particular(tmp_path):
    report = run_selftest("all", environ=fake_env(tmp_path, NPUWATCH_FAKE_FAULT="init:500004"), timeout_s=30)
    (run,) = report.runs
    assert run.device is None and run.result(Step.INIT).error.name == "ACL_ERROR_DRV_FAILURE"
    assert report.notes == ("the device count was never read, so only the first device was tried",)


def test_busy_chip_warns(tmp_path):
    report = run_selftest([0], environ=fake_env(tmp_path, NPUWATCH_FAKE_USED_MIB="50000"), timeout_s=30)
    memory = report.runs[0].result(Step.MEMORY_INFO)
    assert memory.status is StepStatus.WARN and "another job" in memory.warnings[0]
    assert report.exit_code == 1


def test_older_pyacl_without_event_flags_still_passes(tmp_path):
    report = run_selftest([0], environ=fake_env(tmp_path, NPUWATCH_FAKE_OLD_PYACL="1"), timeout_s=30)
    assert report.exit_code == 0
    assert report.runs[0].facts["run_mode"] is None


def test_missing_aclnn_libraries_skip_only_the_kernel(tmp_path):
    report = run_selftest([0], environ=fake_env(tmp_path, NPUWATCH_FAKE_NO_ACLNN="1"), timeout_s=30)
    kernel = report.runs[0].result(Step.KERNEL)
    assert kernel.status is StepStatus.SKIP
    assert "libnnopbase.so" in kernel.detail and "libopapi.so" in kernel.detail  # every path tried
    assert report.runs[0].result(Step.EVENTS).status is StepStatus.PASS
    assert report.exit_code == 1


@pytest.mark.slow
def test_full_level_sweeps_sizes(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_GBPS="h2d=40,d2h=40,d2d=400,kernel=2000")
    report = run_selftest([0], level="full", environ=env, timeout_s=120)
    run = report.runs[0]
    assert report.exit_code == 0, to_dict(report)
    sizes = run.result(Step.COPY_H2D).metrics["sizes"]
    assert [s["size_bytes"] >> 20 for s in sizes] == [1, 4, 16, 64, 256]
    assert all(len(s["samples_ms"]) == 5 for s in sizes)
    assert run.result(Step.KERNEL).metrics["elements"] == 16 << 20
