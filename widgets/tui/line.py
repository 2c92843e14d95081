"""Provides TextLines and Line: widgets drawn from Rich Text through textual's line API.

The dashboard repaints every card, the header, the alerts and the host panel each second.
Textual's generic renderable path (``Static.update``) re-lays-out the screen and converts the
renderable again for every repaint; these widgets build their strips once per change instead,
which took the dashboard from about 10 % to under 3 % of a core (benchmarks/dashboard.py).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
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
        self._drawn_for: Optional[Tuple[int, bool, Style]] = None  # (width, compact, style) drawn for

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
            self._draw(texts, key[0], key[2])
            self.refresh()
            return
        console = self.app.console
        base = key[2]
        changed = []
        for y, (was, now) in enumerate(zip(self._texts, texts)):
            # Text equality ignores the base style (the alerts line turns red with the same
            # words), so compare it too; both are cheaper than rendering to compare strips.
            if was == now and was.style == now.style:
                continue
            self._texts[y] = now
            strip = text_strip(now, console, key[0], base)
            if strip != self._strips[y]:
                self._strips[y] = strip
                changed.append(Region(0, y, key[0], 1))
        if changed:
            self.refresh(*changed)

    def _key(self) -> Tuple[int, bool, Style]:
        # The widget's own style (theme, focus) is drawn into the strips: a change redraws them.
        return (self.size.width, self.has_class("compact"), self.visual_style.rich_style)

    def _draw(self, texts: List[Text], width: int, base: Style) -> None:
        console = self.app.console
        self._texts = texts
        self._strips = [text_strip(text, console, width, base) for text in texts]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = self._key()
        if self._drawn_for != key:
            self._draw(self.lines(), width, key[2])
            self._drawn_for = key
        return self._strips[y] if y < len(self._strips) else Strip.blank(width, key[2])


def text_strip(text: Text, console: Console, width: int, base: Style) -> Strip:
    """``text`` as one screen line ``width`` cells wide, every segment styled over ``base``.

    ``base`` is the widget's own style, as textual's line-API widgets apply it.  Every segment
    must carry a Style: under NO_COLOR textual's monochrome filter reads each segment's colour
    and fails on the ``None`` that ``Text.render`` and the padding helpers leave.  And
    ``Text.render`` drops a Text's own style when it has no spans (``Text("…", style="red")``),
    which a Console would apply, so it is applied here.
    """
    if text.spans or not text.style:
        segments = list(text.render(console))
    else:
        segments = [Segment(text.plain, console.get_style(text.style, default=Style.null()))]
    styled = [Segment(cells, base + style) for cells, style, _ in segments if cells]
    return Strip(styled).adjust_cell_length(width, base)


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
