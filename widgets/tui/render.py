"""Provides the dashboard's small text pieces as Rich Text: bars, sparklines, badges, and the Rich
style of each level (the view model's levels: the judge's, or a usage bar's)."""

from __future__ import annotations

from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

from rich.text import Text

from npuwatch.judge.rules import memory_bar_level
from npuwatch.model import Health, Level
from npuwatch.widgets import format as fmt
from npuwatch.widgets import view_model

_EIGHTHS = " ▏▎▍▌▋▊▉█"
_SPARKS = "▁▂▃▄▅▆▇█"

#: A colour per health; with the glyph and the word the badge reads without colour (NO_COLOR).
_BADGE_STYLES = {
    Health.OK: "bold green",
    Health.WARNING: "bold black on yellow",
    Health.ALARM: "bold white on dark_orange3",
    Health.CRITICAL: "bold white on red",
    Health.UNKNOWN: "bold white on grey42",
}

#: A bar's colour per cell while its level is ok; a warning or critical level takes LEVEL_BAR_STYLES.
CELL_BAR_STYLES = {"util": "green", "memory": "dodger_blue2", "power": "magenta", "temperature": "yellow"}
LEVEL_BAR_STYLES = {Level.WARNING: "dark_orange", Level.CRITICAL: "red"}
#: A value's text style per level (a value drawn without a bar, a chip's title).
LEVEL_TEXT_STYLES = {Level.WARNING: "bold dark_orange", Level.CRITICAL: "bold red"}


def badge(health: Health) -> Text:
    """The health badge: ``✔ OK``, ``▲ Warning``, ``✖ Alarm``, ``‼ Critical``, ``? Unknown``."""
    return Text(f" {view_model.badge(health)} ", style=_BADGE_STYLES[health])


def bar_style(cell: view_model.MetricCell) -> str:
    """The colour of a cell's bar: its level's when not ok, else the cell's own."""
    return LEVEL_BAR_STYLES.get(cell.level) or CELL_BAR_STYLES.get(cell.key, "green")


def text_style(level: Level) -> str:
    """The style of a value at ``level``: plain when ok (or unknown), orange, red."""
    return LEVEL_TEXT_STYLES.get(level, "")


def workload_tag(tag: view_model.WorkloadTag, room: int = 99) -> Text:
    """A chip's workload tag: ``compute``, ``input`` in amber (a class that holds the job back),
    ``idle`` dim, then the throttling mark in amber within ``room`` columns (``▼ thermal``)."""
    style = LEVEL_TEXT_STYLES.get(tag.level) or _QUIET_TAGS.get(tag.kind, "bold")
    text = Text(tag.tag, style=style)
    mark = tag.mark(room)
    if mark:
        text.append(" ")
        text.append(mark, style=LEVEL_TEXT_STYLES[Level.WARNING])
    return text


#: The tags that say nothing is happening: dim.
_QUIET_TAGS = {"idle": "dim", "unknown": "dim"}


def health_mark(health: Health) -> Tuple[str, str]:
    """The badge's glyph and a colour for text about a chip in this health (its error codes)."""
    return fmt.HEALTH_GLYPHS[health], _MARK_STYLES.get(health, "bold")


_MARK_STYLES = {Health.WARNING: "bold yellow", Health.ALARM: "bold dark_orange3", Health.CRITICAL: "bold red"}


def bar(fraction: Optional[float], width: int, style: str = "green") -> Text:
    """A horizontal bar ``width`` cells wide, in eighths; ``None`` gives a dim empty track."""
    if fraction is None:
        return Text("·" * width, style="dim")
    whole, partial = bar_cells(fraction, width)
    text = Text("█" * whole, style=style)
    if whole < width:
        text.append(partial if partial != " " else "·", style=style if partial != " " else "dim")
        text.append("·" * (width - whole - 1), style="dim")
    return text


def bar_cells(fraction: float, width: int) -> Tuple[int, str]:
    """How many whole cells a bar fills, and the eighth after them (``" "`` for none)."""
    filled = max(0.0, min(1.0, fraction)) * width
    whole = int(filled)
    return whole, _EIGHTHS[int((filled - whole) * 8)] if whole < width else ""


#: The sparklines' colour.
SPARK_STYLE = "cyan"


def spark(values: Sequence[Optional[float]], width: int, ceiling: Optional[float] = None) -> Text:
    """The last ``width`` values as ``▁▂▃▅▇``; a ``None`` (a gap, or a stale tick) is a blank."""
    return Text(spark_cells(values, width, ceiling), style=SPARK_STYLE)


def spark_cells(values: Sequence[Optional[float]], width: int, ceiling: Optional[float] = None) -> str:
    """``spark``'s characters, right-aligned in ``width``."""
    shown = list(values)[-width:]
    top = ceiling if ceiling else max((v for v in shown if v is not None), default=0.0) or 1.0
    cells = "".join([_spark_cell(value, top) for value in shown])
    return " " * (width - len(shown)) + cells


@lru_cache(maxsize=4096)
def _spark_cell(value: Optional[float], top: float) -> str:
    """One sparkline cell (a metric repeats its values: 64 sparklines a second look each up once)."""
    if value is None:
        return " "
    return _SPARKS[int(max(0.0, min(1.0, value / top)) * (len(_SPARKS) - 1) + 0.5)]


def usage_style(percent: Optional[float]) -> str:
    """Memory-like usage (the host's memory): the view model's memory level, as a bar colour."""
    share = None if percent is None else percent / 100
    level = memory_bar_level(share)
    return LEVEL_BAR_STYLES.get(level, CELL_BAR_STYLES["memory"])


def fraction(used: Optional[float], total: Optional[float]) -> Tuple[Optional[float], Optional[float]]:
    """``used/total`` as a fraction and a percentage; ``(None, None)`` when either is unknown."""
    if used is None or not total:
        return None, None
    share = used / total
    return share, 100.0 * share


def graph(
    values: Sequence[Optional[float]], width: int, height: int, ceiling: Optional[float] = None
) -> List[Text]:
    """A ``height``-row column chart of the last ``width`` values (eighth blocks), top row first."""
    shown = list(values)[-width:]
    top = ceiling if ceiling else max((v for v in shown if v is not None), default=0.0) or 1.0
    levels = [None if v is None else max(0.0, min(1.0, v / top)) * height * 8 for v in shown]
    rows: List[Text] = []
    for row in range(height - 1, -1, -1):
        cells = []
        for level in levels:
            if level is None:
                cells.append(" ")
                continue
            eighths = int(level - row * 8)
            cells.append(_EIGHTHS_UP[max(0, min(8, eighths))])
        rows.append(Text(" " * (width - len(shown)) + "".join(cells), style="cyan"))
    return rows


_EIGHTHS_UP = " ▁▂▃▄▅▆▇█"
