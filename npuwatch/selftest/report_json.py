"""Provides to_dict(): a SelftestReport as ``npuwatch/selftest/v1`` JSON (fields only ever added)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult

SCHEMA = "npuwatch/selftest/v1"


def to_dict(report: SelftestReport) -> Dict[str, Any]:
    """The whole report; ``exit_code`` and ``status`` are the verdict, ``devices`` the runs in order."""
    return {
        "schema": SCHEMA,
        "status": report.status.value,
        "exit_code": report.exit_code,
        "summary": report.summary,
        "level": report.level,
        "backend_requested": report.backend_requested,
        "devices_requested": report.devices_requested,
        "timeout_per_device_s": report.timeout_s,
        "duration_s": report.duration_s,
        "notes": list(report.notes),
        "devices": [device_to_dict(run) for run in report.runs],
    }


def device_to_dict(run: DeviceRun) -> Dict[str, Any]:
    """One device's run."""
    return {
        "device": run.device,
        "status": run.status.value,
        "backend": run.backend,
        "duration_s": run.duration_s,
        "timed_out": run.timed_out,
        "hung_in": run.hung_in,
        "child_exit_code": run.child_exit_code,
        "problem": run.problem,
        "facts": dict(run.facts),
        "steps": [step_to_dict(result) for result in run.steps],
        "stderr_tail": run.stderr_tail or None,
    }


def step_to_dict(result: StepResult) -> Dict[str, Any]:
    """One step: ``step`` is its stable ID (``set-device``), ``title`` its display name."""
    return {
        "step": result.step.value,
        "title": result.step.title,
        "status": result.status.value,
        "duration_s": result.duration_s,
        "detail": result.detail,
        "warnings": list(result.warnings),
        "error": error_to_dict(result.error),
        "metrics": dict(result.metrics),
    }


def error_to_dict(error: Optional[StepError]) -> Optional[Dict[str, Any]]:
    """A failure's code, name, meaning, fix, the failing call and the runtime's own message."""
    if error is None:
        return None
    return {
        "code": error.code,
        "name": error.name,
        "meaning": error.meaning,
        "fix": error.fix,
        "call": error.call,
        "runtime_message": error.message,
        "log_codes": [{"code": code, "meaning": meaning} for code, meaning in error.log_codes],
    }
