"""Provides run_doctor(): checks in order, each in a thread with a timeout; a crash never ends it."""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, CheckResult, Finding, Status
from npuwatch.probes.runner import worst_case_s

#: Default limit for one check (docs/design.md §2.3); checks that run npu-smi get the runner's worst case
#: for one call (its timeout plus the kill grace) + 1 s, so a hung npu-smi is the check's own finding.
DEFAULT_CHECK_TIMEOUT_S = 3.0
NPU_SMI_CHECK_MARGIN_S = 1.0

_BLOCKING = (Status.FAIL, Status.SKIP, Status.ERROR)


@dataclass(frozen=True)
class DoctorReport:
    """Every result in run order, and what the machine is."""

    results: Tuple[CheckResult, ...]
    has_hardware: bool
    duration_s: float

    @property
    def exit_code(self) -> int:
        """0 all pass (or skip), 1 warnings or a check not run, 2 failures (docs/design.md §2.1)."""
        statuses = {result.status for result in self.results}
        if Status.FAIL in statuses:
            return 2
        if statuses & {Status.WARN, Status.ERROR}:
            return 1
        return 0

    def counts(self) -> Dict[Status, int]:
        """How many results have each status."""
        found = {status: 0 for status in Status}
        for result in self.results:
            found[result.status] += 1
        return found


def check_timeout_s(check: Check, machine: Machine) -> float:
    """How long ``check`` may run on ``machine``."""
    if check.runs_npu_smi:
        return worst_case_s(machine.timeout_s) + NPU_SMI_CHECK_MARGIN_S
    return DEFAULT_CHECK_TIMEOUT_S


def run_doctor(
    machine: Machine,
    checks: Sequence[Check],
    *,
    timeout_for: Callable[[Check, Machine], float] = check_timeout_s,
    on_result: Optional[Callable[[CheckResult], None]] = None,
) -> DoctorReport:
    """Run ``checks`` in order; ``on_result`` sees each result as it is ready (live output)."""
    started = time.monotonic()
    hardware = _has_hardware(machine)
    done: Dict[str, CheckResult] = {}
    results: List[CheckResult] = []
    for check in checks:
        result = _run_one(check, machine, hardware, done, timeout_for(check, machine))
        done[check.id] = result
        results.append(result)
        if on_result is not None:
            on_result(result)
    return DoctorReport(tuple(results), hardware, time.monotonic() - started)


def _has_hardware(machine: Machine, timeout_s: float = DEFAULT_CHECK_TIMEOUT_S) -> bool:
    """Whether the machine has an NPU; a scan that crashes or hangs past ``timeout_s`` (a sysfs
    read stuck in a hung driver) counts as yes: the hardware checks then run, each under its own
    timeout, and explain."""
    box: List[bool] = []

    def scan() -> None:
        with contextlib.suppress(Exception):
            box.append(machine.has_hardware())

    worker = threading.Thread(target=scan, name="doctor-hardware-scan", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return box[0] if box else True  # cannot tell: let the hardware checks run and explain


def _run_one(
    check: Check, machine: Machine, hardware: bool, done: Dict[str, CheckResult], timeout_s: float
) -> CheckResult:
    if check.needs_hardware and not hardware:
        return _result(check, Finding(Status.SKIP, "no Ascend NPU on this machine"), 0.0)
    blockers = [done[name] for name in check.requires if name in done and done[name].status in _BLOCKING]
    if blockers:
        first = blockers[0]
        finding = Finding(Status.SKIP, f"needs {first.id}: {first.summary}")
        return _result(check, finding, 0.0, tuple(b.id for b in blockers))
    started = time.monotonic()
    finding = _call_with_timeout(check, machine, timeout_s)
    return _result(check, finding, time.monotonic() - started)


def _call_with_timeout(check: Check, machine: Machine, timeout_s: float) -> Finding:
    """Run the check in a daemon thread: a hung read is abandoned at the timeout, not waited for."""
    box: List[Finding] = []

    def target() -> None:
        try:
            box.append(check.run(machine))
        except BaseException as exc:
            box.append(_crashed(exc, machine.verbose))

    worker = threading.Thread(target=target, name=f"doctor-{check.id}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not box:
        return Finding(
            Status.ERROR,
            f"the check did not finish within {timeout_s:g} s",
            hint="something it reads is hanging (a stuck driver or network mount); "
            "run it alone with `npuwatch doctor --only " + check.id + " --verbose`",
        )
    finding = box[0]
    if not isinstance(finding, Finding):
        return Finding(Status.ERROR, f"the check returned {type(finding).__name__}, not a Finding")
    return finding


def _crashed(exc: BaseException, verbose: bool) -> Finding:
    details: Tuple[str, ...] = ()
    if verbose:
        details = tuple(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Finding(
        Status.ERROR,
        f"the check crashed: {exc!r}",
        details,
        "this is a bug in npuwatch: please report it with the output of --verbose",
    )


def _result(
    check: Check, finding: Finding, duration_s: float, skipped_because: Tuple[str, ...] = ()
) -> CheckResult:
    return CheckResult(
        id=check.id,
        group=check.group,
        title=check.title,
        status=finding.status,
        summary=finding.summary,
        details=finding.details,
        hint=finding.hint if finding.status in (Status.WARN, Status.FAIL, Status.ERROR) else None,
        duration_s=duration_s,
        skipped_because=skipped_because,
    )
