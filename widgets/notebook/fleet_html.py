"""Provides the notebook fleet view's HTML and text: the node table from the fleet's rows.

The rows are ``npuwatch.widgets.fleet.rows``'s, the terminal fleet view's, so both list the same
nodes in the same order with the same figures.  Levels are coloured as the single-node notebook
colours a chip (``html_parts``); a stale node's row is dimmed and says why.  Classes name things
for tests: ``npuwatch-fleet``, ``npuwatch-fleet-node``, ``npuwatch-level-<level>``,
``npuwatch-stale``, ``data-node``.
"""

from __future__ import annotations

from html import escape
from typing import Optional, Sequence

from npuwatch.model import Level
from npuwatch.widgets.fleet.rows import COLUMNS, FleetHeader, FleetRow
from npuwatch.widgets.notebook.html_parts import BORDER, FONT, HEALTH_COLOURS, LEVEL_COLOURS, level_class
from npuwatch.widgets.notebook.live_html import chips_html
from npuwatch.widgets.view_model import ViewModel

_CELL = "padding:2px 10px 2px 0;text-align:left;vertical-align:top;white-space:nowrap"
_REASON = "padding:2px 10px 2px 0;text-align:left;vertical-align:top;max-width:360px;white-space:normal"
#: A level's badge colours: the health badge's (ok green, warning amber, critical red, unknown grey).
_BADGE = {Level.OK: "ok", Level.WARNING: "warning", Level.CRITICAL: "critical", Level.UNKNOWN: "unknown"}
ERROR_COLOUR = "#c62828"


def level_badge_html(row: FleetRow) -> str:
    """The node's level as a badge: glyph and word on the level's colour (grey when stale)."""
    background, colour = HEALTH_COLOURS[_BADGE[row.level]]
    return (
        f'<span class="npuwatch-badge npuwatch-fleet-level" style="background:{background};color:{colour};'
        f'border-radius:3px;padding:0 6px;font-weight:600;white-space:nowrap">{escape(row.level_text)}</span>'
    )


def header_html(header: Optional[FleetHeader], status: str, source: str = "") -> str:
    """The title line (source, update time, status) and the summary, or the source's error."""
    shown = header.source if header is not None else source
    when = f" · {escape(header.updated)}" if header is not None else ""
    title = (
        f'<div style="font-family:{FONT};font-size:13px"><b>npuwatch fleet</b>'
        f' <span style="opacity:0.7">· {escape(shown)}{when}</span>'
        f' <span class="npuwatch-status" style="opacity:0.8">· {escape(status)}</span></div>'
    )
    if header is None:
        return title
    if header.error:
        line = (
            f'<div class="npuwatch-fleet-error" '
            f'style="font-family:{FONT};font-size:12px;color:{ERROR_COLOUR}">'
            f"{escape(header.error_line)}</div>"
        )
    else:
        colour = LEVEL_COLOURS[header.level]
        line = (
            f'<div class="npuwatch-fleet-summary {level_class(header.level)}" '
            f'style="font-family:{FONT};font-size:12px;color:{colour}">{escape(header.summary)}</div>'
        )
    warnings = "".join(f"<li>{escape(w)}</li>" for w in header.warnings)
    if warnings:
        style = "margin:0;padding-left:16px;font-size:11px;opacity:0.8"
        line += f'<ul class="npuwatch-warnings" style="{style}">{warnings}</ul>'
    return title + line


def table_html(rows: Sequence[FleetRow], filtered: bool = False) -> str:
    """The node table, a row per node in the order given."""
    if not rows:
        said = "No node matches the filter." if filtered else "No nodes yet."
        return f'<div class="npuwatch-fleet-empty" style="font-family:{FONT};opacity:0.8">{said}</div>'
    head = "".join(
        f'<th style="{_CELL};border-bottom:1px solid {BORDER};font-weight:600">{escape(c)}</th>'
        for c in COLUMNS
    )
    body = "".join(_row_html(row) for row in rows)
    return (
        f'<table class="npuwatch-fleet" style="font-family:{FONT};font-size:12px;border-collapse:collapse;'
        f'font-variant-numeric:tabular-nums"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _row_html(row: FleetRow) -> str:
    classes = f"npuwatch-fleet-node {level_class(row.level)}" + (" npuwatch-stale" if row.stale else "")
    dim = ";opacity:0.55" if row.stale else ""
    reason_colour = "inherit" if row.stale else LEVEL_COLOURS[row.level]
    title = escape(" · ".join(row.reasons)) if len(row.reasons) > 1 else ""
    cells = [
        f'<td style="{_CELL}"><b>{escape(row.node)}</b></td>',
        f'<td style="{_CELL}">{level_badge_html(row)}</td>',
        f'<td style="{_CELL}">{escape(row.chips)}</td>',
        f'<td class="npuwatch-fleet-reason" style="{_REASON};color:{reason_colour}" title="{title}">'
        f"{escape(row.reason)}</td>",
        *(f'<td style="{_CELL}">{escape(text)}</td>' for text in row.cells()[4:]),
    ]
    return f'<tr class="{classes}" data-node="{escape(row.node)}" style="{dim[1:]}">{"".join(cells)}</tr>'


def chips_of(view: ViewModel, slots: int, layout: str) -> str:
    """A node's chips as the single-node notebook draws them (cards, or a row each)."""
    return chips_html(view, slots, None, layout)


def node_html(row: FleetRow, chips: str) -> str:
    """One node opened under the table: its name, level, chips OK, every reason, then ``chips``."""
    reasons = "".join(f"<li>{escape(reason)}</li>" for reason in row.reasons)
    listed = (
        f'<ul class="npuwatch-fleet-reasons" style="margin:2px 0;padding-left:16px;font-size:12px;'
        f'color:{"inherit" if row.stale else LEVEL_COLOURS[row.level]}">{reasons}</ul>'
        if reasons
        else '<div style="font-size:12px;opacity:0.7">✔ every chip OK</div>'
    )
    nothing = "" if chips else '<div style="opacity:0.8">No chips were read from this node.</div>'
    return (
        f'<div class="npuwatch-fleet-opened" data-node="{escape(row.node)}" style="font-family:{FONT};'
        f'margin-top:8px;border-top:1px solid {BORDER};padding-top:6px">'
        f'<div style="font-size:13px"><b>{escape(row.node)}</b> {level_badge_html(row)} '
        f'<span style="opacity:0.8">· {escape(row.chips)} chips OK · data {escape(row.age)} old</span></div>'
        f"{listed}{chips}{nothing}</div>"
    )


def node_missing_html(name: str) -> str:
    """The chosen node is no longer in the fleet's source."""
    return (
        f'<div class="npuwatch-fleet-opened" style="font-family:{FONT};margin-top:8px;color:#ef6c00">'
        f"{escape(name)} is not in the latest refresh.</div>"
    )


def fleet_text(rows: Sequence[FleetRow], header: Optional[FleetHeader], status: str, source: str = "") -> str:
    """The node table as plain text (the text/plain fallback), columns aligned."""
    if header is None:
        return f"npuwatch fleet ({source}): {status}"
    lines = [f"npuwatch fleet · {header.source} · {header.updated} · {status}"]
    lines.append(header.error_line or header.summary)
    table = [COLUMNS, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    for line in table:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    return "\n".join(lines)
