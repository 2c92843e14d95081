"""Provides TextLines and Line: widgets drawn from Rich Text through textual's line API.

The dashboard repaints every card, the header, the alerts and the host panel each second.
Textual's generic renderable path (``Static.update``) re-lays-out the screen and converts the
renderable again for every repaint; these widgets build their strips once per change instead,
which took the dashboard from about 10 % to under 3 % of a core (benchmarks/dashboard.py).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    """A widget whose content is ``lines()``; call ``redraw()`` when they change."""

    def __init__(self, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._strips: List[Strip] = []
        self._drawn_for: Optional[Tuple[int, bool]] = None  # (width, compact) the strips fit

    def lines(self) -> List[Text]:
        """The content, one Text per screen line."""
        raise NotImplementedError

    def redraw(self) -> None:
        """Rebuild the strips at the next paint (the content changed)."""
        self._drawn_for = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (width, self.has_class("compact"))
        if self._drawn_for != key:
            console = self.app.console
            self._strips = [
                Strip(list(line.render(console, end=""))).adjust_cell_length(width) for line in self.lines()
            ]
            self._drawn_for = key
        return self._strips[y] if y < len(self._strips) else Strip.blank(width)


class Line(TextLines):
    """Fixed-height text (the header, the alerts line); ``set()`` repaints only on a change."""

    def __init__(self, id: str) -> None:
        super().__init__(id=id)
        self.text = Text()

    def set(self, text: Text) -> None:
        """Show ``text``; a no-op when it is what is already shown."""
        if text != self.text:
            self.text = text
            self.redraw()

    def lines(self) -> List[Text]:
        return list(self.text.split("\n"))
