"""Provides the live view's chip layouts: cards, or a compact table for many chips."""

from __future__ import annotations

#: Above this many chips the live view is a compact table by default: 16 cards (A3) are 2,000 px.
COMPACT_ABOVE_CHIPS = 8
#: How the live view lays out its chips: ``auto`` picks ``table`` above COMPACT_ABOVE_CHIPS.
LAYOUTS = ("auto", "cards", "table")


def resolve_layout(choice: str, chips: int) -> str:
    """``cards`` or ``table`` for a layout ``choice`` and a number of chips."""
    if choice not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {choice!r}")
    if choice != "auto":
        return choice
    return "table" if chips > COMPACT_ABOVE_CHIPS else "cards"
