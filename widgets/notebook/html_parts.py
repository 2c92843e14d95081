"""Provides the small HTML pieces every notebook form shares: colours, the health badge, a value, a reason.

Styles are inline (a notebook's HTML output has no stylesheet of ours) and use the front-end's
CSS variables with fallbacks, so light and dark themes both read.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Optional

from npuwatch.model import Level
from npuwatch.widgets.view_model import ChipRow, MetricCell, ReasonGroup, WorkloadExplanation, WorkloadTag

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


def workload_tag_html(tag: WorkloadTag, title: str = "") -> str:
    """A chip's workload tag (``compute``; ``input`` in amber: a class that holds the job back) and
    its throttling mark (``▼ throttled: thermal``, amber); ``title`` shows on hover."""
    hover = f' title="{escape(title)}"' if title else ""
    colour = LEVEL_COLOURS[tag.level] if tag.level is not Level.UNKNOWN else "inherit"
    opacity = ";opacity:0.7" if tag.kind in ("idle", "unknown") else ""
    mark = ""
    if tag.throttling:
        mark = (
            f' <span class="npuwatch-throttling" data-reason="{escape(tag.throttling)}" '
            f'style="color:{LEVEL_COLOURS[Level.WARNING]};font-weight:600;white-space:nowrap">'
            f"{escape(tag.mark())}</span>"
        )
    return (
        f'<span class="npuwatch-workload npuwatch-workload-{escape(tag.kind)} {level_class(tag.level)}" '
        f'data-class="{escape(tag.kind)}"{hover} style="color:{colour};font-weight:600;white-space:nowrap'
        f'{opacity}">{escape(tag.tag)}</span>{mark}'
    )


def workload_hover(shown: WorkloadExplanation) -> str:
    """A workload explained on one line, for a tooltip: heading, window, summary, evidence, next step."""
    evidence = " · ".join(f"{row.label} {row.value}" for row in shown.evidence)
    parts = [f"{shown.heading} ({shown.window}): {shown.summary}"]
    if evidence:
        parts.append(f"evidence: {evidence}")
    parts.append(f"next step: {shown.next_step}")
    if shown.owner:
        parts.append(f"likely owner: {shown.owner}")
    if shown.needs_dcmi:
        parts.append(shown.needs_dcmi)
    return "\n".join(parts)


def workload_html(row: ChipRow) -> str:
    """A card's workload block (none for an unknown class): its tag and summary; when the class
    holds the job back or AI Core is throttled, also the evidence with units, the next step, the
    likely owner of held memory and what only the DCMI backend could tell (for the others all of
    it is in the tooltip)."""
    tag, shown = row.workload, row.explanation
    if tag is None or shown is None or tag.level is Level.UNKNOWN:
        return ""  # unknown: the card's n/a and its reason say it already (the tooltip of a table cell)
    head = (
        f'<div class="npuwatch-workload-line" title="{escape(workload_hover(shown))}">'
        f"{workload_tag_html(tag)} "
        f'<span class="npuwatch-workload-summary" style="opacity:0.85">{escape(shown.summary)}</span></div>'
    )
    more = _workload_more(shown) if tag.level is Level.WARNING or tag.throttling else ""
    return f'<div class="npuwatch-workload-block" style="margin:2px 0 3px;font-size:12px">{head}{more}</div>'


_SMALL = "font-size:11px;line-height:1.45"


def _workload_more(shown: WorkloadExplanation) -> str:
    """The evidence (with the window), the next step, the likely owner, what needs the DCMI backend."""
    evidence = " · ".join(
        f'<span class="npuwatch-evidence" data-key="{escape(row.key)}" style="white-space:nowrap">'
        f'<span style="opacity:0.8">{escape(row.label)}</span> <b>{escape(row.value)}</b></span>'
        for row in shown.evidence
    )
    window = f'<span style="opacity:0.7">({escape(shown.window)})</span>'
    lines = [("npuwatch-workload-evidence", f"{evidence} {window}")] if evidence else []
    lines.append(("npuwatch-next-step", f"→ {escape(shown.next_step)}"))
    if shown.owner:
        lines.append(("npuwatch-owner", f"<b>likely owner</b> {escape(shown.owner)}"))
    if shown.needs_dcmi:  # a waiting chip read through npu-smi may be AI CPU-bound: say so here
        lines.append(("npuwatch-needs-dcmi", f'<span style="opacity:0.65">{escape(shown.needs_dcmi)}</span>'))
    return "".join(f'<div class="{name}" style="{_SMALL}">{html}</div>' for name, html in lines)
