"""Provides KeyBar: the key hints at the bottom of every npuwatch screen, drawn as one line.

Textual's ``Footer`` builds a widget per key (ten on the dashboard), each styled by the CSS
engine, and builds them again after the first frame: 20–35 ms of CPU before the dashboard's
first full screen (measured side by side in a terminal), a tenth of its Python calls.  The
key bar draws the same hints (the screen's shown bindings, one key per action, disabled ones
dim, the command palette's key on the right) as one line through ``TextLines``; a click on a key
presses it, hovering shows its tooltip, and the line is redrawn when the bindings change.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.screen import Screen

from npuwatch.widgets.tui.line import TextLines

#: Drawn between the keys and the command palette's key (textual's footer draws a ``vkey`` border).
PALETTE_EDGE = "▏"


class KeyHint(NamedTuple):
    """One key as the bar shows it: where it is on the line, and what pressing it does."""

    start: int  # first cell
    end: int  # one past the last cell
    key: str  # the key textual's binding names (what a click presses)
    enabled: bool
    tooltip: str


class KeyBar(TextLines):
    """The screen's key hints on one line; click a key to press it."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"key-bar--key", "key-bar--description", "key-bar--hover", "key-bar--edge"}
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        color: $footer-foreground;
        background: $footer-background;
        & > .key-bar--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .key-bar--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .key-bar--hover {
            background: $block-hover-background;
        }
        & > .key-bar--edge {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.hints: List[KeyHint] = []
        self._hover: Optional[str] = None  # the key of the hint under the mouse

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        if self.is_attached and screen is self.screen:
            self._hover = None  # the keys may have moved under the mouse: the next move says
            self.tooltip = None
            self.redraw()

    def lines(self) -> List[Text]:
        """The hints, laid out as textual's footer lays them out (`` q Quit  ? Help ``)."""
        key_style = self.get_component_rich_style("key-bar--key", partial=True)
        description_style = self.get_component_rich_style("key-bar--description", partial=True)
        hover_style = self.get_component_rich_style("key-bar--hover", partial=True)
        app = self.app
        text, hints, actions = Text(no_wrap=True, end=""), [], set()

        def add(key_text: str, description: str, binding: Binding, enabled: bool, tooltip: str) -> None:
            start, first = text.cell_len, len(text)  # cells for the mouse, characters for styles
            text.append(key_text, key_style)
            text.append(description, description_style)
            if not enabled:
                text.stylize("dim", first, len(text))
            elif binding.key == self._hover:
                text.stylize(hover_style, first, len(text))
            hints.append(KeyHint(start, text.cell_len, binding.key, enabled, tooltip))

        palette = None
        for key, (_, binding, enabled, tooltip) in self.screen.active_bindings.items():
            if key == app.COMMAND_PALETTE_BINDING and app.ENABLE_COMMAND_PALETTE:
                palette = (binding, enabled)
            elif binding.show and binding.action not in actions:  # one key per action
                actions.add(binding.action)
                add(f" {app.get_key_display(binding)} ", f"{binding.description} ", binding, enabled, tooltip)
        if palette is not None:  # on the right, as textual docks it; the keys give way to it
            binding, enabled = palette
            shown = app.get_key_display(binding)
            start = max(0, self.size.width - cell_len(f" {shown} {binding.description} "))
            if text.cell_len > start:
                text.truncate(start)
                hints = [hint._replace(end=min(hint.end, start)) for hint in hints if hint.start < start]
            text.append(" " * (start - text.cell_len))
            text.append(PALETTE_EDGE, self.get_component_rich_style("key-bar--edge", partial=True))
            # The edge takes the key's padding; the palette's key says what it does when hovered.
            add(shown, f" {binding.description} ", binding, enabled, binding.tooltip or binding.description)
            hints[-1] = hints[-1]._replace(start=start)
        self.hints = hints
        return [text]

    def hint_at(self, x: int) -> Optional[KeyHint]:
        """The hint drawn at cell ``x``, if any."""
        return next((hint for hint in self.hints if hint.start <= x < hint.end), None)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        hint = self.hint_at(event.x)
        if hint is None:
            return
        if hint.enabled:
            self.app.simulate_key(hint.key)
        else:
            self.app.bell()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self.hint_at(event.x))

    def on_leave(self, event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, hint: Optional[KeyHint]) -> None:
        key = None if hint is None else hint.key
        if key == self._hover:
            return
        self._hover = key
        self.tooltip = None if hint is None else hint.tooltip or None
        self.redraw()
