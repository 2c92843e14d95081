"""Provides a chip card's lines (multi-line card, or one line per chip) and the chips grouped per NPU
(A3 ×2, 310P Duo ×2, 310 ×4); ``chip_grid`` draws them."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from rich.text import Text

from npuwatch.history import History
from npuwatch.judge.rules import LinkVerdict, link_verdicts
from npuwatch.model import ChipSample, Level
from npuwatch.text_safety import inert
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.view_model import ChipRow, MetricCell, chip_row

LABEL_WIDTH = 5  # "HBM  "
#: Every card's bars are this long whatever the card's width (the grid's cards differ by a cell
#: or more), so equal values draw equal bars; the sparkline takes what is left of the line.
BAR_WIDTH = 10
VALUE_WIDTH = 10  # " 120/128G "
MIN_SPARK_WIDTH = 5


def card_value(cell: MetricCell) -> str:
    """A cell's value in a card's 8 columns: ``64%``, ``52/64G``, ``281.4W``, ``40 °C``."""
    if cell.key == "memory":
        if cell.fraction is None:
            return fmt.NA
        return f"{fmt.gib(cell.value, 0)}/{fmt.gib(cell.total, 0)}G"
    if cell.key == "power":  # the bar shows the share of the rating
        return fmt.watts(cell.value).replace(" W", "W")
    return cell.text


def _title(row: ChipRow, in_group: bool, bus_id: bool = True, ids: bool = True) -> Text:
    ident = row.identity
    text = Text()
    if in_group:  # the group's border names the NPU; each card names its chip
        text.append(f"chip {ident.chip_id} ", style="bold")
    if ids and ident.phy_id is not None:
        text.append(f"phy {ident.phy_id} ")
    if ids and ident.device_id is not None:
        text.append(f"dev {ident.device_id} ")
    if bus_id:
        text.append(inert(ident.bus_id or "Bus-Id n/a"), style="dim")
    if row.stale:
        text.append("  STALE", style="bold dark_orange")
    return text


def card_widths(width: int) -> Tuple[int, int]:
    """A card's bar and sparkline widths at ``width`` columns."""
    room = width - 1 - LABEL_WIDTH - VALUE_WIDTH  # for the bar and the sparkline
    bar_w = BAR_WIDTH if room - BAR_WIDTH >= MIN_SPARK_WIDTH else max(4, room - MIN_SPARK_WIDTH)
    return bar_w, max(1, room - bar_w)


def card_head(chip: ChipSample, row: ChipRow, in_group: bool, width: Optional[int] = None) -> Text:
    """The card's title, health badge and workload tag (``compute``, ``input ▼ thermal``); a card
    narrower than all of them leaves out the Bus-Id, then the throttling's words (keeping its
    ``▼``), then the Phy-ID and Device, never the health or the tag (a 37-column A3 card showed
    ``▲ Warnin``)."""
    workload = row.workload
    shown = workload if workload is not None and workload.tag != UNKNOWN_TAG else None
    forms = _HEAD_FORMS if shown is not None else _HEAD_FORMS[:2]
    for bus_id, ids, room in forms:
        head = _title(row, in_group, bus_id, ids)
        head.rstrip()  # a title without its Bus-Id ends in the space after its Phy-ID
        head.append("  ")
        head.append_text(render.badge(chip.health))
        if shown is not None:
            head.append(" ")
            head.append_text(render.workload_tag(shown, room))
        if width is None or head.cell_len <= width:
            break
    return head


#: A card title's forms, widest first: with or without the Bus-Id, with or without the Phy-ID and
#: Device, and the room its throttling mark gets (``▼ throttled: thermal``, ``▼ thermal``, ``▼``).
_HEAD_FORMS = ((True, True, 99), (False, True, 99), (False, True, 9), (False, True, 1), (False, False, 1))
#: The unknown class's tag: no card or line shows it (a chip with no AI Core reading says so
#: already: n/a, STALE, its health); the detail screen explains it.
UNKNOWN_TAG = "?"


def card_rows(row: ChipRow) -> List[Tuple[MetricCell, ...]]:
    """The metric lines of a chip's card: each cell (a bar, its value, a sparkline), the metric
    shown beside a cell right under it (the AI Core frequency under AI Core), then the extra
    bars (Vector, HBM bandwidth) two to a line without sparklines (a lone one gets a line of its
    own).  An npu-smi chip reports none of the extras: its card is as it always was."""
    if not row.extras:
        return [(cell,) for cell in row.metrics]
    beside = {extra.beside: extra for extra in row.extras if extra.kind == "beside"}
    bars = [extra for extra in row.extras if extra.kind == "bar"]
    lines: List[Tuple[MetricCell, ...]] = []
    for cell in row.metrics:
        lines.append((cell,))
        if cell.key in beside:
            lines.append((beside[cell.key],))
    lines += [tuple(bars[i : i + 2]) if len(bars) - i != 1 else (bars[i],) for i in range(0, len(bars), 2)]
    return lines


def card_height(chip: ChipSample, row: ChipRow) -> int:
    """How many lines the card of ``chip`` has: its title, its metric lines, a line per problem."""
    return 1 + len(card_rows(row)) + problem_count(chip)


def card_lines(
    chip: ChipSample, history: History, width: int, in_group: bool, row: Optional[ChipRow] = None
) -> List[Text]:
    """The multi-line card (wide terminals): its title, its metric lines (``card_rows``), then its
    problems."""
    shown = row if row is not None else chip_row(chip)
    key = chip.identity.key
    bar_w, spark_w = card_widths(width)
    lines = [card_head(chip, shown, in_group, width)]
    for shown_cells in card_rows(shown):
        if len(shown_cells) > 1:
            lines.append(_pair_line(shown_cells, width))
            continue
        (cell,) = shown_cells
        value, cell_spark_w = line_value(cell, spark_w)
        line = _metric_line(cell.tag, cell.fraction, bar_w, value, render.bar_style(cell))
        line.append_text(
            render.spark(history.values(key, cell.metric, last=cell_spark_w), cell_spark_w, cell.ceiling)
        )
        lines.append(line)
    return [*lines, *problem_lines(chip, width)]


def line_value(cell: MetricCell, spark_w: int) -> Tuple[str, int]:
    """A metric line's value and what its sparkline keeps: a value longer than the value column
    (``1300/1800 MHz``) takes cells from the sparkline, and drops its unit when that would leave
    less than ``MIN_SPARK_WIDTH`` of it."""
    value = card_value(cell)
    over = max(0, len(value) - (VALUE_WIDTH - 2))
    if over and spark_w - over < MIN_SPARK_WIDTH and " " in value:
        value = value.rsplit(" ", 1)[0]
        over = max(0, len(value) - (VALUE_WIDTH - 2))
    return value, max(1, spark_w - over)


#: A side-by-side bar's value column: ``100%``.
PAIR_VALUE_WIDTH = 4


def pair_bar_width(count: int, width: int) -> int:
    """Each side-by-side bar's cells: an equal share of the card, less its label and value."""
    return max(2, (width - 1) // count - LABEL_WIDTH - 1 - PAIR_VALUE_WIDTH - (1 if count > 1 else 0))


def _pair_line(cells: Tuple[MetricCell, ...], width: int) -> Text:
    """Two extra bars on one line: ``VEC  ████▌··· 45% HBW  ██████▏· 62%``, each half of the card."""
    bar_w = pair_bar_width(len(cells), width)
    line = Text(style="bold")
    for index, cell in enumerate(cells):
        if index:
            line.append(" ")
        line.append(f"{cell.tag:<{LABEL_WIDTH}}")
        line.append_text(render.bar(cell.fraction, bar_w, render.bar_style(cell)))
        line.append(f" {cell.text:>{PAIR_VALUE_WIDTH}}")
    return line


#: How many of a chip's error codes its card lists (the detail screen shows them all).
CARD_ERRORS = 2


def problem_count(chip: ChipSample) -> int:
    """How many lines ``problem_lines`` gives ``chip``, without drawing them."""
    return min(len(chip.errors), CARD_ERRORS) + len(link_problems(chip))


def link_problems(chip: ChipSample) -> Tuple[LinkVerdict, ...]:
    """The chip's links the judge finds wanting (a warning: narrow, slow under load, down); a link
    gone off the bus is the chip's own verdict (lost), not a line."""
    return tuple(verdict for verdict in link_verdicts(chip) if verdict.level is Level.WARNING)


def problem_lines(chip: ChipSample, width: int) -> List[Text]:
    """The card's lines under its metrics, one per problem: the error codes of a chip that is not
    OK, with their meaning, and each link the judge finds wanting, in its words."""
    lines: List[Text] = []
    glyph, style = render.health_mark(chip.health)
    for index, error in enumerate(chip.errors[:CARD_ERRORS]):
        rest = len(chip.errors) - CARD_ERRORS
        more = f" +{rest}" if index == CARD_ERRORS - 1 and rest > 0 else ""
        lines.append(_fitted(f"{glyph} {inert(error.text)}", more, width, style))
    for verdict in link_problems(chip):  # ▲ PCIe Gen4 x8 of Gen5 x16 narrow
        link, style = verdict.link, render.LEVEL_TEXT_STYLES[verdict.level]
        lines.append(_fitted(f"▲ {link.title} {inert(link.detail)}", f" {verdict.word}", width, style))
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
    workload = shown.workload
    tag_room = 0 if workload is None else COMPACT_TAG_ROOM  # every line of a sample alike: bars align
    if workload is not None and width - COMPACT_FIXED - tag_room < 2 * COMPACT_MIN_BAR:
        # Narrow: the model's column shares its room with the tag (``910B3 input``).
        tag_room = 0
        line.append(f"{_short_model(ident.name):<{COMPACT_SHORT_MODEL}}")
        tag = render.workload_tag(workload, 1) if workload.tag != UNKNOWN_TAG else Text()
        line.append_text(tag)
        line.append(" " * (12 - COMPACT_SHORT_MODEL + 4 - tag.cell_len))
    else:
        line.append(f"{inert(ident.name or '?')[:11]:<12}")  # "Ascend 910B", "Ascend950DT" whole
    badge = render.badge(chip.health)
    line.append_text(badge)
    line.append(" " * max(0, 12 - len(badge.plain)))
    util, memory = shown.cell("util"), shown.cell("memory")
    power, temperature = shown.cell("power"), shown.cell("temperature")
    rest = width - len(line.plain) - 40 - tag_room
    bar_w = max(COMPACT_MIN_BAR, min(14, rest // 2))
    line.append(f"{util.tag} ")
    line.append_text(render.bar(util.fraction, bar_w, render.bar_style(util)))
    line.append(f" {util.text:>4} ")
    line.append(f"{memory.tag} ")
    line.append_text(render.bar(memory.fraction, bar_w, render.bar_style(memory)))
    line.append(f" {_memory_column(memory)} ")
    line.append(f"{card_value(power):>7}", style=render.text_style(power.level))
    line.append(" ")
    line.append(temperature.text, style=render.text_style(temperature.level))
    if shown.stale:
        line.append(" STALE", style="bold dark_orange")
    if tag_room and workload is not None and workload.tag != UNKNOWN_TAG:
        line.append("  ")
        room = width - line.cell_len - len(workload.tag) - 1  # for the throttling mark
        line.append_text(render.workload_tag(workload, max(1, room)))
    if shown.extras:  # what only the DCMI backend reads, when the line has room for it
        for extras in (_compact_extras(shown, bars=True), _compact_extras(shown, bars=False)):
            if extras.cell_len and line.cell_len + extras.cell_len <= width:
                line.append_text(extras)
                break
    return line


#: The one-line form's columns besides its two bars: NPU (5), model (12), badge (12), the labels
#: and values around the bars (36: ``AIC `` … `` 52/64G ``, power, temperature).
COMPACT_FIXED = 5 + 12 + 12 + 36
#: Its bars never get shorter than this.
COMPACT_MIN_BAR = 4
#: The room kept for the workload tag at the end of the line (``  HBM held ▼``); a narrower line
#: shows the model shortened (``910B3``, ``950DT`` for ``Ascend950DT``) and the tag after it,
#: in 4 more columns than the model alone.
COMPACT_TAG_ROOM = 2 + 8 + 2
COMPACT_SHORT_MODEL = 6


def _short_model(name: Optional[str]) -> str:
    """The model without ``Ascend`` in at most 5 columns: ``910B3``, ``910B``, ``950DT``, ``910``."""
    return inert((name or "?").replace("Ascend", "").strip() or "?")[:5]


#: The one-line form's extra bars are this long.
COMPACT_EXTRA_BAR = 4


def _compact_extras(row: ChipRow, bars: bool) -> Text:
    """The one-line form's tail: the AI Core frequency against rated, and the extra bars."""
    text = Text()
    beside = row.beside("util")
    if beside is not None:
        text.append(f"  {beside.text}")
    for cell in row.bars if bars else ():
        text.append(f"  {cell.tag} ")
        text.append_text(render.bar(cell.fraction, COMPACT_EXTRA_BAR, render.bar_style(cell)))
        text.append(f" {cell.text:>{PAIR_VALUE_WIDTH}}")
    return text


def group_chips(chips: Sequence[ChipSample]) -> List[List[ChipSample]]:
    """Chips grouped by NPU ID, in NPU then chip order."""
    groups: dict = {}
    for chip in sorted(chips, key=lambda c: c.identity.key):
        groups.setdefault(chip.identity.npu_id, []).append(chip)
    return list(groups.values())
