"""Fake aclnn libraries: real ctypes function pointers (CFUNCTYPE) over Python; the product's ctypes runs.

Each function is built with the C prototype of its header (runtime-and-doctor.md §2.1); the
product sets its own ``argtypes``/``restype`` on it and calls it, so its marshalling goes through a
real C call.  The Add kernel computes out = self + alpha·other on the fake device memory.
"""

from __future__ import annotations

import ctypes
import operator
import time
from array import array
from typing import Any, Callable, Dict, Optional, Tuple

from fakeruntime import act, error_of, rates_gb_s

from acl.state import LEDGER, STATE

ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002
ACLNN_ERR_INNER = 561000
WORKSPACE_BYTES = 32 * 1024

_P64 = ctypes.POINTER(ctypes.c_int64)
_TENSORS: Dict[int, Tuple[int, int]] = {}  # handle → (elements, device address)
_SCALARS: Dict[int, float] = {}
_EXECUTORS: Dict[int, Tuple[int, int, float, int]] = {}  # handle → (self, other, alpha, out)


def _guarded(fallback: Any, body: Callable[..., Any]) -> Callable[..., Any]:
    """A Python exception inside a ctypes callback would return 0 (success): report a failure instead."""

    def call(*args: Any) -> Any:
        try:
            return body(*args)
        except Exception as exc:
            LEDGER.errors.append(f"aclnn fake raised {exc!r}")
            return fallback

    return call


def _create_tensor(dims, ndims, dtype, strides, offset, fmt, storage, nstorage, data) -> Optional[int]:
    if dtype != 0 or fmt != 2 or not 1 <= ndims <= 8 or offset != 0 or nstorage != ndims:
        return None
    elements = 1
    for i in range(ndims):
        elements *= dims[i]
        if storage[i] != dims[i]:
            return None
    if strides[ndims - 1] != 1 or STATE.device_span(data, 4 * elements) is None:
        return None
    handle = STATE.handle()
    _TENSORS[handle] = (elements, data)
    LEDGER.open("tensor", handle)
    return handle


def _create_scalar(value, dtype) -> Optional[int]:
    if dtype != 0 or not value:
        return None
    handle = STATE.handle()
    _SCALARS[handle] = ctypes.c_float.from_address(value).value
    LEDGER.open("scalar", handle)
    return handle


def _destroy(table: Dict[int, Any], kind: str) -> Callable[[Optional[int]], int]:
    def destroy(handle: Optional[int]) -> int:
        if not handle or table.pop(handle, None) is None:
            return ACLNN_ERR_PARAM_NULLPTR
        LEDGER.close(kind, handle)
        return 0

    return destroy


def _workspace_size(a, b, alpha, out, size_ptr, executor_ptr) -> int:
    code = error_of(act("kernel"))
    if code is not None:
        return STATE.fail(code, "aclnnAddGetWorkspaceSize")
    if not (a in _TENSORS and b in _TENSORS and out in _TENSORS and alpha in _SCALARS):
        return ACLNN_ERR_PARAM_NULLPTR
    if not _TENSORS[a][0] == _TENSORS[b][0] == _TENSORS[out][0]:
        return ACLNN_ERR_PARAM_INVALID
    handle = STATE.handle()
    _EXECUTORS[handle] = (a, b, _SCALARS[alpha], out)
    LEDGER.open("executor", handle)
    size_ptr[0] = WORKSPACE_BYTES
    executor_ptr[0] = handle
    return 0


def _add(workspace, workspace_size, executor, stream) -> int:
    began = time.perf_counter()
    action = act("kernel_run")
    code = error_of(action)
    if code is not None:
        return STATE.fail(code, "aclnnAdd")
    if executor not in _EXECUTORS:
        return ACLNN_ERR_PARAM_NULLPTR
    timeline = STATE.timeline(stream)
    if (
        timeline is None
        or workspace_size < WORKSPACE_BYTES
        or STATE.device_span(workspace, workspace_size) is None
    ):
        return ACLNN_ERR_PARAM_INVALID
    a, b, alpha, out = _EXECUTORS.pop(executor)
    LEDGER.close("executor", executor)
    elements = _TENSORS[out][0]
    views = []
    for handle in (a, b, out):
        buffer, offset = STATE.device_span(_TENSORS[handle][1], 4 * elements)  # type: ignore[misc]
        views.append(memoryview(buffer)[offset : offset + 4 * elements].cast("f"))
    other = views[1] if alpha == 1.0 else [alpha * value for value in views[1]]
    result = array("f", map(operator.add, views[0], other))
    if action == "corrupt":
        result[elements // 2] += 1.0
    views[2][:] = result
    timeline.enqueue(12 * elements / (rates_gb_s()["kernel"] * 1e9), since=began)
    return 0


class FakeLibrary:
    """Stands where ``ctypes.CDLL("libopapi.so")`` would: attributes are C function pointers."""

    def __init__(self, name: str, functions: Dict[str, Any]) -> None:
        self._name = name
        self._keep = functions
        for symbol, pointer in functions.items():
            setattr(self, symbol, pointer)

    def __repr__(self) -> str:
        return f"<FakeLibrary {self._name}>"


def libraries() -> Tuple[FakeLibrary, FakeLibrary]:
    """(libnnopbase, libopapi) as CANN splits them: tensor helpers in one, the op in the other."""
    c = ctypes
    create_tensor = c.CFUNCTYPE(
        c.c_void_p, _P64, c.c_uint64, c.c_int32, _P64, c.c_int64, c.c_int32, _P64, c.c_uint64, c.c_void_p
    )
    nnopbase = {
        "aclCreateTensor": create_tensor(_guarded(None, _create_tensor)),
        "aclCreateScalar": c.CFUNCTYPE(c.c_void_p, c.c_void_p, c.c_int32)(_guarded(None, _create_scalar)),
        "aclDestroyTensor": c.CFUNCTYPE(c.c_int32, c.c_void_p)(
            _guarded(ACLNN_ERR_INNER, _destroy(_TENSORS, "tensor"))
        ),
        "aclDestroyScalar": c.CFUNCTYPE(c.c_int32, c.c_void_p)(
            _guarded(ACLNN_ERR_INNER, _destroy(_SCALARS, "scalar"))
        ),
    }
    workspace = c.CFUNCTYPE(
        c.c_int32,
        c.c_void_p,
        c.c_void_p,
        c.c_void_p,
        c.c_void_p,
        c.POINTER(c.c_uint64),
        c.POINTER(c.c_void_p),
    )
    opapi = {
        "aclnnAddGetWorkspaceSize": workspace(_guarded(ACLNN_ERR_INNER, _workspace_size)),
        "aclnnAdd": c.CFUNCTYPE(c.c_int32, c.c_void_p, c.c_uint64, c.c_void_p, c.c_void_p)(
            _guarded(ACLNN_ERR_INNER, _add)
        ),
    }
    return FakeLibrary("libnnopbase.so", nnopbase), FakeLibrary("libopapi.so", opapi)
