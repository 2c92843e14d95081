"""Small parts: the real aclnn loader on a machine without CANN, plans and patterns, text rendering."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import struct

import pytest

from npuwatch.probes.runtime.aclnn import Aclnn, AclnnUnavailableError, _candidates, open_libraries
from npuwatch.probes.runtime.plan import MIB, Plan, copy_block, kernel_inputs, plan_for, rate_summary
from npuwatch.probes.runtime.protocol import Level, Step, StepStatus
from npuwatch.selftest.render import render_report
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult
from npuwatch.selftest.report_json import to_dict


def test_the_real_loader_uses_ctypes_and_names_every_library_it_tried():
    with pytest.raises(AclnnUnavailableError) as caught:
        open_libraries(object(), {})  # a module without the fake hook: the ctypes.CDLL path
    assert "libnnopbase.so" in str(caught.value) and "libopapi.so" in str(caught.value)


def test_the_loader_also_tries_the_toolkit_lib64():
    found = _candidates("libopapi.so", {"ASCEND_HOME_PATH": "/opt/cann"})
    assert found == ["libopapi.so", "/opt/cann/lib64/libopapi.so"]


def test_a_library_without_the_symbols_is_unavailable():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    with pytest.raises(AclnnUnavailableError, match="aclCreateTensor"):
        Aclnn([libc])


def test_plans():
    quick, full = plan_for(Level.QUICK), plan_for(Level.FULL)
    assert quick.copy_sizes_bytes == (16 * MIB,) and quick.kernel_elements == 1 << 20
    assert [s // MIB for s in full.copy_sizes_bytes] == [1, 4, 16, 64, 256] and full.repeats == 5
    assert full.capped(100 * MIB).copy_sizes_bytes == (MIB, 4 * MIB, 16 * MIB)
    assert full.capped(0).copy_sizes_bytes == (MIB,)
    assert isinstance(full.capped(0), Plan)


def test_patterns_are_exact_and_position_dependent():
    assert copy_block(0) != copy_block(1) and len(copy_block(5)) == MIB
    a, b, total = kernel_inputs(2048)
    values = [struct.unpack_from("<f", blob, 4 * 1500)[0] for blob in (a, b, total)]
    assert values[0] + values[1] == values[2]


def test_rate_summary():
    summary = rate_summary(16 * MIB, [2.0, 1.0, 4.0])
    assert summary["best_gb_s"] == pytest.approx(16 * MIB / 1e-3 / 1e9, rel=1e-3)
    assert summary["median_gb_s"] == pytest.approx(16 * MIB / 2e-3 / 1e9, rel=1e-3)


def _report() -> SelftestReport:
    error = StepError(
        507033,
        "ACL_ERROR_RT_DEV_SETUP_ERROR",
        "the device failed to start",
        "reset it",
        "acl.rt.set_device(0)",
    )
    steps = (
        StepResult(Step.IMPORT, StepStatus.PASS, 0.01, "pyACL"),
        StepResult(
            Step.SET_DEVICE, StepStatus.FAIL, 0.2, "acl.rt.set_device(0) returned 507033", error=error
        ),
        StepResult(Step.CONTEXT_STREAM, StepStatus.NOT_RUN, None, "not run: set device did not succeed"),
        StepResult(Step.MEMORY_INFO, StepStatus.NOT_RUN, None, "not run: set device did not succeed"),
        StepResult(Step.CLEANUP, StepStatus.PASS, 0.01, "2 release call(s), all returned 0"),
    )
    run = DeviceRun(0, "acl", steps, 0.3, facts={"soc_name": "Ascend910B3"})
    return SelftestReport("quick", "auto", "0", (run,), 0.4, 60.0)


def test_text_in_ascii_explains_and_collapses_what_did_not_run():
    text = render_report(_report(), unicode=False)
    assert "backend auto -> acl" in text and "(SoC Ascend910B3)" in text
    assert "FAIL set device" in text and "507033 ACL_ERROR_RT_DEV_SETUP_ERROR: the device failed" in text
    assert "fix: reset it" in text
    assert "2 more step(s) not run: set device did not succeed" in text
    assert text.rstrip().endswith("1 device: 1 failed in 0.4 s: exit 2")
    assert all(ord(ch) < 128 for ch in text)


def test_json_round_trips():
    data = json.loads(json.dumps(to_dict(_report())))
    assert data["devices"][0]["steps"][1]["error"]["code"] == 507033
    assert data["exit_code"] == 2
