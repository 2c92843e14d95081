"""Shared test helpers: tier skips that fail in CI, capture loading."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CAPTURES = REPO / "tests" / "data" / "npu_smi"


def need(condition: bool, reason: str) -> None:
    """Skip a test whose system dependency is missing, but fail in CI (docs/design.md §7)."""
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


@pytest.fixture(autouse=True, scope="session")
def _private_runtime_folders(tmp_path_factory: pytest.TempPathFactory):
    """This test run's self-test pauses and crash reports stay in it.

    ``npuwatch.polling_pause`` markers live in ``$XDG_RUNTIME_DIR/npuwatch``: without a private
    folder, a self-test running elsewhere on the machine (another test run) pauses this run's
    samplers, which then repeat their last sample and break deterministic tests.  Crash reports
    (``$XDG_STATE_HOME/npuwatch``) of deliberately broken runs do not pile up in the home folder.
    """
    patch = pytest.MonkeyPatch()
    runtime = tmp_path_factory.mktemp("xdg-runtime")
    runtime.chmod(0o700)
    patch.setenv("XDG_RUNTIME_DIR", str(runtime))
    patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
    yield
    patch.undo()
