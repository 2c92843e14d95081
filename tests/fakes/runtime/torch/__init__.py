"""A fake ``torch`` for tests: 1-D tensors over bytearrays on ``cpu`` or ``npu:N``, for copies and an add.

``torch.npu`` appears when the fake ``torch_npu`` is imported, as with the real pair.  Device
storage is tracked in the ledger (``device_mem``) until the last tensor using it is dropped.
"""

from __future__ import annotations

import operator
import time
import weakref
from array import array
from typing import Any, Optional

from fakeruntime import act, error_of, rates_gb_s

from torch.npu_state import LEDGER, STATE, npu_error

__version__ = "2.5.1"


class dtype:  # noqa: N801  (torch spells it so)
    def __init__(self, name: str, itemsize: int, code: str) -> None:
        self.name, self.itemsize, self.code = name, itemsize, code

    def __repr__(self) -> str:
        return f"torch.{self.name}"


uint8 = dtype("uint8", 1, "B")
float32 = dtype("float32", 4, "f")


class _Storage:
    def __init__(self, data: bytearray, device: str, pinned: bool = False) -> None:
        self.data, self.device, self.pinned = data, device, pinned
        if device != "cpu":
            handle = STATE.handle()
            LEDGER.open("device_mem", handle, f"{len(data)} B")
            weakref.finalize(self, _release_device, handle, len(data))
        elif pinned:
            handle = STATE.handle()
            LEDGER.open("host_mem", handle, f"{len(data)} B")
            weakref.finalize(self, LEDGER.close, "host_mem", handle)


def _release_device(handle: int, size: int) -> None:
    LEDGER.close("device_mem", handle)
    STATE.allocated -= size


class Tensor:
    def __init__(self, storage: _Storage, offset: int, numel: int, dtype_: dtype) -> None:
        self._storage, self._offset, self._numel, self.dtype = storage, offset, numel, dtype_

    @property
    def device(self) -> str:
        return self._storage.device

    @property
    def is_npu(self) -> bool:
        return self.device != "cpu"

    def numel(self) -> int:
        return self._numel

    def _bytes(self) -> memoryview:
        start = self._offset * self.dtype.itemsize
        return memoryview(self._storage.data)[start : start + self._numel * self.dtype.itemsize]

    def __getitem__(self, key: slice) -> Tensor:
        start, stop, step = key.indices(self._numel)
        if step != 1:
            raise NotImplementedError("fake torch: only contiguous slices")
        return Tensor(self._storage, self._offset + start, max(0, stop - start), self.dtype)

    def copy_(self, src: Tensor, non_blocking: bool = False) -> Tensor:
        if src.numel() != self.numel() or src.dtype is not self.dtype:
            raise RuntimeError(
                f"fake torch: copy_ of {src.numel()} {src.dtype} into {self.numel()} {self.dtype}"
            )
        npu = self.is_npu or src.is_npu
        began = time.perf_counter()
        action = act("memcpy") if npu else None
        code = error_of(action)
        if code is not None:
            raise npu_error("c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream)", code, "copy_")
        target = self._bytes()
        target[:] = src._bytes()
        if action == "corrupt" and len(target):
            target[len(target) // 2] = (target[len(target) // 2] + 1) & 0xFF
        if npu:
            direction = "d2d" if self.is_npu and src.is_npu else ("h2d" if self.is_npu else "d2h")
            STATE.stream.enqueue(len(target) / (rates_gb_s()[direction] * 1e9), since=began)
            if not non_blocking:
                STATE.stream.wait_until(STATE.stream.busy_until)
        return self

    def zero_(self) -> Tensor:
        view = self._bytes()
        view[:] = bytes(len(view))
        return self

    def pin_memory(self) -> Tensor:
        if getattr(STATE, "npu_module", None) is None:
            raise RuntimeError("fake torch: pin_memory needs an accelerator (import torch_npu)")
        code = error_of(act("malloc_host"))
        if code is not None:
            raise npu_error("aclrtMallocHost", code, "pin_memory")
        storage = _Storage(bytearray(self._bytes()), "cpu", pinned=True)
        return Tensor(storage, 0, self._numel, self.dtype)

    def cpu(self) -> Tensor:
        result = empty(self._numel, dtype=self.dtype)
        return result.copy_(self)

    def __repr__(self) -> str:
        return f"tensor(<{self._numel} × {self.dtype}>, device='{self.device}')"


def empty(
    size: int, dtype: dtype = float32, device: Optional[Any] = None, pin_memory: bool = False
) -> Tensor:
    where = "cpu" if device is None else str(device)
    if where != "cpu":
        index = int(where.split(":", 1)[1]) if ":" in where else STATE.current
        if not where.startswith("npu") or not 0 <= index < STATE.device_count():
            raise RuntimeError(f"fake torch: bad device {where!r}")
        code = error_of(act("malloc"))
        if code is not None or size * dtype.itemsize > STATE.free_bytes():
            raise RuntimeError(
                f"NPU out of memory. Tried to allocate {size * dtype.itemsize / 2**20:.2f} MiB "
                f"(NPU {index}; {STATE.total_bytes() / 2**30:.2f} GiB total capacity)"
            )
        STATE.allocated += size * dtype.itemsize
        where = f"npu:{index}"
    tensor = Tensor(_Storage(bytearray(size * dtype.itemsize), where), 0, size, dtype)
    return tensor.pin_memory() if pin_memory else tensor


def frombuffer(buffer: bytearray, dtype: dtype = float32) -> Tensor:
    if len(buffer) % dtype.itemsize:
        raise ValueError("fake torch: buffer length is not a multiple of the element size")
    return Tensor(_Storage(buffer, "cpu"), 0, len(buffer) // dtype.itemsize, dtype)


def equal(a: Tensor, b: Tensor) -> bool:
    if a.device != b.device:
        raise RuntimeError("fake torch: equal() needs both tensors on one device")
    return a.dtype is b.dtype and a.numel() == b.numel() and bytes(a._bytes()) == bytes(b._bytes())


def add(a: Tensor, b: Tensor, *, alpha: float = 1.0, out: Optional[Tensor] = None) -> Tensor:
    if not (a.is_npu and b.is_npu) or a.dtype is not float32 or b.dtype is not float32:
        raise RuntimeError("fake torch: add() is only faked for float32 npu tensors")
    began = time.perf_counter()
    action = act("kernel")
    code = error_of(action)
    if code is not None:
        raise npu_error("call aclnnAdd failed", code, "add")
    result = out if out is not None else empty(a.numel(), dtype=float32, device=a.device)
    other = b._bytes().cast("f") if alpha == 1.0 else [alpha * v for v in b._bytes().cast("f")]
    values = array("f", map(operator.add, a._bytes().cast("f"), other))
    if action == "corrupt":
        values[len(values) // 2] += 1.0
    result._bytes().cast("f")[:] = values
    STATE.stream.enqueue(12 * a.numel() / (rates_gb_s()["kernel"] * 1e9), since=began)
    return result
