"""Provides the pyACL self-test's measuring steps: copies timed with events, aclnnAdd, event resolution."""

from __future__ import annotations

import ctypes
import time
from typing import Callable, Dict, List, Optional

from npuwatch.probes.runtime.acl_session import AclSession
from npuwatch.probes.runtime.aclnn import Aclnn, AclnnCallError, AclnnUnavailableError, open_libraries
from npuwatch.probes.runtime.plan import (
    CORRUPTION_HINT,
    MIB,
    copy_block,
    headline,
    judge_timing,
    kernel_inputs,
    rate_summary,
)
from npuwatch.probes.runtime.recorder import StepFailedError, StepOutcome, StepSkippedError

ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_EVENT_RECORDED_STATUS_COMPLETE = 1


def _timed(session: AclSession, enqueue: Callable[[], None], announce: Optional[str] = None) -> float:
    """Event-timed milliseconds of what ``enqueue`` puts on the stream; the host wall time is kept too."""
    rt, (start, end), stream = session.acl.rt, session.res.events, session.res.stream
    if announce:  # before the first event, so writing it is not timed
        session.rec.call(announce)
    began = time.perf_counter()
    session.check(rt.record_event(start, stream), "acl.rt.record_event")
    enqueue()
    session.check(rt.record_event(end, stream), "acl.rt.record_event")
    session.rec.call("acl.rt.synchronize_event")
    session.check(rt.synchronize_event(end), "acl.rt.synchronize_event")
    wall_ms = (time.perf_counter() - began) * 1e3
    (elapsed_ms,) = session.values(rt.event_elapsed_time(start, end), "acl.rt.event_elapsed_time")
    session.timings.append((float(elapsed_ms), wall_ms))
    return float(elapsed_ms)


def _copy_async(session: AclSession, dst: int, src: int, size: int, kind: int) -> Callable[[], None]:
    def enqueue() -> None:
        ret = session.acl.rt.memcpy_async(dst, size, src, size, kind, session.res.stream)
        session.check(ret, f"acl.rt.memcpy_async(kind={kind})")

    return enqueue


def _sweep(session: AclSession, enqueue_for: Callable[[int], Callable[[], None]]) -> List[Dict[str, object]]:
    """One warm-up and ``repeats`` timed runs of every copy size."""
    per_size = []
    for size in session.plan.copy_sizes_bytes:
        enqueue = enqueue_for(size)
        _timed(session, enqueue)
        per_size.append(rate_summary(size, [_timed(session, enqueue) for _ in range(session.plan.repeats)]))
    return per_size


def _read_back(session: AclSession, device_ptr: int, size: int) -> None:
    """Copy ``size`` bytes of device memory into the pinned ``dst`` buffer (untimed, synchronous)."""
    dst = session.res.host_buffers["dst"]
    ctypes.memset(dst, 0, size)
    ret = session.acl.rt.memcpy(dst, size, device_ptr, size, ACL_MEMCPY_DEVICE_TO_HOST)
    session.check(ret, "acl.rt.memcpy(device→host, read back)")


def _mismatch(address: int, size: int) -> Optional[int]:
    """The first MiB of host memory at ``address`` that differs from the copy pattern, or None."""
    for index in range(size // MIB):
        if ctypes.string_at(address + index * MIB, MIB) != copy_block(index):
            return index
    return None


def _verify(session: AclSession, size: int, what: str) -> None:
    bad = _mismatch(session.res.host_buffers["dst"], size)
    if bad is not None:
        raise StepFailedError(
            f"{what}: data differs from what was written, first in MiB {bad} of {size // MIB}",
            hint=CORRUPTION_HINT,
            fatal=False,
        )


def _finish(out: StepOutcome, per_size: List[Dict[str, object]], verified: str) -> None:
    out.metrics.update(headline(per_size))
    best, median = out.metrics["best_gb_s"], out.metrics["median_gb_s"]
    size = int(out.metrics["bytes"] or 0)
    out.detail = f"{best} GB/s best, {median} GB/s median at {size // MIB} MiB; {verified}"


def copy_h2d(session: AclSession, out: StepOutcome) -> None:
    src, dev = session.res.host_buffers["src"], session.res.device_buffers["copy_a"]
    for index in range(session.plan.largest_copy_bytes // MIB):
        ctypes.memmove(src + index * MIB, copy_block(index), MIB)
    per_size = _sweep(session, lambda size: _copy_async(session, dev, src, size, ACL_MEMCPY_HOST_TO_DEVICE))
    _read_back(session, dev, session.plan.largest_copy_bytes)
    _verify(session, session.plan.largest_copy_bytes, "host→device copy (read back)")
    _finish(out, per_size, "data verified (read back)")


def copy_d2h(session: AclSession, out: StepOutcome) -> None:
    dst, dev = session.res.host_buffers["dst"], session.res.device_buffers["copy_a"]
    per_size = []
    for size in session.plan.copy_sizes_bytes:
        enqueue = _copy_async(session, dst, dev, size, ACL_MEMCPY_DEVICE_TO_HOST)
        _timed(session, enqueue)
        samples = []
        for _ in range(session.plan.repeats):
            ctypes.memset(dst, 0, size)
            samples.append(_timed(session, enqueue))
            _verify(session, size, "device→host copy")
        per_size.append(rate_summary(size, samples))
    _finish(out, per_size, "every copy verified")


def copy_d2d(session: AclSession, out: StepOutcome) -> None:
    a, b = session.res.device_buffers["copy_a"], session.res.device_buffers["copy_b"]
    largest = session.plan.largest_copy_bytes
    session.check(session.acl.rt.memset(b, largest, 0, largest), "acl.rt.memset")
    per_size = _sweep(session, lambda size: _copy_async(session, b, a, size, ACL_MEMCPY_DEVICE_TO_DEVICE))
    _read_back(session, b, largest)
    _verify(session, largest, "device→device copy (read back)")
    _finish(out, per_size, "data verified (read back); memory traffic is twice the copy rate")


def kernel_add(session: AclSession, out: StepOutcome) -> None:
    """out = a + 1.0·b with aclnnAdd (workspace phase, then execute on the stream), verified bit for bit."""
    try:
        aclnn = Aclnn(open_libraries(session.acl, session.environ))
    except AclnnUnavailableError as exc:
        raise StepSkippedError(f"the aclnn libraries could not be loaded ({exc})") from None
    elements = session.plan.kernel_elements
    size = 4 * elements
    a_bytes, b_bytes, expected = kernel_inputs(elements)
    bufs, host, rt = session.res.device_buffers, session.res.host_buffers["kernel_host"], session.acl.rt
    for data, name in ((a_bytes, "kernel_a"), (b_bytes, "kernel_b")):
        ctypes.memmove(host, data, size)
        session.check(rt.memcpy(bufs[name], size, host, size, ACL_MEMCPY_HOST_TO_DEVICE), "acl.rt.memcpy")
    handles: List[int] = []
    scalar = 0
    try:
        for name in ("kernel_a", "kernel_b", "kernel_out"):
            handles.append(aclnn.create_tensor_1d(elements, bufs[name]))
        scalar = aclnn.create_scalar_f32(1.0)
        began = time.perf_counter()
        _launch(session, aclnn, handles, scalar, timed=False)
        first_ms = (time.perf_counter() - began) * 1e3
        session.check(rt.memset(bufs["kernel_out"], size, 0, size), "acl.rt.memset", fatal=False)
        kernel_ms = _launch(session, aclnn, handles, scalar, timed=True)
    except AclnnCallError as exc:
        raise StepFailedError(str(exc), fatal=False) from None
    finally:
        for handle in handles:
            aclnn.destroy_tensor(handle)
        if scalar:
            aclnn.destroy_scalar(scalar)
    session.check(rt.memcpy(host, size, bufs["kernel_out"], size, ACL_MEMCPY_DEVICE_TO_HOST), "acl.rt.memcpy")
    got = ctypes.string_at(host, size)
    if got != expected:
        at = next(i for i in range(0, size, 4) if got[i : i + 4] != expected[i : i + 4]) // 4
        raise StepFailedError(
            f"aclnnAdd ran but its result is wrong, first at element {at} of {elements}",
            hint=CORRUPTION_HINT,
            fatal=False,
        )
    rate = 3 * size / (kernel_ms / 1e3) / 1e9 if kernel_ms > 0 else None
    out.metrics.update(elements=elements, kernel_ms=kernel_ms, first_launch_ms=round(first_ms, 3), gb_s=rate)
    out.detail = (
        f"aclnnAdd on {elements:,} float32: {kernel_ms:.3f} ms on the device "
        f"(first launch {first_ms:.0f} ms incl. kernel load); result verified"
    )


def _launch(session: AclSession, aclnn: Aclnn, handles: List[int], scalar: int, timed: bool) -> float:
    """Workspace phase then execute; the executor is single-use, so every launch asks again."""
    a, b, result = handles
    status, workspace_bytes, executor = aclnn.add_workspace_size(a, b, scalar, result)
    if status != 0:
        raise StepFailedError(
            f"aclnnAddGetWorkspaceSize returned {status}",
            code=status,
            call="aclnnAddGetWorkspaceSize",
            message=session.recent_error(),
            fatal=False,
        )
    workspace = session.res.device_buffers.get("workspace", 0)
    if workspace_bytes and not workspace:
        (workspace,) = session.values(session.acl.rt.malloc(workspace_bytes, 0), "acl.rt.malloc(workspace)")
        session.res.device_buffers["workspace"] = workspace

    def enqueue() -> None:
        status = aclnn.add(workspace, workspace_bytes, executor, session.res.stream or 0)
        if status != 0:
            raise StepFailedError(
                f"aclnnAdd returned {status}",
                code=status,
                call="aclnnAdd",
                message=session.recent_error(),
                fatal=False,
            )

    if timed:
        return _timed(session, enqueue, announce="aclnnAdd")
    session.rec.call("aclnnAdd")
    enqueue()
    session.rec.call("acl.rt.synchronize_stream")
    session.check(session.acl.rt.synchronize_stream(session.res.stream), "acl.rt.synchronize_stream")
    return 0.0


def event_timing(session: AclSession, out: StepOutcome) -> None:
    """Back-to-back event pairs: the floor and resolution of device timing, and a check against wall time."""
    rt, (start, end), stream = session.acl.rt, session.res.events, session.res.stream
    samples = []
    for _ in range(session.plan.event_samples):
        session.check(rt.record_event(start, stream), "acl.rt.record_event")
        session.check(rt.record_event(end, stream), "acl.rt.record_event")
        session.rec.call("acl.rt.synchronize_event")
        session.check(rt.synchronize_event(end), "acl.rt.synchronize_event")
        (ms,) = session.values(rt.event_elapsed_time(start, end), "acl.rt.event_elapsed_time")
        samples.append(float(ms))
    query = getattr(rt, "query_event_status", None)
    if query is not None:
        (status,) = session.values(query(end), "acl.rt.query_event_status")
        if status != ACL_EVENT_RECORDED_STATUS_COMPLETE:
            raise StepFailedError(f"a synchronized event reports status {status}, not complete", fatal=False)
    judge_timing(samples, session.timings, out)
