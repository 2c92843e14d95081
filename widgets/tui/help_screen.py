"""Provides HelpScreen: the keys, in a modal box."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("q", "quit"),
    ("?", "this help"),
    ("p", "pause / resume sampling"),
    ("+ / -", "sample more / less often"),
    ("s", "sort processes (NPU, NPU memory, %CPU, PID, user)"),
    ("/", "filter processes (Enter keeps it, Esc clears it)"),
    ("Tab / arrows", "move between chips"),
    ("Enter / click", "chip detail: everything npu-smi reports, PCIe, large graphs"),
    ("Esc", "back"),
    ("t", "dark / light theme"),
    ("[ / ]", "replay: back / forward 10 s"),
    ("< / >", "replay: slower / faster"),
)


class HelpScreen(ModalScreen[None]):
    """Lists every key; any of Esc, q or ? closes it."""

    BINDINGS = [("escape", "dismiss", "Back"), ("q", "dismiss", "Back"), ("question_mark", "dismiss", "Back")]

    def compose(self) -> ComposeResult:
        lines = "\n".join(f"[b]{key:>14}[/b]  {what}" for key, what in KEYS)
        with Vertical(id="help-box"):
            yield Static("[b]npuwatch keys[/b]\n", id="help-title")
            yield Static(lines)
            yield Static(
                "\n[dim]Metrics the driver does not report read n/a; the detail screen says why.[/dim]"
            )
