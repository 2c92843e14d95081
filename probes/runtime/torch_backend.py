"""Provides run_torch(): the self-test through torch_npu (runtime-and-doctor.md §4), same steps as pyACL."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from npuwatch.probes.runtime.error_codes import code_in_torch_message
from npuwatch.probes.runtime.plan import (
    CORRUPTION_HINT,
    MIB,
    Plan,
    copy_block,
    headline,
    judge_timing,
    kernel_inputs,
    rate_summary,
)
from npuwatch.probes.runtime.protocol import MAIN_STEPS, EventKind, Step
from npuwatch.probes.runtime.recorder import Recorder, RunAbortedError, StepFailedError, StepOutcome

_OOM_HINT = (
    "device memory is held by other processes: see them with `npu-smi info`, stop them, or run the "
    "self-test on an idle chip"
)


@contextlib.contextmanager
def _calling(call: str, fatal: bool = True) -> Iterator[None]:
    """Turn torch_npu's RuntimeError (``… error code is 507033 …``) into a StepFailedError naming ``call``."""
    try:
        yield
    except RuntimeError as exc:
        message = str(exc).strip()
        first = message.splitlines()[0] if message else type(exc).__name__
        hint = _OOM_HINT if "out of memory" in message.lower() else None
        raise StepFailedError(
            f"{call} raised: {first}",
            code=code_in_torch_message(message),
            call=call,
            message=message,
            hint=hint,
            fatal=fatal,
        ) from None


class TorchSession:
    """One device's run through torch.npu; tensors are dropped and the cache emptied at the end."""

    def __init__(self, torch: Any, rec: Recorder, plan: Plan, environ: Mapping[str, str]) -> None:
        self.torch = torch
        self.npu = torch.npu
        self.rec = rec
        self.plan = plan
        self.environ = environ
        self.device_name = ""
        self.stream: Any = None
        self.events: List[Any] = []
        self.tensors: Dict[str, Any] = {}
        self.timings: List[Tuple[float, float]] = []

    def timed(self, enqueue: Callable[[], None], announce: Optional[str] = None) -> float:
        """Event-timed milliseconds of ``enqueue``; the host wall time is kept for the timing check."""
        start, end = self.events
        if announce:
            self.rec.call(announce)
        began = time.perf_counter()
        with _calling("torch.npu.Event.record"):
            start.record(self.stream)
        enqueue()
        with _calling("torch.npu.Event.record"):
            end.record(self.stream)
        self.rec.call("torch.npu.Event.synchronize")
        with _calling("torch.npu.Event.synchronize"):
            end.synchronize()
        wall_ms = (time.perf_counter() - began) * 1e3
        with _calling("torch.npu.Event.elapsed_time"):
            elapsed_ms = float(start.elapsed_time(end))
        self.timings.append((elapsed_ms, wall_ms))
        return elapsed_ms

    def setup(self, device: int, rec: Recorder) -> None:
        npu = self.npu
        with rec.step(Step.INIT) as out, _calling("torch.npu.init"):
            init = getattr(npu, "init", None)
            if init is not None:
                rec.call("torch.npu.init")
                init()
            out.detail = "torch.npu initialised" if init is not None else "torch.npu initialises lazily"
        with rec.step(Step.DEVICE_COUNT) as out, _calling("torch.npu.device_count"):
            count = int(npu.device_count())
            rec.emit(EventKind.FACTS, device_count=count, run_mode=None)
            out.metrics["device_count"] = count
            visible = self.environ.get("ASCEND_RT_VISIBLE_DEVICES")
            scope = "" if visible is None else f" (ASCEND_RT_VISIBLE_DEVICES={visible!r})"
            if count < 1:
                raise StepFailedError(f"torch.npu sees no device{scope}", hint="run `npuwatch doctor`")
            if device >= count:
                raise StepFailedError(
                    f"device {device} is not visible: torch.npu sees {count} device(s), 0–{count - 1}{scope}",
                    hint="use a logical device ID below the count (`--device all` tests every one)",
                )
            out.detail = f"{count} device(s) visible{scope}"
        with rec.step(Step.SET_DEVICE) as out, _calling(f"torch.npu.set_device({device})"):
            rec.call("torch.npu.set_device")
            npu.set_device(device)
            name = getattr(npu, "get_device_name", None)
            self.device_name = str(name(device)) if name is not None else ""
            out.detail = f"device {device} opened" + (f" ({self.device_name})" if self.device_name else "")
        with rec.step(Step.CONTEXT_STREAM) as out, _calling("torch.npu.Event"):
            self.stream = npu.current_stream()
            self.events = [npu.Event(enable_timing=True), npu.Event(enable_timing=True)]
            out.detail = "current stream and 2 timing events"

    def memory(self, device: int, rec: Recorder) -> None:
        torch = self.torch
        with rec.step(Step.MEMORY_INFO) as out, _calling("torch.npu.mem_get_info"):
            free, total = (int(v) for v in self.npu.mem_get_info(device))
            used = total - free
            out.metrics.update(kind="device", free_bytes=free, total_bytes=total, used_bytes=used)
            out.detail = (
                f"{used / 2**30:.1f} GiB used of {total / 2**30:.1f} GiB ({free / 2**30:.1f} GiB free)"
            )
            if total > 0 and used > 0.5 * total:
                out.warn(
                    f"{used / total:.0%} of device memory is already in use: another job may hold this chip"
                )
        self.plan = self.plan.capped(free // 4)
        with rec.step(Step.ALLOCATE) as out:
            where = f"npu:{device}"
            size, elements = self.plan.largest_copy_bytes, self.plan.kernel_elements
            with _calling("torch.empty(device)"):
                for name in ("copy_a", "copy_b"):
                    self.tensors[name] = torch.empty(size, dtype=torch.uint8, device=where)
                for name in ("kernel_a", "kernel_b", "kernel_out"):
                    self.tensors[name] = torch.empty(elements, dtype=torch.float32, device=where)
            with _calling("torch.Tensor.pin_memory"):
                for name in ("src", "dst"):
                    self.tensors[name] = torch.empty(size, dtype=torch.uint8).pin_memory()
            device_bytes, host_bytes = 2 * size + 12 * elements, 2 * size
            out.metrics.update(device_bytes=device_bytes, pinned_host_bytes=host_bytes)
            out.detail = f"{device_bytes // MIB} MiB device, {host_bytes // MIB} MiB pinned host"

    def copy(self, source: str, target: str, out: StepOutcome, verify_each: bool) -> None:
        """Timed copies ``source`` → ``target`` at every size; then the data is checked on the host."""
        src, dst, host_src, host_dst = (self.tensors[n] for n in (source, target, "src", "dst"))
        per_size = []
        for size in self.plan.copy_sizes_bytes:

            def enqueue(size: int = size) -> None:
                with _calling(f"torch.Tensor.copy_({source}→{target})"):
                    dst[:size].copy_(src[:size], non_blocking=True)

            self.timed(enqueue)
            samples = []
            for _ in range(self.plan.repeats):
                if verify_each:
                    host_dst.zero_()
                samples.append(self.timed(enqueue))
                if verify_each:
                    self._verify(host_dst, host_src, size, f"{source}→{target} copy")
            per_size.append(rate_summary(size, samples))
        if not verify_each:
            largest = self.plan.largest_copy_bytes
            with _calling("torch.Tensor.copy_(read back)"):
                host_dst.zero_()
                host_dst.copy_(dst)
                self.npu.synchronize()
            self._verify(host_dst, host_src, largest, f"{source}→{target} copy (read back)")
        out.metrics.update(headline(per_size))
        size = int(out.metrics["bytes"] or 0)
        out.detail = (
            f"{out.metrics['best_gb_s']} GB/s best, {out.metrics['median_gb_s']} GB/s median "
            f"at {size // MIB} MiB; "
            + ("every copy verified" if verify_each else "data verified (read back)")
        )

    def _verify(self, got: Any, want: Any, size: int, what: str) -> None:
        if not self.torch.equal(got[:size], want[:size]):
            raise StepFailedError(
                f"{what}: data differs from what was written", hint=CORRUPTION_HINT, fatal=False
            )

    def kernel(self, out: StepOutcome) -> None:
        torch, t = self.torch, self.tensors
        elements = self.plan.kernel_elements
        a_bytes, b_bytes, expected = kernel_inputs(elements)
        with _calling("torch.Tensor.copy_(kernel inputs)", fatal=False):
            t["kernel_a"].copy_(torch.frombuffer(bytearray(a_bytes), dtype=torch.float32))
            t["kernel_b"].copy_(torch.frombuffer(bytearray(b_bytes), dtype=torch.float32))

        def enqueue() -> None:
            with _calling("torch.add", fatal=False):
                torch.add(t["kernel_a"], t["kernel_b"], out=t["kernel_out"])

        began = time.perf_counter()
        self.rec.call("torch.add")
        enqueue()
        with _calling("torch.npu.synchronize", fatal=False):
            self.npu.synchronize()
        first_ms = (time.perf_counter() - began) * 1e3
        with _calling("torch.Tensor.zero_", fatal=False):
            t["kernel_out"].zero_()
        kernel_ms = self.timed(enqueue, announce="torch.add")
        result = torch.empty(elements, dtype=torch.float32)
        with _calling("torch.Tensor.copy_(kernel result)", fatal=False):
            result.copy_(t["kernel_out"])
        if not torch.equal(result, torch.frombuffer(bytearray(expected), dtype=torch.float32)):
            raise StepFailedError(
                f"torch.add ran but its result is wrong ({elements} float32)",
                hint=CORRUPTION_HINT,
                fatal=False,
            )
        rate = 12 * elements / (kernel_ms / 1e3) / 1e9 if kernel_ms > 0 else None
        out.metrics.update(
            elements=elements, kernel_ms=kernel_ms, first_launch_ms=round(first_ms, 3), gb_s=rate
        )
        out.detail = (
            f"torch.add on {elements:,} float32: {kernel_ms:.3f} ms on the device "
            f"(first launch {first_ms:.0f} ms incl. kernel load); result verified"
        )

    def event_timing(self, out: StepOutcome) -> None:
        start, end = self.events
        samples = []
        for _ in range(self.plan.event_samples):
            with _calling("torch.npu.Event", fatal=False):
                start.record(self.stream)
                end.record(self.stream)
                self.rec.call("torch.npu.Event.synchronize")
                end.synchronize()
                samples.append(float(start.elapsed_time(end)))
        with _calling("torch.npu.Event.query", fatal=False):
            if not end.query():
                raise StepFailedError("a synchronized event reports it has not completed", fatal=False)
        judge_timing(samples, self.timings, out)

    def cleanup(self, out: StepOutcome) -> None:
        count = len(self.tensors)
        self.tensors.clear()
        self.events = []
        with _calling("torch.npu.synchronize"):
            self.rec.call("torch.npu.synchronize")
            self.npu.synchronize()
        with _calling("torch.npu.empty_cache"):
            self.npu.empty_cache()
        out.metrics["released"] = count
        out.detail = f"{count} tensors dropped, the caching allocator emptied"


def run_torch(torch: Any, device: int, plan: Plan, rec: Recorder, environ: Mapping[str, str]) -> None:
    """Every step after import on ``device``; cleanup always runs last."""
    session = TorchSession(torch, rec, plan, environ)
    set_up = False
    try:
        session.setup(device, rec)
        set_up = True
        session.memory(device, rec)
        with rec.step(Step.COPY_H2D) as out:
            pattern = b"".join(copy_block(i) for i in range(session.plan.largest_copy_bytes // MIB))
            session.tensors["src"].copy_(torch.frombuffer(bytearray(pattern), dtype=torch.uint8))
            session.copy("src", "copy_a", out, verify_each=False)
        with rec.step(Step.COPY_D2H) as out:
            session.copy("copy_a", "dst", out, verify_each=True)
        with rec.step(Step.COPY_D2D) as out:
            with _calling("torch.Tensor.zero_"):
                session.tensors["copy_b"].zero_()
            session.copy("copy_a", "copy_b", out, verify_each=False)
        with rec.step(Step.KERNEL, fatal=False) as out:
            session.kernel(out)
        with rec.step(Step.EVENTS, fatal=False) as out:
            session.event_timing(out)
    except RunAbortedError as stop:
        rec.not_run(MAIN_STEPS, because=stop.step)
    finally:
        with rec.step(Step.CLEANUP, fatal=False) as out:
            if set_up or session.tensors:
                session.cleanup(out)
            else:
                out.detail = "nothing to release"
