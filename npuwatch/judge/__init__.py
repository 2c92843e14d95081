"""Provides the one judge: every chip's level (ok, warning, critical, unknown) and its reasons.

``limits`` holds the tunable thresholds (the per-family limits are ``npuwatch.chip_families``);
``rules`` the pure functions over the model.
Every surface takes its levels from here, so the same chip reads the same everywhere.
"""

from npuwatch.judge.limits import DEFAULT_THRESHOLDS, Thresholds, limits_for
from npuwatch.judge.rules import (
    HeldMemory,
    Judgement,
    Reason,
    ReasonKind,
    judge_chip,
    judge_snapshot,
    temperature_level,
)
from npuwatch.model import Level

__all__ = [
    "DEFAULT_THRESHOLDS",
    "HeldMemory",
    "Judgement",
    "Level",
    "Reason",
    "ReasonKind",
    "Thresholds",
    "judge_chip",
    "judge_snapshot",
    "limits_for",
    "temperature_level",
]
