"""The notebook's HTML as JupyterLab draws it: headless Chromium with JupyterLab's own stylesheet.

Geometry, not pixels: the page is the HTML the kernel sends, inside the classes JupyterLab puts
around a text/html output, styled by the stylesheet JupyterLab's HTML export ships (the same
rules as the app: ``jupyter nbconvert --to html`` uses it).  Screenshots go to
``test-artifacts/notebook/`` for a person to look at; nothing here compares images.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from npuwatch.history import History
from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.view_model import build_view
from tests.conftest import REPO, need
from tests.widgets.fakes import capture_snapshot

pytestmark = pytest.mark.slow

ARTIFACTS = REPO / "test-artifacts" / "notebook"
CHROMIUM = os.environ.get("NPUWATCH_TEST_CHROMIUM", "/usr/bin/chromium")
WIDTH = 1000
#: The classes JupyterLab gives a text/html output (its stylesheet styles by them).
OUTPUT_CLASSES = "jp-OutputArea-output jp-RenderedHTMLCommon jp-RenderedHTML"
ROW_HEIGHTS_JS = "() => [...document.querySelectorAll('tr.npuwatch-chip')].map(row => row.offsetHeight)"

#: Text on another line that an inline element's background covers.  Inline boxes are painted
#: line by line, background then text, so a background reaching into the line above (padding, a
#: line-height smaller than the font's box) is painted over that line's underscores; block
#: backgrounds are painted before all text and hide nothing.
COVERED_TEXT_JS = """(root) => {
  const texts = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.textContent.trim() || !node.parentElement.checkVisibility()) continue;  // closed <details>
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) texts.push({node, r});
  }
  const covered = [];
  for (const el of root.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    if (style.display !== 'inline' || !el.checkVisibility()) continue;
    const bg = style.backgroundColor;
    if (bg === 'transparent' || /^rgba\\(.*,\\s*0\\)$/.test(bg)) continue;
    for (const b of el.getClientRects()) {
      for (const {node, r} of texts) {
        if ((r.top + r.bottom) / 2 >= b.top + 0.5) continue;  // its own line, or a line below
        const x = Math.min(r.right, b.right) - Math.max(r.left, b.left);
        const y = Math.min(r.bottom, b.bottom) - Math.max(r.top, b.top);
        if (x > 0 && y > 0) {
          covered.push({text: node.textContent.trim().slice(0, 80), by: el.textContent.slice(0, 40), px: y});
        }
      }
    }
  }
  return covered;
}"""


def _lab_stylesheet() -> str:
    from jupyter_core.paths import jupyter_path

    for folder in jupyter_path("nbconvert", "templates", "lab", "static"):
        index, theme = Path(folder) / "index.css", Path(folder) / "theme-light.css"
        if index.is_file() and theme.is_file():
            return index.read_text(encoding="utf-8") + theme.read_text(encoding="utf-8")
    need(False, "JupyterLab's stylesheet (nbconvert's lab template) is not installed")
    return ""


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    need(importlib.util.find_spec("playwright") is not None, "the playwright Python package is not installed")
    need(
        os.access(CHROMIUM, os.X_OK) or shutil.which(CHROMIUM) is not None,
        f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium)",
    )
    from playwright.sync_api import sync_playwright

    css = _lab_stylesheet()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        try:
            tab = browser.new_page(viewport={"width": WIDTH + 40, "height": 800})
            tab.set_default_timeout(60_000)
            tab.css = css  # type: ignore[attr-defined]
            yield tab
        finally:
            browser.close()


#: The live view's chips are drawn in an ipywidgets HTML widget, not a text/html output: its
#: content is ``.widget-html-content``, whose line-height is ``--jp-widgets-inline-height`` (28 px).
WIDGET = ("widget-html-content", "line-height:28px;font-size:13px")


def _show(page: Any, html: str, name: str, inside: Tuple[str, str] = (OUTPUT_CLASSES, "")) -> Dict[str, Any]:
    """Load ``html`` as JupyterLab shows it (a text/html output unless ``inside`` says otherwise).

    Returns its height and the text its inline backgrounds hide.
    """
    classes, style = inside
    page.set_content(
        '<!doctype html><html><head><meta charset="utf-8"><style>'
        + page.css
        + '</style></head><body class="jp-Notebook" data-jp-theme-light="true" style="margin:0">'
        + f'<div id="out" class="{classes}" style="width:{WIDTH}px;{style}">'
        + html
        + "</div></body></html>"
    )
    out = page.locator("#out")
    out.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    covered: List[Dict[str, Any]] = page.evaluate(COVERED_TEXT_JS, out.element_handle())
    return {"height": out.bounding_box()["height"], "covered": covered}


def test_doctor_fix_lines_hide_no_text_in_jupyterlab(page):
    from npuwatch import notebook

    report = notebook.doctor(demo="container-missing-nodes")
    assert _show(page, report.html(), "doctor-container-missing-nodes")["covered"] == []


def _view(number: str, samples: int = 30):
    snapshot = capture_snapshot(number)
    history = History(samples)
    for _ in range(samples):
        history.add(snapshot)
    return build_view(snapshot, history, points=samples, window="15 min")


def test_sixteen_chips_fit_a_compact_table(page):
    view = _view("100")
    assert len(view.chips) == 16
    table = _show(page, live_html.page_html(view, "live", 900, layout="table"), "a3-table")
    cards = _show(page, live_html.page_html(view, "live", 900, layout="cards"), "a3-cards")
    assert table["covered"] == [] and cards["covered"] == []
    assert table["height"] < 800  # a row per chip: about 30 px each, with the host and processes
    assert cards["height"] > 2 * table["height"]
    # In the widget, under ipywidgets' 28 px line-height, a row stays one text line tall.
    _show(page, live_html.chips_html(view, 900, layout="table"), "a3-table-widget", WIDGET)
    heights = page.evaluate(ROW_HEIGHTS_JS)
    assert len(heights) == 16 and max(heights) < 25  # 33 px at the widget's 28 px lines


def test_failing_npu_smi_costs_one_line_not_one_per_metric(page):
    from npuwatch import notebook

    failing = notebook.snapshot(demo="container-missing-nodes").snapshot
    healthy = _view("001")
    assert len(failing.chips) == len(healthy.chips) == 8
    failed = build_view(failing, History(2), points=2, window="15 min")
    failed_html = live_html.chips_html(failed, 2, layout="cards")
    healthy_html = live_html.chips_html(healthy, 30, layout="cards")
    shown = _show(page, failed_html, "container-missing-nodes-cards")
    assert shown["height"] <= _show(page, healthy_html, "910b-cards")["height"] + 60


def _dcmi_view(number: str, samples: int = 30):
    """Capture ``number`` as the DCMI backend would read it: every driver-only metric, an error code."""
    from dataclasses import replace

    from npuwatch.model import ChipError

    snapshot = capture_snapshot(number)
    values = {
        "aicore_freq_mhz": 1300,
        "aicore_rated_freq_mhz": 1800,
        "vector_percent": 45,
        "cube_percent": 12,
        "aicpu_percent": 3,
        "ctrlcpu_percent": 7,
        "hbm_bandwidth_percent": 60,
        "hbm_temperature_c": 41,
        "voltage_v": 0.85,
        "ecc_single_bit_errors": 1234567,
        "ecc_double_bit_errors": 0,
        "ecc_isolated_pages": 1,
    }
    error = (ChipError("80E01801", "HBM multi-bit ECC error"),)
    chips = tuple(replace(chip, errors=error, **values) for chip in snapshot.chips)
    snapshot = replace(snapshot, chips=chips, chip_source="dcmi")
    history = History(samples)
    for _ in range(samples):
        history.add(snapshot)
    return build_view(snapshot, history, points=samples, window="15 min")


def test_the_driver_only_metrics_hide_no_text_and_keep_the_table_one_line_a_row(page):
    view = _dcmi_view("100")
    assert len(view.chips) == 16 and all(row.extras for row in view.chips)
    cards = _show(page, live_html.page_html(view, "live", 900, layout="cards"), "a3-dcmi-cards")
    table = _show(page, live_html.page_html(view, "live", 900, layout="table"), "a3-dcmi-table")
    assert cards["covered"] == [] and table["covered"] == []
    plain = _view("100")
    # Two bars and a detail line or two per card: taller, but not twice as tall.
    plain_cards = _show(page, live_html.page_html(plain, "live", 900, layout="cards"), "a3-cards")
    assert plain_cards["height"] < cards["height"] < 2 * plain_cards["height"]
    _show(page, live_html.chips_html(view, 900, layout="table"), "a3-dcmi-table-widget", WIDGET)
    heights = page.evaluate(ROW_HEIGHTS_JS)
    assert len(heights) == 16 and max(heights) < 25
