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


def capture_text(name: str) -> str:
    """The text of a capture, by its number (``"031"``) or its full file name."""
    path = CAPTURES / name
    if not path.exists():
        (path,) = CAPTURES.glob(f"{name}_*.txt")
    return path.read_text(encoding="utf-8", errors="replace")
