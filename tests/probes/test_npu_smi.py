"""Tests for running npu-smi and explaining its real failure texts (captures 034, 035, 069, 070, 075)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from npuwatch.model import MetricStatus
from npuwatch.probes.npu_smi import (
    FailureKind,
    NpuSmi,
    NpuSmiError,
    Withheld,
    classify,
    find_npu_smi,
    withheld_npu_smi,
)
from npuwatch.probes.runner import RunResult
from npuwatch.probes.sysroot import Sysroot
from tests.conftest import capture_text as capture


def result(stdout: str = "", stderr: str = "", exit_code: int = 0, timed_out: bool = False) -> RunResult:
    return RunResult(("npu-smi", "info"), None if timed_out else exit_code, stdout, stderr, 5.0, timed_out)


def fake_npu_smi(tmp_path: Path, text: str, exit_code: int = 0, to_stderr: bool = False) -> Path:
    out = tmp_path / "out.txt"
    out.write_text(text)
    tool = tmp_path / "npu-smi"
    redirect = " >&2" if to_stderr else ""
    tool.write_text(f"#!/bin/sh\ncat {shlex.quote(str(out))}{redirect}\nexit {exit_code}\n")
    tool.chmod(0o755)
    return tool


def test_good_table_is_not_a_failure():
    assert classify(result(capture("001"))) is None


def test_table_after_the_benign_console_log_line_is_not_a_failure():
    text = "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\n" + capture("022")
    assert classify(result(text)) is None


def test_dcmi_8005_in_a_container_is_explained():
    failure = classify(result(capture("035"), exit_code=255))
    assert failure is not None
    assert failure.kind is FailureKind.DCMI
    assert failure.dcmi_code == -8005
    assert "INNER_ERR" in failure.message
    assert "/dev/davinci_manager" in failure.hint


def test_dcmi_8020_device_in_use_with_the_real_typo_is_explained():
    failure = classify(result(capture("034"), exit_code=255))
    assert failure is not None
    assert failure.dcmi_code == -8020
    assert "in use by another process" in failure.message


def test_dcmi_8002_is_a_permission_failure():
    failure = classify(result("dcmi module initialize failed. ret is -8002\n", exit_code=255))
    assert failure is not None
    assert failure.kind is FailureKind.PERMISSION
    assert failure.kind.metric_status is MetricStatus.PERMISSION
    assert "HwHiAiUser" in failure.hint


def test_unknown_dcmi_code_is_still_reported_with_its_number():
    failure = classify(result("dcmi module initialize failed. ret is -8999\n", exit_code=1))
    assert failure is not None
    assert failure.dcmi_code == -8999
    assert "-8999" in failure.message


def test_missing_libc_sec_names_the_library_and_the_mount():
    failure = classify(result(stderr=capture("069"), exit_code=127))
    assert failure is not None
    assert failure.kind is FailureKind.LIBRARY_MISSING
    assert "libc_sec.so" in failure.message
    assert "/usr/local/Ascend/driver/lib64" in failure.hint


def test_unsupported_query_is_unsupported_not_an_error():
    failure = classify(result(capture("070"), exit_code=255))
    assert failure is not None
    assert failure.kind is FailureKind.NOT_SUPPORTED
    assert failure.kind.metric_status is MetricStatus.UNSUPPORTED
    assert "cpu-freq-up" in failure.message


def test_bad_argument_of_minus_t():
    failure = classify(result("Error parameter of -t\n", exit_code=255))
    assert failure is not None
    assert failure.kind is FailureKind.BAD_ARGUMENT


def test_shell_says_npu_smi_is_missing():
    failure = classify(result(stderr=capture("075"), exit_code=127))
    assert failure is not None
    assert failure.kind is FailureKind.NOT_FOUND
    assert "-v /usr/local/bin/npu-smi" in failure.hint


def test_timeout_is_a_timeout_status():
    failure = classify(result(timed_out=True))
    assert failure is not None
    assert failure.kind is FailureKind.TIMEOUT
    assert failure.kind.metric_status is MetricStatus.TIMEOUT


def test_nonzero_exit_with_unknown_text_keeps_the_text():
    failure = classify(result("something odd happened\n", exit_code=2))
    assert failure is not None
    assert failure.kind is FailureKind.FAILED
    assert "something odd happened" in failure.message


def test_empty_output_is_reported():
    failure = classify(result(""))
    assert failure is not None
    assert failure.kind is FailureKind.NO_OUTPUT


def test_call_returns_the_table_text(tmp_path):
    tool = fake_npu_smi(tmp_path, capture("001"))
    output = NpuSmi(tool).info()
    assert output.text == capture("001")
    assert output.argv == (str(tool), "info")


def test_call_raises_the_explained_failure(tmp_path):
    tool = fake_npu_smi(tmp_path, capture("035"), exit_code=255, to_stderr=True)
    with pytest.raises(NpuSmiError) as info:
        NpuSmi(tool).info()
    assert info.value.failure.dcmi_code == -8005


def test_hung_npu_smi_times_out_within_the_limit(tmp_path):
    tool = tmp_path / "npu-smi"
    tool.write_text("#!/bin/sh\nsleep 30\n")
    tool.chmod(0o755)
    with pytest.raises(NpuSmiError) as info:
        NpuSmi(tool, timeout_s=0.3).info()
    assert info.value.failure.kind is FailureKind.TIMEOUT


def test_missing_binary_is_not_found(tmp_path):
    with pytest.raises(NpuSmiError) as info:
        NpuSmi(tmp_path / "npu-smi").info()
    assert info.value.failure.kind is FailureKind.NOT_FOUND
    with pytest.raises(NpuSmiError):
        NpuSmi(None).info()


def test_query_builds_the_key_value_arguments(tmp_path):
    tool = tmp_path / "npu-smi"
    tool.write_text('#!/bin/sh\necho "$@"\n')
    tool.chmod(0o755)
    assert NpuSmi(tool).query("board", 3, 1).text.strip() == "info -t board -i 3 -c 1"


def test_find_npu_smi_prefers_explicit_then_tree_paths(tmp_path):
    sysroot = Sysroot(tmp_path, environ={"PATH": "/usr/bin", "NPUWATCH_TRUST_ROOT": "1"})
    assert find_npu_smi(sysroot) is None  # a tree never falls back to the host's PATH
    sbin = tmp_path / "usr/local/sbin/npu-smi"
    sbin.parent.mkdir(parents=True)
    sbin.write_text("")
    assert find_npu_smi(sysroot) == sbin
    binary = tmp_path / "usr/local/bin/npu-smi"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert find_npu_smi(sysroot) == binary
    assert find_npu_smi(sysroot, "/opt/x/npu-smi") == Path("/opt/x/npu-smi")
    untrusted = Sysroot(tmp_path, environ={"PATH": "/usr/bin"})
    assert find_npu_smi(untrusted) is None  # found, but an untrusted tree's program never runs
    assert withheld_npu_smi(untrusted) == Withheld("/usr/local/bin/npu-smi", None)
    assert withheld_npu_smi(sysroot) is None
    assert find_npu_smi(untrusted, "/opt/x/npu-smi") == Path("/opt/x/npu-smi")  # the user's own


def test_a_call_past_a_one_shots_deadline_is_not_run_and_says_the_budget_was_spent(tmp_path):
    import time

    from npuwatch.probes.npu_smi import FailureKind, NpuSmi, NpuSmiError

    marker = tmp_path / "ran"
    script = tmp_path / "npu-smi"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    with pytest.raises(NpuSmiError) as raised:
        NpuSmi(script, timeout_s=5.0, deadline=time.monotonic() - 1.0).info()
    failure = raised.value.failure
    assert failure.kind is FailureKind.TIMEOUT and "budget was spent" in failure.message
    assert not marker.exists()
