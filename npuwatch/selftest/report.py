"""Provides SelftestReport: per-device step results and the exit code (its JSON: ``report_json.to_dict``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

# The report's vocabulary: views and renderers take Step and StepStatus from here, not from the probe.
from npuwatch.probes.runtime.protocol import Step, StepStatus

__all__ = ["DeviceRun", "SelftestReport", "Step", "StepError", "StepResult", "StepStatus", "worst"]

#: Worst first: a device's or the report's status is the worst of its parts.
_SEVERITY = (StepStatus.FAIL, StepStatus.ERROR, StepStatus.WARN, StepStatus.SKIP, StepStatus.PASS)


@dataclass(frozen=True)
class StepError:
    """A runtime failure explained: code and name, meaning, what to do, and the runtime's own words."""

    code: Optional[int]
    name: Optional[str]
    meaning: Optional[str]
    fix: Optional[str]
    call: Optional[str] = None  # the runtime call that failed (``acl.rt.set_device(0)``)
    message: Optional[str] = None  # the runtime's own text (acl.get_recent_err_msg, the torch_npu error)
    log_codes: Tuple[Tuple[str, Optional[str]], ...] = ()  # (E39009, its meaning) found in the message


@dataclass(frozen=True)
class StepResult:
    """One step's verdict, timing and findings."""

    step: Step
    status: StepStatus
    duration_s: Optional[float]
    detail: str
    metrics: Mapping[str, Any] = field(default_factory=dict)
    warnings: Tuple[str, ...] = ()
    error: Optional[StepError] = None


@dataclass(frozen=True)
class DeviceRun:
    """One child process's run on one device (``device`` None: it stopped before a device was chosen)."""

    device: Optional[int]
    backend: Optional[str]
    steps: Tuple[StepResult, ...]
    duration_s: float
    facts: Mapping[str, Any] = field(default_factory=dict)
    timed_out: bool = False
    hung_in: Optional[str] = None  # "copy-h2d (acl.rt.synchronize_event)" when killed at the timeout
    child_exit_code: Optional[int] = None  # None when killed at the timeout
    #: Something about the run beyond its steps (a crash after the last step, an unreadable child).
    problem: Optional[str] = None
    problem_status: Optional[StepStatus] = None
    stderr_tail: str = ""  # the child's last stderr lines, kept when something went wrong

    @property
    def status(self) -> StepStatus:
        """The worst of the step statuses and the run's own problem."""
        statuses = [result.status for result in self.steps]
        if self.problem_status is not None:
            statuses.append(self.problem_status)
        return worst(statuses)

    def result(self, step: Step) -> Optional[StepResult]:
        """The result of ``step``, if it was reported."""
        return next((result for result in self.steps if result.step is step), None)


def worst(statuses: Any) -> StepStatus:
    """The most severe of ``statuses`` (``not_run`` counts as nothing; none at all is ``skip``)."""
    present = set(statuses)
    return next((status for status in _SEVERITY if status in present), StepStatus.SKIP)


@dataclass(frozen=True)
class SelftestReport:
    """Every device's run, in order, with what was asked."""

    level: str
    backend_requested: str
    devices_requested: str  # "all" or "0,2"
    runs: Tuple[DeviceRun, ...]
    duration_s: float
    timeout_s: float  # per device
    notes: Tuple[str, ...] = ()

    @property
    def status(self) -> StepStatus:
        """The worst device status."""
        return worst(run.status for run in self.runs)

    @property
    def exit_code(self) -> int:
        """0 pass; 1 skipped, warnings, or a step not run; 2 a failure (docs/design.md §2.1)."""
        status = self.status
        if status is StepStatus.FAIL:
            return 2
        return 0 if status is StepStatus.PASS else 1

    @property
    def summary(self) -> str:
        """One line: ``2 devices: 1 passed, 1 failed (device 1: set device 507033 …)``."""
        counts: Dict[StepStatus, int] = {}
        for run in self.runs:
            counts[run.status] = counts.get(run.status, 0) + 1
        words = {StepStatus.PASS: "passed", StepStatus.WARN: "with warnings", StepStatus.FAIL: "failed"}
        words.update({StepStatus.SKIP: "skipped", StepStatus.ERROR: "could not be tested"})
        parts = [f"{counts[s]} {words[s]}" for s in _SEVERITY[::-1] if counts.get(s)]
        tested = [run for run in self.runs if run.device is not None]
        head = f"{len(tested)} device{'s' if len(tested) != 1 else ''}" if tested else "no device tested"
        return f"{head}: {', '.join(parts)}" if parts else head
