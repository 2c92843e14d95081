"""Provides chip_table_html(): the live view's compact form, one row per chip with line-high plots.

Sixteen A3 cards make an output 2,000 px tall; as a table the same chips take a row each (about
30 px).  The rows carry the cards' classes (``npuwatch-chip``, ``npuwatch-health-<health>``,
``npuwatch-value``), so whatever reads one form reads the other.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

from npuwatch.widgets.notebook.html_parts import (
    BORDER,
    FONT,
    PLOT_COLOURS,
    badge_html,
    beside_html,
    chip_classes,
    not_reported_html,
    shared_reason_html,
    value_html,
    workload_hover,
    workload_tag_html,
)
from npuwatch.widgets.notebook.sparkline_svg import mini_sparkline_svg
from npuwatch.widgets.view_model import ChipRow, MetricCell, ViewModel, reason_groups

_CELL = "padding:2px 10px 2px 0;text-align:left;vertical-align:middle;white-space:nowrap"
_FALLBACK_LABELS = ("Util", "Memory", "Power", "Temp")
#: ipywidgets' HTML widget sets ``line-height: var(--jp-widgets-inline-height)`` (28 px) on its
#: content: rows of one text line and a 16 px plot would be 33 px tall instead of about 22.
_COMPACT = "line-height:1.35"


def _headers(rows: Sequence[ChipRow]) -> Sequence[str]:
    """Each metric column's label: the chips' own (AI Core, HBM) when they agree, else a general one."""
    labels = []
    for i, fallback in enumerate(_FALLBACK_LABELS):
        seen = {row.metrics[i].label for row in rows}
        labels.append(seen.pop() if len(seen) == 1 else fallback)
    return labels


def _metric_cell(cell: MetricCell, header: str, window: str, slots: int, extra: str = "") -> str:
    label = "" if cell.label == header else f"<small>{escape(cell.label)}</small> "
    span = f"over the last {window}" if window else "history"
    plot = mini_sparkline_svg(
        cell.series,
        ceiling=cell.ceiling,
        colour=PLOT_COLOURS.get(cell.key, "#1f77b4"),
        title=f"{cell.label} {span}, 0 to {cell.top_label}",
        slots=slots,
    )
    return (
        f'<td class="npuwatch-metric" data-metric="{cell.key}" style="{_CELL}">'
        f'<div style="display:flex;align-items:center;gap:6px">'
        f'<span style="min-width:86px">{label}{value_html(cell)}{extra}</span>{plot}</div></td>'
    )


def _row_html(row: ChipRow, headers: Sequence[str], window: str, slots: int, with_workload: bool) -> str:
    stale = ' <b class="npuwatch-stale" style="color:#ef6c00">STALE</b>' if row.stale else ""
    cells = [
        f'<td style="{_CELL}">{row.key[0]}</td>',
        f'<td style="{_CELL}">{row.key[1]}</td>',
        f'<td style="{_CELL}">{escape(row.model or "n/a")}{stale}</td>',
        f'<td style="{_CELL}">{badge_html(row.health_class, row.badge)}</td>',
    ]
    if with_workload:
        tag, shown = row.workload, row.explanation
        tag_html = (
            "" if tag is None else workload_tag_html(tag, "" if shown is None else workload_hover(shown))
        )
        cells.append(f'<td class="npuwatch-workload-cell" style="{_CELL}">{tag_html}</td>')
    for cell, header in zip(row.metrics, headers):
        own = ""
        if cell.key == "memory" and row.own_memory:
            own = (
                f'<div class="npuwatch-own" style="font-size:10px">this kernel {escape(row.own_memory)}</div>'
            )
        beside = row.beside(cell.key) if row.extras else None
        if beside is not None:  # the AI Core frequency against rated, beside AI Core
            own = f" {beside_html(beside)}{own}"
        cells.append(_metric_cell(cell, header, window, slots, own))
    # The other extras and the error codes fit no column: the row's tooltip says them.
    more = "".join(f" · {cell.label} {cell.text}" for cell in row.extras if cell.kind != "beside")
    more += "".join(f" · {error}" for error in row.errors)
    return (
        f'<tr class="{chip_classes(row)}" data-npu="{row.key[0]}" '
        f'data-chip="{row.key[1]}" title="{escape(row.title)} · {escape(row.detail)}{escape(more)}" '
        f'style="border-top:1px solid {BORDER}">{"".join(cells)}</tr>'
    )


def chip_table_html(view: ViewModel, slots: int) -> str:
    """Every chip as a table row: NPU, chip, model, health, what it is limited by (its workload
    tag, explained on hover), then each metric with its plot."""
    headers = _headers(view.chips)
    # What each chip is limited by, once a feed has judged it (a column only then).
    with_workload = any(row.workload is not None for row in view.chips)
    head = "".join(
        f'<th style="{_CELL};font-weight:600">{escape(h)}</th>'
        for h in ("NPU", "Chip", "Model", "Health", *(("Workload",) if with_workload else ()), *headers)
    )
    rows = "".join(_row_html(row, headers, view.window, slots, with_workload) for row in view.chips)
    groups = [g for g in reason_groups(view.chips) if g.reason != view.shared_reason]
    return (
        f'<div class="npuwatch-chips npuwatch-layout-table" style="font-family:{FONT};{_COMPACT}">'
        f"{shared_reason_html(view.shared_reason)}"
        f'<table class="npuwatch-chip-table" style="border-collapse:collapse;font-size:12px">'
        f"<tr>{head}</tr>{rows}</table>{not_reported_html(groups)}</div>"
    )
