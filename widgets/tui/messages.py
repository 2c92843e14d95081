"""Provides the dashboard's messages: a sample is ready, the sampler failed, a chip was chosen."""

from __future__ import annotations

from typing import Tuple

from textual.message import Message

from npuwatch.model import Snapshot


class SnapshotReady(Message):
    """A sample finished; the UI renders it."""

    def __init__(self, snapshot: Snapshot, took_s: float) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.took_s = took_s

    def can_replace(self, message: Message) -> bool:
        # A UI that falls behind renders only the newest snapshot.
        return isinstance(message, SnapshotReady)


class SamplerFailed(Message):
    """The sampler itself raised (a bug, not an environment problem: those are in the snapshot)."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class ChipSelected(Message):
    """The user asked for a chip's detail screen (Enter on a card or a line, or a click)."""

    def __init__(self, key: Tuple[int, int]) -> None:
        super().__init__()
        self.key = key
