"""Provides Aclnn: ``aclnnAdd`` and its tensor/scalar helpers through ctypes (runtime-and-doctor.md §2.1).

The aclnn op API has no Python binding; it shares the process runtime with pyACL, so device
pointers from ``acl.rt.malloc`` and a stream from ``acl.rt.create_stream`` pass straight in.
Signatures (CANN ``aclnn/acl_meta.h``, ``aclnnop/aclnn_add.h``)::

    aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                               const int64_t *stride, int64_t offset, aclFormat format,
                               const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData);
    aclScalar *aclCreateScalar(void *value, aclDataType dataType);
    aclnnStatus aclDestroyTensor(const aclTensor *t);
    aclnnStatus aclDestroyScalar(const aclScalar *s);
    aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other,
                                         const aclScalar *alpha, aclTensor *out,
                                         uint64_t *workspaceSize, aclOpExecutor **executor);
    aclnnStatus aclnnAdd(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                         aclrtStream stream);

Test seam: a module passed as ``acl`` that has the attribute ``NPUWATCH_FAKE_ACLNN_LIBRARIES``
(a sequence of CDLL-like objects) supplies the libraries instead of ``ctypes.CDLL``.  Real pyACL
has no such attribute, so on a machine the libraries always come from ``ctypes.CDLL``; everything
after opening them (symbol lookup, argtypes, marshalling) is the same code either way.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple

#: aclDataType ACL_FLOAT and aclFormat ACL_FORMAT_ND (runtime-and-doctor.md §2.1).
ACL_FLOAT = 0
ACL_FORMAT_ND = 2

#: Searched in this order for every symbol; some CANN builds export the tensor helpers from
#: libopapi.so too, so a symbol is taken from the first library that has it.
LIBRARY_NAMES = ("libnnopbase.so", "libopapi.so")

FAKE_LIBRARIES_HOOK = "NPUWATCH_FAKE_ACLNN_LIBRARIES"

_P64 = ctypes.POINTER(ctypes.c_int64)
_VOIDP = ctypes.c_void_p
_SIGNATURES: Mapping[str, Tuple[Any, List[Any]]] = {
    "aclCreateTensor": (
        ctypes.c_void_p,
        [
            _P64,
            ctypes.c_uint64,
            ctypes.c_int32,
            _P64,
            ctypes.c_int64,
            ctypes.c_int32,
            _P64,
            ctypes.c_uint64,
            _VOIDP,
        ],
    ),
    "aclCreateScalar": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int32]),
    "aclDestroyTensor": (ctypes.c_int32, [ctypes.c_void_p]),
    "aclDestroyScalar": (ctypes.c_int32, [ctypes.c_void_p]),
    "aclnnAddGetWorkspaceSize": (
        ctypes.c_int32,
        [ctypes.c_void_p] * 4 + [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)],
    ),
    "aclnnAdd": (ctypes.c_int32, [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]),
}


class AclnnUnavailableError(Exception):
    """The aclnn libraries or one of their symbols could not be loaded."""


class AclnnCallError(Exception):
    """A helper returned NULL (aclCreateTensor / aclCreateScalar give no status code)."""


def open_libraries(acl_module: Any, environ: Mapping[str, str]) -> Tuple[Any, ...]:
    """The loaded aclnn libraries; raises ``AclnnUnavailableError`` naming every path tried."""
    provided = getattr(acl_module, FAKE_LIBRARIES_HOOK, None)
    if provided is not None:
        return tuple(provided)
    loaded: List[Any] = []
    errors: List[str] = []
    for name in LIBRARY_NAMES:
        for candidate in _candidates(name, environ):
            try:
                loaded.append(ctypes.CDLL(candidate))
                break
            except OSError as exc:
                errors.append(str(exc))
    if not loaded:
        raise AclnnUnavailableError("; ".join(errors))
    return tuple(loaded)


def _candidates(name: str, environ: Mapping[str, str]) -> List[str]:
    """The bare name (LD_LIBRARY_PATH, as set_env.sh sets it), then the toolkit's lib64 folders."""
    found = [name]
    for variable in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        root = environ.get(variable)
        if root:
            path = os.path.join(root, "lib64", name)
            if path not in found:
                found.append(path)
    return found


class Aclnn:
    """The aclnn calls the self-test makes, with argtypes and restype set as the C headers declare."""

    def __init__(self, libraries: Sequence[Any]) -> None:
        self._fn: Dict[str, Any] = {}
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = _find(libraries, name)
            function.restype = restype
            function.argtypes = argtypes
            self._fn[name] = function
        self._keep: Dict[int, Any] = {}  # the values scalars point at stay alive until destroyed

    def create_tensor_1d(self, elements: int, data_ptr: int) -> int:
        """A contiguous 1-D float32 ND tensor over ``elements`` values at device address ``data_ptr``."""
        dims = (ctypes.c_int64 * 1)(elements)
        strides = (ctypes.c_int64 * 1)(1)
        handle = self._fn["aclCreateTensor"](
            dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, ctypes.c_void_p(data_ptr)
        )
        if not handle:
            raise AclnnCallError("aclCreateTensor returned NULL")
        return int(handle)

    def create_scalar_f32(self, value: float) -> int:
        """A float32 scalar (``alpha`` of Add)."""
        boxed = ctypes.c_float(value)
        handle = self._fn["aclCreateScalar"](ctypes.byref(boxed), ACL_FLOAT)
        if not handle:
            raise AclnnCallError("aclCreateScalar returned NULL")
        self._keep[int(handle)] = boxed
        return int(handle)

    def destroy_tensor(self, handle: int) -> int:
        """Release a tensor descriptor (the device memory stays); returns the aclnn status."""
        return int(self._fn["aclDestroyTensor"](ctypes.c_void_p(handle)))

    def destroy_scalar(self, handle: int) -> int:
        """Release a scalar; returns the aclnn status."""
        status = int(self._fn["aclDestroyScalar"](ctypes.c_void_p(handle)))
        self._keep.pop(handle, None)
        return status

    def add_workspace_size(self, a: int, b: int, alpha: int, out: int) -> Tuple[int, int, int]:
        """Phase 1 of out = a + alpha·b: (status, workspace bytes, executor handle)."""
        size = ctypes.c_uint64(0)
        executor = ctypes.c_void_p()
        status = self._fn["aclnnAddGetWorkspaceSize"](
            ctypes.c_void_p(a),
            ctypes.c_void_p(b),
            ctypes.c_void_p(alpha),
            ctypes.c_void_p(out),
            ctypes.byref(size),
            ctypes.byref(executor),
        )
        return int(status), int(size.value), int(executor.value or 0)

    def add(self, workspace: int, workspace_bytes: int, executor: int, stream: int) -> int:
        """Phase 2: launch the kernel on ``stream``; returns the aclnn status (the executor is spent)."""
        return int(
            self._fn["aclnnAdd"](
                ctypes.c_void_p(workspace or None),
                workspace_bytes,
                ctypes.c_void_p(executor),
                ctypes.c_void_p(stream or None),
            )
        )


def _find(libraries: Sequence[Any], name: str) -> Any:
    for library in libraries:
        try:
            return getattr(library, name)
        except AttributeError:
            continue
    raise AclnnUnavailableError(f"no loaded aclnn library exports {name}")
