"""Fixtures of the browser tier: the tools it needs, a headless Chromium, a private Jupyter server
per test (every test runs in JupyterLab and in Notebook 7), and a tab that keeps its evidence.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.browser.jupyter_server import LAB, NOTEBOOK, JupyterApp, JupyterServer
from tests.browser.session import ARTIFACTS, Session
from tests.conftest import need

CHROMIUM = os.environ.get("NPUWATCH_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # small /dev/shm in containers
]
#: The Python package each front end comes from, by its ``jupyter`` subcommand.
APP_PACKAGES = {"lab": "jupyterlab", "notebook": "notebook"}


def artifact_name(request: pytest.FixtureRequest) -> str:
    """The test's name as a file name: ``test_x[notebook7]`` → ``test_x-notebook7``."""
    return re.sub(r"[^\w.-]+", "-", request.node.name).strip("-")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """The artifact folder; asking for it first checks that every tool of this tier is here."""
    need(importlib.util.find_spec("playwright") is not None, "the playwright Python package is not installed")
    need(
        os.access(CHROMIUM, os.X_OK) or shutil.which(CHROMIUM) is not None,
        f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)",
    )
    for module in ("jupyterlab_widgets", "ipykernel", "ipywidgets"):
        need(importlib.util.find_spec(module) is not None, f"{module} is not installed")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(params=[LAB, NOTEBOOK], ids=lambda app: app.name)
def server(tmp_path: Path, artifacts: Path, request: pytest.FixtureRequest) -> Iterator[JupyterServer]:
    """A server per test: its own workspace (no tabs left over) and kernels that die with it."""
    app: JupyterApp = request.param
    package = APP_PACKAGES[app.command]
    need(importlib.util.find_spec(package) is not None, f"{package} is not installed")
    name = artifact_name(request)
    for stale in ARTIFACTS.glob(f"{name}-*"):
        stale.unlink()  # this test's artifacts from an earlier run
    root = tmp_path / "root"
    root.mkdir()
    jupyter = JupyterServer(tmp_path / "home", root, artifacts / f"{name}-server.log", app=app)
    try:
        jupyter.start()
        yield jupyter
    finally:
        jupyter.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        # A persistent context is how Playwright takes a user data dir: a fresh one per module.
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def session(browser: Any, server: JupyterServer, request: pytest.FixtureRequest) -> Iterator[Session]:
    """A fresh tab; its console and the server log are kept, plus a screenshot when the test failed."""
    page = browser.new_page()
    page.set_default_timeout(60_000)
    tab = Session(page, server, artifact_name(request))
    failures_before = request.session.testsfailed
    try:
        yield tab
    finally:
        # The call phase's report is counted before teardown runs: a rise means this test failed.
        failed = request.session.testsfailed > failures_before
        try:
            if failed:
                shot = ARTIFACTS / f"{tab.name}-failure.png"
                try:
                    page.screenshot(path=str(shot))
                    attach(request, "failure screenshot", shot)
                except Exception as exc:  # a crashed page: the logs still tell the story
                    tab.console.append(f"test: no failure screenshot: {exc}")
            for what, path in tab.save_logs().items():
                attach(request, f"{what} log", path)
        finally:
            page.close()


def attach(request: pytest.FixtureRequest, what: str, path: Path) -> None:
    """Name an artifact in the test's report (junit properties) and in its captured output."""
    request.node.user_properties.append((what, str(path)))
    print(f"{what}: {path}")
