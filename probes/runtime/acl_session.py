"""Provides AclSession: one device's pyACL calls, return codes checked, every resource tracked for cleanup.

pyACL returns ``value…, ret`` tuples with ``ret`` last, or a bare ``ret``; 0 is success
(runtime-and-doctor.md §1.2).  Constants are the C enums' values (§1.3): pyACL exports none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npuwatch.chip_families import family_of
from npuwatch.probes.runtime.plan import MIB, Plan
from npuwatch.probes.runtime.protocol import EventKind
from npuwatch.probes.runtime.recorder import Recorder, StepFailedError, StepOutcome

ACL_SUCCESS = 0
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_DDR_MEM = 0
ACL_HBM_MEM = 1
ACL_EVENT_TIME_LINE = 0x8
RUN_MODES = {0: "device", 1: "host"}  # ACL_DEVICE: the app runs on the board's own CPU (RC, 310B)


@dataclass
class AclResources:
    """What this process created, so cleanup can undo exactly that (child side, mutable)."""

    initialized: bool = False  # our acl.init returned 0, so finalize is ours to call
    device: Optional[int] = None  # set_device succeeded
    context: Optional[int] = None
    stream: Optional[int] = None
    events: List[int] = field(default_factory=list)
    device_buffers: Dict[str, int] = field(default_factory=dict)
    host_buffers: Dict[str, int] = field(default_factory=dict)


class AclSession:
    """One device's run: pyACL calls with their return codes checked and their resources tracked."""

    def __init__(self, acl: Any, rec: Recorder, plan: Plan, environ: Mapping[str, str]) -> None:
        self.acl = acl
        self.rec = rec
        self.plan = plan
        self.environ = environ
        self.res = AclResources()
        self.soc_name: Optional[str] = None
        self.run_mode: Optional[str] = None
        self.timings: List[Tuple[float, float]] = []  # (event ms, host wall ms) of timed copies

    def recent_error(self) -> Optional[str]:
        """The runtime's own text for the last failure (``EE…``/``EZ9999`` lines), if it has one."""
        getter = getattr(self.acl, "get_recent_err_msg", None)
        try:
            message = getter() if getter is not None else None
        except Exception:
            return None
        if not isinstance(message, str):
            return None
        return message.strip() or None

    def check(self, ret: Any, call: str, fatal: bool = True) -> None:
        """Raise ``StepFailedError`` naming ``call`` when ``ret`` is not ACL_SUCCESS."""
        if ret != ACL_SUCCESS:
            raise StepFailedError(
                f"{call} returned {ret}", code=int(ret), call=call, message=self.recent_error(), fatal=fatal
            )

    def values(self, result: Any, call: str, fatal: bool = True) -> Tuple[Any, ...]:
        """The values of a ``value…, ret`` tuple, after checking ``ret``."""
        *values, ret = result
        self.check(ret, call, fatal)
        return tuple(values)

    # -- steps, in order ------------------------------------------------------------------------

    def init(self, out: StepOutcome) -> None:
        self.rec.call("acl.init")
        ret = self.acl.init()
        if ret == ACL_ERROR_REPEAT_INITIALIZE:
            out.detail = (
                "already initialised in this process (100002, harmless): finalize is left to its owner"
            )
            return
        self.check(ret, "acl.init")
        self.res.initialized = True
        out.detail = "acl.init returned 0"

    def device_count(self, device: int, out: StepOutcome) -> int:
        (count,) = self.values(self.acl.rt.get_device_count(), "acl.rt.get_device_count")
        get_run_mode = getattr(self.acl.rt, "get_run_mode", None)
        if get_run_mode is not None:
            mode, ret = get_run_mode()
            self.run_mode = RUN_MODES.get(mode) if ret == ACL_SUCCESS else None
        self.rec.emit(EventKind.FACTS, device_count=count, run_mode=self.run_mode)
        out.metrics.update(device_count=count, run_mode=self.run_mode)
        visible = self.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        scope = "" if visible is None else f" (ASCEND_RT_VISIBLE_DEVICES={visible!r})"
        if count < 1:
            raise StepFailedError(
                f"the runtime sees no device{scope}",
                hint="check /dev/davinci*, the driver, ASCEND_RT_VISIBLE_DEVICES (empty hides every chip); "
                "run `npuwatch doctor`",
            )
        if device >= count:
            raise StepFailedError(
                f"device {device} is not visible: the runtime sees {count} device(s), 0–{count - 1}{scope}",
                hint="use a logical device ID below the count (`--device all` tests every one)",
            )
        out.detail = f"{count} device(s) visible{scope}" + (
            f", run mode {self.run_mode}" if self.run_mode else ""
        )
        return int(count)

    def set_device(self, device: int, out: StepOutcome) -> None:
        self.rec.call("acl.rt.set_device")
        self.check(self.acl.rt.set_device(device), f"acl.rt.set_device({device})")
        self.res.device = device
        out.detail = f"device {device} opened"

    def context_stream(self, device: int, out: StepOutcome) -> None:
        rt = self.acl.rt
        (self.res.context,) = self.values(rt.create_context(device), f"acl.rt.create_context({device})")
        (self.res.stream,) = self.values(rt.create_stream(), "acl.rt.create_stream")
        with_flag = getattr(rt, "create_event_with_flag", None)
        kind = "timing"
        for _ in range(2):
            event, ret = with_flag(ACL_EVENT_TIME_LINE) if with_flag is not None else (0, -1)
            if ret != ACL_SUCCESS:
                # Older pyACL lacks the call (runtime-and-doctor.md §14 item 1), and a runtime may
                # refuse the flag: a plain event is recorded and timed the same way.
                (event,) = self.values(rt.create_event(), "acl.rt.create_event")
                kind = "plain"
            self.res.events.append(event)
        out.detail = f"context, stream and 2 {kind} events created"

    def memory_info(self, out: StepOutcome) -> int:
        """Free bytes of the chip's main memory (HBM, or DDR on 310-class chips)."""
        ddr_first = family_of(self.soc_name).memory_kind == "DDR"  # the 310 family (§11)
        attrs = [ACL_DDR_MEM, ACL_HBM_MEM] if ddr_first else [ACL_HBM_MEM, ACL_DDR_MEM]
        free = total = 0
        kind = "HBM"
        for attr in attrs:
            free, total = self.values(self.acl.rt.get_mem_info(attr), f"acl.rt.get_mem_info({attr})")
            kind = "DDR" if attr == ACL_DDR_MEM else "HBM"
            if total > 0:
                break
        if total <= 0:
            raise StepFailedError("the runtime reports 0 bytes of device memory", call="acl.rt.get_mem_info")
        used = total - free
        out.metrics.update(kind=kind, free_bytes=free, total_bytes=total, used_bytes=used)
        out.detail = (
            f"{kind} {used / 2**30:.1f} GiB used of {total / 2**30:.1f} GiB ({free / 2**30:.1f} GiB free)"
        )
        if used > 0.5 * total:
            out.warn(f"{used / total:.0%} of {kind} is already in use: another job may hold this chip")
        return int(free)

    def allocate(self, free_bytes: int, out: StepOutcome) -> None:
        # Take at most a quarter of free memory, so the self-test never starves a job beside it.
        self.plan = self.plan.capped(free_bytes // 4)
        kernel_elements = self.plan.kernel_elements
        while kernel_elements > 1024 and 3 * 4 * kernel_elements > free_bytes // 8:
            kernel_elements //= 2
        if kernel_elements != self.plan.kernel_elements:
            self.plan = Plan(
                self.plan.level,
                self.plan.copy_sizes_bytes,
                self.plan.repeats,
                kernel_elements,
                self.plan.event_samples,
            )
        copy_bytes = self.plan.largest_copy_bytes
        kernel_bytes = 4 * self.plan.kernel_elements
        device = {
            "copy_a": copy_bytes,
            "copy_b": copy_bytes,
            "kernel_a": kernel_bytes,
            "kernel_b": kernel_bytes,
        }
        device["kernel_out"] = kernel_bytes
        for name, size in device.items():
            self.rec.call("acl.rt.malloc")
            (ptr,) = self.values(
                self.acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST), f"acl.rt.malloc({size})"
            )
            self.res.device_buffers[name] = ptr
        for name, size in (("src", copy_bytes), ("dst", copy_bytes), ("kernel_host", kernel_bytes)):
            (ptr,) = self.values(self.acl.rt.malloc_host(size), f"acl.rt.malloc_host({size})")
            self.res.host_buffers[name] = ptr
        device_total = sum(device.values())
        host_total = 2 * copy_bytes + kernel_bytes
        out.metrics.update(device_bytes=device_total, pinned_host_bytes=host_total)
        out.detail = f"{device_total // MIB} MiB device, {host_total // MIB} MiB pinned host"

    def cleanup(self, out: StepOutcome) -> None:
        """Undo everything in reverse order; keep going past failures and report them all."""
        rt, res = self.acl.rt, self.res
        failures: List[Tuple[str, int]] = []
        released = 0

        def undo(call: str, ret: Any) -> None:
            nonlocal released
            if ret == ACL_SUCCESS:
                released += 1
            else:
                failures.append((call, int(ret)))

        if res.stream is not None:
            self.rec.call("acl.rt.synchronize_stream")
            undo("acl.rt.synchronize_stream", rt.synchronize_stream(res.stream))
        while res.events:
            undo("acl.rt.destroy_event", rt.destroy_event(res.events.pop()))
        for name in reversed(list(res.device_buffers)):
            undo(f"acl.rt.free({name})", rt.free(res.device_buffers.pop(name)))
        for name in reversed(list(res.host_buffers)):
            undo(f"acl.rt.free_host({name})", rt.free_host(res.host_buffers.pop(name)))
        if res.stream is not None:
            undo("acl.rt.destroy_stream", rt.destroy_stream(res.stream))
            res.stream = None
        if res.context is not None:
            undo("acl.rt.destroy_context", rt.destroy_context(res.context))
            res.context = None
        if res.device is not None:
            self.rec.call("acl.rt.reset_device")
            undo(f"acl.rt.reset_device({res.device})", rt.reset_device(res.device))
            res.device = None
        if res.initialized:
            self.rec.call("acl.finalize")
            undo("acl.finalize", self.acl.finalize())
            res.initialized = False
        out.metrics.update(released=released, failed=len(failures))
        if failures:
            call, code = failures[0]
            listed = ", ".join(f"{c} → {r}" for c, r in failures)
            raise StepFailedError(
                f"{len(failures)} release call(s) failed: {listed}",
                code=code,
                call=call,
                message=self.recent_error(),
            )
        out.detail = f"{released} release call(s), all returned 0" if released else "nothing to release"
