"""Provides HelpScreen: the keys, in a modal box."""

from __future__ import annotations

from typing import Sequence, Tuple

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

#: Keys that are not the dashboard's own bindings (those come with their binding's tooltip).
OTHER_KEYS: Tuple[Tuple[str, str], ...] = (
    ("Tab / arrows", "move between chips (↑ ↓ the row above / below)"),
    ("Enter / click", "chip detail: everything npu-smi reports, PCIe, large graphs"),
    ("PgUp / PgDn", "scroll the detail screen (also ↑ ↓, Home, End)"),
    ("Esc", "back"),
)


class HelpScreen(ModalScreen[None]):
    """Lists every key; any of Esc, q or ? closes it."""

    BINDINGS = [("escape", "dismiss", "Back"), ("q", "dismiss", "Back"), ("question_mark", "dismiss", "Back")]

    def __init__(self, keys: Sequence[Tuple[str, str]]) -> None:
        super().__init__()
        self.keys = tuple(keys)

    def compose(self) -> ComposeResult:
        width = max(len(key) for key, _ in self.keys) if self.keys else 0
        lines = Text()
        for key, what in self.keys:
            if lines:
                lines.append("\n")
            lines.append(f"{key:>{width}}", style="bold")
            lines.append(f"  {what}")
        with Vertical(id="help-box"):
            yield Static(Text("npuwatch keys\n", style="bold"), id="help-title")
            yield Static(lines)
            yield Static(
                Text(
                    "\nMetrics the driver does not report read n/a; the detail screen says why.", style="dim"
                )
            )
