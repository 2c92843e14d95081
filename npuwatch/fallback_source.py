"""Provides FallbackSource: the ``auto`` backend — DCMI first, npu-smi when DCMI keeps failing.

The policy (issue 16, DESIGN §2.1 ``--backend``):

- ``auto`` reads through the primary source (DCMI, in-process) while it works.  A tick it fails
  is read through the fallback (npu-smi) at once, so the view never has a hole; after
  ``SWITCH_AFTER_FAILURES`` failed ticks in a row the fallback becomes the source, and the
  primary is tried again at most once every ``RETRY_PRIMARY_S``.  A good primary read switches
  back.  Each reading says why it came from the fallback (``SourceReading.note``: the
  snapshot's ``backend_note``).
- An explicit choice never switches (``switching=False``): a failed DCMI tick is a failed tick.
- On-demand details (the detail screen's ``npu-smi info -t …`` blocks) always come from the
  source that provides them: DCMI has no equivalent.

Nothing here names a backend's internals: both sides are ``ChipSource``s.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional

from npuwatch.chip_source import ChipSource, SourceReading, close_source

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails

#: Failed primary ticks in a row before the fallback becomes the source.
SWITCH_AFTER_FAILURES = 3
#: How often, at most, a fallen-back source tries the primary again.
RETRY_PRIMARY_S = 60.0


class FallbackSource:
    """A ``ChipSource`` that reads ``primary`` and falls back to ``fallback`` by the policy above.

    ``probe_name`` and ``label`` are those of the source that produced the last reading, so the
    snapshot names the backend that read it.  ``details`` answers ``chip_details`` (default: the
    fallback); ``close()`` closes both sides that can be closed.
    """

    provides_processes = True

    def __init__(
        self,
        primary: ChipSource,
        fallback: Optional[ChipSource],
        *,
        switching: bool = True,
        details: Optional[ChipSource] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.switching = switching and fallback is not None
        self.details = details if details is not None else fallback
        self._clock = clock
        self._active: ChipSource = primary  # the source the policy reads next
        self._produced: ChipSource = primary  # the source that read the last reading
        self._failures = 0
        self._tried_at: Optional[float] = None
        self._note: Optional[str] = None

    @property
    def probe_name(self) -> str:
        return self._produced.probe_name

    @property
    def label(self) -> str:
        return self._produced.label

    @property
    def provides_details(self) -> bool:
        return self.details is not None and self.details.provides_details

    @property
    def provides_logic_ids(self) -> bool:
        return self._produced.provides_logic_ids

    @property
    def on_fallback(self) -> bool:
        """True while the fallback is the source (after ``SWITCH_AFTER_FAILURES`` failed ticks)."""
        return self._active is not self.primary

    def read(self) -> SourceReading:
        if self._active is self.primary:
            return self._read_primary()
        now = self._clock()
        if self._tried_at is None or now - self._tried_at >= RETRY_PRIMARY_S:
            self._tried_at = now
            outcome = self.primary.read()
            if outcome.failure is None:
                self._back_to_primary()
                return outcome
            self._note = self._why(outcome, SWITCH_AFTER_FAILURES)
        return self._from_fallback()

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        if self.details is None or not self.details.provides_details:
            return None
        return self.details.chip_details(npu_id, chip_id)

    def close(self) -> None:
        """Close both sources (the DCMI worker process); safe to call twice."""
        sides = {id(side): side for side in (self.primary, self.fallback, self.details) if side is not None}
        for source in sides.values():
            close_source(source)

    def _read_primary(self) -> SourceReading:
        self._produced = self.primary
        outcome = self.primary.read()
        if outcome.failure is None:
            self._failures = 0
            return outcome
        self._failures += 1
        fallback = self.fallback
        if not self.switching or fallback is None:
            return outcome
        self._note = self._why(outcome, self._failures)
        if self._failures >= SWITCH_AFTER_FAILURES:
            self._active = fallback
            self._tried_at = self._clock()
        return self._from_fallback()

    def _from_fallback(self) -> SourceReading:
        assert self.fallback is not None
        self._produced = self.fallback
        outcome = self.fallback.read()
        return replace(outcome, note=self._note)

    def _back_to_primary(self) -> None:
        self._active = self._produced = self.primary
        self._failures = 0
        self._note = None

    def _why(self, outcome: SourceReading, failures: int) -> str:
        """``dcmi failed 3 ticks in a row (…): reading through npu-smi; dcmi is tried again at most
        once a minute`` — or, before the switch, ``… : this tick read through npu-smi``."""
        failure = outcome.failure
        said = failure.message if failure is not None else "no reading"
        name = self.primary.probe_name
        other = self.fallback.probe_name if self.fallback is not None else "the fallback"
        if failures < SWITCH_AFTER_FAILURES:
            return f"{name} failed ({said}): this tick read through {other}"
        return (
            f"{name} failed {failures} ticks in a row ({said}): reading through {other}; "
            f"{name} is tried again at most once a minute"
        )
