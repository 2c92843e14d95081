"""Provides run_selftest(): a child process per device, each in its own process group with a hard timeout."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from npuwatch import polling_pause
from npuwatch.errors import UsageError
from npuwatch.probes.runner import LaunchError, python_module_argv, run
from npuwatch.probes.runtime.protocol import Backend, Level, Step, StepStatus, decode_events
from npuwatch.probes.sysroot import Sysroot
from npuwatch.selftest.collect import collect
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepResult

#: Per-device limits: set_device alone can take seconds on a cold chip, importing torch many more.
DEFAULT_TIMEOUT_S = {Level.QUICK: 60.0, Level.FULL: 180.0}

CHILD_MODULE = "npuwatch.probes.runtime.child"

#: Called from a watcher thread with (device, event) as the child writes each event.
ProgressCallback = Callable[[int, Dict[str, Any]], None]


class SelftestUsageError(UsageError):
    """A bad argument to run_selftest (the CLI turns it into exit 64)."""


def run_selftest(
    devices: Union[str, int, Sequence[int]] = "all",
    level: str = "quick",
    backend: str = "auto",
    timeout_s: Optional[float] = None,
    environ: Optional[Mapping[str, str]] = None,
    *,
    sysroot: Optional[Sysroot] = None,
    python: Optional[str] = None,
    on_progress: Optional[ProgressCallback] = None,
) -> SelftestReport:
    """Self-test ``devices`` ("all" or logical IDs) at ``level``; raises only for bad arguments.

    Each device runs in ``python -m npuwatch.probes.runtime.child`` (``python`` defaults to this
    interpreter) with ``environ`` (default ``os.environ``), killed with its process group after
    ``timeout_s`` (default 60 s quick, 180 s full).  npuwatch's own polling is paused meanwhile
    (``npuwatch.polling_pause``).  ``sysroot`` is where the PCIe links are read (default ``/``).
    """
    chosen_level = _choice(Level, level, "level")
    requested = None if backend == "auto" else _choice(Backend, backend, "backend")
    every, queue = _devices(devices)
    limit = DEFAULT_TIMEOUT_S[chosen_level] if timeout_s is None else float(timeout_s)
    if limit <= 0:
        raise SelftestUsageError(f"timeout must be more than 0 seconds, got {timeout_s!r}")
    env = dict(os.environ if environ is None else environ)
    machine = sysroot or Sysroot("/", environ=env)
    started = time.monotonic()
    runs: List[DeviceRun] = []
    notes: List[str] = []
    with polling_pause.pause(limit + 30.0, env) as hold:
        index = 0
        while index < len(queue):
            hold.extend(limit + 30.0)
            device_run = _run_device(queue[index], chosen_level, requested, limit, env, python, on_progress)
            count = device_run.facts.get("device_count")
            if every and index == 0:
                if isinstance(count, int):
                    queue += list(range(1, count))
                else:
                    device_run = _unchosen(device_run)
                    if not _no_runtime(device_run):
                        notes.append("the device count was never read, so only the first device was tried")
            if requested is None and device_run.backend:
                requested = Backend(device_run.backend)  # every later device uses what worked first
            runs.append(_judged(machine, device_run, env))
            if _no_runtime(device_run):
                if index + 1 < len(queue):
                    notes.append("the other devices were not tried: this environment has no Ascend runtime")
                break
            index += 1
    return SelftestReport(
        level=chosen_level.value,
        backend_requested=backend,
        devices_requested="all" if every else ",".join(str(d) for d in queue),
        runs=tuple(runs),
        duration_s=round(time.monotonic() - started, 3),
        timeout_s=limit,
        notes=tuple(notes),
    )


def _choice(enum: Any, value: str, what: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        names = ", ".join(member.value for member in enum)
        raise SelftestUsageError(
            f"{what} must be one of {names} (or auto for backend), got {value!r}"
        ) from None


def _devices(devices: Union[str, int, Sequence[int]]) -> tuple:
    if isinstance(devices, str):
        if devices == "all":
            return True, [0]
        try:
            ids = [int(part) for part in devices.split(",") if part.strip()]
        except ValueError:
            raise SelftestUsageError(
                f"devices must be 'all' or logical IDs like 0,1, got {devices!r}"
            ) from None
    elif isinstance(devices, int):
        ids = [devices]
    else:
        ids = [int(d) for d in devices]
    if not ids or any(d < 0 for d in ids):
        raise SelftestUsageError(f"devices must be 'all' or logical IDs ≥ 0, got {devices!r}")
    return False, list(dict.fromkeys(ids))


def _run_device(
    device: int,
    level: Level,
    backend: Optional[Backend],
    timeout_s: float,
    env: Mapping[str, str],
    python: Optional[str],
    on_progress: Optional[ProgressCallback],
) -> DeviceRun:
    with tempfile.TemporaryDirectory(prefix="npuwatch-selftest-") as folder:
        events_path = os.path.join(folder, "events.jsonl")
        args = ["--device", str(device), "--level", level.value]
        args += ["--backend", backend.value if backend else "auto", "--events", events_path]
        argv = python_module_argv(python or sys.executable, CHILD_MODULE, args)
        watcher = _Tail(events_path, device, on_progress) if on_progress else None
        try:
            result = run(argv, timeout_s, env)
        except LaunchError as exc:
            detail = f"could not start the self-test child `{argv[0]}`: {exc.reason}"
            return DeviceRun(device, None, (StepResult(Step.IMPORT, StepStatus.ERROR, None, detail),), 0.0)
        finally:
            if watcher is not None:
                watcher.stop()
        text = _read(events_path)
    return collect(
        device,
        decode_events(text),
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_s=result.duration_s,
        timeout_s=timeout_s,
        stderr=result.stderr,
    )


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _judged(machine: Sysroot, device_run: DeviceRun, env: Mapping[str, str]) -> DeviceRun:
    """The run with its host copies compared to the PCIe link (sysfs is read only when there were copies)."""
    copied = any(r.step in (Step.COPY_H2D, Step.COPY_D2H) and r.metrics for r in device_run.steps)
    if device_run.device is None or not copied:
        return device_run
    from npuwatch.selftest.link import find_link, judge_copies

    try:
        link, why_none = find_link(machine, device_run.device, env)
    except Exception as exc:  # sysfs oddities must not cost the whole report
        link, why_none = None, f"the PCIe link could not be read ({exc!r})"
    return judge_copies(device_run, link, why_none)


def _no_runtime(device_run: DeviceRun) -> bool:
    result = device_run.result(Step.IMPORT)
    return result is None or result.status is not StepStatus.PASS


def _unchosen(device_run: DeviceRun) -> DeviceRun:
    """With ``all``, a run that stopped before counting devices tested no device in particular."""
    from dataclasses import replace

    return replace(device_run, device=None)


class _Tail:
    """Follows the child's events file from a thread and hands each new event to a callback."""

    def __init__(self, path: str, device: int, callback: ProgressCallback) -> None:
        self.path, self.device, self.callback = path, device, callback
        self._stop = threading.Event()
        self._offset = 0
        self._thread = threading.Thread(target=self._loop, name="npuwatch-selftest-tail", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self._poll()

    def _poll(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        for event in decode_events(complete.decode("utf-8", errors="replace")):
            with contextlib.suppress(Exception):  # a progress display must never break the self-test
                self.callback(self.device, event)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._poll()
