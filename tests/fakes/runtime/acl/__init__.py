"""A fake pyACL for tests: the surface npuwatch's backend uses, with pyACL's return conventions.

A call that yields values returns them with ``ret`` last (``count, ret = acl.rt.get_device_count()``);
one that yields none returns ``ret``; ``get_soc_name`` and ``get_recent_err_msg`` return text only
(runtime-and-doctor.md §1.2).  Fault injection and the ledger: see ``fakeruntime``.  The fake
aclnn libraries reach the product through ``NPUWATCH_FAKE_ACLNN_LIBRARIES`` (npuwatch.probes.runtime.aclnn).
"""

from __future__ import annotations

from typing import Tuple

from fakeruntime import env, hidden

if hidden("acl"):
    raise ModuleNotFoundError("No module named 'acl'", name="acl")
if env("NPUWATCH_FAKE_ACL_IMPORT_ERROR"):
    raise ImportError(env("NPUWATCH_FAKE_ACL_IMPORT_ERROR"))

from fakeruntime import act, error_of

from acl import nn, rt, util
from acl.state import LEDGER, STATE

__all__ = ["finalize", "get_recent_err_msg", "get_soc_name", "get_version", "init", "rt", "util"]

ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_REPEAT_FINALIZE = 100037

if env("NPUWATCH_FAKE_OLD_PYACL"):
    for _name in ("create_event_with_flag", "query_event_status", "get_run_mode"):
        delattr(rt, _name)

if not env("NPUWATCH_FAKE_NO_ACLNN"):
    NPUWATCH_FAKE_ACLNN_LIBRARIES = nn.libraries()


def init(config_path: str = "") -> int:
    code = error_of(act("init"))
    if code is not None:
        return STATE.fail(code, "init")
    if STATE.initialized:
        return LEDGER.call("init", ACL_ERROR_REPEAT_INITIALIZE)
    STATE.initialized = True
    LEDGER.open("runtime", 1)
    return LEDGER.call("init", 0)


def finalize() -> int:
    code = error_of(act("finalize"))
    if code is not None:
        return STATE.fail(code, "finalize")
    if not STATE.initialized:
        return LEDGER.call("finalize", ACL_ERROR_REPEAT_FINALIZE)
    STATE.initialized = False
    LEDGER.close("runtime", 1)
    return LEDGER.call("finalize", 0)


def get_soc_name() -> str:
    return env("NPUWATCH_FAKE_SOC", "Ascend910B3")


def get_version() -> Tuple[int, int, int, int]:
    return 1, 0, 0, 0


def get_recent_err_msg() -> str:
    message, STATE.recent = STATE.recent, ""
    return message
