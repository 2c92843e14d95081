"""Provides collect(): a child's events and exit → a DeviceRun, naming the step (and call) it hung in."""

from __future__ import annotations

import signal
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npuwatch.probes.runtime.error_codes import explain, explain_log_code, explain_torch_id, log_codes
from npuwatch.probes.runtime.protocol import PROTOCOL_VERSION, EventKind, Step, StepStatus
from npuwatch.selftest.report import DeviceRun, StepError, StepResult

_REPORT_BUG = "npuwatch's own code failed here: please report it with this output (`--json` shows all of it)"
_STDERR_TAIL_CHARS = 2000


def collect(
    device: Optional[int],
    events: List[Dict[str, Any]],
    *,
    exit_code: Optional[int],
    timed_out: bool,
    duration_s: float,
    timeout_s: float,
    stderr: str = "",
) -> DeviceRun:
    """One device's run from what its child wrote and how it ended."""
    facts: Dict[str, Any] = {}
    results: List[StepResult] = []
    started: Dict[Step, Tuple[float, Optional[str]]] = {}  # step → (child time, last blocking call)
    done = False
    problem: Optional[Tuple[str, StepStatus]] = None
    for event in events:
        kind, step = event.get("event"), _step(event)
        if kind == EventKind.HELLO.value and event.get("protocol") != PROTOCOL_VERSION:
            problem = (
                f"the child speaks self-test protocol {event.get('protocol')!r}, not {PROTOCOL_VERSION}",
                StepStatus.ERROR,
            )
        elif kind == EventKind.FACTS.value:
            facts.update({k: v for k, v in event.items() if k not in ("event", "t")})
        elif kind == EventKind.START.value and step is not None:
            started[step] = (float(event.get("t") or 0.0), None)
        elif kind == EventKind.CALL.value and started:
            last = next(reversed(started))
            started[last] = (started[last][0], str(event.get("name")))
        elif kind == EventKind.END.value and step is not None:
            started.pop(step, None)
            results.append(_result(step, event))
        elif kind == EventKind.DONE.value:
            done = True
    hung_in = None
    for step, (began, call) in started.items():  # started, never ended: the child stopped inside
        ran_s = max(0.0, duration_s - began)
        where = f" in {call}" if call else ""
        if timed_out:
            hung_in = f"{step.value}" + (f" ({call})" if call else "")
            detail = f"hung{where}: no answer within {timeout_s:g} s; killed with its process group"
        elif exit_code not in (0, None):
            detail = f"the self-test process died ({_exit_text(exit_code)}){where} during this step"
        else:
            detail = f"the self-test process stopped{where} without finishing this step"
        results.append(StepResult(step, StepStatus.FAIL, round(ran_s, 3), detail))
    if problem is None:
        problem = _run_problem(events, started, done, exit_code, timed_out, timeout_s, stderr)
    worse = problem is not None or any(r.status in (StepStatus.FAIL, StepStatus.ERROR) for r in results)
    return DeviceRun(
        device=device,
        backend=facts.get("backend"),
        steps=tuple(results),
        duration_s=round(duration_s, 3),
        facts=facts,
        timed_out=timed_out,
        hung_in=hung_in,
        child_exit_code=exit_code,
        problem=problem[0] if problem else None,
        problem_status=problem[1] if problem else None,
        stderr_tail=stderr[-_STDERR_TAIL_CHARS:].strip() if worse else "",
    )


def _run_problem(
    events: List[Dict[str, Any]],
    pending: Mapping[Step, Any],
    done: bool,
    exit_code: Optional[int],
    timed_out: bool,
    timeout_s: float,
    stderr: str,
) -> Optional[Tuple[str, StepStatus]]:
    """What went wrong with the run outside its steps, if anything."""
    if pending:
        return None  # already reported on the step it stopped in
    if timed_out and not done:
        where = "before its first step" if not events else "between steps"
        return (f"no answer within {timeout_s:g} s {where}; killed with its process group", StepStatus.FAIL)
    if not events:
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
        return (f"the self-test child did not start ({_exit_text(exit_code)}): {last}", StepStatus.ERROR)
    if not done:
        return (f"the self-test process ended early ({_exit_text(exit_code)})", StepStatus.FAIL)
    if exit_code not in (0, None):
        return (
            f"the self-test process finished but then exited with {_exit_text(exit_code)}",
            StepStatus.WARN,
        )
    return None


def _step(event: Mapping[str, Any]) -> Optional[Step]:
    try:
        return Step(event.get("step"))
    except ValueError:
        return None


def _result(step: Step, event: Mapping[str, Any]) -> StepResult:
    try:
        status = StepStatus(event.get("status"))
    except ValueError:
        status = StepStatus.ERROR
    duration = event.get("duration_s")
    error = event.get("error")
    return StepResult(
        step=step,
        status=status,
        duration_s=float(duration) if isinstance(duration, (int, float)) else None,
        detail=str(event.get("detail") or ""),
        metrics=dict(event.get("metrics") or {}),
        warnings=tuple(str(w) for w in event.get("warnings") or ()),
        error=explain_error(error, status) if isinstance(error, dict) else None,
    )


def explain_error(error: Mapping[str, Any], status: StepStatus) -> StepError:
    """The child's raw error (code, call, message, hint) with the code's meaning and fix looked up."""
    code = error.get("code")
    message = error.get("message")
    message = str(message) if message else None
    found = tuple((log, explain_log_code(log)) for log in log_codes(message))
    if isinstance(code, int):
        known = explain(code)
        return StepError(
            code, known.name, known.meaning, error.get("hint") or known.fix, error.get("call"), message, found
        )
    meaning = explain_torch_id(message) if message else None
    fix = error.get("hint") or (_REPORT_BUG if status is StepStatus.ERROR else None)
    return StepError(None, None, meaning, fix, error.get("call"), message, found)


def _exit_text(exit_code: Optional[int]) -> str:
    if exit_code is None:
        return "killed"
    if exit_code < 0:
        try:
            return f"signal {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"signal {-exit_code}"
    return f"exit status {exit_code}"
