"""Provides ChipCard and NpuGroup: one card per chip, grouped per NPU (A3 ×2, 310P Duo ×2, 310 ×4)."""

from __future__ import annotations

from typing import List, Optional, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.geometry import Size
from textual.markup import escape
from textual.message import Message
from textual.widget import Widget

from npuwatch.chip_facts import ChipMemory, chip_memory, rated_power_w
from npuwatch.history import History
from npuwatch.model import ChipSample, MetricStatus
from npuwatch.text_safety import inert
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.line import TextLines

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

    def __init__(self, chip: ChipSample, history: History, in_group: bool) -> None:
        super().__init__(classes="chip")
        self.chip = chip
        self.history = history
        self.in_group = in_group

    def show(self, chip: ChipSample) -> None:
        """Render a newer sample of this chip."""
        grows = len(problem_lines(chip, 20)) != len(problem_lines(self.chip, 20))
        self.chip = chip
        if grows:  # a line appeared or went (an alarm's code, a degraded link): the card resizes
            self.refresh(layout=True)
        self.redraw()

    def lines(self) -> List[Text]:
        """The card's lines as text (what the screen shows; also read by tests)."""
        width = max(20, self.size.width)
        if self.has_class("compact"):
            return [compact_line(self.chip, self.history, width, self.in_group)]
        return card_lines(self.chip, self.history, width, self.in_group)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        # The wide card is as tall as its lines: the metrics, then one line per problem.
        return len(card_lines(self.chip, self.history, max(20, width), self.in_group))

    def on_click(self) -> None:
        self.post_message(self.Selected(self.chip.identity.key))

    def key_enter(self) -> None:
        self.post_message(self.Selected(self.chip.identity.key))


class NpuGroup(Widget):
    """The chips of one NPU card in one bordered box, titled with the NPU ID and model."""

    def __init__(self, chips: Sequence[ChipSample], history: History) -> None:
        super().__init__(classes="npu-group")
        first = chips[0].identity
        self.npu_id = first.npu_id
        self.keys = [chip.identity.key for chip in chips]
        count = f" · {len(chips)} chips" if len(chips) > 1 else ""
        # A border title is markup: the name npu-smi printed is escaped for it as well.
        name = escape(inert(first.name or "unknown model"))
        self.border_title = f"NPU {first.npu_id} · {name}{count}"
        self.cards = [ChipCard(chip, history, in_group=len(chips) > 1) for chip in chips]
        if len(chips) > 1:
            self.add_class("multi")

    def compose(self) -> ComposeResult:
        yield from self.cards

    def show(self, chips: Sequence[ChipSample]) -> None:
        """Render the newer samples of this NPU's chips (same chips, same order)."""
        for card, chip in zip(self.cards, chips):
            card.show(chip)
        # Touch the box only when its look changes: each change repaints the whole group.
        if len(chips) > 1:  # one card shows its own badge; a group sums up the worst
            worst = max((chip.health for chip in chips), key=lambda h: _SEVERITY[h.value])
            subtitle = render.badge(worst).plain.strip()
            if subtitle != self.border_subtitle:
                self.border_subtitle = subtitle
        stale = any(_stale(chip) for chip in chips)
        if stale != self.has_class("stale"):
            self.set_class(stale, "stale")


_SEVERITY = {"OK": 0, "Warning": 1, "Unknown": 2, "Alarm": 3, "Critical": 4}


def _stale(chip: ChipSample) -> bool:
    return any(note.status is MetricStatus.STALE for note in chip.notes.values())


def _utilisation(chip: ChipSample) -> tuple:
    """(label, percent, history metric): AI Core, or NPU Util on layouts that print only that (950)."""
    if chip.aicore_percent is not None or chip.npu_util_percent is None:
        return "AIC", chip.aicore_percent, "aicore_percent"
    return "NPU", chip.npu_util_percent, "npu_util_percent"


def _memory_label(memory: ChipMemory) -> str:
    """HBM, or DDR on 310P/310B which have no HBM; MEM for a model npuwatch does not know."""
    return memory.kind or "MEM"


def _memory_figures(memory: ChipMemory, share: Optional[float]) -> str:
    """``52/64G``, or ``n/a`` when the use or the size is not known."""
    if share is None:
        return fmt.NA
    return f"{fmt.gib(memory.used_mib, 0)}/{fmt.gib(memory.total_mib, 0)}G"


def _title(chip: ChipSample, in_group: bool) -> Text:
    ident = chip.identity
    text = Text()
    if in_group:  # the group's border names the NPU; each card names its chip
        text.append(f"chip {ident.chip_id} ", style="bold")
    if ident.phy_id is not None:
        text.append(f"phy {ident.phy_id} ")
    if ident.device_id is not None:
        text.append(f"dev {ident.device_id} ")
    text.append(inert(ident.bus_id or "Bus-Id n/a"), style="dim")
    if _stale(chip):
        text.append("  STALE", style="bold dark_orange")
    return text


def card_lines(chip: ChipSample, history: History, width: int, in_group: bool) -> List[Text]:
    """The multi-line card (wide terminals)."""
    key = chip.identity.key
    inner = width - 1
    room = inner - LABEL_WIDTH - VALUE_WIDTH  # for the bar and the sparkline
    bar_w = BAR_WIDTH if room - BAR_WIDTH >= MIN_SPARK_WIDTH else max(4, room - MIN_SPARK_WIDTH)
    spark_w = max(1, room - bar_w)
    head = _title(chip, in_group)
    head.append("  ")
    head.append_text(render.badge(chip.health))
    label, util, util_metric = _utilisation(chip)
    util_line = _metric_line(
        label, util / 100 if util is not None else None, bar_w, fmt.percent(util), "green"
    )
    util_line.append_text(render.spark(history.values(key, util_metric, last=spark_w), spark_w, 100))
    memory = chip_memory(chip)
    share, pct = render.fraction(memory.used_mib, memory.total_mib)
    mem_text = _memory_figures(memory, share)
    mem_line = _metric_line(_memory_label(memory), share, bar_w, mem_text, render.usage_style(pct))
    mem_history = history.values(key, memory.used_metric, last=spark_w)
    mem_line.append_text(render.spark(mem_history, spark_w, memory.total_mib))
    rated = rated_power_w(chip.identity.name)
    power_share = chip.power_w / rated if rated and chip.power_w is not None else None
    power_line = _metric_line(
        "PWR", power_share, bar_w, fmt.watts(chip.power_w).replace(" W", "W"), "magenta"
    )
    power_line.append_text(render.spark(history.values(key, "power_w", last=spark_w), spark_w, rated))
    temp_share = chip.temperature_c / 100 if chip.temperature_c is not None else None
    temp_style = render.temperature_style(chip.temperature_c) or "yellow"
    temp_line = _metric_line("TEMP", temp_share, bar_w, fmt.celsius(chip.temperature_c), temp_style)
    temp_line.append_text(render.spark(history.values(key, "temperature_c", last=spark_w), spark_w, 100))
    return [head, util_line, mem_line, power_line, temp_line, *problem_lines(chip, width)]


#: How many of a chip's error codes its card lists (the detail screen shows them all).
CARD_ERRORS = 2


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


def _memory_column(memory: ChipMemory, share: Optional[float]) -> str:
    """The one-line row's memory figures, aligned on the slash: `` 52/64G``, ``  3/64G``, ``    n/a``."""
    if share is None:
        return f"{fmt.NA:>7}"
    return f"{fmt.gib(memory.used_mib, 0):>3}/{fmt.gib(memory.total_mib, 0)}G"


def compact_line(chip: ChipSample, history: History, width: int, in_group: bool) -> Text:
    """One line per chip (80-column terminals)."""
    ident = chip.identity
    line = Text()
    who = f" └c{ident.chip_id}" if in_group and ident.chip_id else f"{ident.npu_id:>3}"
    line.append(f"{who:<5}", style="bold")
    line.append(f"{inert(ident.name or '?')[:11]:<12}")  # "Ascend 910B", "Ascend950DT" whole
    badge = render.badge(chip.health)
    line.append_text(badge)
    line.append(" " * max(0, 12 - len(badge.plain)))
    label, util, _ = _utilisation(chip)
    memory = chip_memory(chip)
    share, pct = render.fraction(memory.used_mib, memory.total_mib)
    rest = width - len(line.plain) - 40
    bar_w = max(4, min(14, rest // 2))
    line.append(f"{label} ")
    line.append_text(render.bar(util / 100 if util is not None else None, bar_w, "green"))
    line.append(f" {fmt.percent(util):>4} ")
    line.append(f"{_memory_label(memory)} ")
    line.append_text(render.bar(share, bar_w, render.usage_style(pct)))
    line.append(f" {_memory_column(memory, share)} ")
    line.append(f"{fmt.watts(chip.power_w).replace(' W', 'W'):>7} ")
    line.append(fmt.celsius(chip.temperature_c), style=render.temperature_style(chip.temperature_c))
    if _stale(chip):
        line.append(" STALE", style="bold dark_orange")
    return line


def group_chips(chips: Sequence[ChipSample]) -> List[List[ChipSample]]:
    """Chips grouped by NPU ID, in NPU then chip order."""
    groups: dict = {}
    for chip in sorted(chips, key=lambda c: c.identity.key):
        groups.setdefault(chip.identity.npu_id, []).append(chip)
    return list(groups.values())
