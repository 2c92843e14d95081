"""One browser tab on a private Jupyter server (JupyterLab or Notebook 7): the steps a user takes
and the live view's DOM as the tests read it.

Both front ends are built from JupyterLab's components, so the notebook panel, its cells, the
toolbar and the ``window.jupyterapp`` object are the same; only the notebook's page and the menu
bar's selector differ (``JupyterApp`` in jupyter_server.py).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TypeVar

from tests.browser.jupyter_server import JupyterServer
from tests.conftest import REPO

ARTIFACTS = REPO / "test-artifacts" / "browser"

INTERVAL_S = 0.5
LIVE_CELLS = ["%load_ext npuwatch", f"%npuwatch --demo --interval {INTERVAL_S}"]

OPEN_DEADLINE_S = 120.0  # the app's page and the notebook's kernel, on a slow machine
VIEW_DEADLINE_S = 60.0  # from "Run All Cells" to a visible live view
TICK_DEADLINE_S = 30.0  # for the clock to move (samples every 0.5 s, the clock shows seconds)

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
except ImportError:  # the tests skip (or fail in CI) through need() in the artifacts fixture

    class PlaywrightError(Exception):  # type: ignore[no-redef]
        """Stands in for playwright's error type where playwright is missing."""


def now() -> str:
    return time.strftime("%H:%M:%S")


class Session:
    """One browser tab on the server, with its console recorded."""

    def __init__(self, page: Any, server: JupyterServer, name: str) -> None:
        self.page = page
        self.server = server
        self.name = name
        self.console: List[str] = []
        page.on("console", lambda m: self.console.append(f"[{now()}] {m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console.append(f"[{now()}] pageerror: {e}"))
        page.on("crash", lambda _p: self.console.append(f"[{now()}] page crashed"))

    # --- waiting ----------------------------------------------------------------------------------

    def poll(self, probe: Callable[[], Optional[T]], what: str, deadline_s: float) -> T:
        """Call ``probe`` until it returns something other than None/False; dismiss dialogs meanwhile."""
        deadline = time.monotonic() + deadline_s
        last_error = ""
        while True:
            proc = self.server.proc
            if proc is None or proc.poll() is not None:
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
            self.console.append(f"[{now()}] test: dismissing dialog: {dialog.first.text_content()!r}")
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
        self.page.goto(self.server.notebook_url(name), wait_until="domcontentloaded", timeout=60_000)
        self.poll(lambda: self.page.locator(f"{PANEL} .jp-Cell").count() > 0, "the notebook", OPEN_DEADLINE_S)
        self.poll(lambda: self.page.evaluate(KERNEL_READY_JS), "an idle, connected kernel", OPEN_DEADLINE_S)

    def run_all(self) -> None:
        """Run → Run All Cells, through the menu bar as a user would."""
        menu_bar = self.server.app.menu_bar
        self.page.locator(f"{menu_bar} .lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
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
            current = self.clock()
            return current if current is not None and current != after else None

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
        self.server.log_text()  # flushes it
        return {"console": console, "server": self.server.log_path}
