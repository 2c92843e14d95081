"""Provides the live view's HTML pieces (chip cards, host, processes, alerts) from a ViewModel.

Numbers are visible text; the SVG plots only repeat them over time.  Styles are inline (a
notebook's HTML output has no stylesheet of ours) and use the front-end's CSS variables with
fallbacks, so light and dark themes both read.  Classes name things for tests and the browser
test's DOM contract: ``npuwatch-chip``, ``npuwatch-health-<health>``, ``npuwatch-level-<level>``.
"""

from __future__ import annotations

from html import escape
from typing import Iterable, Optional

from npuwatch.widgets.notebook.sparkline_svg import sparkline_svg
from npuwatch.widgets.notebook.view_model import ChipRow, HostRow, MetricCell, ProcessRow, ViewModel

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
LEVEL_COLOURS = {"normal": "inherit", "warn": "#ef6c00", "critical": "#c62828", "na": "inherit"}
PLOT_COLOURS = {"util": "#2ca02c", "memory": "#1f77b4", "power": "#9467bd", "temperature": "#d62728"}
SEVERITY_COLOURS = {"critical": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}


def badge_html(health_class: str, text: str) -> str:
    """The health badge: glyph and word on the health colour."""
    background, colour = HEALTH_COLOURS.get(health_class, HEALTH_COLOURS["unknown"])
    return (
        f'<span class="npuwatch-badge npuwatch-health-{health_class}" style="background:{background};'
        f'color:{colour};border-radius:3px;padding:0 6px;font-weight:600;white-space:nowrap">'
        f"{escape(text)}</span>"
    )


def _bar(fraction: Optional[float], colour: str) -> str:
    if fraction is None:
        return ""
    width = max(0.0, min(1.0, fraction)) * 100
    return (
        f'<div style="height:3px;background:{BORDER};margin-top:2px">'
        f'<div style="height:3px;width:{width:.0f}%;background:{colour}"></div></div>'
    )


def metric_html(cell: MetricCell, window: str, slots: int) -> str:
    """One metric row: label, value (with the n/a reason), a bar and the history plot."""
    colour = LEVEL_COLOURS[cell.level]
    value = (
        f'<span class="npuwatch-value npuwatch-level-{cell.level}" data-metric="{cell.key}" '
        f'style="color:{colour};font-weight:600;font-variant-numeric:tabular-nums">{escape(cell.text)}</span>'
    )
    reason = ""
    if cell.reason:
        reason = (
            f'<div class="npuwatch-reason" data-metric="{cell.key}" style="font-size:10px;opacity:0.7;'
            f'max-width:130px">{escape(cell.reason)}</div>'
        )
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
        f'<td style="padding:1px 6px 1px 0;vertical-align:top;min-width:96px">{value}'
        f"{_bar(cell.fraction, PLOT_COLOURS.get(cell.key, '#1f77b4'))}{reason}</td>"
        f'<td style="padding:1px 0">{plot}</td></tr>'
    )


def chip_html(row: ChipRow, window: str, slots: int) -> str:
    """One chip card with class ``npuwatch-chip``."""
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
    metrics = "".join(metric_html(cell, window, slots) for cell in row.metrics)
    return (
        f'<div class="npuwatch-chip npuwatch-health-{row.health_class}" data-npu="{row.key[0]}" '
        f'data-chip="{row.key[1]}" style="border:1px solid {BORDER};border-radius:4px;padding:6px 8px;'
        f'min-width:330px">'
        f'<div style="display:flex;justify-content:space-between;gap:8px;align-items:baseline">'
        f'<span class="npuwatch-chip-title" style="font-weight:600">{escape(row.title)}{stale}</span>'
        f"{badge_html(row.health_class, row.badge)}</div>"
        f'<div style="font-size:11px;opacity:0.7;margin-bottom:3px">{escape(row.detail)}</div>'
        f'<table style="border-collapse:collapse;font-size:12px">{metrics}</table>{own}</div>'
    )


def chips_html(view: ViewModel, slots: int, problem: Optional[str] = None) -> str:
    """Every chip card in a responsive grid (or why there are none: ``problem``)."""
    if not view.chips:
        why = f" {escape(problem)}" if problem else ""
        return f'<div class="npuwatch-nochips" style="opacity:0.8">No NPU chips could be read.{why}</div>'
    cards = "".join(chip_html(row, view.window, slots) for row in view.chips)
    return (
        f'<div class="npuwatch-chips" style="display:grid;gap:8px;'
        f'grid-template-columns:repeat(auto-fill,minmax(340px,1fr));font-family:{FONT}">{cards}</div>'
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
        command = row.command + ("  ← this kernel" if row.mine else "")
        cells = _cells((row.where, row.pid, row.user, row.npu_memory, row.cpu, row.rss, command))
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


def page_html(view: ViewModel, status: str, slots: int) -> str:
    """The whole frame as one static HTML block (the text/html fallback of the live view)."""
    return (
        f'<div class="npuwatch-live" style="font-family:{FONT}">'
        f"{header_html(view.title, view.source, status)}"
        f'<div>updated <span class="npuwatch-updated">{escape(view.updated)}</span></div>'
        f"{alerts_html(view)}{chips_html(view, slots)}{host_html(view.host, view.window, slots)}"
        f"{processes_html(view.processes)}{notes_html(view.warnings)}</div>"
    )
