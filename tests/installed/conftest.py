"""Fixtures of the installed-product tier: one wheel and sdist, one venv per Python, per session.

The venvs are made at the same time (one thread each: pip mostly waits on files and the
network), the first time a test asks for one; a Python that is missing skips its tests with the
reason, and fails them in CI (``tests.conftest.need``).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest

from tests.conftest import need
from tests.installed.product import (
    Dists,
    Installed,
    Interpreter,
    build_dists,
    current_python,
    install,
    python39,
)

#: The Pythons of this tier, by test id; the current one is whatever runs pytest.
_CURRENT = current_python()
PYTHON_IDS: List[str] = list(dict.fromkeys([_CURRENT.name, "py39"]))


def _interpreter(name: str) -> Optional[Interpreter]:
    return _CURRENT if name == _CURRENT.name else python39()


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    return build_dists(tmp_path_factory.mktemp("dists"))


@pytest.fixture(scope="session")
def venv_builds(
    request: pytest.FixtureRequest, dists: Dists, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dict[str, Future[Installed]]]:
    """Starts a venv for every Python the selected tests use; each entry resolves to its install."""
    wanted = {
        item.callspec.params["installed"]
        for item in request.session.items
        if hasattr(item, "callspec") and "installed" in item.callspec.params
    }
    found = {name: _interpreter(name) for name in PYTHON_IDS if name in wanted}
    with ThreadPoolExecutor(max_workers=max(1, len(found))) as pool:
        futures = {
            name: pool.submit(install, interpreter, dists, tmp_path_factory.mktemp(name) / "venv")
            for name, interpreter in found.items()
            if interpreter is not None
        }
        yield futures


@pytest.fixture(scope="session", params=PYTHON_IDS)
def installed(request: pytest.FixtureRequest, venv_builds: Dict[str, Future[Installed]]) -> Installed:
    """npuwatch installed from the wheel (not editable) in a fresh venv of one Python."""
    name = request.param
    need(name in venv_builds, f"no Python for {name}: pyenv install 3.9 (or put python3.9 on PATH)")
    return venv_builds[name].result()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """Where a user runs the commands: an empty directory, not the repository."""
    path = tmp_path / "work"
    path.mkdir()
    return path
