"""Provides the chip area's geometry: which layout (cards or one line per chip), and where each NPU
box and chip card goes.  Pure arithmetic, no widgets: the chip area draws everything as one widget.

The places are those textual's grid gave the box widgets the dashboard used to mount (a grid of
``1fr`` columns with a one-cell gutter, a rounded border and one cell of padding around each box,
two-chip boxes spanning two columns with their cards side by side), so the screen looks the same.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import List, Optional, Sequence, Tuple

from textual.geometry import Size

#: Below this width (columns) chips are one line each; from it, cards in a grid when they fit the height.
WIDE_MIN_COLUMNS = 120
CARD_COLUMNS = 38
#: Rows an NPU box adds to its tallest card: its top and bottom border.
GROUP_FRAME_ROWS = 2
#: Rows around the chips: alerts line, host panel (its rule and two lines), footer; the header adds 1 or 2.
FIXED_ROWS = 1 + 3 + 1
#: Rows the process table keeps whatever the chips need: its title, column header and four processes.
PROCESS_MIN_ROWS = 6
#: The chip area never shrinks below this, however small the terminal.
CHIP_MIN_ROWS = 3
#: Columns between two grid columns.
GUTTER = 1
#: A box's border and padding on each side (columns), and its border above and below (rows).
BOX_SIDE = 2
#: Columns right of each card of a two-chip box (the gap between its cards, and before its padding).
CARD_MARGIN = 1


@dataclasses.dataclass(frozen=True)
class ChipLayout:
    """How the chips are drawn: cards in ``columns`` grid columns, or one line each (``compact``)."""

    compact: bool
    columns: int
    max_rows: int  # the chip area's height limit; it scrolls beyond


@dataclasses.dataclass(frozen=True)
class GroupShape:
    """What the layout needs of one NPU box: how many chips it holds and its height as cards."""

    chips: int
    card_rows: int  # the box's height in card form: its tallest card and its frame


@dataclasses.dataclass(frozen=True)
class Place:
    """A rectangle of the chip area, in cells (``y`` counts from the area's first line)."""

    x: int
    y: int
    width: int
    height: int


@dataclasses.dataclass(frozen=True)
class BoxPlace:
    """One NPU's box (``framed``: with its border, in card form) and its cards' places."""

    box: Place
    cards: Tuple[Place, ...]
    framed: bool


def choose_layout(size: Size, groups: Sequence[GroupShape], header_rows: int = 1) -> ChipLayout:
    """Cards when the terminal is wide enough and every card fits the height; else one line per chip.

    The chip area gets what the header, alerts, host panel and footer leave, minus the process
    table's minimum.  Cards are chosen when all of them fit there; otherwise lines, which are
    denser (one row a chip against seven a row of cards), so they show every chip where cards
    cannot; and when even the lines do not fit, the lines scroll (the focused chip is kept in view).
    """
    rows = max(CHIP_MIN_ROWS, size.height - header_rows - FIXED_ROWS - PROCESS_MIN_ROWS)
    columns = max(1, size.width // CARD_COLUMNS)
    if any(group.chips > 1 for group in groups):
        columns = max(2, columns - columns % 2)  # two-chip groups span two columns: keep them aligned
    cards_fit = bool(groups) and grid_height(groups, columns) <= rows
    compact = size.width < WIDE_MIN_COLUMNS or not cards_fit
    return ChipLayout(compact=compact, columns=1 if compact else columns, max_rows=rows)


def grid_height(groups: Sequence[GroupShape], columns: int) -> int:
    """The height of the card grid: boxes placed in order (a multi-chip box spans two columns and
    starts a new row when it does not fit), each row as tall as its tallest box."""
    total, used, row = 0, columns, 0
    for group in groups:
        span = min(columns, 2 if group.chips > 1 else 1)
        if used + span > columns:
            total, used, row = total + row, 0, 0
        used += span
        row = max(row, group.card_rows)
    return total + row


def fr_spans(count: int, total: int, gutter: int) -> List[Tuple[int, int]]:
    """``count`` equal shares of ``total`` cells with ``gutter`` cells between them, as (start, length):
    the shares are fractions, each edge rounded down (textual's ``1fr`` columns)."""
    share = Fraction(max(0, total - gutter * (count - 1)), count)
    edges, at = [0], Fraction(0)
    for _ in range(count):
        at += share
        edges.append(int(at))
        at += gutter
        edges.append(int(at))
    return [(edges[2 * i], edges[2 * i + 1] - edges[2 * i]) for i in range(count)]


def card_spans(count: int, width: int) -> List[Tuple[int, int]]:
    """Where the ``count`` cards of one box go across its ``width`` content columns, as (start, length).

    One card fills the width; several share it equally, each followed by a one-cell margin
    (textual's horizontal layout of ``1fr`` cards with ``margin-right: 1``).
    """
    if count == 1:
        return [(0, width)]
    share = Fraction(max(0, width - CARD_MARGIN * count), count)
    spans, at = [], Fraction(0)
    for _ in range(count):
        start = int(at)
        spans.append((start, int(at + share - start)))
        at += share + CARD_MARGIN
    return spans


def place_grid(heights: Sequence[Sequence[int]], width: int, columns: int) -> List[BoxPlace]:
    """The boxes of the card grid ``width`` cells wide: ``heights`` is each box's cards' heights."""
    spans = fr_spans(columns, width, GUTTER)
    places: List[BoxPlace] = []
    rows: List[List[int]] = []  # per grid row, the indexes of its boxes
    used = columns
    for index, cards in enumerate(heights):
        span = min(columns, 2 if len(cards) > 1 else 1)
        if used + span > columns:
            rows.append([])
            used = 0
        rows[-1].append(index)
        start, _ = spans[used]
        end = spans[used + span - 1][0] + spans[used + span - 1][1]
        used += span
        places.append(BoxPlace(Place(start, 0, end - start, max(cards, default=0) + 2), (), True))
    top = 0
    for row in rows:
        for index in row:
            box = dataclasses.replace(places[index].box, y=top)
            inner = card_spans(len(heights[index]), box.width - 2 * BOX_SIDE)
            placed = tuple(
                Place(box.x + BOX_SIDE + x, top + 1, w, h) for (x, w), h in zip(inner, heights[index])
            )
            places[index] = BoxPlace(box, placed, True)
        top += max(places[index].box.height for index in row)
    return places


def place_lines(counts: Sequence[int], width: int) -> List[BoxPlace]:
    """The one-line form ``width`` cells wide: each NPU's chips one line each, one under the other
    (a two-chip NPU's lines keep the card's one-cell right margin)."""
    places, top = [], 0
    for count in counts:
        room = width - (CARD_MARGIN if count > 1 else 0)
        cards = tuple(Place(0, top + i, room, 1) for i in range(count))
        places.append(BoxPlace(Place(0, top, width, count), cards, False))
        top += count
    return places


def neighbour(regions: Sequence[Place], index: int, direction: str) -> Optional[int]:
    """The card an arrow key moves to from ``regions[index]``, or None at an edge.

    Left and right: the previous and next card in reading order.  Up and down: the nearest
    row above or below, and in it the card whose middle is closest to this one's (in the
    one-line form each chip is its own row, so they move one chip).
    """
    if direction in ("left", "right"):
        target = index + (1 if direction == "right" else -1)
        return target if 0 <= target < len(regions) else None
    here = regions[index]
    if direction == "up":
        row = max((r.y for r in regions if r.y < here.y), default=None)
    else:
        row = min((r.y for r in regions if r.y > here.y), default=None)
    if row is None:
        return None
    middle = here.x * 2 + here.width
    in_row = [i for i, r in enumerate(regions) if r.y == row]
    return min(in_row, key=lambda i: (abs(regions[i].x * 2 + regions[i].width - middle), i))
