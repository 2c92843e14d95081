"""Provides SnapshotFeed: what every view needs from a sampler, live or replayed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol, runtime_checkable

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails
    from npuwatch.history import History
    from npuwatch.model import Snapshot


class SnapshotFeed(Protocol):
    """A source of Snapshots: ``npuwatch.sampler.Sampler`` or ``npuwatch.replay.ReplaySampler``.

    ``npuwatch.feeds.open_feed(options)`` returns one; views, the exporter and the recorder use only this.
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


@runtime_checkable
class ReplayControls(Protocol):
    """What a replayed feed adds for the dashboard's transport keys (``npuwatch.replay.ReplaySampler``).

    A view asks ``isinstance(feed, ReplayControls)`` instead of importing the replay module.
    """

    @property
    def duration_s(self) -> float: ...

    @property
    def position_s(self) -> float: ...

    @property
    def speed(self) -> float: ...

    @property
    def paused(self) -> bool: ...

    @property
    def finished(self) -> bool:
        """True once the position reached the recording's last snapshot (``record`` then ends)."""
        ...

    def sample(self) -> Snapshot: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def seek(self, delta_s: float) -> None: ...

    def faster(self) -> None: ...

    def slower(self) -> None: ...
