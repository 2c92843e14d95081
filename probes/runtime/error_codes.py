"""Provides explain(): an ACL/aclnn error code, a CANN log code or a torch_npu ERR id → meaning and fix.

Sources (collected in docs/reference/runtime-and-doctor.md §9 and §10): the ACL ``aclError``
codes from Ascend/pytorch ``torch_npu/csrc/core/npu/NPUErrorCodes.h`` and the hiascend aclError
pages (CANNCommunityEdition/910 runtime API ``aclcppdevg_03_6666``, canncommercial/900
``aclcppdevg_03_1345``); aclnn status codes from the hiascend aclnn API pages; log codes and
fixes from the issue threads named in §10 (vllm-ascend #116 #1443 #4284, Ascend/pytorch #62 #66
#67, Ascend/samples #16, hiyouga/LlamaFactory #3796, hw-native-sys/PTOAS #341 #523 #765 #948).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from npuwatch.probes.runtime.error_table import ACL_CODES, ACLNN_CODES, LOG_CODES, TORCH_NPU_KINDS


@dataclass(frozen=True)
class RuntimeCode:
    """One code: its macro name, what it means, and what to do about it."""

    code: int
    name: str
    meaning: str
    fix: str
    known: bool = True  # False: only the code's range is known


_BY_CODE: Dict[int, Tuple[str, str, str]] = {**ACL_CODES, **ACLNN_CODES}

#: The first digit of an ACL/aclnn code says its family (runtime-and-doctor.md §9.1).
_RANGES = {
    1: (
        "a parameter, environment or usage error",
        "check the runtime's message below; run `npuwatch doctor`",
    ),
    2: (
        "a resource or feature error",
        "check free device memory and the driver version; run `npuwatch doctor`",
    ),
    3: ("a business limit (storage) was exceeded", "reduce the request; see the runtime's message"),
    5: (
        "an internal runtime, driver or hardware error",
        "check `npu-smi info -t health -i <NPU ID>`, `dmesg` and the plog under ~/ascend/log; "
        "reset the chip or reboot if it persists",
    ),
}

_LOG_CODE = re.compile(r"\b(E[A-Z0-9][0-9]{4})\b")
_TORCH_ID = re.compile(r"\bERR([0-9]{2})([0-9]{3})\b")
_TORCH_CODE = re.compile(r"error code is (-?[0-9]+)")
_TORCH_SUBMODULES = {"00": "PTA", "01": "OPS", "02": "DIST", "03": "GRAPH", "04": "PROF", "99": "UNKNOWN"}


def explain(code: int) -> RuntimeCode:
    """The meaning and fix of an ACL or aclnn code; an unlisted code is explained by its range."""
    entry = _BY_CODE.get(code)
    if entry is not None:
        name, meaning, fix = entry
        return RuntimeCode(code, name, meaning, fix)
    family = _RANGES.get(code // 100000) if 100000 <= code < 600000 else None
    if family is None:
        return RuntimeCode(code, "UNKNOWN", "not an ACL or aclnn code npuwatch knows", _RANGES[1][1], False)
    meaning, fix = family
    return RuntimeCode(code, "UNKNOWN", f"unlisted code: {meaning}", fix, False)


def log_codes(message: Optional[str]) -> Tuple[str, ...]:
    """The CANN log codes (``E30006``, ``EL0004`` …) in a runtime message, in order, once each."""
    if not message:
        return ()
    return tuple(dict.fromkeys(_LOG_CODE.findall(message)))


def explain_log_code(log_code: str) -> Optional[str]:
    """What a CANN log code means, when npuwatch knows it."""
    return LOG_CODES.get(log_code)


def code_in_torch_message(message: str) -> Optional[int]:
    """The ACL/aclnn code in a torch_npu error (``… NPU function error: …, error code is 507033``)."""
    match = _TORCH_CODE.search(message)
    return int(match.group(1)) if match else None


def explain_torch_id(message: str) -> Optional[str]:
    """The meaning of the first torch_npu ``ERRssccc`` id in ``message`` (``ERR00100``: ACL call failed)."""
    match = _TORCH_ID.search(message)
    if match is None:
        return None
    submodule = _TORCH_SUBMODULES.get(match.group(1), f"submodule {match.group(1)}")
    kind = TORCH_NPU_KINDS.get(match.group(2), f"error {match.group(2)}")
    return f"ERR{match.group(1)}{match.group(2)}: {submodule}: {kind}"


def describe(code: int) -> str:
    """``507033 ACL_ERROR_RT_DEV_SETUP_ERROR`` for one-line summaries."""
    return f"{code} {explain(code).name}"
