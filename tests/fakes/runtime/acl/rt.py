"""The fake ``acl.rt``: pyACL's runtime calls with its return conventions (``value…, ret`` with ret last)."""

from __future__ import annotations

import ctypes
import time
from typing import Optional, Tuple

from fakeruntime import act, error_of, rates_gb_s, working_on

from acl.state import LEDGER, STATE

ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID = 107006
ACL_ERROR_RT_INVALID_HANDLE = 107017
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507006

_RATES = rates_gb_s()


def _fault(name: str, call: str) -> Optional[int]:
    code = error_of(act(name))
    return None if code is None else STATE.fail(code, call)


def _ok(call: str) -> int:
    return LEDGER.call(call, 0)


def _need_context(call: str) -> Optional[int]:
    if not STATE.initialized:
        return STATE.fail(ACL_ERROR_UNINITIALIZE, call)
    if STATE.current_device is None and STATE.current_context is None:
        return STATE.fail(ACL_ERROR_RT_CONTEXT_NULL, call)
    return None


# -- devices -------------------------------------------------------------------------------------


def get_device_count() -> Tuple[int, int]:
    code = _fault("device_count", "get_device_count")
    if code is not None:
        return 0, code
    if not STATE.initialized:
        return 0, STATE.fail(ACL_ERROR_UNINITIALIZE, "get_device_count")
    return STATE.device_count(), _ok("get_device_count")


def get_run_mode() -> Tuple[int, int]:
    return 1, 0  # ACL_HOST: a PCIe card in a server


def set_device(device_id: int) -> int:
    working_on(device_id)
    code = _fault("set_device", "set_device")
    if code is not None:
        return code
    if not STATE.initialized:
        return STATE.fail(ACL_ERROR_UNINITIALIZE, "set_device")
    if not 0 <= device_id < STATE.device_count():
        return STATE.fail(ACL_ERROR_RT_INVALID_DEVICEID, "set_device")
    if device_id not in STATE.devices_set:
        LEDGER.open("device", device_id)
    STATE.devices_set[device_id] = STATE.devices_set.get(device_id, 0) + 1
    STATE.current_device = device_id
    return _ok("set_device")


def reset_device(device_id: int) -> int:
    code = _fault("reset_device", "reset_device")
    if code is not None:
        return code
    if device_id not in STATE.devices_set:
        return STATE.fail(ACL_ERROR_RT_INVALID_DEVICEID, "reset_device")
    STATE.devices_set[device_id] -= 1
    if STATE.devices_set[device_id] == 0:
        del STATE.devices_set[device_id]
        LEDGER.close("device", device_id)
        if STATE.current_device == device_id:
            STATE.current_device = None
    return _ok("reset_device")


# -- contexts and streams ------------------------------------------------------------------------


def create_context(device_id: int) -> Tuple[int, int]:
    code = _fault("create_context", "create_context")
    if code is not None:
        return 0, code
    if not 0 <= device_id < STATE.device_count():
        return 0, STATE.fail(ACL_ERROR_RT_INVALID_DEVICEID, "create_context")
    handle = STATE.handle()
    STATE.contexts[handle] = device_id
    STATE.current_context = handle
    LEDGER.open("context", handle)
    return handle, _ok("create_context")


def destroy_context(context: int) -> int:
    code = _fault("destroy_context", "destroy_context")
    if code is not None:
        return code
    if STATE.contexts.pop(context, None) is None or not LEDGER.close("context", context):
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "destroy_context")
    if STATE.current_context == context:
        STATE.current_context = None
    return _ok("destroy_context")


def create_stream() -> Tuple[int, int]:
    code = _fault("create_stream", "create_stream") or _need_context("create_stream")
    if code is not None:
        return 0, code
    handle = STATE.handle()
    STATE.streams[handle] = type(STATE.default_stream)()
    LEDGER.open("stream", handle)
    return handle, _ok("create_stream")


def destroy_stream(stream: int) -> int:
    code = _fault("destroy_stream", "destroy_stream")
    if code is not None:
        return code
    if STATE.streams.pop(stream, None) is None or not LEDGER.close("stream", stream):
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "destroy_stream")
    return _ok("destroy_stream")


def synchronize_stream(stream: int) -> int:
    code = _fault("synchronize", "synchronize_stream")
    if code is not None:
        return code
    timeline = STATE.timeline(stream)
    if timeline is None:
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "synchronize_stream")
    timeline.wait_until(timeline.busy_until)
    return _ok("synchronize_stream")


# -- memory --------------------------------------------------------------------------------------


def get_mem_info(attr: int) -> Tuple[int, int, int]:
    code = _fault("get_mem_info", "get_mem_info") or _need_context("get_mem_info")
    if code is not None:
        return 0, 0, code
    if not 0 <= attr <= 9:
        return 0, 0, STATE.fail(ACL_ERROR_INVALID_PARAM, "get_mem_info")
    return STATE.free_bytes(), STATE.total_bytes(), _ok("get_mem_info")


def malloc(size: int, policy: int) -> Tuple[int, int]:
    code = _fault("malloc", "malloc") or _need_context("malloc")
    if code is not None:
        return 0, code
    if size <= 0 or not 0 <= policy <= 5:
        return 0, STATE.fail(ACL_ERROR_INVALID_PARAM, "malloc")
    if size > STATE.free_bytes():
        return 0, STATE.fail(ACL_ERROR_RT_MEMORY_ALLOCATION, "malloc")
    address = STATE.device_alloc(size)
    LEDGER.open("device_mem", address, f"{size} B")
    return address, _ok("malloc")


def free(dev_ptr: int) -> int:
    code = _fault("free", "free")
    if code is not None:
        return code
    if STATE.device_mem.pop(dev_ptr, None) is None or not LEDGER.close("device_mem", dev_ptr):
        return STATE.fail(ACL_ERROR_RT_PARAM_INVALID, "free")
    return _ok("free")


def malloc_host(size: int) -> Tuple[int, int]:
    code = _fault("malloc_host", "malloc_host") or _need_context("malloc_host")
    if code is not None:
        return 0, code
    address = STATE.host_alloc(size)
    LEDGER.open("host_mem", address, f"{size} B")
    return address, _ok("malloc_host")


def free_host(host_ptr: int) -> int:
    code = _fault("free_host", "free_host")
    if code is not None:
        return code
    if STATE.host_mem.pop(host_ptr, None) is None or not LEDGER.close("host_mem", host_ptr):
        return STATE.fail(ACL_ERROR_RT_PARAM_INVALID, "free_host")
    return _ok("free_host")


def _copy(dst: int, dest_max: int, src: int, count: int, kind: int, pinned_only: bool, call: str) -> int:
    action = act("memcpy")
    if action not in (None, "corrupt"):
        return STATE.fail(int(str(action)), call)
    dst_dev, src_dev = STATE.is_device_address(dst), STATE.is_device_address(src)
    expected = {0: (False, False), 1: (True, False), 2: (False, True), 3: (True, True)}.get(kind)
    if count > dest_max or (expected is not None and expected != (dst_dev, src_dev)) or kind not in range(5):
        return STATE.fail(ACL_ERROR_INVALID_PARAM, call)
    if pinned_only and not all(
        STATE.pinned(p, count) for p, dev in ((dst, dst_dev), (src, src_dev)) if not dev
    ):
        return STATE.fail(ACL_ERROR_INVALID_PARAM, call)  # async copies need malloc_host memory
    real_dst, real_src = STATE.real_address(dst, count), STATE.real_address(src, count)
    if real_dst is None or real_src is None:
        return STATE.fail(ACL_ERROR_RT_PARAM_INVALID, call)
    ctypes.memmove(real_dst, real_src, count)
    if action == "corrupt" and count:
        byte = ctypes.c_ubyte.from_address(real_dst + count // 2)
        byte.value = (byte.value + 1) & 0xFF  # never cancels out when read back through a second copy
    return 0


def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> int:
    code = _need_context("memcpy") or _copy(dst, dest_max, src, count, kind, False, "memcpy")
    return code if code else _ok("memcpy")


def memcpy_async(dst: int, dest_max: int, src: int, count: int, kind: int, stream: int) -> int:
    timeline = STATE.timeline(stream)
    if timeline is None:
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "memcpy_async")
    began = time.perf_counter()
    code = _need_context("memcpy_async") or _copy(dst, dest_max, src, count, kind, True, "memcpy_async")
    if code:
        return code
    rate = {1: "h2d", 2: "d2h", 3: "d2d"}.get(kind, "d2d")
    timeline.enqueue(count / (_RATES[rate] * 1e9), since=began)
    return _ok("memcpy_async")


def memset(dev_ptr: int, max_count: int, value: int, count: int) -> int:
    code = _fault("memset", "memset") or _need_context("memset")
    if code is not None:
        return code
    span = STATE.device_span(dev_ptr, count)
    if span is None or count > max_count:
        return STATE.fail(ACL_ERROR_INVALID_PARAM, "memset")
    buffer, offset = span
    buffer[offset : offset + count] = bytes([value & 0xFF]) * count
    return _ok("memset")


# -- events --------------------------------------------------------------------------------------


def create_event() -> Tuple[int, int]:
    code = _fault("create_event", "create_event") or _need_context("create_event")
    if code is not None:
        return 0, code
    handle = STATE.handle()
    STATE.events[handle] = None
    LEDGER.open("event", handle)
    return handle, _ok("create_event")


def create_event_with_flag(flag: int) -> Tuple[int, int]:
    if flag not in (0x1, 0x2, 0x8, 0x9, 0xA):
        return 0, STATE.fail(ACL_ERROR_INVALID_PARAM, "create_event_with_flag")
    return create_event()


def record_event(event: int, stream: int) -> int:
    code = _fault("record_event", "record_event")
    if code is not None:
        return code
    timeline = STATE.timeline(stream)
    if event not in STATE.events or timeline is None:
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "record_event")
    STATE.events[event] = timeline.stamp()
    return _ok("record_event")


def synchronize_event(event: int) -> int:
    code = _fault("synchronize", "synchronize_event")
    if code is not None:
        return code
    if event not in STATE.events:
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "synchronize_event")
    stamp = STATE.events[event]
    if stamp is not None:
        type(STATE.default_stream).wait_until(stamp)
    return _ok("synchronize_event")


def query_event_status(event: int) -> Tuple[int, int]:
    stamp = STATE.events.get(event)
    if event not in STATE.events:
        return 0, STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "query_event_status")
    return int(stamp is not None and time.perf_counter() >= stamp), _ok("query_event_status")


def event_elapsed_time(start: int, end: int) -> Tuple[float, int]:
    code = _fault("elapsed", "event_elapsed_time")
    if code is not None:
        return 0.0, code
    if start not in STATE.events or end not in STATE.events:
        return 0.0, STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "event_elapsed_time")
    t0, t1 = STATE.events[start], STATE.events[end]
    if t0 is None or t1 is None:
        return 0.0, STATE.fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "event_elapsed_time")
    if time.perf_counter() < t1:
        return 0.0, STATE.fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE, "event_elapsed_time")
    return round((t1 - t0) * 1e3, 3), _ok("event_elapsed_time")


def destroy_event(event: int) -> int:
    code = _fault("destroy_event", "destroy_event")
    if code is not None:
        return code
    if event not in STATE.events:
        return STATE.fail(ACL_ERROR_RT_INVALID_HANDLE, "destroy_event")
    del STATE.events[event]
    LEDGER.close("event", event)
    return _ok("destroy_event")
