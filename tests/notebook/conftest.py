"""Fixtures for the notebook tests: fixed snapshots and private hubs over fake feeds."""

from __future__ import annotations

import threading
from typing import List, Optional, Sequence

import pytest

from npuwatch.model import Snapshot
from tests.conftest import need
from tests.notebook.helpers import FeedMaker
from tests.widgets.fakes import capture_snapshot


@pytest.fixture(autouse=True)
def crash_folder(tmp_path, monkeypatch):
    """Where npuwatch.crash writes tracebacks during a test: never the user's ~/.local/state."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "npuwatch"


@pytest.fixture
def needs_ipywidgets() -> None:
    """Skip without IPython and ipywidgets (the jupyter extra), but fail in CI."""
    import importlib.util

    missing = [m for m in ("IPython", "ipywidgets") if importlib.util.find_spec(m) is None]
    need(not missing, f"{', '.join(missing)} not installed: pip install -e '.[test]'")


@pytest.fixture
def snap_910b() -> Snapshot:
    return capture_snapshot("001")


@pytest.fixture
def hub_factory():
    """Builds private hubs over fake feeds; every hub is stopped after the test."""
    from npuwatch.widgets.notebook.hub import SamplerHub

    hubs: List[SamplerHub] = []

    def make(snapshots: Sequence[Snapshot], gate: Optional[threading.Event] = None):
        maker = FeedMaker(snapshots, gate)
        hub = SamplerHub(factory=maker)
        hubs.append(hub)
        return hub, maker

    yield make
    for hub in hubs:
        hub.stop_all(timeout_s=5.0)
