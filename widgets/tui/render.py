"""Provides the dashboard's small text pieces as Rich Text: bars, sparklines, badges, colours."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from rich.text import Text

from npuwatch.model import Health
from npuwatch.widgets import format as fmt

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

#: Temperature colours: below ``warn`` plain, then orange, then red at ``limit`` (°C).
TEMPERATURE_WARN_C = 75.0
TEMPERATURE_LIMIT_C = 85.0


def badge(health: Health) -> Text:
    """The health badge: ``✔ OK``, ``▲ Warning``, ``✖ Alarm``, ``‼ Critical``, ``? Unknown``."""
    return Text(f" {fmt.HEALTH_GLYPHS[health]} {health.value} ", style=_BADGE_STYLES[health])


def health_mark(health: Health) -> Tuple[str, str]:
    """The badge's glyph and a colour for text about a chip in this health (its error codes)."""
    return fmt.HEALTH_GLYPHS[health], _MARK_STYLES.get(health, "bold")


_MARK_STYLES = {Health.WARNING: "bold yellow", Health.ALARM: "bold dark_orange3", Health.CRITICAL: "bold red"}


def bar(fraction: Optional[float], width: int, style: str = "green") -> Text:
    """A horizontal bar ``width`` cells wide, in eighths; ``None`` gives a dim empty track."""
    if fraction is None:
        return Text("·" * width, style="dim")
    filled = max(0.0, min(1.0, fraction)) * width
    whole = int(filled)
    text = Text("█" * whole, style=style)
    if whole < width:
        partial = _EIGHTHS[int((filled - whole) * 8)]
        text.append(partial if partial != " " else "·", style=style if partial != " " else "dim")
        text.append("·" * (width - whole - 1), style="dim")
    return text


def spark(values: Sequence[Optional[float]], width: int, ceiling: Optional[float] = None) -> Text:
    """The last ``width`` values as ``▁▂▃▅▇``; a ``None`` (a gap, or a stale tick) is a blank."""
    shown = list(values)[-width:]
    top = ceiling if ceiling else max((v for v in shown if v is not None), default=0.0) or 1.0
    cells = []
    for value in shown:
        if value is None:
            cells.append(" ")
        else:
            level = int(max(0.0, min(1.0, value / top)) * (len(_SPARKS) - 1) + 0.5)
            cells.append(_SPARKS[level])
    return Text(" " * (width - len(shown)) + "".join(cells), style="cyan")


def usage_style(percent: Optional[float]) -> str:
    """Memory-like usage: calm below 80 %, orange to 95 %, red above."""
    if percent is None or percent < 80:
        return "dodger_blue2"
    return "dark_orange" if percent < 95 else "red"


def temperature_style(celsius: Optional[float]) -> str:
    """Plain below the warning level, orange to the limit, red at or over it."""
    if celsius is None or celsius < TEMPERATURE_WARN_C:
        return ""
    return "bold dark_orange" if celsius < TEMPERATURE_LIMIT_C else "bold red"


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
