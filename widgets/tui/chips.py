"""Provides ChipCard and NpuGroup: one card per chip, grouped per NPU (A3 ×2, 310P Duo ×2, 310 ×4)."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.geometry import Size
from textual.markup import escape
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from npuwatch.history import History
from npuwatch.judge import Judgement
from npuwatch.model import ChipSample, Level
from npuwatch.text_safety import inert
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.line import TextLines, combined_style, fitted_strip, text_strip
from npuwatch.widgets.view_model import ChipRow, MetricCell, chip_row, worst_health

LABEL_WIDTH = 5  # "HBM  "
#: Every card's bars are this long whatever the card's width (the grid's cards differ by a cell
#: or more), so equal values draw equal bars; the sparkline takes what is left of the line.
BAR_WIDTH = 10
VALUE_WIDTH = 10  # " 120/128G "
MIN_SPARK_WIDTH = 5


class ChipCard(TextLines, can_focus=True):
    """One chip: identity, health badge, AI Core / memory bars, power, temperature, graphs.

    Drawn with textual's line API from strips built once per sample: sixteen cards repaint
    every second, and the generic renderable path cost most of the dashboard's CPU.
    """

    class Selected(Message):
        """The user asked for this chip's detail screen (Enter or a click)."""

        def __init__(self, key: tuple) -> None:
            super().__init__()
            self.key = key

    def __init__(
        self, chip: ChipSample, history: History, in_group: bool, judgement: Optional[Judgement] = None
    ) -> None:
        super().__init__(classes="chip")
        self.chip = chip
        self.history = history
        self.in_group = in_group
        self.row = chip_row(chip, judgement=judgement)
        self._set_level(self.row.level)

    def show(self, chip: ChipSample, judgement: Optional[Judgement] = None) -> None:
        """Render a newer sample of this chip; ``judgement`` is the judge's verdict on it."""
        grows = problem_count(chip) != problem_count(self.chip)
        self.chip = chip
        self.row = chip_row(chip, judgement=judgement)
        self._set_level(self.row.level)
        if grows:  # a line appeared or went (an alarm's code, a degraded link): the card resizes
            self.refresh(layout=True)
        self.redraw()

    def _set_level(self, level: Level) -> None:
        """The class ``level-ok|warning|critical|unknown``: the card's colour is the judge's level."""
        wanted = f"level-{level.value}"
        if not self.has_class(wanted):
            self.remove_class(*(f"level-{other.value}" for other in Level))
            self.add_class(wanted)

    def lines(self) -> List[Text]:
        """The card's lines as text (what the screen shows; also read by tests)."""
        width = max(20, self.size.width)
        if self.has_class("compact"):
            return [compact_line(self.chip, self.history, width, self.in_group, self.row)]
        return card_lines(self.chip, self.history, width, self.in_group, self.row)

    def fresh_strips(self, width: int, base: Style) -> Optional[List[Strip]]:
        if self.has_class("compact"):
            return None
        console = self.app.console
        return card_strips(
            self.chip, self.history, max(20, width), self.in_group, self.row, console, width, base
        )

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # The wide card is as tall as its lines: the title, the metrics, then one line per problem
        # (counted, not drawn: layout asks often).
        return 1 + len(self.row.metrics) + problem_count(self.chip)

    def on_click(self) -> None:
        self.post_message(self.Selected(self.chip.identity.key))

    def key_enter(self) -> None:
        self.post_message(self.Selected(self.chip.identity.key))


class NpuGroup(Widget):
    """The chips of one NPU card in one bordered box, titled with the NPU ID and model."""

    def __init__(
        self,
        chips: Sequence[ChipSample],
        history: History,
        judgements: Optional[Mapping[Tuple[int, int], Judgement]] = None,
    ) -> None:
        super().__init__(classes="npu-group")
        first = chips[0].identity
        self.npu_id = first.npu_id
        self.keys = [chip.identity.key for chip in chips]
        count = f" · {len(chips)} chips" if len(chips) > 1 else ""
        # A border title is markup: the name npu-smi printed is escaped for it as well.
        name = escape(inert(first.name or "unknown model"))
        self.border_title = f"NPU {first.npu_id} · {name}{count}"
        judged = judgements or {}
        self.cards = [
            ChipCard(chip, history, len(chips) > 1, judged.get(chip.identity.key)) for chip in chips
        ]
        if len(chips) > 1:
            self.add_class("multi")

    def compose(self) -> ComposeResult:
        yield from self.cards

    def show(
        self, chips: Sequence[ChipSample], judgements: Optional[Mapping[Tuple[int, int], Judgement]] = None
    ) -> None:
        """Render the newer samples of this NPU's chips (same chips, same order) with the judge's
        verdicts on them (``judge_snapshot``)."""
        judged = judgements or {}
        for card, chip in zip(self.cards, chips):
            card.show(chip, judged.get(chip.identity.key))
        # Touch the box only when its look changes: each change repaints the whole group.
        if len(chips) > 1:  # one card shows its own badge; a group sums up the worst
            subtitle = render.badge(worst_health([chip.health for chip in chips])).plain.strip()
            if subtitle != self.border_subtitle:
                self.border_subtitle = subtitle
        stale = any(card.row.stale for card in self.cards)
        if stale != self.has_class("stale"):
            self.set_class(stale, "stale")


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
    makes of them, but the metric lines (four of a card's five change every second: the
    sparklines scroll) are cut straight into segments, without building Rich Text."""
    key = chip.identity.key
    bar_w, spark_w = _widths(width)
    head_key = (row.identity, row.stale, chip.health, in_group, console, columns, base)
    head = _HEADS.get(head_key)
    if head is None:  # a card's title line changes only with its chip's identity, health or staleness
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        head = _HEADS[head_key] = text_strip(_head(chip, row, in_group), console, columns, base)
    strips = [head]
    for cell in row.metrics:
        cells = render.spark_cells(history.values(key, cell.metric, last=spark_w), spark_w, cell.ceiling)
        strips.append(_metric_strip(cell, bar_w, cells, console, columns, base))
    strips += [text_strip(line, console, columns, base) for line in problem_lines(chip, width)]
    return strips


#: The title lines drawn, by what they show and how: sixteen cards keep theirs from one second to the next.
_HEADS: Dict[Tuple[object, ...], Strip] = {}
_HEADS_MAX = 1024


def _metric_strip(
    cell: MetricCell, bar_w: int, spark: str, console: Console, columns: int, base: Style
) -> Strip:
    """One metric line of a card as ``text_strip`` cuts ``_metric_line`` + its sparkline."""
    value = _card_value(cell)
    if cell.fraction is None:  # a dim track, or no bar: rare, so through Rich Text
        line = _metric_line(cell.tag, cell.fraction, bar_w, value, render.bar_style(cell))
        line.append(spark, style=render.SPARK_STYLE)
        return text_strip(line, console, columns, base)
    colour = render.bar_style(cell)
    whole, partial = render.bar_cells(cell.fraction, bar_w)

    def styled(text: str, *spans: str) -> Segment:  # the line's own style is bold, then the spans
        return Segment(text, combined_style(console, base, ("bold", *spans)))

    segments = [styled(f"{cell.tag:<{LABEL_WIDTH}}")]
    if whole:
        segments.append(styled("█" * whole, colour))
    if whole < bar_w:
        segments.append(styled(partial, colour, colour) if partial != " " else styled("·", colour, "dim"))
        if bar_w - whole - 1:
            segments.append(styled("·" * (bar_w - whole - 1), colour, "dim"))
    segments.append(styled(f" {value:>{VALUE_WIDTH - 2}} ", "bold" if value != fmt.NA else "dim"))
    if spark:
        segments.append(styled(spark, render.SPARK_STYLE))
    return fitted_strip(segments, cell_len("".join(segment.text for segment in segments)), columns, base)


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
