"""Provides TextLines and Line: widgets drawn from Rich Text through textual's line API.

The dashboard repaints every card, the header, the alerts and the host panel each second.
Textual's generic renderable path (``Static.update``) re-lays-out the screen and converts the
renderable again for every repaint; these widgets build their strips once per change instead,
which took the dashboard from about 10 % to under 3 % of a core (benchmarks/dashboard.py).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from rich.console import Console
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    """A widget whose content is ``lines()``; call ``redraw()`` when they change."""

    def __init__(self, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._texts: List[Text] = []  # what the strips show, to skip rendering unchanged lines
        self._strips: List[Strip] = []
        self._drawn_for: Optional[Tuple[int, bool]] = None  # (width, compact) the strips fit

    def lines(self) -> List[Text]:
        """The content, one Text per screen line."""
        raise NotImplementedError

    def redraw(self) -> None:
        """Repaint the lines that changed (the content changed).

        The lines are rebuilt now and compared with those on screen, so only changed lines are
        marked dirty: a card's title (and often its memory line) stays the same from one second to
        the next, and repainting every line of every widget was most of a frame's CPU.
        """
        key = self._key()
        if self._drawn_for != key or not key[0]:  # never drawn, resized or restyled: all of it
            self._drawn_for = None
            self.refresh()
            return
        texts = self.lines()
        if len(texts) != len(self._texts):
            self._draw(texts, key[0])
            self.refresh()
            return
        console = self.app.console
        changed = []
        for y, (was, now) in enumerate(zip(self._texts, texts)):
            # Text equality ignores the base style (the alerts line turns red with the same
            # words), so compare it too; both are cheaper than rendering to compare strips.
            if was == now and was.style == now.style:
                continue
            self._texts[y] = now
            strip = _strip(now, console, key[0])
            if strip != self._strips[y]:
                self._strips[y] = strip
                changed.append(Region(0, y, key[0], 1))
        if changed:
            self.refresh(*changed)

    def _key(self) -> Tuple[int, bool]:
        return (self.size.width, self.has_class("compact"))

    def _draw(self, texts: List[Text], width: int) -> None:
        console = self.app.console
        self._texts = texts
        self._strips = [_strip(text, console, width) for text in texts]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = self._key()
        if self._drawn_for != key:
            self._draw(self.lines(), width)
            self._drawn_for = key
        return self._strips[y] if y < len(self._strips) else Strip.blank(width)


def _strip(text: Text, console: Console, width: int) -> Strip:
    return Strip(list(text.render(console, end=""))).adjust_cell_length(width)


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
