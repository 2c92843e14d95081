"""Shared test helpers: tier skips that fail in CI, capture loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CAPTURES = REPO / "tests" / "data" / "npu_smi"


def need(condition: bool, reason: str) -> None:
    """Skip a test whose system dependency is missing, but fail in CI (DESIGN §7)."""
    if condition:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


def capture_text(number: str) -> str:
    """The text of the capture whose file name starts with ``number``."""
    return next(CAPTURES.glob(f"{number}_*.txt")).read_text(errors="replace")
