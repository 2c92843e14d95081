"""Provides the doctor's vocabulary: a check, what it found, and the result the report prints."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from npuwatch.doctor.machine import Machine


class Status(enum.Enum):
    """A check's verdict (docs/design.md §2.3); ``error`` means the check itself crashed or timed out."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"


class Group(enum.Enum):
    """The report's sections, printed in this order."""

    HARDWARE = "hardware"
    DRIVER = "driver"
    CANN = "CANN"
    FRAMEWORKS = "frameworks"
    CONTAINER = "container"


@dataclass(frozen=True)
class Finding:
    """What one check established: a verdict, one line, supporting lines, and the fix."""

    status: Status
    summary: str
    details: Tuple[str, ...] = ()
    hint: Optional[str] = None  # the exact command, mount or package that fixes a warn/fail


def passed(summary: str, details: Sequence[str] = ()) -> Finding:
    """All is well."""
    return Finding(Status.PASS, summary, tuple(details))


def warned(summary: str, hint: str, details: Sequence[str] = ()) -> Finding:
    """Works, but something will bite: say what and how to fix it."""
    return Finding(Status.WARN, summary, tuple(details), hint)


def failed(summary: str, hint: str, details: Sequence[str] = ()) -> Finding:
    """Broken: say what and how to fix it."""
    return Finding(Status.FAIL, summary, tuple(details), hint)


def skipped(reason: str, details: Sequence[str] = ()) -> Finding:
    """The check does not apply here (no torch installed, not in a container …)."""
    return Finding(Status.SKIP, reason, tuple(details))


@dataclass(frozen=True)
class Problem:
    """One of several things a check found wrong: how bad, what, how to fix it, the evidence."""

    status: Status  # WARN or FAIL
    summary: str
    hint: str
    details: Tuple[str, ...] = ()


def combine(problems: Sequence[Problem], passing: str, details: Sequence[str] = ()) -> Finding:
    """One Finding from several problems: the worst leads, the rest follow in the details.

    Hints are joined in order, leaving out one that another hint already says.
    """
    if not problems:
        return passed(passing, details)
    ordered = sorted(problems, key=lambda p: p.status != Status.FAIL)
    lead = ordered[0]
    more = len(ordered) - 1
    summary = lead.summary + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")
    hints: List[str] = []
    for problem in ordered:
        if not any(problem.hint in hint for hint in hints):
            hints.append(problem.hint)
    lines = [*details]
    for problem in ordered:
        lines.append(problem.summary if problem is lead else f"also: {problem.summary}")
        lines += problem.details
    make = failed if lead.status == Status.FAIL else warned
    return make(summary, "; then ".join(hints), lines)


@dataclass(frozen=True)
class Check:
    """One diagnosis: a stable ID, its report section, and a function that never prints."""

    id: str
    group: Group
    title: str  # what it establishes, for --list
    run: Callable[[Machine], Finding]
    #: Checks whose failure makes this one meaningless: it is skipped, naming them.
    requires: Tuple[str, ...] = ()
    #: Needs NPU hardware: skipped plainly on a machine without any.
    needs_hardware: bool = False
    #: Runs npu-smi: its timeout is npu-smi's plus 1 s (docs/design.md §2.3) instead of the default.
    runs_npu_smi: bool = False


@dataclass(frozen=True)
class CheckResult:
    """A finished check as the report and ``--json`` show it (docs/design.md §2.3 plus group/title/time)."""

    id: str
    group: Group
    title: str
    status: Status
    summary: str
    details: Tuple[str, ...] = ()
    hint: Optional[str] = None
    duration_s: float = 0.0
    skipped_because: Tuple[str, ...] = field(default=())  # IDs of failed checks this one needed
