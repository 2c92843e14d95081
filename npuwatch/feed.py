"""Provides SnapshotFeed: what every view needs from a sampler, live or replayed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from npuwatch.chip_source import ChipDetails
    from npuwatch.history import History
    from npuwatch.model import Snapshot


class SnapshotFeed(Protocol):
    """A source of Snapshots: ``npuwatch.sampler.Sampler`` or ``npuwatch.replay.ReplaySampler``.

    ``build_sampler(**options)`` returns one; views, the exporter and the recorder use only this.
    """

    interval_s: float
    history: History

    @property
    def label(self) -> str:
        """Where the data comes from: ``npu-smi``, ``demo:<scenario>``, ``replay:<file>``."""
        ...

    def sample(self) -> Snapshot:
        """The Snapshot for now (and add it to the History); thread-safe, never overlapping."""
        ...

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """One chip's on-demand npu-smi reports; ``None`` when the source has none."""
        ...

    def close(self) -> None:
        """Release what the feed owns (a demo's simulated machine)."""
        ...

    def __enter__(self) -> SnapshotFeed: ...

    def __exit__(self, *exc: object) -> None: ...
