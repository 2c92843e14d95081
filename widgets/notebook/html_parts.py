"""Provides the small HTML pieces every notebook form shares: colours, the health badge, a value, a reason.

Styles are inline (a notebook's HTML output has no stylesheet of ours) and use the front-end's
CSS variables with fallbacks, so light and dark themes both read.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Optional

from npuwatch.model import Level
from npuwatch.widgets.view_model import ChipRow, MetricCell, ReasonGroup

FONT = "var(--jp-ui-font-family, var(--vscode-font-family, system-ui, sans-serif))"
BORDER = "var(--jp-border-color2, rgba(128,128,128,0.35))"
#: Badge colours per health: (background, text).
HEALTH_COLOURS = {
    "ok": ("#2e7d32", "#ffffff"),
    "warning": ("#f9a825", "#000000"),
    "alarm": ("#ef6c00", "#ffffff"),
    "critical": ("#c62828", "#ffffff"),
    "unknown": ("#757575", "#ffffff"),
}
#: Text colours per level (the judge's, or a usage bar's): a value reads amber or red when not ok.
LEVEL_COLOURS = {
    Level.OK: "inherit",
    Level.WARNING: "#ef6c00",
    Level.CRITICAL: "#c62828",
    Level.UNKNOWN: "inherit",
}
PLOT_COLOURS = {
    "util": "#2ca02c",
    "memory": "#1f77b4",
    "power": "#9467bd",
    "temperature": "#d62728",
    "vector_percent": "#17becf",
    "hbm_bandwidth_percent": "#8c564b",
}
_REASON = "font-size:10px;opacity:0.7"


def badge_html(health_class: str, text: str) -> str:
    """The health badge: glyph and word on the health colour."""
    background, colour = HEALTH_COLOURS.get(health_class, HEALTH_COLOURS["unknown"])
    return (
        f'<span class="npuwatch-badge npuwatch-health-{health_class}" style="background:{background};'
        f'color:{colour};border-radius:3px;padding:0 6px;font-weight:600;white-space:nowrap">'
        f"{escape(text)}</span>"
    )


def level_class(level: Level) -> str:
    """The HTML class of a level: ``npuwatch-level-ok|warning|critical|unknown``."""
    return f"npuwatch-level-{level.value}"


def chip_classes(row: ChipRow) -> str:
    """A chip element's classes: ``npuwatch-chip``, its health, and the judge's level of the chip
    (``npuwatch-chip-level-ok|warning|critical|unknown``)."""
    return f"npuwatch-chip npuwatch-health-{row.health_class} npuwatch-chip-level-{row.level.value}"


def value_html(cell: MetricCell) -> str:
    """A metric's value (``n/a`` carries its reason on hover), coloured by its level."""
    colour = LEVEL_COLOURS[cell.level]
    title = f' title="{escape(cell.reason)}"' if cell.reason else ""
    return (
        f'<span class="npuwatch-value {level_class(cell.level)}" data-metric="{cell.key}"{title} '
        f'style="color:{colour};font-weight:600;font-variant-numeric:tabular-nums;white-space:nowrap">'
        f"{escape(cell.text)}</span>"
    )


def beside_html(cell: MetricCell) -> str:
    """A metric shown next to a card value: ``1300/1800 MHz`` (the frequency beside AI Core)."""
    title = f' title="{escape(cell.reason)}"' if cell.reason else ""
    return (
        f'<span class="npuwatch-beside" data-metric="{cell.key}"{title} '
        f'style="font-size:11px;opacity:0.8;white-space:nowrap;font-variant-numeric:tabular-nums">'
        f"{escape(cell.text)}</span>"
    )


def reason_html(reason: str, metric: Optional[str] = None, style: str = "") -> str:
    """Why values are n/a, once: under one metric (``metric``), a chip or the whole view."""
    where = f' data-metric="{metric}"' if metric else ""
    return f'<div class="npuwatch-reason"{where} style="{_REASON};{style}">{escape(reason)}</div>'


def shared_reason_html(reason: Optional[str]) -> str:
    """The reason every chip's values are n/a (a failed npu-smi), said once for the view."""
    if not reason:
        return ""
    return (
        f'<div class="npuwatch-reason npuwatch-shared-reason" style="font-size:12px;margin:2px 0 6px">'
        f"<b>n/a on every chip:</b> {escape(reason)}</div>"
    )


def not_reported_html(groups: Iterable[ReasonGroup]) -> str:
    """Each n/a reason once, with the metrics and chips (by NPU and chip) it explains."""
    items = "".join(f"<li>{escape(group.text())}</li>" for group in groups)
    if not items:
        return ""
    return (
        f'<div class="npuwatch-not-reported" style="font-size:11px;opacity:0.8">Not reported:'
        f'<ul style="margin:0;padding-left:16px">{items}</ul></div>'
    )
