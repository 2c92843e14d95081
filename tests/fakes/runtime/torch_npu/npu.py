"""The fake ``torch.npu``: init, devices, memory info, streams, timing events, synchronize, empty_cache."""

from __future__ import annotations

import time
from typing import Optional, Tuple

from fakeruntime import act, env, error_of, working_on
from torch.npu_state import LEDGER, STATE, npu_error


def _fault(name: str, call: str, where: str) -> None:
    code = error_of(act(name))
    if code is not None:
        raise npu_error(call, code, where)


def init() -> None:
    _fault("init", "c10_npu::NpuSysCtrl::Initialize", "init")
    if not STATE.initialized:
        STATE.initialized = True
        LEDGER.call("init", 0)


def is_available() -> bool:
    return device_count() > 0


def device_count() -> int:
    _fault("device_count", "aclrtGetDeviceCount", "device_count")
    return STATE.device_count()


def set_device(device: int) -> None:
    working_on(int(device))
    _fault("set_device", "c10_npu::SetDevice(device_id_)", "Initialize")
    if not 0 <= int(device) < STATE.device_count():
        raise npu_error("c10_npu::SetDevice(device_id_)", 107001, "Initialize")
    STATE.current = int(device)
    LEDGER.open("device", STATE.current)  # torch_npu never resets a device; not part of the balance


def current_device() -> int:
    return STATE.current


def get_device_name(device: Optional[int] = None) -> str:
    return env("NPUWATCH_FAKE_SOC", "Ascend910B3")


def mem_get_info(device: Optional[int] = None) -> Tuple[int, int]:
    _fault("get_mem_info", "aclrtGetMemInfo", "mem_get_info")
    return STATE.free_bytes(), STATE.total_bytes()


class Stream:
    def __init__(self) -> None:
        self.npu_stream = STATE.handle()

    def synchronize(self) -> None:
        synchronize()


_CURRENT = Stream()


def current_stream(device: Optional[int] = None) -> Stream:
    return _CURRENT


class Event:
    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = enable_timing
        self._stamp: Optional[float] = None

    def record(self, stream: Optional[Stream] = None) -> None:
        _fault("record_event", "aclrtRecordEvent", "record")
        self._stamp = STATE.stream.stamp()

    def synchronize(self) -> None:
        _fault("synchronize", "aclrtSynchronizeEvent", "synchronize")
        if self._stamp is not None:
            STATE.stream.wait_until(self._stamp)

    def query(self) -> bool:
        return self._stamp is None or time.perf_counter() >= self._stamp

    def elapsed_time(self, end: Event) -> float:
        _fault("elapsed", "aclrtEventElapsedTime", "elapsed_time")
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._stamp is None or end._stamp is None:
            raise npu_error("aclrtEventElapsedTime", 107006, "elapsed_time")
        return round((end._stamp - self._stamp) * 1e3, 3)


def synchronize(device: Optional[int] = None) -> None:
    _fault("synchronize", "aclrtSynchronizeDevice", "npuSynchronizeDevice")
    STATE.stream.wait_until(STATE.stream.busy_until)


def empty_cache() -> None:
    LEDGER.call("empty_cache", 0)


# --- allocator statistics (read by the notebook view's "this kernel" figures) -----------------

#: The caching allocator rounds device blocks up to this size (torch_npu's large-block rounding).
_BLOCK = 2 * 1024 * 1024


def is_initialized() -> bool:
    return STATE.initialized


def memory_allocated(device: Optional[int] = None) -> int:
    """Bytes held by live tensors; the fake keeps one ledger, charged to the current device."""
    index = STATE.current if device is None else int(str(device).rsplit(":", 1)[-1])
    return STATE.allocated if index == STATE.current else 0


def memory_reserved(device: Optional[int] = None) -> int:
    """Bytes the caching allocator holds: the allocated bytes rounded up to whole blocks."""
    allocated = memory_allocated(device)
    return -(-allocated // _BLOCK) * _BLOCK
