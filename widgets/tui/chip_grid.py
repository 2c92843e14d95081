"""Provides ChipGrid: every chip of the dashboard, as cards in NPU boxes or one line each, drawn
as ONE line-API widget.

The chip area used to be a box widget per NPU holding a card widget per chip: 24 widgets that
textual's compositor cut, styled and joined every second (every card's sparklines scroll each
sample).  Here the boxes (rounded border, title, worst-health subtitle, padding) and the cards
are drawn into whole screen lines by this widget, with the places textual's grid gave them
(``chip_layout``) and the colours of the CSS (``npuwatch.tcss``: the ``chip-grid--*`` component
classes), so the screen looks as before; a card's strips are rebuilt only when its chip changed,
and only lines that changed are repainted.  The cursor is the focused card: Tab, Shift+Tab and
the arrows move it, Enter or a click opens its chip's detail screen.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from npuwatch.history import History
from npuwatch.judge import Judgement
from npuwatch.judge.limits import PowerRating
from npuwatch.model import ChipSample
from npuwatch.text_safety import inert
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.card_paint import Card, Line, Slot, TemplateLine, fill_line
from npuwatch.widgets.tui.chip_layout import (
    GROUP_FRAME_ROWS,
    BoxPlace,
    GroupShape,
    neighbour,
    place_grid,
    place_lines,
)
from npuwatch.widgets.tui.chip_palette import Palette
from npuwatch.widgets.tui.line import text_strip
from npuwatch.widgets.tui.messages import ChipSelected
from npuwatch.widgets.view_model import chip_row, worst_health

ChipKey = Tuple[int, int]
EMPTY = "No NPU chips could be read: see the alerts line."
EMPTY_LINES = ("", f" {EMPTY}", "")
#: No chip's rating given: each chip's own (``chip_row``'s default).
_NO_RATINGS: Mapping[Tuple[int, int], PowerRating] = {}


class ChipGrid(ScrollView, can_focus=True):
    """The chips: a card per chip in a box per NPU (wide), or a line per chip (compact)."""

    COMPONENT_CLASSES = {
        "chip-grid--box",
        "chip-grid--stale",
        "chip-grid--warning",
        "chip-grid--critical",
        "chip-grid--unknown",
        "chip-grid--focus",
        "chip-grid--empty",
    }
    BINDINGS = [
        Binding("left", "move('left')", "Previous chip", show=False),
        Binding("right", "move('right')", "Next chip", show=False),
        Binding("up", "move('up')", "Chip above", show=False),
        Binding("down", "move('down')", "Chip below", show=False),
        Binding("tab", "step(1)", "Next chip", show=False),
        Binding("shift+tab", "step(-1)", "Previous chip", show=False),
        Binding("enter", "select", "Details", show=False),
    ]

    def __init__(self, history: History, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.history = history
        self.cards: List[Card] = []
        self.groups: List[List[int]] = []  # the cards of each NPU, by index into ``cards``
        self.compact = True
        self.columns = 1
        self.cursor = 0
        self.boxes: List[BoxPlace] = []
        self._lines: List[Strip] = []  # the whole area, a strip per line, as drawn
        self._parts: List[List[Line]] = []  # what each line was drawn from
        self._template: List[TemplateLine] = []
        self._template_key: object = None
        self._layout_id = 0  # counts the placings of boxes and cards
        self._labels: Dict[Tuple[object, ...], Tuple[str, str]] = {}
        self._drawn_for: Optional[Tuple[object, ...]] = None
        self._palette: Optional[Palette] = None
        self._palette_for: Optional[Tuple[object, ...]] = None
        self._frames: Dict[Tuple[object, ...], Tuple[Line, Line]] = {}

    # --- what it shows ---------------------------------------------------------------------

    def set_chips(self, groups: Sequence[Sequence[ChipSample]]) -> None:
        """Show these chips (grouped per NPU, in order): a new set of chips; the cursor goes to the
        first card."""
        self.cards, self.groups = [], []
        for group in groups:
            first = len(self.cards)
            self.cards += [Card(chip, len(group) > 1) for chip in group]
            self.groups.append(list(range(first, len(self.cards))))
        self.cursor = 0
        self._relayout()

    def show(
        self,
        groups: Sequence[Sequence[ChipSample]],
        judgements: Mapping[ChipKey, Judgement],
        ratings: Mapping[ChipKey, PowerRating] = _NO_RATINGS,
    ) -> bool:
        """Newer samples of the same chips, with the judge's verdicts on them (``judge_snapshot``)
        and the ratings their power readings compare with (``power_ratings``); whether a card's
        height changed (a problem line came or went: the layout may change)."""
        chips = [chip for group in groups for chip in group]
        before = [card.height() for card in self.cards]
        for card, chip in zip(self.cards, chips):
            card.chip = chip
            key = chip.identity.key
            card.row = chip_row(chip, judgement=judgements.get(key), details=False, power=ratings.get(key))
            card.generation += 1
        grown = [card.height() for card in self.cards] != before
        if grown and not self.compact:  # the boxes move
            self._relayout()
        else:
            self._redraw()
        return grown

    def set_layout(self, compact: bool, columns: int) -> None:
        """Cards in ``columns`` grid columns, or one line per chip (``compact``)."""
        if (compact, columns) != (self.compact, self.columns):
            self.compact, self.columns = compact, columns
            self._relayout()

    def shapes(self) -> List[GroupShape]:
        """Each NPU box's shape in card form (for the layout's choice)."""
        return [
            GroupShape(len(group), max(self.cards[i].height() for i in group) + GROUP_FRAME_ROWS)
            for group in self.groups
        ]

    @property
    def cursor_card(self) -> Optional[Card]:
        """The card the cursor is on (the focused card while the grid has the focus)."""
        return self.cards[self.cursor] if self.cards else None

    def card_texts(self, card: Card) -> List[str]:
        """What ``card`` shows, line by line, as the grid paints it (its kept lines when they are
        current): read by tests, so they see the painter's output, caches included."""
        focused = self.has_focus and self.cards.index(card) == self.cursor
        lines = self._card_lines(card, focused, self._get_palette())
        return ["".join(segment.text for segment in line) for line in lines]

    def focus_card(self, index: int) -> None:
        """Put the cursor on card ``index`` and scroll it into view."""
        if not self.cards:
            return
        was, self.cursor = self.cursor, max(0, min(index, len(self.cards) - 1))
        if was != self.cursor:
            self._redraw()
        place = self.cards[self.cursor].place
        self.scroll_to_region(
            Region(place.x, place.y, place.width, place.height), animate=False, immediate=True
        )

    # --- keys and the mouse ------------------------------------------------------------------

    def action_move(self, direction: str) -> None:
        if not self.cards:
            return
        target = neighbour([card.place for card in self.cards], self.cursor, direction)
        if target is not None:
            self.focus_card(target)

    def action_step(self, step: int) -> None:
        """Tab and Shift+Tab: the next or previous card, then on past the last (or first) one."""
        target = self.cursor + step
        if 0 <= target < len(self.cards):
            self.focus_card(target)
        elif step > 0:
            self.screen.focus_next()
        else:
            self.screen.focus_previous()

    def action_select(self) -> None:
        card = self.cursor_card
        if card is not None:
            self.post_message(ChipSelected(card.key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        x, y = offset.x + int(self.scroll_x), offset.y + int(self.scroll_y)
        for index, card in enumerate(self.cards):
            place = card.place
            if place.x <= x < place.x + place.width and place.y <= y < place.y + place.height:
                self.focus_card(index)
                self.post_message(ChipSelected(card.key))
                return

    def on_focus(self) -> None:
        self._redraw()

    def on_blur(self) -> None:
        self._redraw()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._palette_for = None

    # --- layout and drawing -------------------------------------------------------------------

    def _width(self) -> int:
        return self.scrollable_content_region.width

    def _relayout(self) -> None:
        """Place the boxes and cards again (the chips, the layout or a card's height changed)."""
        width = self._width()
        self._place(width)
        # No chips: the line saying so, with a blank line each side.
        height = _bottom(self.boxes) if self.cards else len(EMPTY_LINES)
        self._drawn_for = None
        if self.virtual_size != Size(width, height):
            self.virtual_size = Size(width, height)
            self.refresh(layout=True)
        self.refresh()

    def _place(self, width: int) -> None:
        if self.compact:
            self.boxes = place_lines([len(group) for group in self.groups], width)
        else:
            heights = [[self.cards[i].height() for i in group] for group in self.groups]
            self.boxes = place_grid(heights, width, self.columns)
        for box, group in zip(self.boxes, self.groups):
            for place, index in zip(box.cards, group):
                self.cards[index].place = place
        self._parts = []
        self._layout_id += 1

    def _frame_key(self) -> Tuple[object, ...]:
        return (self._width(), self.compact, self.columns, self._palette_key(), self.has_focus)

    def _redraw(self) -> None:
        """Draw the lines again and repaint those that changed."""
        if self._drawn_for != self._frame_key():
            self._drawn_for = None
            self.refresh()
            return
        changed = self._draw()
        top, height, width = int(self.scroll_y), self.size.height, self._width()
        regions = [Region(0, y - top, width, 1) for y in changed if top <= y < top + height]
        if regions:
            self.refresh(*regions)

    def _draw(self) -> List[int]:
        """Draw every line of the area from the cards' lines and the boxes' frames; the lines that
        changed.  A line is made of parts (a card's line, a border, a blank run) that are the same
        objects while they show the same: a line whose parts are all as before is kept as it is."""
        width = self._width()
        palette = self._get_palette()
        if width != self.virtual_size.width:
            self._place(width)
            self.virtual_size = Size(width, self.virtual_size.height)
        if width <= 0:
            self._lines, self._parts = [], []
            return []
        if not self.cards:
            self._lines, self._parts = self._empty_lines(width, palette), []
            return list(range(len(self._lines)))
        focused = self.cursor if self.has_focus else -1
        cards = [self._card_lines(card, index == focused, palette) for index, card in enumerate(self.cards)]
        template, rebuilt = self._get_template(width, palette)
        before, lines = self._parts, self._lines
        if rebuilt or len(before) != len(template) or len(lines) != len(template):
            rows = [fill_line(statics, slots, cards) for statics, slots in template]
            self._parts = rows
            self._lines = [Strip([segment for part in parts for segment in part], width) for parts in rows]
            return list(range(len(rows)))
        changed = []
        for y, (statics, slots) in enumerate(template):
            was = before[y]
            if not slots:
                if was is not statics:
                    before[y] = statics
                    lines[y] = Strip([segment for part in statics for segment in part], width)
                    changed.append(y)
                continue
            now = fill_line(statics, slots, cards)
            if any(now[position] is not was[position] for position, _, _, _ in slots) or len(now) != len(was):
                before[y] = now
                lines[y] = Strip([segment for part in now for segment in part], width)
                changed.append(y)
        return changed

    def _get_template(self, width: int, palette: Palette) -> Tuple[List[TemplateLine], bool]:
        """What each line is made of: fixed parts (frames, borders, blank runs) and the slots its
        cards' lines fill; built again only when the boxes, their frames or the colours change
        (then True: every line is drawn again)."""
        frames = [
            self._box_frames(index, box.box.width, palette) if box.framed else None
            for index, box in enumerate(self.boxes)
        ]
        stale = [self._stale(group) for group in self.groups]
        key = (width, palette, self._layout_id, frames, stale)
        rebuilt = key != self._template_key
        if rebuilt:
            height = _bottom(self.boxes)
            rows: List[List[Line]] = [[] for _ in range(height)]
            slots: List[List[Slot]] = [[] for _ in range(height)]
            ends = [0] * height
            for index, box in enumerate(self.boxes):
                self._template_box(box, index, frames[index], stale[index], palette, rows, slots, ends)
            for parts, end in zip(rows, ends):
                if end < width:
                    parts.append(palette.blank_run(width - end))
            self._template = list(zip(rows, slots))
            self._template_key = key
        return self._template, rebuilt

    def _template_box(
        self,
        box: BoxPlace,
        index: int,
        frames: Optional[Tuple[Line, Line]],
        stale: bool,
        palette: Palette,
        rows: List[List[Line]],
        slots: List[List[Slot]],
        ends: List[int],
    ) -> None:
        """Add ``box`` (its frame, and slots for its cards' lines) to the lines it covers."""
        outer = box.box
        first = outer.y
        for y in range(first, min(len(rows), first + outer.height)):
            parts = rows[y]
            if outer.x > ends[y]:
                parts.append(palette.blank_run(outer.x - ends[y]))
            if frames is not None and y == first:
                parts.append(frames[0])
            elif frames is not None and y == first + outer.height - 1:
                parts.append(frames[1])
            else:
                self._template_line(box, self.groups[index], palette, y, parts, slots[y], stale)
            ends[y] = outer.x + outer.width

    def _template_line(
        self,
        box: BoxPlace,
        group: List[int],
        palette: Palette,
        y: int,
        parts: List[Line],
        slots: List[Slot],
        stale: bool,
    ) -> None:
        """One line inside ``box``: its side borders and padding around slots for its cards' lines."""
        outer = box.box
        x = outer.x
        if box.framed:
            parts.append(palette.side(stale))
            x += 1
        for place, index in zip(box.cards, group):
            if not box.framed and not place.y <= y < place.y + place.height:
                continue  # the one-line form: the chips of an NPU are one under the other
            if place.x > x:
                parts.append(palette.blank_run(place.x - x))
            blank = palette.blank_run(place.width)  # under a card shorter than its neighbour
            slots.append((len(parts), index, y - place.y, blank))
            parts.append(blank)
            x = place.x + place.width
        right = outer.x + outer.width - (1 if box.framed else 0)
        if right > x:
            parts.append(palette.blank_run(right - x))
        if box.framed:
            parts.append(palette.side(stale))

    def _stale(self, group: List[int]) -> bool:
        return any(self.cards[i].row.stale for i in group)

    def labels(self, group: int) -> Tuple[str, str]:
        """NPU box ``group``'s title (its NPU and model, and how many chips when several) and
        subtitle (the worst health of its chips, for a box of several chips)."""
        chips = [self.cards[i].chip for i in self.groups[group]]
        first = chips[0].identity
        key = (first.npu_id, first.name, tuple(chip.health for chip in chips))
        found = self._labels.get(key)
        if found is None:
            if len(self._labels) > 256:
                self._labels.clear()
            count = f" · {len(chips)} chips" if len(chips) > 1 else ""
            title = f"NPU {first.npu_id} · {inert(first.name or 'unknown model')}{count}"
            subtitle = ""
            if len(chips) > 1:  # one card shows its own badge; a box of several sums up the worst
                subtitle = render.badge(worst_health([chip.health for chip in chips])).plain.strip()
            found = self._labels[key] = (title, subtitle)
        return found

    def _box_frames(self, group: int, width: int, palette: Palette) -> Tuple[Line, Line]:
        """The box's top border with its title and its bottom border with its subtitle, drawn
        once until they change."""
        title, subtitle = self.labels(group)
        stale = self._stale(self.groups[group])
        key = (title, subtitle, stale, width, palette)
        frames = self._frames.get(key)
        if frames is None:
            if len(self._frames) > 256:
                self._frames.clear()
            frames = (palette.edge(title, width, True, stale), palette.edge(subtitle, width, False, stale))
            self._frames[key] = frames
        return frames

    def _card_lines(self, card: Card, focused: bool, palette: Palette) -> List[Line]:
        """The card's lines ``card.place.width`` wide, in its level's or the focus's colours."""
        width = card.place.width
        base = palette.focus if focused else palette.looks.get(card.row.level, palette.plain)
        key = (card.generation, width, base, self.compact, palette.finish)
        if key == card.drawn_for:
            return card.lines_drawn
        console, finish, room = self.app.console, palette.finish, max(20, width)
        if self.compact:
            lines = [
                card.painter.compact(
                    card.chip, self.history, room, card.in_group, card.row, console, width, base, finish
                )
            ]
        else:
            lines = card.painter.card(
                card.chip, self.history, room, card.in_group, card.row, console, width, base, finish
            )
        card.lines_drawn, card.drawn_for = lines, key
        return lines

    def _empty_lines(self, width: int, palette: Palette) -> List[Strip]:
        blank = Strip(list(palette.blank_run(width)), width)
        text = Text(f" {EMPTY}", style=palette.empty)
        return [blank, text_strip(text, self.app.console, width, palette.inner_rich, palette.finish), blank]

    # --- colours --------------------------------------------------------------------------

    def _palette_key(self) -> Tuple[object, ...]:
        # The theme's colours, and the line filters (NO_COLOR, ANSI → true colour) the styles go through.
        return (self.app.theme, self.visual_style, tuple(self.get_line_filters()))

    def _get_palette(self) -> Palette:
        key = self._palette_key()
        if self._palette is None or self._palette_for != key:
            self._palette = Palette(self)
            self._palette_for = key
            self._frames.clear()
        return self._palette

    # --- textual's line API ------------------------------------------------------------------

    def render_lines(self, crop: Region) -> List[Strip]:
        """The lines as drawn.

        Their styles are already what the app's line filters make of them (``FilteredStyles``),
        so they go to the compositor as they are: textual's styles cache would copy every
        repainted line to add a padding and border this widget does not have, and filter each
        copy afresh, segment by segment.
        """
        if self._drawn_for != self._frame_key():
            self._draw()
            self._drawn_for = self._frame_key()
        width = self.size.width
        top = int(self.scroll_y)
        lines = self._lines
        palette = self._get_palette()
        strips = []
        for y in crop.line_range:
            index = top + y
            strip = lines[index] if 0 <= index < len(lines) else None
            if strip is None or strip.cell_length != width:
                blank = Strip(list(palette.blank_run(width)), width)
                strip = blank if strip is None else strip.adjust_cell_length(width, palette.blank)
            strips.append(strip)
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def render_line(self, y: int) -> Strip:
        return self.render_lines(Region(0, y, self.size.width, 1))[0]


def _bottom(boxes: Sequence[BoxPlace]) -> int:
    return max((box.box.y + box.box.height for box in boxes), default=0)
