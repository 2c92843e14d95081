"""Provides what the DCMI worker's failures say, and when the next worker may start after them.

A failure is never an exception out of ``Worker.tick()``: inside a request it travels as
``FailedError`` and comes out as a ``protocol.WorkerFailure`` (a crash's signal, a refused
``dcmi_init``'s meaning and hint).  Restarts back off: at once for the first
``RESTARTS_AT_ONCE`` recent failures, then doubling up to ``RESTART_BACKOFF_MAX_S``.
"""

from __future__ import annotations

import signal
from typing import Optional

from npuwatch.probes.dcmi import records
from npuwatch.probes.dcmi.worker.protocol import InitOutcome, WorkerFailure

#: Failures in a row a fresh worker is started after at once; then the wait doubles up to the cap.
RESTARTS_AT_ONCE = 3
RESTART_BACKOFF_MAX_S = 60.0
#: Failures count towards the back-off while they are this recent, good ticks between them or not
#: (a library whose worker is killed every third tick must back off too, not restart for ever).
FAILURE_WINDOW_S = 300.0


class FailedError(Exception):
    """A request's failure on its way out of ``Worker.tick()``, which answers its ``failure``."""

    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


CRASH_HINT = (
    "a fresh worker starts on the next read; if it keeps crashing use `--backend npu-smi` "
    "and report the driver version (`npuwatch doctor`)"
)


def crash_message(returncode: Optional[int]) -> str:
    """What a dead worker's exit status says: ``the DCMI library crashed (SIGSEGV) in the worker…``."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the DCMI library crashed ({name}) in the worker; npuwatch kept running"
    if returncode is not None:
        return f"the DCMI worker exited unexpectedly (exit code {returncode}); npuwatch kept running"
    return "the DCMI worker closed its pipe without exiting; it was killed, npuwatch kept running"


def restart_delay_s(failures: int) -> float:
    """How long after ``failures`` recent failures (``FAILURE_WINDOW_S``) the next worker starts:
    at once for the first ``RESTARTS_AT_ONCE``, then 2, 4, 8 … s up to ``RESTART_BACKOFF_MAX_S``."""
    if failures < RESTARTS_AT_ONCE:
        return 0.0
    return min(RESTART_BACKOFF_MAX_S, 2.0 ** (failures - RESTARTS_AT_ONCE + 1))


def init_failure(init: InitOutcome) -> WorkerFailure:
    if init.kind != "init":
        return WorkerFailure(init.kind, init.message, init.hint, output="\n".join(init.tried))
    from npuwatch.probes.dcmi.status import PERMISSION_HINT, hint, meaning

    code = init.code if init.code is not None else 0
    if code == records.SYMBOL_MISSING:  # a file named libdcmi.so that is not DCMI (or far too old)
        return WorkerFailure(
            "load",
            "the library loaded has no dcmi_init: it is not a DCMI library",
            "point --dcmi-lib (NPUWATCH_DCMI_LIB) at the driver's libdcmi.so, or use --backend npu-smi",
            code=code,
        )
    if code == -8002:
        return WorkerFailure(
            "permission",
            "dcmi_init failed with -8002: not root and not in the HwHiAiUser group",
            PERMISSION_HINT,
            code=code,
        )
    return WorkerFailure(
        "init",
        f"dcmi_init failed with {code}: {meaning(code)}",
        hint(code) or "run `npuwatch doctor`",
        code=code,
    )


def first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else "an error"
