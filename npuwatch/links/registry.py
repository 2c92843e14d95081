"""Provides LinkEnrichers: the registry's per-chip link enrichers, each refreshed on its cadence."""

from __future__ import annotations

import functools
import time
from typing import Callable, List, Optional, Sequence, Tuple

from npuwatch.links.enricher import EnrichInputs, LinkEnricher
from npuwatch.links.pcie import PcieEnricher
from npuwatch.model import ChipSample

#: The link enrichers, in the order their links are listed: a new kind is one line here.
ENRICHERS: Tuple[Callable[[], LinkEnricher], ...] = (PcieEnricher,)

#: Runs one enricher's refresh; a crash becomes the probe report of its kind (``Sampler._guard``).
Guard = Callable[[str, Callable[[], None]], None]


class LinkEnrichers:
    """One sampler's enrichers: refreshes each when its cadence is due, and enriches every chip."""

    def __init__(
        self,
        factories: Sequence[Callable[[], LinkEnricher]] = ENRICHERS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._enrichers: List[LinkEnricher] = [factory() for factory in factories]
        self._refreshed: List[Optional[float]] = [None] * len(self._enrichers)
        self._monotonic = monotonic

    @property
    def kinds(self) -> Tuple[str, ...]:
        """The kinds of link the enrichers add, in order."""
        return tuple(enricher.kind for enricher in self._enrichers)

    def refresh(self, inputs: EnrichInputs, guard: Guard) -> None:
        """Refresh every enricher whose cadence is due (each one's failure its own)."""
        now_s = self._monotonic()
        for index, enricher in enumerate(self._enrichers):
            last = self._refreshed[index]
            if last is None or now_s - last >= enricher.refresh_s:
                self._refreshed[index] = now_s
                guard(f"link-{enricher.kind}", functools.partial(enricher.refresh, inputs))

    def enrich(self, chip: ChipSample) -> ChipSample:
        """``chip`` with every link the enrichers know of it."""
        for enricher in self._enrichers:
            chip = enricher.enrich(chip)
        return chip
