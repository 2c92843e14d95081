"""Provides Palette: the styles the chip area draws with, from the CSS of its component classes
(``chip-grid--*`` in npuwatch.tcss), combined as textual combined them for the box and card widgets
the chip area replaced, and each passed once through the app's line filters."""

from __future__ import annotations

from typing import Dict, List

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.color import TRANSPARENT, Color
from textual.content import Content
from textual.style import Style
from textual.widget import Widget

from npuwatch.model import Level
from npuwatch.widgets.tui.card_paint import Line
from npuwatch.widgets.tui.line import FilteredStyles

#: The component classes a card's look comes from: its level's tint, or the focus.
LOOKS = {
    Level.WARNING: "chip-grid--warning",
    Level.CRITICAL: "chip-grid--critical",
    Level.UNKNOWN: "chip-grid--unknown",
}
FOCUS = "chip-grid--focus"


class Palette:
    """The styles the grid draws with, from its CSS (theme-dependent): blank, borders, titles, cards.

    ``finish`` turns a style into what the app's line filters make of it; every segment the grid
    draws has its finished style.  The cards' bases are not finished: a card's line combines them
    with its own styles first (``CardPainter``).
    """

    def __init__(self, grid: Widget) -> None:
        base_background, background = grid.background_colors
        self.finish = FilteredStyles(grid.get_line_filters(), background)
        finish = self.finish
        self.inner = Style(background=base_background + background)
        self.inner_rich: RichStyle = self.inner.rich_style
        self.blank: RichStyle = finish(self.inner_rich)
        self._blanks: Dict[int, Line] = {}
        own = grid.visual_style
        self.plain: RichStyle = own.rich_style
        self.looks: Dict[Level, RichStyle] = {
            level: grid.get_visual_style(name).rich_style for level, name in LOOKS.items()
        }
        self.focus: RichStyle = grid.get_visual_style(FOCUS).rich_style
        self.empty: RichStyle = grid.get_visual_style("chip-grid--empty").rich_style
        box = grid.get_component_styles("chip-grid--box")
        stale = grid.get_component_styles("chip-grid--stale")
        self._borders = {
            False: self.inner + Style(foreground=base_background + box.border.top[1]),
            True: self.inner + Style(foreground=base_background + stale.border.top[1]),
        }
        self._sides = {
            stale_: (Segment("│", finish(style.rich_style)),) for stale_, style in self._borders.items()
        }
        label_background = base_background + background
        self._labels = {
            True: _label_style(
                box.auto_border_title_color,
                box.border_title_color,
                box.border_title_background,
                box.border_title_style,
                base_background,
                label_background,
            ),
            False: _label_style(
                box.auto_border_subtitle_color,
                box.border_subtitle_color,
                box.border_subtitle_background,
                box.border_subtitle_style,
                base_background,
                label_background,
            ),
        }

    def side(self, stale: bool) -> Line:
        """A box's left or right border cell."""
        return self._sides[stale]

    def blank_run(self, width: int) -> Line:
        """``width`` blank cells (the same object for the same width)."""
        run = self._blanks.get(width)
        if run is None:
            run = self._blanks[width] = (Segment(" " * width, self.blank),)
        return run

    def edge(self, label: str, width: int, top: bool, stale: bool) -> Line:
        """A box's top (title on the left) or bottom (subtitle on the right) border, ``width`` wide,
        as textual draws a ``round`` border with its labels."""
        border = self._borders[stale]
        finish = self.finish
        style = finish(border.rich_style)
        left, fill, right = ("╭", "─", "╮") if top else ("╰", "─", "╯")
        segments: List[Segment] = []
        if label and width - 2 > 4:
            text = Content(label).truncate(width - 6, ellipsis=True).pad_left(1).pad_right(1)
            labelled = text.stylize_before(self._labels[top]).render_segments(border)
            segments = [Segment(t, finish(s) if s is not None else style) for t, s, _ in labelled]
        length = sum(segment.cell_length for segment in segments)
        room = max(0, width - 2 - length)
        line = [Segment(left, style)]
        if not room:
            line += segments
        elif not length:
            line.append(Segment(fill * room, style))
        elif top:
            line += [Segment(fill, style), *segments, Segment(fill * (room - 1), style)]
        else:
            line += [Segment(fill * (room - 1), style), *segments, Segment(fill, style)]
        line.append(Segment(right, style))
        return tuple(line)


def _label_style(
    auto: bool,
    color: Color,
    background: Color,
    style: RichStyle,
    base_background: Color,
    label_background: Color,
) -> Style:
    """A border label's style, as textual's styles cache combines it."""
    if auto:
        color = base_background.get_contrast_text(color.a)
    visual = Style.from_rich_style(style)
    return visual + Style(
        (label_background + background) if background.a else TRANSPARENT,
        (label_background + color) if color.a else TRANSPARENT,
    )
