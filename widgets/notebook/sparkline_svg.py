"""Provides sparkline_svg(): a history plot as inline SVG text, for ``ipywidgets.HTML`` and text/html.

Why inline SVG and not a plotting widget: bqplot, plotly's FigureWidget and similar need a
JupyterLab/Notebook front-end extension whose version must match the Python package, and each
front-end (JupyterLab, Notebook 7, VS Code, JupyterHub images) breaks that pairing in its own way —
the pain jupyterlab-nvdashboard users hit with its Bokeh plots.  An ``<svg>`` polyline inside a core
``ipywidgets.HTML`` needs nothing but the widgets every front-end ships, renders the same in the
static text/html fallback, and costs a few hundred bytes per plot per update.
"""

from __future__ import annotations

from html import escape
from typing import List, Optional, Sequence, Tuple

#: At most this many points are drawn; longer histories are bucketed (each bucket keeps its peak).
MAX_POINTS = 120

_PLOT_W = 160.0
_PLOT_H = 34.0
_LEFT = 34.0  # room for the y-axis labels
_BOTTOM = 11.0  # room for the x-axis labels
#: The compact table's line-high plots.
MINI_POINTS = 60
_MINI_W = 64.0
_MINI_H = 14.0


def downsample(values: Sequence[Optional[float]], limit: int = MAX_POINTS) -> List[Optional[float]]:
    """``values`` cut to at most ``limit`` buckets; a bucket is its peak, or a gap when all are gaps.

    Peaks, not means: a one-second power or temperature spike is what a user looks for.
    """
    if len(values) <= limit:
        return list(values)
    out: List[Optional[float]] = []
    size = len(values) / limit
    for i in range(limit):
        bucket = [v for v in values[int(i * size) : int((i + 1) * size)] if v is not None]
        out.append(max(bucket) if bucket else None)
    return out


def _segments(
    values: Sequence[Optional[float]],
    top: float,
    slots: int,
    left: float = _LEFT,
    width: float = _PLOT_W,
    height: float = _PLOT_H,
) -> List[List[Tuple[float, float]]]:
    """Runs of consecutive values as (x, y) points; a gap (None) ends a run."""
    runs: List[List[Tuple[float, float]]] = [[]]
    offset = slots - len(values)  # a short history is drawn against the right edge ("now")
    step = width / max(1, slots - 1)
    for i, value in enumerate(values):
        if value is None:
            if runs[-1]:
                runs.append([])
            continue
        share = max(0.0, min(1.0, value / top)) if top > 0 else 0.0
        runs[-1].append((left + (offset + i) * step, height * (1.0 - share) + 1.0))
    return [run for run in runs if run]


def _marks(runs: List[List[Tuple[float, float]]], colour: str) -> str:
    """The runs as polylines, a lone point between gaps as a dot (a line of one point is invisible)."""
    lines = []
    for run in runs:
        if len(run) == 1:
            x, y = run[0]
            lines.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="1.2" fill="{colour}"/>')
        else:
            points = " ".join(f"{x:.1f},{y:.1f}" for x, y in run)
            lines.append(
                f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.3" '
                'stroke-linejoin="round"/>'
            )
    return "".join(lines)


def sparkline_svg(
    values: Sequence[Optional[float]],
    *,
    ceiling: Optional[float] = None,
    top_label: str = "",
    window: str = "",
    colour: str = "#1f77b4",
    title: str = "",
    slots: int = 0,
) -> str:
    """An SVG plot of ``values`` (oldest first) from 0 to ``ceiling`` (default: their maximum).

    ``slots`` is how many samples the window holds (the plot fills from the right as history
    grows); ``top_label`` and ``window`` (``15 min``) label the axes.
    """
    shown = downsample(values)
    # Until the window is full the plot spans the points there are, labelled with their real
    # span ("−40 s"): a fresh view drawn against a 15-minute axis would be a dot at "now".
    filling_s = _window_seconds(window) if 0 < len(values) < slots else None
    width_slots = max(len(shown), 2)
    if filling_s is None and slots:
        ratio = len(shown) / len(values) if values else 1.0
        width_slots = max(width_slots, int(slots * ratio + 0.5))
    present = [v for v in shown if v is not None]
    top = ceiling if ceiling else (max(present) if present else 1.0) or 1.0
    marks = _marks(_segments(shown, top, width_slots), colour)
    right = _LEFT + _PLOT_W
    bottom = _PLOT_H + 1.0
    label_style = 'font-size="8" fill="currentColor" fill-opacity="0.65"'
    top_text = escape(top_label or _compact(top))
    window_text = escape(f"−{window}" if window else "")
    if filling_s is not None:
        window_text = escape(f"−{_span(filling_s * max(1, len(values) - 1) / slots)}")
    total_w, total_h = right + 2, bottom + _BOTTOM
    return (
        f'<svg class="npuwatch-plot" xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" '
        f'height="{total_h:.0f}" viewBox="0 0 {total_w:.0f} {total_h:.0f}" role="img" '
        f'aria-label="{escape(title)}" style="display:block;overflow:visible">'
        f"<title>{escape(title)}</title>"
        f'<line x1="{_LEFT}" y1="1" x2="{_LEFT}" y2="{bottom}" stroke="currentColor" stroke-opacity="0.3"/>'
        f'<line x1="{_LEFT}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="currentColor" '
        'stroke-opacity="0.3"/>'
        f'<text x="{_LEFT - 3}" y="8" text-anchor="end" {label_style}>{top_text}</text>'
        f'<text x="{_LEFT - 3}" y="{bottom}" text-anchor="end" {label_style}>0</text>'
        f'<text x="{_LEFT}" y="{total_h - 1}" {label_style}>{window_text}</text>'
        f'<text x="{right}" y="{total_h - 1}" text-anchor="end" {label_style}>now</text>'
        f"{marks}</svg>"
    )


def mini_sparkline_svg(
    values: Sequence[Optional[float]],
    *,
    ceiling: Optional[float] = None,
    colour: str = "#1f77b4",
    title: str = "",
    slots: int = 0,
) -> str:
    """A line-high plot for the compact table: the same line as sparkline_svg, without axis labels.

    The scale is in ``title`` (shown on hover), so a row stays one text line tall.
    """
    shown = downsample(values, MINI_POINTS)
    width_slots = max(len(shown), 2)
    if slots and len(values) >= slots:
        width_slots = max(width_slots, int(slots * len(shown) / len(values) + 0.5))
    present = [v for v in shown if v is not None]
    top = ceiling if ceiling else (max(present) if present else 1.0) or 1.0
    marks = _marks(_segments(shown, top, width_slots, 0.0, _MINI_W, _MINI_H), colour)
    return (
        f'<svg class="npuwatch-plot npuwatch-miniplot" xmlns="http://www.w3.org/2000/svg" '
        f'width="{_MINI_W:.0f}" height="{_MINI_H + 2:.0f}" viewBox="0 0 {_MINI_W:.0f} {_MINI_H + 2:.0f}" '
        f'role="img" aria-label="{escape(title)}" style="display:block;overflow:visible">'
        f"<title>{escape(title)}</title>"
        f'<line x1="0" y1="{_MINI_H + 1}" x2="{_MINI_W}" y2="{_MINI_H + 1}" stroke="currentColor" '
        f'stroke-opacity="0.3"/>{marks}</svg>'
    )


def _window_seconds(window: str) -> Optional[float]:
    """``"15 min"`` (the live view's window label) in seconds; ``None`` for anything else."""
    number, _, unit = window.partition(" ")
    try:
        return float(number) * 60 if unit == "min" else None
    except ValueError:
        return None


def _span(seconds: float) -> str:
    """``40 s`` under two minutes, else ``3 min``."""
    return f"{max(1, round(seconds))} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _compact(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"
