"""Provides the time budgets of a feed's reads: one DCMI worker's start, a one-shot command's end
(``one_shot_deadline``), the error-code queries of a tick.
"""

from __future__ import annotations

import time
from typing import Optional

#: How much longer than one read (``--timeout``) DCMI's worker may take to give its first answer
#: (a fresh interpreter, the library's load, ``dcmi_init``): inside the one budget of a command.
WORKER_START_GRACE_S = 1.0
#: On top of ``--timeout``, what a one-shot command (``check``, ``snapshot``) may take in all
#: (README: "within --timeout + 2 s"): npu-smi's start beside a hung DCMI read
#: (``fallback_source.hedge_for``) and the error codes of chips not OK, all inside it; the
#: interpreter's start is the rest of the 2 s.
ONE_SHOT_GRACE_S = 1.5


def one_shot_deadline(timeout_s: float, started: Optional[float] = None) -> float:
    """A one-shot command's end (``time.monotonic()``): ``started`` (now) plus its ``--timeout``
    and ``ONE_SHOT_GRACE_S``; no npu-smi call runs past it, no DCMI worker is started again."""
    return (time.monotonic() if started is None else started) + timeout_s + ONE_SHOT_GRACE_S


#: The time a tick's ``npu-smi info -t health`` queries (the error codes of chips not OK) share:
#: a driver that hangs on a broken chip's query must not hold a tick for a timeout per chip.
ERROR_QUERIES_BUDGET_S = 2.0
