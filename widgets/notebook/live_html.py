"""Provides the live view's HTML pieces (chip cards, host, processes, alerts) from a ViewModel.

Numbers are visible text; the SVG plots only repeat them over time.  Styles are inline (a
notebook's HTML output has no stylesheet of ours) and use the front-end's CSS variables with
fallbacks, so light and dark themes both read.  Classes name things for tests and the browser
test's DOM contract: ``npuwatch-chip``, ``npuwatch-health-<health>``, ``npuwatch-level-<level>``.
The chips are cards, or a compact table (``chip_table``) for many chips.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Optional

from npuwatch.widgets.notebook.chip_table import chip_table_html
from npuwatch.widgets.notebook.html_parts import (
    BORDER,
    FONT,
    HEALTH_COLOURS,
    PLOT_COLOURS,
    badge_html,
    beside_html,
    chip_classes,
    reason_html,
    shared_reason_html,
    value_html,
    workload_html,
)
from npuwatch.widgets.notebook.sparkline_svg import sparkline_svg
from npuwatch.widgets.view_model import ChipRow, HostRow, MetricCell, ProcessRow, ViewModel

SEVERITY_COLOURS = {"critical": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}


def _bar(fraction: Optional[float], colour: str) -> str:
    if fraction is None:
        return ""
    width = max(0.0, min(1.0, fraction)) * 100
    return (
        f'<div style="height:3px;background:{BORDER};margin-top:2px">'
        f'<div style="height:3px;width:{width:.0f}%;background:{colour}"></div></div>'
    )


def metric_html(
    cell: MetricCell,
    window: str,
    slots: int,
    said: Optional[str] = None,
    beside: Optional[MetricCell] = None,
) -> str:
    """One metric row: label, value, a bar, the history plot, and why it is n/a unless ``said``;
    ``beside``: a metric shown next to the value (AI Core frequency against rated, beside AI Core)."""
    reason = ""
    if cell.reason and cell.reason != said:
        reason = reason_html(cell.reason, cell.key, "max-width:130px")
    extra = "" if beside is None else f" {beside_html(beside)}"
    plot = sparkline_svg(
        cell.series,
        ceiling=cell.ceiling,
        top_label=cell.top_label,
        window=window,
        colour=PLOT_COLOURS.get(cell.key, "#1f77b4"),
        title=f"{cell.label} over the last {window}" if window else cell.label,
        slots=slots,
    )
    return (
        f'<tr class="npuwatch-metric" data-metric="{cell.key}">'
        f'<td style="padding:1px 6px 1px 0;opacity:0.8;white-space:nowrap;vertical-align:top">'
        f"{escape(cell.label)}</td>"
        f'<td style="padding:1px 6px 1px 0;vertical-align:top;min-width:96px">{value_html(cell)}{extra}'
        f"{_bar(cell.fraction, PLOT_COLOURS.get(cell.key, '#1f77b4'))}{reason}</td>"
        f'<td style="padding:1px 0">{plot}</td></tr>'
    )


def details_html(row: ChipRow) -> str:
    """The chip's detail metrics on one wrapping line (``Cube 12% · AI CPU 3% · ECC 2-bit 0 errors``),
    then its error codes, a line each; nothing for a chip that reports neither (npu-smi's chips)."""
    details = ""
    if row.details:
        parts = " · ".join(_detail_html(cell) for cell in row.details)
        style = "margin-top:3px;font-size:11px;line-height:1.5"
        details = f'<div class="npuwatch-details" style="{style}">{parts}</div>'
    colour = HEALTH_COLOURS.get(row.health_class, HEALTH_COLOURS["unknown"])[0]
    errors = "".join(
        f'<div class="npuwatch-error-code" style="font-size:11px;color:{colour}">{escape(error)}</div>'
        for error in row.errors
    )
    return details + errors


def _detail_html(cell: MetricCell) -> str:
    title = f' title="{escape(cell.reason)}"' if cell.reason else ""
    return (
        f'<span class="npuwatch-detail" data-metric="{cell.key}"{title} style="white-space:nowrap">'
        f'<span style="opacity:0.8">{escape(cell.label)}</span> <b>{escape(cell.text)}</b></span>'
    )


def chip_html(row: ChipRow, window: str, slots: int, said: Optional[str] = None) -> str:
    """One chip card with class ``npuwatch-chip``; a reason several metrics share is said once.

    ``said``: a reason the view already gave for every chip (the card then does not repeat it).
    """
    stale = (
        ' <span class="npuwatch-stale" style="color:#ef6c00;font-weight:600">STALE</span>'
        if row.stale
        else ""
    )
    own = ""
    if row.own_memory:
        own = (
            f'<div class="npuwatch-own" style="margin-top:3px;font-size:11px">'
            f"<b>this kernel</b> {escape(row.own_memory)}</div>"
        )
    reason = reason_html(row.reason, style="margin-bottom:3px") if row.reason and row.reason != said else ""
    metrics = "".join(
        metric_html(cell, window, slots, row.reason, row.beside(cell.key) if row.extras else None)
        for cell in row.metrics
    )
    metrics += "".join(metric_html(cell, window, slots, row.reason) for cell in row.bars)
    return (
        f'<div class="{chip_classes(row)}" data-npu="{row.key[0]}" '
        f'data-chip="{row.key[1]}" style="border:1px solid {BORDER};border-radius:4px;padding:6px 8px;'
        f'min-width:330px">'
        f'<div style="display:flex;justify-content:space-between;gap:8px;align-items:baseline">'
        f'<span class="npuwatch-chip-title" style="font-weight:600">{escape(row.title)}{stale}</span>'
        f"{badge_html(row.health_class, row.badge)}</div>"
        f'<div style="font-size:11px;opacity:0.7;margin-bottom:3px">{escape(row.detail)}</div>'
        f"{workload_html(row)}{reason}"
        f'<table style="border-collapse:collapse;font-size:12px">{metrics}</table>'
        f"{details_html(row)}{own}</div>"
    )


def chips_html(view: ViewModel, slots: int, problem: Optional[str] = None, layout: str = "cards") -> str:
    """Every chip, as cards in a responsive grid or (``layout="table"``) a row each.

    Without chips, why there are none (``problem``).
    """
    if not view.chips:
        why = f" {escape(problem)}" if problem else ""
        return f'<div class="npuwatch-nochips" style="opacity:0.8">No NPU chips could be read.{why}</div>'
    if layout == "table":
        return chip_table_html(view, slots)
    cards = "".join(chip_html(row, view.window, slots, view.shared_reason) for row in view.chips)
    return (
        f'<div class="npuwatch-chips npuwatch-layout-cards" style="font-family:{FONT}">'
        f"{shared_reason_html(view.shared_reason)}"
        f'<div style="display:grid;gap:8px;grid-template-columns:repeat(auto-fill,minmax(340px,1fr))">'
        f"{cards}</div></div>"
    )


def host_html(host: Optional[HostRow], window: str = "", slots: int = 0) -> str:
    """The host line: CPU (with its plot), memory, load."""
    if host is None:
        return '<div class="npuwatch-host" style="opacity:0.7">Host: not part of a replayed capture.</div>'
    where = " · container" if host.in_container else ""
    plot = ""
    if host.cpu_series:
        plot = sparkline_svg(
            host.cpu_series, ceiling=100.0, top_label="100%", window=window, title="host CPU", slots=slots
        )
    return (
        f'<div class="npuwatch-host" style="display:flex;gap:14px;align-items:center;font-family:{FONT};'
        f'font-size:12px"><span><b>Host</b> {escape(host.hostname)}{where}</span>'
        f'<span>CPU <b class="npuwatch-value" data-metric="host-cpu">{escape(host.cpu_text)}</b></span>'
        f"{plot}"
        f'<span>memory <b class="npuwatch-value" data-metric="host-memory">{escape(host.memory_text)}</b>'
        f"</span><span>load <b>{escape(host.load_text)}</b></span></div>"
    )


def _cells(values: Iterable[str], tag: str = "td") -> str:
    style = "padding:1px 10px 1px 0;text-align:left;white-space:nowrap"
    return "".join(f'<{tag} style="{style}">{escape(v)}</{tag}>' for v in values)


def processes_html(rows: Iterable[ProcessRow]) -> str:
    """The process table; this kernel's own row is marked."""
    body = []
    for row in rows:
        mark = (
            ' class="npuwatch-process npuwatch-mine" style="font-weight:600"'
            if row.mine
            else (' class="npuwatch-process"')
        )
        command = row.command_text() + ("  ← this kernel" if row.mine else "")
        user, cpu, rss = row.user or "-", row.cpu or "-", row.rss or "-"  # "-": the host cannot see it
        cells = _cells((row.where, row.pid, user, row.npu_memory, cpu, rss, command))
        body.append(f"<tr{mark}>{cells}</tr>")
    if not body:
        return '<div class="npuwatch-processes" style="opacity:0.7;font-size:12px">No NPU processes.</div>'
    head = _cells(("NPU", "PID", "User", "NPU mem", "CPU", "RSS", "Command"), "th")
    return (
        f'<table class="npuwatch-processes" style="border-collapse:collapse;font-size:12px;'
        f'font-family:{FONT}"><tr>{head}</tr>{"".join(body)}</table>'
    )


def alerts_html(view: ViewModel) -> str:
    """The alerts, most severe first, each with its explanation on hover and below."""
    if not view.alerts:
        return (
            '<div class="npuwatch-alerts npuwatch-noalerts" style="opacity:0.7;font-size:12px">'
            "no alerts</div>"
        )
    items = []
    for alert in view.alerts:
        colour = SEVERITY_COLOURS.get(alert.severity, "inherit")
        items.append(
            f'<li class="npuwatch-alert npuwatch-severity-{alert.severity}" title="{escape(alert.detail)}">'
            f'<b style="color:{colour}">⚠ {escape(alert.message)}</b> '
            f'<span style="opacity:0.75">{escape(alert.detail)}</span></li>'
        )
    return (
        f'<ul class="npuwatch-alerts" style="margin:0;padding-left:16px;font-size:12px;font-family:{FONT}">'
        f"{''.join(items)}</ul>"
    )


def header_html(title: str, source: str, status: str) -> str:
    """The title line: host, data source and a status (``sampling…``, ``live``, an error)."""
    return (
        f'<div style="font-family:{FONT};font-size:13px"><b>{escape(title)}</b>'
        f' <span style="opacity:0.7">· {escape(source)}</span>'
        f' <span class="npuwatch-status" style="opacity:0.8">· {escape(status)}</span></div>'
    )


def notes_html(warnings: Iterable[str]) -> str:
    """npu-smi and sampler warnings, if any."""
    items = "".join(f"<li>{escape(w)}</li>" for w in warnings)
    if not items:
        return ""
    style = "margin:0;padding-left:16px;font-size:11px;opacity:0.8"
    return f'<ul class="npuwatch-warnings" style="{style}">{items}</ul>'


def crash_html(line: Optional[str]) -> str:
    """An internal error of the view: one line saying what happened and where its traceback is."""
    if not line:
        return ""
    return (
        f'<div class="npuwatch-crash" style="color:#c62828;font-size:12px;font-family:{FONT}">'
        f"{escape(line)}</div>"
    )


def page_html(
    view: ViewModel, status: str, slots: int, layout: str = "cards", crash: Optional[str] = None
) -> str:
    """The whole frame as one static HTML block (the text/html fallback of the live view)."""
    return (
        f'<div class="npuwatch-live" style="font-family:{FONT}">'
        f"{header_html(view.title, view.source, status)}{crash_html(crash)}"
        f'<div>updated <span class="npuwatch-updated">{escape(view.updated)}</span></div>'
        f"{alerts_html(view)}{chips_html(view, slots, layout=layout)}"
        f"{host_html(view.host, view.window, slots)}"
        f"{processes_html(view.processes)}{notes_html(view.warnings)}</div>"
    )
