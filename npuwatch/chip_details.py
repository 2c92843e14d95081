"""Provides ChipDetails: one chip's on-demand details as plain key/value sections, whichever source asked.

A chip source that ``provides_details`` (``npuwatch.chip_source``) answers ``chip_details()``
with these records; the detail screen shows them without knowing which tool printed them.
Kept apart from the seam's per-tick records so ``npuwatch check``, which never asks for
details, does not pay for them.  Model layer: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional, Tuple

Fields = Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class DetailSection:
    """One on-demand query about one chip: what was asked, every key and value it gave, or why not."""

    command: str  # what was asked, for display: ``npu-smi info -t board -i 0 -c 0``
    fields: Fields = ()  # as the source printed them, in its order
    failure: Optional[str] = None  # why it gave nothing: the source's explained message
    duration_s: Optional[float] = None  # None when it was not asked


@dataclass(frozen=True)
class ChipDetails:
    """Everything a source's on-demand queries say about one chip, fetched at ``taken_at``."""

    npu_id: int
    chip_id: int
    taken_at: datetime
    sections: Tuple[DetailSection, ...] = ()

    @property
    def duration_s(self) -> float:
        """How long all the queries took together."""
        return sum(section.duration_s or 0.0 for section in self.sections)
