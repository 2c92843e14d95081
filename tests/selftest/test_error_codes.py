"""The runtime code tables: every code the self-test can meet has a meaning and a fix."""

from __future__ import annotations

import pytest

from npuwatch.probes.runtime.error_codes import (
    code_in_torch_message,
    describe,
    explain,
    explain_log_code,
    explain_torch_id,
    log_codes,
)
from npuwatch.probes.runtime.error_table import ACL_CODES, ACLNN_CODES


@pytest.mark.parametrize(
    ("code", "name", "words"),
    [
        (507033, "ACL_ERROR_RT_DEV_SETUP_ERROR", "failed to start"),
        (561003, "ACLNN_ERR_INNER_FIND_KERNEL_ERROR", "kernels for this SoC are not installed"),
        (207001, "ACL_ERROR_RT_MEMORY_ALLOCATION", "out of device memory"),
        (507001, "ACL_ERROR_RT_TS_ERROR", "SDMA"),
        (100000, "ACL_ERROR_INVALID_PARAM", "invalid"),
        (207018, "ACL_ERROR_RT_DEVIDE_OOM", "out of device memory"),
    ],
)
def test_known_codes(code, name, words):
    known = explain(code)
    assert known.known and known.name == name and words in known.meaning and known.fix


def test_every_row_is_complete():
    for code, (name, meaning, fix) in {**ACL_CODES, **ACLNN_CODES}.items():
        assert 100000 <= code < 600000 and name and meaning and fix, code


@pytest.mark.parametrize(
    ("code", "words"), [(507999, "internal runtime"), (207777, "resource"), (42, "not an ACL")]
)
def test_unknown_codes_are_explained_by_their_range(code, words):
    unknown = explain(code)
    assert not unknown.known and words in unknown.meaning and unknown.fix


def test_describe():
    assert describe(507033) == "507033 ACL_ERROR_RT_DEV_SETUP_ERROR"


def test_torch_messages():
    message = (
        "Initialize:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:152 NPU function error: "
        "c10_npu::SetDevice(device_id_), error code is 507033\n[ERROR] 2025-11-19-11:14:58 (PID:356, "
        "Device:0, RankID:-1) ERR00100 PTA call acl api failed\nE30006: Failed to verify the OPP"
    )
    assert code_in_torch_message(message) == 507033
    assert explain_torch_id(message) == "ERR00100: PTA: an ACL call failed (the ACL code is in the message)"
    assert log_codes(message) == ("E30006",)
    assert "OPP" in (explain_log_code("E30006") or "")
    assert code_in_torch_message("no code here") is None
