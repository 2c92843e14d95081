"""The runtime self-test: ``run_selftest()`` → ``SelftestReport`` (``.exit_code``, ``.to_dict()``)."""

from __future__ import annotations

from npuwatch.selftest.orchestrate import DEFAULT_TIMEOUT_S, SelftestUsageError, run_selftest
from npuwatch.selftest.report import SCHEMA, DeviceRun, SelftestReport, StepError, StepResult

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "SCHEMA",
    "DeviceRun",
    "SelftestReport",
    "SelftestUsageError",
    "StepError",
    "StepResult",
    "run_selftest",
]
