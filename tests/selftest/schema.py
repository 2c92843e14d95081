"""The `npuwatch/selftest/v1` JSON Schema the tests hold the output to (fields may be added, not removed)."""

from __future__ import annotations

_STATUS = {"enum": ["pass", "warn", "fail", "skip", "error"]}
_STEP_STATUS = {"enum": ["pass", "warn", "fail", "skip", "error", "not_run"]}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}

_ERROR = {
    "type": ["object", "null"],
    "required": ["code", "name", "meaning", "fix", "call", "runtime_message", "log_codes"],
    "properties": {
        "code": {"type": ["integer", "null"]},
        "name": _STRING_OR_NULL,
        "meaning": _STRING_OR_NULL,
        "fix": _STRING_OR_NULL,
        "call": _STRING_OR_NULL,
        "runtime_message": _STRING_OR_NULL,
        "log_codes": {
            "type": "array",
            "items": {"type": "object", "required": ["code", "meaning"]},
        },
    },
}

_STEP = {
    "type": "object",
    "required": ["step", "title", "status", "duration_s", "detail", "warnings", "error", "metrics"],
    "properties": {
        "step": {
            "enum": [
                "import",
                "init",
                "device-count",
                "set-device",
                "context-stream",
                "memory-info",
                "allocate",
                "copy-h2d",
                "copy-d2h",
                "copy-d2d",
                "kernel",
                "events",
                "cleanup",
            ]
        },
        "title": {"type": "string"},
        "status": _STEP_STATUS,
        "duration_s": _NUMBER_OR_NULL,
        "detail": {"type": "string"},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "error": _ERROR,
        "metrics": {"type": "object"},
    },
}

SELFTEST_V1 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": [
        "schema",
        "status",
        "exit_code",
        "summary",
        "level",
        "backend_requested",
        "devices_requested",
        "timeout_per_device_s",
        "duration_s",
        "notes",
        "devices",
    ],
    "properties": {
        "schema": {"const": "npuwatch/selftest/v1"},
        "status": _STATUS,
        "exit_code": {"enum": [0, 1, 2]},
        "summary": {"type": "string"},
        "level": {"enum": ["quick", "full"]},
        "backend_requested": {"enum": ["auto", "acl", "torch"]},
        "devices_requested": {"type": "string"},
        "timeout_per_device_s": {"type": "number"},
        "duration_s": {"type": "number"},
        "notes": {"type": "array", "items": {"type": "string"}},
        "devices": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "device",
                    "status",
                    "backend",
                    "duration_s",
                    "timed_out",
                    "hung_in",
                    "child_exit_code",
                    "problem",
                    "facts",
                    "steps",
                    "stderr_tail",
                ],
                "properties": {
                    "device": {"type": ["integer", "null"]},
                    "status": _STATUS,
                    "backend": {"enum": ["acl", "torch", None]},
                    "duration_s": {"type": "number"},
                    "timed_out": {"type": "boolean"},
                    "hung_in": _STRING_OR_NULL,
                    "child_exit_code": {"type": ["integer", "null"]},
                    "problem": _STRING_OR_NULL,
                    "facts": {"type": "object"},
                    "steps": {"type": "array", "items": _STEP},
                    "stderr_tail": _STRING_OR_NULL,
                },
            },
        },
    },
}
