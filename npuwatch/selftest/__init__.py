"""The runtime self-test: ``run_selftest()`` → ``SelftestReport``; its JSON is ``report_json.to_dict()``."""

from __future__ import annotations

from npuwatch.selftest.orchestrate import DEFAULT_TIMEOUT_S, SelftestUsageError, run_selftest
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult
from npuwatch.selftest.report_json import SCHEMA

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
