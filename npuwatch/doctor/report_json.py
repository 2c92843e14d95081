"""Provides to_dict(): a doctor report as ``npuwatch/doctor/v1`` JSON (docs/design.md §2.3)."""

from __future__ import annotations

from typing import Any, Dict

from npuwatch.doctor.engine import DoctorReport
from npuwatch.doctor.result import CheckResult

SCHEMA = "npuwatch/doctor/v1"


def result_dict(result: CheckResult) -> Dict[str, Any]:
    """One result: the contract's ``id, status, summary, details, hint`` plus group, title, time."""
    return {
        "id": result.id,
        "status": result.status.value,
        "summary": result.summary,
        "details": list(result.details),
        "hint": result.hint,
        "group": result.group.value,
        "title": result.title,
        "duration_s": round(result.duration_s, 4),
        "skipped_because": list(result.skipped_because),
    }


def to_dict(report: DoctorReport, machine: Dict[str, Any]) -> Dict[str, Any]:
    """The whole report; ``machine`` says what was diagnosed (root, npu-smi, demo scenario)."""
    return {
        "schema": SCHEMA,
        "machine": machine,
        "has_hardware": report.has_hardware,
        "results": [result_dict(result) for result in report.results],
        "exit_code": report.exit_code,
        "duration_s": round(report.duration_s, 3),
    }
