"""The ``%npuwatch`` live view in a real JupyterLab, in a real (headless) Chromium.

A private ``jupyter lab`` serves a temporary directory (see ``jupyter_server.py``); Playwright
drives the system Chromium (``/usr/bin/chromium``, Debian package ``chromium``; no Playwright
browser download).  The test opens a notebook holding ``%load_ext npuwatch`` and
``%npuwatch --demo --interval 0.5``, runs it as a user would (Run → Run All Cells), and checks
the view's DOM contract: the widget root ``.npuwatch-live``, chip cards ``.npuwatch-chip`` with
numbers in them, and an ``.npuwatch-updated`` clock (HH:MM:SS) that moves with every sample.

Everything waits by polling with generous deadlines (a 2-core CI machine takes a while to start
JupyterLab and a kernel); nothing asserts how long anything took.  Screenshots go to
``test-artifacts/browser/`` at the repository root, and on a failure so do a screenshot of the
page as it was, the browser console and the server log.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, TypeVar

import pytest

from tests.browser.jupyter_server import JupyterLab, write_notebook
from tests.conftest import REPO, need

pytestmark = pytest.mark.slow

ARTIFACTS = REPO / "test-artifacts" / "browser"
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
INTERVAL_S = 0.5
LIVE_CELLS = ["%load_ext npuwatch", f"%npuwatch --demo --interval {INTERVAL_S}"]

OPEN_DEADLINE_S = 120.0  # JupyterLab's page and the notebook's kernel, on a slow machine
VIEW_DEADLINE_S = 60.0  # from "Run All Cells" to a visible live view
TICK_DEADLINE_S = 30.0  # for the clock to move (samples every 0.5 s, the clock shows seconds)
QUIET_S = max(3.0, 6 * INTERVAL_S)  # a stopped view must stay still at least this long

# The live view's root is the ipywidgets VBox, not the static text/html fallback of its bundle.
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
LIVE = f"{PANEL} .npuwatch-live.jupyter-widgets"
UPDATED = f"{LIVE} .npuwatch-updated"
CHIPS = f"{LIVE} .npuwatch-chip"
CLOCK = re.compile(r"^\d\d:\d\d:\d\d$")

# The notebook's kernel, connected and idle, as the app itself sees it (needs expose_app_in_browser).
KERNEL_READY_JS = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  const ctx = panel && panel.sessionContext;
  const kernel = ctx && ctx.session && ctx.session.kernel;
  return !!kernel && ctx.isReady && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""

T = TypeVar("T")

try:
    from playwright.sync_api import Error as PlaywrightError
except ImportError:  # the tests skip (or fail in CI) through need() in the browser fixture

    class PlaywrightError(Exception):  # type: ignore[no-redef]
        """Stands in for playwright's error type where playwright is missing."""


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """The artifact folder; asking for it first checks that every tool of this tier is here."""
    need(importlib.util.find_spec("playwright") is not None, "the playwright Python package is not installed")
    need(
        os.access(CHROMIUM, os.X_OK) or shutil.which(CHROMIUM) is not None,
        f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)",
    )
    for module in ("jupyterlab", "jupyterlab_widgets", "ipykernel", "ipywidgets"):
        need(importlib.util.find_spec(module) is not None, f"{module} is not installed")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def lab(tmp_path: Path, artifacts: Path, request: pytest.FixtureRequest) -> Iterator[JupyterLab]:
    """A server per test: its own workspace (no tabs left over) and kernels that die with it."""
    for stale in ARTIFACTS.glob(f"{request.node.name}-*"):
        stale.unlink()  # this test's artifacts from an earlier run
    root = tmp_path / "root"
    root.mkdir()
    server = JupyterLab(tmp_path / "home", root, artifacts / f"{request.node.name}-server.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


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


class Session:
    """One browser tab on the lab, with its console recorded."""

    def __init__(self, page: Any, lab: JupyterLab, name: str) -> None:
        self.page = page
        self.lab = lab
        self.name = name
        self.console: List[str] = []
        page.on("console", lambda m: self.console.append(f"[{_now()}] {m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"[{_now()}] pageerror: {e}"))
        page.on("crash", lambda _p: self.console.append(f"[{_now()}] page crashed"))

    # --- waiting ----------------------------------------------------------------------------------

    def poll(self, probe: Callable[[], Optional[T]], what: str, deadline_s: float) -> T:
        """Call ``probe`` until it returns something other than None/False; dismiss dialogs meanwhile."""
        deadline = time.monotonic() + deadline_s
        last_error = ""
        while True:
            server = self.lab.proc
            if server is None or server.poll() is not None:
                raise AssertionError(f"{self.name}: the Jupyter server died while waiting for {what}")
            try:
                self.dismiss_dialogs()
                value = probe()
            except PlaywrightError as exc:  # e.g. "execution context was destroyed" mid-navigation
                last_error, value = f"; last error: {exc}".splitlines()[0], None
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.name}: gave up after {deadline_s:.0f} s waiting for {what}{last_error}"
                )
            self.page.wait_for_timeout(150)

    def dismiss_dialogs(self) -> None:
        """Accept any modal (kernel choice, "unsaved changes", news): none of them is under test."""
        dialog = self.page.locator(".jp-Dialog")
        if dialog.count() and dialog.first.is_visible():
            self.console.append(f"[{_now()}] test: dismissing dialog: {dialog.first.text_content()!r}")
            accept = dialog.first.locator(".jp-Dialog-button.jp-mod-accept")
            if accept.count():
                accept.first.click()
            else:
                self.page.keyboard.press("Escape")

    def text(self, selector: str) -> Optional[str]:
        """The visible text of the first match, or None while there is none."""
        found = self.page.locator(selector)
        if not found.count():
            return None
        try:
            return str(found.first.inner_text(timeout=2000)).strip()
        except PlaywrightError:  # detached between count() and inner_text(): try again next poll
            return None

    def clock(self) -> Optional[str]:
        """The view's sample time when it shows one (not the ``--:--:--`` placeholder)."""
        text = self.text(UPDATED)
        return text if text and CLOCK.match(text) else None

    # --- steps ------------------------------------------------------------------------------------

    def open_notebook(self, name: str) -> None:
        self.page.goto(self.lab.url(f"lab/tree/{name}"), wait_until="domcontentloaded", timeout=60_000)
        self.poll(lambda: self.page.locator(f"{PANEL} .jp-Cell").count() > 0, "the notebook", OPEN_DEADLINE_S)
        self.poll(lambda: self.page.evaluate(KERNEL_READY_JS), "an idle, connected kernel", OPEN_DEADLINE_S)

    def run_all(self) -> None:
        """Run → Run All Cells, through the menu bar as a user would."""
        self.page.locator("#jp-menu-panel .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        self.page.locator(".lm-Menu li[data-command='runmenu:run-all']").click()

    def run_cell(self, index: int) -> None:
        """Select cell ``index`` (by its prompt) and press the toolbar's ▶ (run and select next)."""
        self.page.locator(f"{PANEL} .jp-Cell").nth(index).locator(".jp-InputPrompt").click()
        self.page.locator(
            f"{PANEL} .jp-NotebookPanel-toolbar [data-command='notebook:run-cell-and-select-next']"
        ).click()

    def wait_live(self) -> str:
        """Wait for a visible live view showing a sample time; return that time."""
        self.poll(
            lambda: self.page.locator(LIVE).first.is_visible(),
            "a visible .npuwatch-live widget",
            VIEW_DEADLINE_S,
        )
        return self.poll(self.clock, "a sample time in .npuwatch-updated", VIEW_DEADLINE_S)

    def wait_tick(self, after: str) -> str:
        """Wait for the clock to show a time other than ``after``; return it."""

        def moved() -> Optional[str]:
            now = self.clock()
            return now if now is not None and now != after else None

        return self.poll(moved, f".npuwatch-updated to move on from {after}", TICK_DEADLINE_S)

    def cell_output(self, index: int) -> str:
        """The text of cell ``index``'s output area ("" while it has none)."""
        area = self.page.locator(f"{PANEL} .jp-Cell").nth(index).locator(".jp-OutputArea")
        try:
            return str(area.inner_text(timeout=2000)) if area.count() else ""
        except PlaywrightError:
            return ""

    def chip_values(self) -> List[str]:
        """Every metric value shown on every chip card, as text."""
        return [t.strip() for t in self.page.locator(f"{CHIPS} .npuwatch-value").all_inner_texts()]

    def screenshot(self, label: str) -> Path:
        path = ARTIFACTS / f"{self.name}-{label}.png"
        # The view's top (title, status, clock) at the top of the notebook's scroll area.
        self.page.evaluate(
            "sel => { const el = document.querySelector(sel); if (el) el.scrollIntoView({block: 'start'}); }",
            LIVE,
        )
        self.page.screenshot(path=str(path))
        return path

    def save_logs(self) -> Dict[str, Path]:
        """Write the browser console next to the server's own log; the paths of both."""
        console = ARTIFACTS / f"{self.name}-console.log"
        console.write_text("\n".join(self.console) + "\n", encoding="utf-8")
        self.lab.log_text()  # flushes it
        return {"console": console, "server": self.lab.log_path}


@pytest.fixture
def session(browser: Any, lab: JupyterLab, request: pytest.FixtureRequest) -> Iterator[Session]:
    """A fresh tab; its console and the server log are kept, plus a screenshot when the test failed."""
    page = browser.new_page()
    page.set_default_timeout(60_000)
    tab = Session(page, lab, request.node.name)
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
                    _attach(request, "failure screenshot", shot)
                except Exception as exc:  # a crashed page: the logs still tell the story
                    tab.console.append(f"test: no failure screenshot: {exc}")
            for what, path in tab.save_logs().items():
                _attach(request, f"{what} log", path)
        finally:
            page.close()


def _attach(request: pytest.FixtureRequest, what: str, path: Path) -> None:
    """Name an artifact in the test's report (junit properties) and in its captured output."""
    request.node.user_properties.append((what, str(path)))
    print(f"{what}: {path}")


def _now() -> str:
    return time.strftime("%H:%M:%S")


# --- tests ------------------------------------------------------------------------------------------


def test_live_view_updates_in_jupyterlab(
    lab: JupyterLab, session: Session, request: pytest.FixtureRequest
) -> None:
    write_notebook(lab.root / "live.ipynb", LIVE_CELLS)
    session.open_notebook("live.ipynb")
    started = time.monotonic()
    session.run_all()

    first = session.wait_live()
    # Reported, never asserted (tests do not time things): the "readable within 2 s".
    print(f"live view with a sample time {time.monotonic() - started:.2f} s after Run All Cells")
    shot1 = session.screenshot("1")
    numbers_1 = session.chip_values()
    second = session.wait_tick(after=first)
    shot2 = session.screenshot("2")
    numbers_2 = session.chip_values()
    _attach(request, "screenshot 1", shot1)
    _attach(request, "screenshot 2", shot2)
    print(f"updated: {first} -> {second}")
    print(f"chip values at {first}: {numbers_1}")
    print(f"chip values at {second}: {numbers_2}")

    assert second != first
    chips = session.page.locator(CHIPS)
    assert chips.count() >= 1, "no .npuwatch-chip in the live view"
    assert all(chips.nth(i).is_visible() for i in range(chips.count())), "a .npuwatch-chip is not visible"
    assert numbers_2, "no .npuwatch-value on the chip cards"
    assert any(re.search(r"\d", value) for value in numbers_2), f"no numbers on the chip cards: {numbers_2}"
    # One live view, and it is the widget: the bundle's static text/html fallback was not rendered.
    assert session.page.locator(f"{PANEL} .npuwatch-live").count() == 1


def test_stopped_view_stops_updating(
    lab: JupyterLab, session: Session, request: pytest.FixtureRequest
) -> None:
    write_notebook(lab.root / "stop.ipynb", [*LIVE_CELLS, "%npuwatch stop"])
    session.open_notebook("stop.ipynb")
    session.run_cell(0)
    session.run_cell(1)
    first = session.wait_live()
    session.wait_tick(after=first)  # it is live before we stop it

    session.run_cell(2)
    session.poll(
        lambda: "stopped 1 live view" in session.cell_output(2),
        "'%npuwatch stop' to report one stopped view",
        VIEW_DEADLINE_S,
    )
    session.poll(
        lambda: (session.text(f"{LIVE} .npuwatch-status") or "").endswith("stopped"),
        "the view's status to read 'stopped'",
        VIEW_DEADLINE_S,
    )
    # The last sample's message comes from the sampler thread and the "stopped" header from the
    # cell's thread; the kernel may interleave their sends, so let in-flight messages land first.
    session.page.wait_for_timeout(2 * INTERVAL_S * 1000)
    frozen = session.poll(session.clock, "the clock of the stopped view", VIEW_DEADLINE_S)
    readings = []
    deadline = time.monotonic() + QUIET_S
    while time.monotonic() < deadline:
        now = session.clock()
        if now is not None:
            readings.append(now)
        session.page.wait_for_timeout(100)
    assert readings, "could not read .npuwatch-updated after %npuwatch stop"
    assert set(readings) == {frozen}, (
        f"the clock moved after %npuwatch stop: {frozen} -> {sorted(set(readings))}"
    )
    _attach(request, "screenshot stopped", session.screenshot("stopped"))
