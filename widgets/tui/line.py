"""Provides TextLines and Line: widgets drawn from Rich Text through textual's line API.

The dashboard repaints every card, the header, the alerts and the host panel each second.
Textual's generic renderable path (``Static.update``) re-lays-out the screen and converts the
renderable again for every repaint; these widgets build their strips once per change instead,
which took the dashboard from about 10 % to under 3 % of a core (benchmarks/dashboard.py).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.filter import LineFilter
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    """A widget whose content is ``lines()``; call ``redraw()`` when they change."""

    def __init__(self, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._texts: List[Text] = []  # what the strips show, to skip rendering unchanged lines
        self._strips: List[Strip] = []
        self._drawn_for: Optional[Tuple[int, Style]] = None  # (width, style) drawn for

    def lines(self) -> List[Text]:
        """The content, one Text per screen line."""
        raise NotImplementedError

    def redraw(self) -> None:
        """Repaint the lines that changed (the content changed).

        The lines are rebuilt now and compared with those on screen, so only changed lines are
        marked dirty: a line that reads the same from one second to the next is not repainted.
        """
        key = self._key()
        if self._drawn_for != key or not key[0]:  # never drawn, resized or restyled: all of it
            self._drawn_for = None
            self.refresh()
            return
        texts = self.lines()
        if len(texts) != len(self._texts):
            self._draw(texts, key[0], key[1])
            self.refresh()
            return
        console = self.app.console
        base = key[1]
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

    def _key(self) -> Tuple[int, Style]:
        # The widget's own style (theme, focus) is drawn into the strips: a change redraws them.
        return (self.size.width, self.visual_style.rich_style)

    def _draw(self, texts: List[Text], width: int, base: Style) -> None:
        console = self.app.console
        self._texts = texts
        self._strips = [text_strip(text, console, width, base) for text in texts]

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = self._key()
        if self._drawn_for != key:
            self._draw(self.lines(), width, key[1])
            self._drawn_for = key
        return self._strips[y] if y < len(self._strips) else Strip.blank(width, key[1])

    def render_lines(self, crop: Region) -> List[Strip]:
        """The strips as drawn, for a widget with no box around its lines.

        Textual's styles cache would copy every line it repaints to add padding, borders and
        opacity these widgets do not have, and so filter (ANSI → true colour) each copy afresh;
        the strips here are already the whole line in the widget's style, and each keeps its
        filtered form until its line changes.  A widget with a box, or lines it has not drawn,
        takes textual's path.
        """
        width = self.size.width
        if not self._bare() or crop.bottom > len(self._strips) or self._drawn_for != self._key():
            return super().render_lines(crop)
        _, background = self.background_colors
        filters = self.get_line_filters()
        strips = []
        for y in crop.line_range:
            strip = self._strips[y]
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _bare(self) -> bool:
        """Whether textual would draw the lines as they are: no padding, border, outline, hatch,
        tint or opacity."""
        styles = self.styles
        return (
            not any(styles.gutter)
            and not any(edge for edge, _ in styles.outline)
            and not styles.tint.a
            and styles.text_opacity == 1.0
            and self.opacity == 1.0
            and not (styles.has_rule("hatch") and styles.hatch != "none")
        )


#: A style's final form on screen (``FilteredStyles``), or None for the style as it is.
Finish = Optional[Callable[[Style], Style]]


class FilteredStyles:
    """Each style as the app's line filters (ANSI → true colour, NO_COLOR's monochrome …) turn it.

    Textual filters every line a widget renders, segment by segment; a widget that gives the
    compositor its lines already filtered (the chip area) looks each style up once here instead:
    the filters act on each segment's style alone, so a style's filtered form is the same in
    every line.
    """

    def __init__(self, filters: Sequence[LineFilter], background: Color) -> None:
        self._filters = tuple(filters)
        self._background = background
        self._styles: Dict[Style, Style] = {}

    def __call__(self, style: Style) -> Style:
        done = self._styles.get(style)
        if done is None:
            if len(self._styles) >= _CACHE_MAX:
                self._styles.clear()
            segments = [Segment(" ", style)]
            for line_filter in self._filters:
                segments = line_filter.apply(segments, self._background)
            done = self._styles[style] = segments[0].style or style
        return done


def text_strip(text: Text, console: Console, width: int, base: Style, finish: Finish = None) -> Strip:
    """``text`` as one screen line ``width`` cells wide, every segment styled over ``base``.

    ``base`` is the widget's own style, as textual's line-API widgets apply it.  Every segment
    must carry a Style: under NO_COLOR textual's monochrome filter reads each segment's colour
    and fails on the ``None`` that ``Text.render`` and the padding helpers leave.  And
    ``Text.render`` drops a Text's own style when it has no spans (``Text("…", style="red")``),
    which a Console would apply, so it is applied here.

    The segments are those ``Text.render`` cuts (one wherever a span starts or ends, styled by
    the Text's style and then every span over it, in order), but each combination of styles is
    looked up once for all lines and frames: Rich sorts span events and combines styles afresh
    for every segment of every line, which was a third of a frame's own CPU.
    ``finish`` turns each style into its final form (``FilteredStyles``).
    """
    plain = text.plain
    key = (console, base, finish, text.style, len(plain), tuple(text.spans))
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) >= _CACHE_MAX:  # a hostile stream of lines cannot grow it past this
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = _layout(text, console, base, finish)
    segments = [Segment(plain[left:right], style) for left, right, style in layout]
    return fitted_strip(segments, cell_len(plain), width, finish(base) if finish else base)


def fitted_strip(segments: List[Segment], length: int, width: int, base: Style) -> Strip:
    """``Strip(segments, length).adjust_cell_length(width, base)`` without the intermediate strip
    when the line fits (each Strip builds seven caches; the dashboard makes ~100 a second)."""
    if length > width:
        return Strip(segments, length).adjust_cell_length(width, base)
    if length < width:
        segments.append(Segment(" " * (width - length), base))
    return Strip(segments, width)


def fitted_segments(segments: List[Segment], length: int, width: int, base: Style) -> Tuple[Segment, ...]:
    """``fitted_strip``'s segments, without building a Strip when the line fits."""
    if length > width:
        return tuple(Strip(segments, length).adjust_cell_length(width, base))
    if length < width:
        segments.append(Segment(" " * (width - length), base))
    return tuple(segments)


#: (console, base, Text style, length, spans) → the line's cuts: a card's lines keep their spans
#: from one second to the next while their characters change.
_LAYOUTS: Dict[Tuple[object, ...], List[Tuple[int, int, Style]]] = {}


def _layout(text: Text, console: Console, base: Style, finish: Finish) -> List[Tuple[int, int, Style]]:
    """Where ``Text.render`` cuts ``text`` into segments, and each segment's style over ``base``."""
    end = len(text.plain)
    outer = text.style
    spans = [span for span in text.spans if span.start < min(span.end, end)]
    if not spans:
        return [(0, end, _combined(console, base, (outer,), finish))] if end else []
    cuts = sorted({0, end, *(span.start for span in spans), *(min(span.end, end) for span in spans)})
    return [
        (
            left,
            right,
            _combined(console, base, (outer, *(s.style for s in spans if s.start <= left < s.end)), finish),
        )
        for left, right in zip(cuts, cuts[1:])
    ]


_StyleKey = Tuple[Console, Style, Tuple[Union[str, Style], ...], Finish]
_COMBINED: Dict[_StyleKey, Style] = {}
#: The dashboard draws a few dozen style combinations and a few hundred layouts: no cache grows past this.
_CACHE_MAX = 4096


def combined_style(
    console: Console, base: Style, styles: Tuple[Union[str, Style], ...], finish: Finish = None
) -> Style:
    """``base`` + ``styles`` in order: the style ``text_strip`` gives a segment under those styles
    (a Text's own style, then each span over the segment), turned by ``finish`` when given."""
    return _combined(console, base, styles, finish)


def _combined(
    console: Console, base: Style, styles: Tuple[Union[str, Style], ...], finish: Finish = None
) -> Style:
    """``base`` + ``styles`` in order, as ``Text.render`` combines them and ``text_strip`` adds the base."""
    key = (console, base, styles, finish)
    style = _COMBINED.get(key)
    if style is None:
        if len(_COMBINED) >= _CACHE_MAX:
            _COMBINED.clear()
        null = Style.null()
        style = base
        for name in styles:
            style += console.get_style(name, default=null)
        if finish is not None:
            style = finish(style)
        _COMBINED[key] = style
    return style


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
