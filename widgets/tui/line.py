"""Provides Line: a fixed-height text widget that repaints only when its text changes."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class Line(Widget):
    """Like ``Static``, but ``set()`` never asks for a relayout (the height is fixed in CSS).

    ``Static.update`` re-lays-out the whole screen each call; the header and alerts change
    every tick, and that relayout was most of the dashboard's CPU.
    """

    def __init__(self, id: str) -> None:
        super().__init__(id=id)
        self.text = Text()

    def set(self, text: Text) -> None:
        """Show ``text``; a no-op when it is what is already shown."""
        if text != self.text:
            self.text = text
            self.refresh()

    def render(self) -> Text:
        return self.text
