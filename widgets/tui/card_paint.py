"""Provides CardPainter and Card: a chip card's lines drawn straight to segments and kept from
one sample to the next while they read the same (the chip area, ``chip_grid``, repaints only the
lines that changed and compares them by identity)."""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from npuwatch.history import History
from npuwatch.model import ChipSample, Level
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.chip_layout import Place
from npuwatch.widgets.tui.chips import (
    LABEL_WIDTH,
    PAIR_VALUE_WIDTH,
    VALUE_WIDTH,
    card_head,
    card_height,
    card_rows,
    card_widths,
    compact_line,
    line_value,
    link_problems,
    pair_bar_width,
    problem_lines,
)
from npuwatch.widgets.tui.line import Finish, combined_style, fitted_segments, text_strip
from npuwatch.widgets.view_model import ChipRow, MetricCell, chip_row

ChipKey = Tuple[int, int]


def card_strips(
    chip: ChipSample,
    history: History,
    width: int,
    in_group: bool,
    row: ChipRow,
    console: Console,
    columns: int,
    base: Style,
) -> List[Strip]:
    """``card_lines`` drawn ``columns`` wide over ``base``, segment for segment what ``text_strip``
    makes of them (the chip area draws these lines through a ``CardPainter``)."""
    lines = CardPainter().card(chip, history, width, in_group, row, console, columns, base)
    return [Strip(list(line), columns) for line in lines]


#: One line of a card as drawn: its segments, exactly its width.
Line = Tuple[Segment, ...]


class CardPainter:
    """Draws one card's lines, and keeps each line while what it shows stays the same.

    The metric lines (four of a card's five change nearly every second: the sparklines scroll)
    are cut straight into segments, without building Rich Text: a line's label, bar and value
    are kept while they read the same, its sparkline is shifted by one cell when the history
    moved by one point, and a line that shows what it showed before is the same ``Line`` object,
    so the chip area repaints only lines that changed, and compares them by identity.
    """

    def __init__(self) -> None:
        self._head: Tuple[object, Line] = ((), ())
        self._metrics: List[_MetricLine] = []
        self._problems: Tuple[object, List[Line]] = ((), [])
        self._compact: Tuple[object, Line] = ((), ())

    def card(
        self,
        chip: ChipSample,
        history: History,
        width: int,
        in_group: bool,
        row: ChipRow,
        console: Console,
        columns: int,
        base: Style,
        finish: Finish = None,
    ) -> List[Line]:
        """``card_lines`` drawn ``columns`` wide over ``base`` (each style turned by ``finish``)."""
        key = chip.identity.key
        bar_w, spark_w = card_widths(width)
        head_key = (
            row.identity,
            row.stale,
            chip.health,
            row.workload,
            in_group,
            console,
            width,
            columns,
            base,
            finish,
        )
        if head_key != self._head[0]:  # a card's title changes with its identity, health, staleness or tag
            strip = text_strip(card_head(chip, row, in_group, width), console, columns, base, finish)
            self._head = (head_key, tuple(strip))
        lines = [self._head[1]]
        rows = card_rows(row)
        metrics = self._metrics
        if len(metrics) != len(rows):
            metrics[:] = [_MetricLine() for _ in rows]
        for line_cells, drawn in zip(rows, metrics):
            if len(line_cells) > 1:  # extra bars side by side: no sparkline
                lines.append(drawn.pair(line_cells, width, console, columns, base, finish))
                continue
            (cell,) = line_cells
            value, cell_spark_w = line_value(cell, spark_w)
            values = history.values(key, cell.metric, last=cell_spark_w)
            lines.append(drawn.draw(cell, value, values, cell_spark_w, bar_w, console, columns, base, finish))
        problem_key = (chip.errors, link_problems(chip), chip.health, width, console, columns, base, finish)
        if problem_key != self._problems[0]:
            drawn_problems = [
                tuple(text_strip(t, console, columns, base, finish)) for t in problem_lines(chip, width)
            ]
            self._problems = (problem_key, drawn_problems)
        return [*lines, *self._problems[1]]

    def compact(
        self,
        chip: ChipSample,
        history: History,
        width: int,
        in_group: bool,
        row: ChipRow,
        console: Console,
        columns: int,
        base: Style,
        finish: Finish = None,
    ) -> Line:
        """``compact_line`` drawn ``columns`` wide over ``base``."""
        text = compact_line(chip, history, width, in_group, row)
        key = (text.plain, tuple(text.spans), text.style, console, columns, base, finish)
        if key != self._compact[0]:
            self._compact = (key, tuple(text_strip(text, console, columns, base, finish)))
        return self._compact[1]


class _MetricLine:
    """One metric line of a card as last drawn: its label/bar/value part, its sparkline, the line."""

    def __init__(self) -> None:
        self.head_key: object = ()
        self.head: Tuple[Segment, ...] = ()  # the label and the bar (or blank, or dim track)
        self.head_length = 0
        self.value_key: object = ()
        self.value: Segment = Segment("")
        self.value_length = 0
        self.values: List[Optional[float]] = []
        self.top: Optional[float] = None
        self.spark = ""
        self.key: object = ()
        self.line: Line = ()

    def draw(
        self,
        cell: MetricCell,
        value: str,
        values: List[Optional[float]],
        spark_w: int,
        bar_w: int,
        console: Console,
        columns: int,
        base: Style,
        finish: Finish,
    ) -> Line:
        """The line for ``cell`` showing ``value``, with the sparkline of ``values`` (``spark_w``
        cells), ``columns`` wide."""
        spark = self._spark(values, spark_w, cell.ceiling)
        colour = render.bar_style(cell)
        bar = None if cell.fraction is None else render.bar_cells(cell.fraction, bar_w)
        # The value changes more often than the bar: each part is kept while it reads the same.
        head_key = (cell.tag, bar, value == fmt.NA, colour, bar_w, console, base, finish)
        value_key = (value, console, base, finish)
        key = (head_key, value_key, spark, columns)
        if key == self.key:
            return self.line
        if head_key != self.head_key:
            segments = _metric_head(cell.tag, bar, bar_w, value == fmt.NA, colour, console, base, finish)
            self.head_key, self.head = head_key, tuple(segments)
            self.head_length = sum(cell_len(segment.text) for segment in segments)
        if value_key != self.value_key:
            self.value_key, self.value = value_key, _metric_value(value, console, base, finish)
            self.value_length = cell_len(self.value.text)
        segments = [*self.head, self.value]
        if spark:  # the sparkline's characters are one cell each
            segments.append(
                Segment(spark, combined_style(console, base, ("bold", render.SPARK_STYLE), finish))
            )
        self.key = key
        length = self.head_length + self.value_length + len(spark)
        self.line = fitted_segments(segments, length, columns, finish(base) if finish else base)
        return self.line

    def pair(
        self,
        cells: Tuple[MetricCell, ...],
        width: int,
        console: Console,
        columns: int,
        base: Style,
        finish: Finish,
    ) -> Line:
        """Extra bars side by side (``_pair_line``), kept while their tags, bars and values read the same."""
        key = (
            tuple((c.tag, c.fraction, c.text, c.level) for c in cells),
            width,
            console,
            columns,
            base,
            finish,
        )
        if key != self.key:
            self.key = key
            self.line = _pair_segments(cells, width, console, columns, base, finish)
        return self.line

    def _spark(self, values: List[Optional[float]], width: int, ceiling: Optional[float]) -> str:
        """``render.spark_cells``; when the window only moved by one point on a fixed scale, the
        last sparkline shifted by one cell (the same characters, without redrawing them all)."""
        same_window = len(values) == width == len(self.values) == len(self.spark)
        moved = same_window and values[:-1] == self.values[1:]
        if ceiling and moved and self.top == ceiling:
            spark = self.spark[1:] + render.spark_cells(values[-1:], 1, ceiling)
        else:
            spark = render.spark_cells(values, width, ceiling)
        self.values, self.top, self.spark = values, ceiling, spark
        return spark


def _metric_head(
    tag: str,
    bar: Optional[Tuple[int, str]],
    bar_w: int,
    not_available: bool,
    colour: str,
    console: Console,
    base: Style,
    finish: Finish,
) -> List[Segment]:
    """A metric line's label and bar (``render.bar_cells``; or blank when a value has no scale,
    or a dim track when there is no value), as ``text_strip`` cuts ``_metric_line``."""

    def styled(text: str, *spans: str) -> Segment:  # the line's own style is bold, then the spans
        return Segment(text, combined_style(console, base, ("bold", *spans), finish))

    label = f"{tag:<{LABEL_WIDTH}}"
    if bar is None and not not_available:  # a value with no scale (no rating): no bar
        return [styled(label + " " * bar_w)]
    if bar is None:  # n/a: a dim track
        return [styled(label), styled("·" * bar_w, "dim")]
    return [styled(label), *_bar_segments(bar, bar_w, colour, styled)]


def _metric_value(value: str, console: Console, base: Style, finish: Finish) -> Segment:
    """A metric line's value after its bar, right-aligned in ``VALUE_WIDTH`` cells (a longer one
    takes cells from the sparkline): bold, dim when n/a."""
    spans = ("bold", "dim") if value == fmt.NA else ("bold", "bold")
    return Segment(f" {value:>{VALUE_WIDTH - 2}} ", combined_style(console, base, spans, finish))


def _bar_segments(
    bar: Tuple[int, str], bar_w: int, colour: str, styled: Callable[..., Segment]
) -> List[Segment]:
    """``render.bar`` appended to a bold line, cut as ``text_strip`` cuts it: the bar's colour over
    the whole bar, the partial cell or the dim track after it inside that."""
    whole, partial = bar
    segments = []
    if whole:
        segments.append(styled("█" * whole, colour))
    if whole < bar_w:
        segments.append(styled(partial, colour, colour) if partial != " " else styled("·", colour, "dim"))
        if bar_w - whole - 1:
            segments.append(styled("·" * (bar_w - whole - 1), colour, "dim"))
    return segments


def _pair_segments(
    cells: Tuple[MetricCell, ...], width: int, console: Console, columns: int, base: Style, finish: Finish
) -> Line:
    """``_pair_line`` drawn ``columns`` wide over ``base``: the same cells in the same styles (the
    unstyled stretch between two bars cut into a segment per part)."""

    def styled(text: str, *spans: str) -> Segment:
        return Segment(text, combined_style(console, base, ("bold", *spans), finish))

    bar_w = pair_bar_width(len(cells), width)
    segments: List[Segment] = []
    for index, cell in enumerate(cells):
        segments.append(styled(f"{' ' if index else ''}{cell.tag:<{LABEL_WIDTH}}"))
        if cell.fraction is None:
            segments.append(styled("·" * bar_w, "dim"))
        else:
            segments += _bar_segments(
                render.bar_cells(cell.fraction, bar_w), bar_w, render.bar_style(cell), styled
            )
        segments.append(styled(f" {cell.text:>{PAIR_VALUE_WIDTH}}"))
    length = sum(cell_len(segment.text) for segment in segments)
    return fitted_segments(segments, length, columns, finish(base) if finish else base)


class Card:
    """One chip's card: its latest sample, its row of the view model, and its strips as drawn."""

    def __init__(self, chip: ChipSample, in_group: bool) -> None:
        self.chip = chip
        self.in_group = in_group
        self.row: ChipRow = chip_row(chip, details=False)
        self.place = Place(0, 0, 0, 0)
        self.painter = CardPainter()
        self.generation = 0  # counts the samples shown: a new one (and new history) redraws the card
        self._height: Tuple[object, int] = (None, 0)  # (the row it was counted for, the height)
        self.lines_drawn: List[Line] = []  # its lines as last drawn …
        self.drawn_for: Optional[Tuple[object, ...]] = None  # … for this sample, width and look

    @property
    def key(self) -> ChipKey:
        return self.chip.identity.key

    @property
    def level(self) -> Level:
        """The judge's level of the chip: the card's colour."""
        return self.row.level

    def height(self) -> int:
        """The card's lines in card form: its title, its metric lines, a line per problem."""
        if self._height[0] is not self.row:
            self._height = (self.row, card_height(self.chip, self.row))
        return self._height[1]


#: A card's line in a line of the area: (its place among the line's parts, the card, the card's
#: line, the blank drawn when the card has no such line).
Slot = Tuple[int, int, int, Line]
#: A line of the area: its fixed parts (a slot holds a blank run), and its slots.
TemplateLine = Tuple[List[Line], List[Slot]]


def fill_line(statics: List[Line], slots: List[Slot], cards: List[List[Line]]) -> List[Line]:
    """A line's parts: its fixed parts, each slot filled with its card's line."""
    if not slots:
        return statics
    parts = list(statics)
    for position, index, line, blank in slots:
        card = cards[index]
        parts[position] = card[line] if 0 <= line < len(card) else blank
    return parts
