"""Provides ChipList: every chip on one line, drawing only the rows on screen (huge tables).

Up to ``HUGE_CHIPS`` chips the dashboard mounts a card widget per chip.  A table of thousands
(a broken or hostile npu-smi) would mount thousands of widgets and freeze the first paint for
tens of seconds; this one widget scrolls a virtual list instead: its work per frame is the
visible rows, whatever the count.  A cursor row (arrows, Page Up/Down, Home/End) and Enter open
a chip's detail screen as a card does.
"""

from __future__ import annotations

from typing import Mapping, Sequence, Tuple

from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from npuwatch.history import History
from npuwatch.judge import Judgement
from npuwatch.judge.limits import PowerRating
from npuwatch.model import ChipSample
from npuwatch.widgets.tui.chips import compact_line
from npuwatch.widgets.tui.line import text_strip
from npuwatch.widgets.tui.messages import ChipSelected
from npuwatch.widgets.view_model import ChipRow, chip_row

#: Above this many chips the dashboard shows the ChipList instead of a card widget per chip.
HUGE_CHIPS = 256
#: No chip's rating given: each chip's own (``chip_row``'s default).
_NO_RATINGS: Mapping[Tuple[int, int], PowerRating] = {}


class ChipList(ScrollView, can_focus=True):
    """Every chip as its one-line form; only the visible rows are ever rendered."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Previous chip", show=False),
        Binding("down", "cursor(1)", "Next chip", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor(-1000000000)", "First chip", show=False),
        Binding("end", "cursor(1000000000)", "Last chip", show=False),
        Binding("enter", "select", "Details", show=False),
    ]

    def __init__(self, history: History) -> None:
        super().__init__(id="chip-list")
        self.history = history
        self.chips: Sequence[ChipSample] = ()
        self.judgements: Mapping[Tuple[int, int], Judgement] = {}
        self.ratings: Mapping[Tuple[int, int], PowerRating] = {}
        self.cursor = 0

    def show(
        self,
        chips: Sequence[ChipSample],
        judgements: Mapping[Tuple[int, int], Judgement],
        ratings: Mapping[Tuple[int, int], PowerRating] = _NO_RATINGS,
    ) -> None:
        """Show a newer sample (any number of chips) with the judge's verdicts on its chips
        (``judge_snapshot``: each chip with the processes listed on it); the cursor stays on its row."""
        self.chips = chips
        self.judgements = judgements
        self.ratings = ratings
        self.cursor = min(self.cursor, max(0, len(chips) - 1))
        self.virtual_size = Size(0, len(chips))  # lines fit the width: no sideways scrollbar
        self.refresh()

    def render_line(self, y: int) -> Strip:
        index = self.scroll_offset.y + y
        width = self.scrollable_content_region.width  # beside the scrollbar: nothing hides under it
        base = self.rich_style
        if not 0 <= index < len(self.chips):
            return Strip.blank(width, base)
        text = compact_line(self.chips[index], self.history, max(20, width), False, self.row(index))
        if index == self.cursor and self.has_focus:
            base = base + Style(reverse=True)
        return text_strip(text, self.app.console, width, base)

    def row(self, index: int) -> ChipRow:
        """Chip ``index`` as the view model shows it, with the judge's verdict on it."""
        chip = self.chips[index]
        key = chip.identity.key
        return chip_row(chip, judgement=self.judgements.get(key), details=False, power=self.ratings.get(key))

    def action_cursor(self, step: int) -> None:
        self._move_to(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor + direction * max(1, self.size.height - 1))

    def action_select(self) -> None:
        if self.chips:
            self.post_message(ChipSelected(self.chips[self.cursor].identity.key))

    def _move_to(self, index: int) -> None:
        self.cursor = max(0, min(index, len(self.chips) - 1))
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + self.size.height:
            self.scroll_to(y=self.cursor - self.size.height + 1, animate=False)
        self.refresh()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
