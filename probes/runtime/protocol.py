"""Provides the self-test's vocabulary (steps, statuses) and the JSON-lines events the child writes."""

from __future__ import annotations

import enum
import json
import math
from typing import Any, Dict, List, Mapping

#: Every event line starts with this, so stray native output in the same stream is never mistaken
#: for an event (CANN libraries can print to stdout).
LINE_PREFIX = "@npuwatch-selftest "

#: Bumped when an event changes incompatibly; the parent refuses a child that speaks another one.
PROTOCOL_VERSION = 1


class Step(enum.Enum):
    """The self-test's steps, in the order they run (reference runtime-and-doctor.md §3)."""

    IMPORT = "import"
    INIT = "init"
    DEVICE_COUNT = "device-count"
    SET_DEVICE = "set-device"
    CONTEXT_STREAM = "context-stream"
    MEMORY_INFO = "memory-info"
    ALLOCATE = "allocate"
    COPY_H2D = "copy-h2d"
    COPY_D2H = "copy-d2h"
    COPY_D2D = "copy-d2d"
    KERNEL = "kernel"
    EVENTS = "events"
    CLEANUP = "cleanup"

    @property
    def title(self) -> str:
        """A short human name for reports."""
        return _TITLES[self]


_TITLES = {
    Step.IMPORT: "import runtime",
    Step.INIT: "init",
    Step.DEVICE_COUNT: "device count",
    Step.SET_DEVICE: "set device",
    Step.CONTEXT_STREAM: "context + stream",
    Step.MEMORY_INFO: "memory info",
    Step.ALLOCATE: "allocate",
    Step.COPY_H2D: "copy H2D",
    Step.COPY_D2H: "copy D2H",
    Step.COPY_D2D: "copy D2D",
    Step.KERNEL: "kernel",
    Step.EVENTS: "event timing",
    Step.CLEANUP: "cleanup",
}

#: The steps between import and cleanup, in order.
MAIN_STEPS = tuple(step for step in Step if step not in (Step.IMPORT, Step.CLEANUP))


class StepStatus(enum.Enum):
    """A step's verdict; ``error``: npuwatch's own code failed; ``not_run``: an earlier step stopped it."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"
    NOT_RUN = "not_run"


class Backend(enum.Enum):
    """How the runtime is driven."""

    ACL = "acl"  # pyACL (`import acl`), with aclnnAdd through ctypes
    TORCH = "torch"  # torch + torch_npu


class Level(enum.Enum):
    """How long the self-test runs: seconds per chip, or a longer sweep."""

    QUICK = "quick"
    FULL = "full"


class EventKind(enum.Enum):
    """The kinds of line the child writes."""

    HELLO = "hello"  # protocol version, pid, the request
    FACTS = "facts"  # what was learned: backend, versions, SoC, device count, run mode
    START = "start"  # a step began
    CALL = "call"  # a runtime call that can block is about to be made (names the hang)
    END = "end"  # a step ended: status, duration, detail, error, metrics
    DONE = "done"  # the child finished normally


def encode_event(kind: EventKind, fields: Mapping[str, Any]) -> str:
    """One event as a line (with its newline); non-finite floats become null."""
    body = {"event": kind.value, **{key: _finite(value) for key, value in fields.items()}}
    return LINE_PREFIX + json.dumps(body, separators=(",", ":"), allow_nan=False) + "\n"


def decode_events(text: str) -> List[Dict[str, Any]]:
    """The events in ``text``; other lines, and a line cut off by a kill, are skipped."""
    events = []
    for line in text.splitlines():
        at = line.find(LINE_PREFIX)
        if at < 0:
            continue
        try:
            event = json.loads(line[at + len(LINE_PREFIX) :])
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(event)
    return events


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
