"""Provides Recorder: times each self-test step in the child and writes its events as they happen."""

from __future__ import annotations

import contextlib
import time
import traceback
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Set

from npuwatch.probes.runtime.protocol import EventKind, Step, StepStatus, encode_event


class StepFailedError(Exception):
    """A step failed: the runtime's code (when it gave one), the call, and its own message."""

    def __init__(
        self,
        summary: str,
        *,
        code: Optional[int] = None,
        call: Optional[str] = None,
        message: Optional[str] = None,
        hint: Optional[str] = None,
        fatal: bool = True,
    ) -> None:
        super().__init__(summary)
        self.summary = summary
        self.code = code
        self.call = call
        self.message = message
        self.hint = hint  # what to do, when there is no code to look the fix up by
        self.fatal = fatal  # False: the steps after this one can still run


class StepSkippedError(Exception):
    """The step does not apply here; the message says why."""


class RunAbortedError(Exception):
    """A fatal step failed: the main sequence stops and only cleanup runs."""

    def __init__(self, step: Step) -> None:
        super().__init__(step.value)
        self.step = step


@dataclass
class StepOutcome:
    """What a step fills in while it runs (child side, mutable)."""

    detail: str = ""
    metrics: Dict[str, Any] = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)

    def warn(self, text: str) -> None:
        """Works, but say this: the step ends ``warn``."""
        self.warnings.append(text)


class Recorder:
    """Writes the child's events, one flushed line each, so a kill leaves every finished step behind."""

    def __init__(self, stream: IO[str], clock: Callable[[], float] = time.perf_counter) -> None:
        self._stream = stream
        self._clock = clock
        self._t0 = clock()
        self.started: Set[Step] = set()

    def emit(self, kind: EventKind, **fields: Any) -> None:
        """Write one event now."""
        self._stream.write(encode_event(kind, {"t": round(self._clock() - self._t0, 6), **fields}))
        self._stream.flush()

    def call(self, name: str) -> None:
        """Announce a runtime call that can block, so a hang inside it is named."""
        self.emit(EventKind.CALL, name=name)

    @contextlib.contextmanager
    def step(self, step: Step, fatal: bool = True) -> Iterator[StepOutcome]:
        """Run one step: start event, the body, end event; a fatal failure raises ``RunAbortedError``."""
        self.started.add(step)
        self.emit(EventKind.START, step=step.value)
        began = self._clock()
        outcome = StepOutcome()
        try:
            yield outcome
        except StepFailedError as failure:
            error = {
                "code": failure.code,
                "call": failure.call,
                "message": failure.message,
                "hint": failure.hint,
            }
            self._end(step, StepStatus.FAIL, began, outcome, failure.summary, error)
            if fatal and failure.fatal:
                raise RunAbortedError(step) from failure
            return
        except StepSkippedError as skipped:
            self._end(step, StepStatus.SKIP, began, outcome, str(skipped), None)
            return
        except RunAbortedError:
            raise
        except Exception as exc:  # npuwatch's own code or an API that differs from the reference
            summary = f"npuwatch could not run this step: {type(exc).__name__}: {exc}"
            tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
            error = {"code": None, "call": None, "message": tail.strip(), "hint": None}
            self._end(step, StepStatus.ERROR, began, outcome, summary, error)
            if fatal:
                raise RunAbortedError(step) from exc
            return
        status = StepStatus.WARN if outcome.warnings else StepStatus.PASS
        self._end(step, status, began, outcome, outcome.detail, None)

    def not_run(self, steps: Iterable[Step], because: Step) -> None:
        """Record the steps an earlier failure stopped."""
        for step in steps:
            if step in self.started:
                continue
            self.started.add(step)
            self.emit(
                EventKind.END,
                step=step.value,
                status=StepStatus.NOT_RUN.value,
                duration_s=None,
                detail=f"not run: {because.title} did not succeed",
                metrics={},
                warnings=[],
                error=None,
            )

    def _end(
        self,
        step: Step,
        status: StepStatus,
        began: float,
        outcome: StepOutcome,
        detail: str,
        error: Optional[Dict[str, Any]],
    ) -> None:
        self.emit(
            EventKind.END,
            step=step.value,
            status=status.value,
            duration_s=round(self._clock() - began, 6),
            detail=detail or outcome.detail,
            metrics=outcome.metrics,
            warnings=outcome.warnings,
            error=error,
        )
