"""The torch_npu self-test against the fake torch + torch_npu, and how the backend is chosen."""

from __future__ import annotations

import pytest

from npuwatch.probes.runtime.protocol import MAIN_STEPS, Step, StepStatus
from npuwatch.selftest import run_selftest
from npuwatch.selftest.report_json import to_dict
from tests.selftest.helpers import child_pids, fake_env, ledgers, live_members, unbalanced

TORCH_KINDS = ("device_mem", "host_mem")  # torch_npu never resets a device; tensors are what it holds


def test_pass_reports_every_step(tmp_path):
    report = run_selftest([1], backend="torch", environ=fake_env(tmp_path), timeout_s=30)
    (run,) = report.runs
    assert report.exit_code == 0, to_dict(report)
    assert run.backend == "torch" and run.device == 1
    assert [r.step for r in run.steps] == [Step.IMPORT, *MAIN_STEPS, Step.CLEANUP]
    assert all(r.status is StepStatus.PASS for r in run.steps)
    assert run.result(Step.COPY_H2D).metrics["best_gb_s"] > 0
    assert "torch.add" in run.result(Step.KERNEL).detail
    assert run.facts["torch_npu_version"] == "2.5.1.post1"
    (ledger,) = ledgers(tmp_path)
    assert unbalanced(ledger, TORCH_KINDS) == {} and ledger["errors"] == []
    assert ["empty_cache", 0] in ledger["calls"]


@pytest.mark.parametrize(
    ("fault", "step", "code"),
    [
        ("set_device:507033", Step.SET_DEVICE, 507033),
        ("memcpy:507001", Step.COPY_H2D, 507001),
        ("kernel:561003", Step.KERNEL, 561003),
        ("init:100000", Step.INIT, 100000),
    ],
)
def test_torch_errors_carry_the_acl_code(tmp_path, fault, step, code):
    env = fake_env(tmp_path, NPUWATCH_FAKE_FAULT=fault)
    report = run_selftest([0], backend="torch", environ=env, timeout_s=30)
    run = report.runs[0]
    failed = [r for r in run.steps if r.status is StepStatus.FAIL]
    assert [r.step for r in failed] == [step]
    error = failed[0].error
    assert error.code == code and error.fix
    assert "ERR00100" in error.message  # torch_npu's own words are kept
    assert run.result(Step.CLEANUP).status is StepStatus.PASS
    assert unbalanced(ledgers(tmp_path)[0], TORCH_KINDS) == {}
    assert report.exit_code == 2


def test_out_of_memory_is_explained_without_a_code(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_FAULT="malloc@2:207001")
    report = run_selftest([0], backend="torch", environ=env, timeout_s=30)
    result = report.runs[0].result(Step.ALLOCATE)
    assert result.status is StepStatus.FAIL
    assert "NPU out of memory" in result.detail and "npu-smi info" in result.error.fix
    assert unbalanced(ledgers(tmp_path)[0], TORCH_KINDS) == {}


def test_hang_is_killed_without_orphans(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_FAULT="synchronize:hang")
    report = run_selftest([0], backend="torch", environ=env, timeout_s=3)
    run = report.runs[0]
    assert run.timed_out and run.hung_in == "copy-h2d (torch.npu.Event.synchronize)"
    (pid,) = child_pids(tmp_path)
    assert live_members(pid) == []


def test_auto_prefers_pyacl(tmp_path):
    report = run_selftest([0], environ=fake_env(tmp_path), timeout_s=30)
    assert report.runs[0].backend == "acl"


def test_auto_falls_back_to_torch_and_says_why(tmp_path):
    report = run_selftest("all", environ=fake_env(tmp_path, NPUWATCH_FAKE_HIDE="acl"), timeout_s=30)
    assert [run.backend for run in report.runs] == ["torch", "torch"]
    detail = report.runs[0].result(Step.IMPORT).detail
    assert "pyACL not used: `import acl` failed: no module named 'acl'" in detail


def test_explicit_acl_without_pyacl_skips_naming_only_pyacl(tmp_path):
    env = fake_env(tmp_path, NPUWATCH_FAKE_ACL_IMPORT_ERROR="libascendcl.so: cannot open shared object file")
    report = run_selftest([0], backend="acl", environ=env, timeout_s=30)
    result = report.runs[0].result(Step.IMPORT)
    assert result.status is StepStatus.SKIP and report.exit_code == 1
    assert "libascendcl.so: cannot open shared object file" in result.detail
    assert "LD_LIBRARY_PATH" in result.detail and "torch_npu" not in result.detail


def test_broken_torch_npu_import_is_quoted(tmp_path):
    message = "libhccl.so: cannot open shared object file: No such file or directory"
    env = fake_env(tmp_path, NPUWATCH_FAKE_HIDE="acl", NPUWATCH_FAKE_TORCH_NPU_IMPORT_ERROR=message)
    report = run_selftest([0], environ=env, timeout_s=30)
    detail = report.runs[0].result(Step.IMPORT).detail
    assert f"`import torch_npu` failed: ImportError: {message}" in detail
    assert "npuwatch doctor" in detail
