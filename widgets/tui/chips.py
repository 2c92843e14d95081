"""Provides a chip card's lines (multi-line card, or one line per chip) and the chips grouped per NPU
(A3 ×2, 310P Duo ×2, 310 ×4); ``chip_grid`` draws them."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from npuwatch.history import History
from npuwatch.model import ChipSample
from npuwatch.text_safety import inert
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.line import Finish, cells, combined_style, fitted_segments, text_strip
from npuwatch.widgets.view_model import ChipRow, MetricCell, chip_row

LABEL_WIDTH = 5  # "HBM  "
#: Every card's bars are this long whatever the card's width (the grid's cards differ by a cell
#: or more), so equal values draw equal bars; the sparkline takes what is left of the line.
BAR_WIDTH = 10
VALUE_WIDTH = 10  # " 120/128G "
MIN_SPARK_WIDTH = 5


def _card_value(cell: MetricCell) -> str:
    """A cell's value in a card's 8 columns: ``64%``, ``52/64G``, ``281.4W``, ``40 °C``."""
    if cell.key == "memory":
        if cell.fraction is None:
            return fmt.NA
        return f"{fmt.gib(cell.value, 0)}/{fmt.gib(cell.total, 0)}G"
    if cell.key == "power":  # the bar shows the share of the rating
        return fmt.watts(cell.value).replace(" W", "W")
    return cell.text


def _title(row: ChipRow, in_group: bool) -> Text:
    ident = row.identity
    text = Text()
    if in_group:  # the group's border names the NPU; each card names its chip
        text.append(f"chip {ident.chip_id} ", style="bold")
    if ident.phy_id is not None:
        text.append(f"phy {ident.phy_id} ")
    if ident.device_id is not None:
        text.append(f"dev {ident.device_id} ")
    text.append(inert(ident.bus_id or "Bus-Id n/a"), style="dim")
    if row.stale:
        text.append("  STALE", style="bold dark_orange")
    return text


def _widths(width: int) -> Tuple[int, int]:
    """A card's bar and sparkline widths at ``width`` columns."""
    room = width - 1 - LABEL_WIDTH - VALUE_WIDTH  # for the bar and the sparkline
    bar_w = BAR_WIDTH if room - BAR_WIDTH >= MIN_SPARK_WIDTH else max(4, room - MIN_SPARK_WIDTH)
    return bar_w, max(1, room - bar_w)


def _head(chip: ChipSample, row: ChipRow, in_group: bool) -> Text:
    head = _title(row, in_group)
    head.append("  ")
    head.append_text(render.badge(chip.health))
    return head


def card_lines(
    chip: ChipSample, history: History, width: int, in_group: bool, row: Optional[ChipRow] = None
) -> List[Text]:
    """The multi-line card (wide terminals): a line per cell of the chip's row, then its problems."""
    shown = row if row is not None else chip_row(chip)
    key = chip.identity.key
    bar_w, spark_w = _widths(width)
    lines = [_head(chip, shown, in_group)]
    for cell in shown.metrics:
        line = _metric_line(cell.tag, cell.fraction, bar_w, _card_value(cell), render.bar_style(cell))
        line.append_text(render.spark(history.values(key, cell.metric, last=spark_w), spark_w, cell.ceiling))
        lines.append(line)
    return [*lines, *problem_lines(chip, width)]


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
        bar_w, spark_w = _widths(width)
        head_key = (row.identity, row.stale, chip.health, in_group, console, columns, base, finish)
        if head_key != self._head[0]:  # a card's title changes only with its identity, health or staleness
            strip = text_strip(_head(chip, row, in_group), console, columns, base, finish)
            self._head = (head_key, tuple(strip))
        lines = [self._head[1]]
        metrics = self._metrics
        if len(metrics) != len(row.metrics):
            metrics[:] = [_MetricLine() for _ in row.metrics]
        for cell, drawn in zip(row.metrics, metrics):
            values = history.values(key, cell.metric, last=spark_w)
            lines.append(drawn.draw(cell, values, spark_w, bar_w, console, columns, base, finish))
        problem_key = (chip.errors, chip.pcie, chip.health, width, console, columns, base, finish)
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
        self.head: Tuple[Segment, ...] = ()
        self.head_length = 0
        self.values: List[Optional[float]] = []
        self.top: Optional[float] = None
        self.spark = ""
        self.key: object = ()
        self.line: Line = ()

    def draw(
        self,
        cell: MetricCell,
        values: List[Optional[float]],
        spark_w: int,
        bar_w: int,
        console: Console,
        columns: int,
        base: Style,
        finish: Finish,
    ) -> Line:
        """The line for ``cell`` with the sparkline of ``values`` (``spark_w`` cells), ``columns`` wide."""
        spark = self._spark(values, spark_w, cell.ceiling)
        value = _card_value(cell)
        colour = render.bar_style(cell)
        bar = None if cell.fraction is None else render.bar_cells(cell.fraction, bar_w)
        head_key = (cell.tag, bar, value, colour, bar_w, console, base, finish)
        key = (head_key, spark, columns)
        if key == self.key:
            return self.line
        if head_key != self.head_key:
            segments = _metric_head(cell, bar_w, value, colour, console, base, finish)
            self.head_key, self.head = head_key, tuple(segments)
            self.head_length = sum(cells(segment.text) for segment in segments)
        segments = list(self.head)
        if spark:  # the sparkline's characters are one cell each
            segments.append(
                Segment(spark, combined_style(console, base, ("bold", render.SPARK_STYLE), finish))
            )
        self.key = key
        self.line = fitted_segments(
            segments, self.head_length + len(spark), columns, finish(base) if finish else base
        )
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
    cell: MetricCell, bar_w: int, value: str, colour: str, console: Console, base: Style, finish: Finish
) -> List[Segment]:
    """A metric line's label, bar (or blank, or dim track) and value, as ``text_strip`` cuts
    ``_metric_line``."""

    def styled(text: str, *spans: str) -> Segment:  # the line's own style is bold, then the spans
        return Segment(text, combined_style(console, base, ("bold", *spans), finish))

    label = f"{cell.tag:<{LABEL_WIDTH}}"
    if cell.fraction is None and value != fmt.NA:  # a value with no scale (no rating): no bar
        return [styled(label + " " * bar_w), styled(f" {value:>{VALUE_WIDTH - 2}} ", "bold")]
    if cell.fraction is None:  # n/a: a dim track
        return [styled(label), styled("·" * bar_w, "dim"), styled(f" {value:>{VALUE_WIDTH - 2}} ", "dim")]
    whole, partial = render.bar_cells(cell.fraction, bar_w)
    segments = [styled(label)]
    if whole:
        segments.append(styled("█" * whole, colour))
    if whole < bar_w:
        segments.append(styled(partial, colour, colour) if partial != " " else styled("·", colour, "dim"))
        if bar_w - whole - 1:
            segments.append(styled("·" * (bar_w - whole - 1), colour, "dim"))
    segments.append(styled(f" {value:>{VALUE_WIDTH - 2}} ", "bold" if value != fmt.NA else "dim"))
    return segments


#: How many of a chip's error codes its card lists (the detail screen shows them all).
CARD_ERRORS = 2


def problem_count(chip: ChipSample) -> int:
    """How many lines ``problem_lines`` gives ``chip``, without drawing them."""
    link = chip.pcie
    degraded = link is not None and link.present and link.degraded
    return min(len(chip.errors), CARD_ERRORS) + (1 if degraded else 0)


def problem_lines(chip: ChipSample, width: int) -> List[Text]:
    """The card's lines under its metrics, one per problem: the error codes of a chip that is not
    OK, with their meaning, and a PCIe link below its maximum."""
    lines: List[Text] = []
    glyph, style = render.health_mark(chip.health)
    for index, error in enumerate(chip.errors[:CARD_ERRORS]):
        rest = len(chip.errors) - CARD_ERRORS
        more = f" +{rest}" if index == CARD_ERRORS - 1 and rest > 0 else ""
        lines.append(_fitted(f"{glyph} {inert(error.text)}", more, width, style))
    link = chip.pcie
    if link is not None and link.present and link.degraded:  # the model's one test of "degraded"
        lines.append(_fitted(f"▲ PCIe {fmt.pcie_link(link)}", " degraded", width, "bold dark_orange"))
    return lines


def _fitted(text: str, tail: str, width: int, style: str) -> Text:
    """``text + tail`` when it fits in ``width``, else ``text`` (cut with … if need be)."""
    line = Text(text + tail if len(text + tail) <= width else text, style=style)
    line.truncate(width, overflow="ellipsis")
    return line


def _metric_line(label: str, share: Optional[float], bar_w: int, value: str, style: str) -> Text:
    line = Text(f"{label:<{LABEL_WIDTH}}", style="bold")
    if share is None and value != fmt.NA:  # a value with no scale (power of a chip with no rating)
        line.append(" " * bar_w)
    else:
        line.append_text(render.bar(share, bar_w, style))
    line.append(f" {value:>{VALUE_WIDTH - 2}} ", style="bold" if value != fmt.NA else "dim")
    return line


def _memory_column(cell: MetricCell) -> str:
    """The one-line row's memory figures, aligned on the slash: `` 52/64G``, ``  3/64G``, ``    n/a``."""
    if cell.fraction is None:
        return f"{fmt.NA:>7}"
    return f"{fmt.gib(cell.value, 0):>3}/{fmt.gib(cell.total, 0)}G"


def compact_line(
    chip: ChipSample, history: History, width: int, in_group: bool, row: Optional[ChipRow] = None
) -> Text:
    """One line per chip (80-column terminals)."""
    shown = row if row is not None else chip_row(chip)
    ident = chip.identity
    line = Text()
    who = f" └c{ident.chip_id}" if in_group and ident.chip_id else f"{ident.npu_id:>3}"
    line.append(f"{who:<5}", style="bold")
    line.append(f"{inert(ident.name or '?')[:11]:<12}")  # "Ascend 910B", "Ascend950DT" whole
    badge = render.badge(chip.health)
    line.append_text(badge)
    line.append(" " * max(0, 12 - len(badge.plain)))
    util, memory = shown.cell("util"), shown.cell("memory")
    power, temperature = shown.cell("power"), shown.cell("temperature")
    rest = width - len(line.plain) - 40
    bar_w = max(4, min(14, rest // 2))
    line.append(f"{util.tag} ")
    line.append_text(render.bar(util.fraction, bar_w, render.bar_style(util)))
    line.append(f" {util.text:>4} ")
    line.append(f"{memory.tag} ")
    line.append_text(render.bar(memory.fraction, bar_w, render.bar_style(memory)))
    line.append(f" {_memory_column(memory)} ")
    line.append(f"{_card_value(power):>7}", style=render.text_style(power.level))
    line.append(" ")
    line.append(temperature.text, style=render.text_style(temperature.level))
    if shown.stale:
        line.append(" STALE", style="bold dark_orange")
    return line


def group_chips(chips: Sequence[ChipSample]) -> List[List[ChipSample]]:
    """Chips grouped by NPU ID, in NPU then chip order."""
    groups: dict = {}
    for chip in sorted(chips, key=lambda c: c.identity.key):
        groups.setdefault(chip.identity.npu_id, []).append(chip)
    return list(groups.values())
