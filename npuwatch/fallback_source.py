"""Provides FallbackSource: the ``auto`` backend — DCMI first, npu-smi when DCMI fails, hangs or lists few.

The policy (issues 16 and 27, docs/design.md §2.1 ``--backend`` and ``--timeout``):

- ``auto`` reads through the primary source (DCMI, in its worker process) while it works.  Each primary
  read runs on a thread of its own: a tick waits for it at most ``hedge_s``, then reads the
  fallback (npu-smi) beside it, so a hung driver library never costs a tick more than
  ``hedge_s`` on top of npu-smi's own timeout — one budget for the whole read, whichever source
  hangs.  A primary that answers while the fallback runs still wins (it reads more metrics).
- A primary still running when the fallback has answered is hung: the fallback becomes the
  source at once, and the primary is tried again **in the background** (its own thread, at most
  once every ``RETRY_PRIMARY_S``), never on a tick's time.  A good background read switches back.
- A tick the primary fails (an error, not a hang) is read through the fallback at once, so the
  view never has a hole; after ``SWITCH_AFTER_FAILURES`` failed ticks within ``SWITCH_WINDOW_S``
  (in a row or between good ones: a worker killed every third tick) the fallback becomes the
  source.  The fallback's readings carry the primary's worker restarts (``restarts_of``).
- A primary that lists fewer chips than the machine has (``expected_chips``: PCI sysfs and
  ``/dev``) — 0 chips from a broken enumeration, a card the library skips — is a failed tick too
  when the fallback lists more: that tick is the fallback's.  When the fallback lists no more, the
  primary's reading stands (the sampler and ``check`` then say chips are missing) and the
  fallback is not asked again for ``RETRY_PRIMARY_S``.
- An explicit choice never switches (``switching=False``): a failed DCMI tick is a failed tick.
- On-demand details (the detail screen's ``npu-smi info -t …`` blocks) always come from the
  source that provides them: DCMI has no equivalent.

Each reading says why it came from the fallback (``SourceReading.note``: the snapshot's
``backend_note``).  Nothing here names a backend's internals: both sides are ``ChipSource``s.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, List, Optional

from npuwatch.chip_source import ChipSource, SourceFailure, SourceReading, close_source, declared_info
from npuwatch.source_info import SourceInfo

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails
    from npuwatch.machine_chips import MachineChips

#: Failed primary ticks within ``SWITCH_WINDOW_S`` (in a row or not) before the fallback becomes the source.
SWITCH_AFTER_FAILURES = 3
SWITCH_WINDOW_S = 60.0
#: How often, at most, a fallen-back source tries the primary again (in the background).
RETRY_PRIMARY_S = 60.0
#: How long a tick waits for the primary before it reads the fallback beside it, at most.
HEDGE_MAX_S = 1.0


def hedge_for(timeout_s: float) -> float:
    """How long a tick waits for the primary before starting the fallback, for a ``--timeout``:
    a quarter of it, at most ``HEDGE_MAX_S`` — so a read with both sources hung ends within the
    timeout plus a second, and a healthy primary (milliseconds a tick) never starts the fallback."""
    return max(0.0, min(HEDGE_MAX_S, timeout_s / 4.0))


class _Attempt:
    """One primary read, running on a daemon thread of its own."""

    def __init__(self, source: ChipSource, started_at: float) -> None:
        self.started_at = started_at
        self.outcome: Optional[SourceReading] = None
        self._done = threading.Event()
        self._source = source
        threading.Thread(target=self._run, name="npuwatch-primary-read", daemon=True).start()

    def _run(self) -> None:
        try:
            self.outcome = self._source.read()
        except Exception as exc:  # a source never raises for the environment: a bug, kept as a failure
            failure = SourceFailure("error", f"{type(exc).__name__}: {exc}", "run with --verbose")
            info = declared_info(self._source).for_tick(False)
            self.outcome = SourceReading(None, failure, 0.0, source_info=info)
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: Optional[float]) -> bool:
        """Whether the read ended within ``timeout_s`` (``None``: wait for it)."""
        return self._done.wait(timeout_s)


class FallbackSource:
    """A ``ChipSource`` that reads ``primary`` and falls back to ``fallback`` by the policy above.

    ``probe_name``, ``label`` and ``source_info`` are those of the source that produced the last
    reading, so the snapshot names the backend that read it and says what that one can read (each
    reading carries its own side's ``SourceReading.source_info``).  ``details`` answers
    ``chip_details`` (default: the fallback); ``close()`` closes both sides that can be closed.
    ``hedge_s``: how long a tick waits on the primary before reading the fallback beside it
    (``hedge_for(timeout)``).
    ``expected_chips``: the chips the machine has (``machine_chips.MachineChipsWatch``), to
    catch a primary that lists too few; ``None``: not checked.
    """

    def __init__(
        self,
        primary: ChipSource,
        fallback: Optional[ChipSource],
        *,
        switching: bool = True,
        details: Optional[ChipSource] = None,
        clock: Callable[[], float] = time.monotonic,
        hedge_s: float = HEDGE_MAX_S,
        expected_chips: Optional[Callable[[], Optional[MachineChips]]] = None,
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.switching = switching and fallback is not None
        self.details = details if details is not None else fallback
        self.hedge_s = hedge_s
        self.expected_chips = expected_chips
        self._clock = clock
        self._active: ChipSource = primary  # the source the policy reads next
        self._produced: ChipSource = primary  # the source that read the last reading
        self._failures_at: List[float] = []  # the primary's failures within SWITCH_WINDOW_S
        self._primary_restarts: Optional[int] = None  # the last count of its worker's restarts
        self._tried_at: Optional[float] = None
        self._note: Optional[str] = None
        self._attempt: Optional[_Attempt] = None  # a primary read still running (hung, or a retry)
        self._short_since: Optional[float] = None  # both sources listed too few chips: since when

    @property
    def probe_name(self) -> str:
        return self._produced.probe_name

    @property
    def label(self) -> str:
        return self._produced.label

    @property
    def source_info(self) -> SourceInfo:
        return declared_info(self._produced)

    @property
    def provides_processes(self) -> bool:
        return self.source_info.process_table

    @property
    def provides_details(self) -> bool:
        return self.details is not None and self.details.provides_details

    @property
    def provides_logic_ids(self) -> bool:
        return self._produced.provides_logic_ids

    @property
    def on_fallback(self) -> bool:
        """True while the fallback is the source (after a hang, or ``SWITCH_AFTER_FAILURES`` failures)."""
        return self._active is not self.primary

    @property
    def primary_busy(self) -> bool:
        """True while a primary read runs in the background (a hung call, or a retry)."""
        return self._attempt is not None and not self._attempt.done

    def read(self) -> SourceReading:
        if not self.switching:
            self._produced = self.primary
            return self.primary.read()
        self._take_finished_attempt()
        if self._active is self.primary and self._attempt is None:
            return self._read_primary()
        if self._attempt is None and self._retry_due():
            self._tried_at = self._clock()
            self._attempt = _Attempt(self.primary, self._tried_at)  # in the background: not waited for
        return self._from_fallback()

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        if self.details is None or not self.details.provides_details:
            return None
        return self.details.chip_details(npu_id, chip_id)

    def close(self) -> None:
        """Close both sources (the DCMI worker process, killed even mid-call); safe to call twice."""
        sides = {id(side): side for side in (self.primary, self.fallback, self.details) if side is not None}
        for source in sides.values():
            close_source(source)

    # the primary --------------------------------------------------------------------------------

    def _read_primary(self) -> SourceReading:
        attempt = _Attempt(self.primary, self._clock())
        if not attempt.wait(self.hedge_s):
            return self._beside_slow_primary(attempt)
        return self._primary_answered(self._seen(attempt))

    def _seen(self, attempt: _Attempt) -> SourceReading:
        """A finished primary read's outcome, its worker restarts noted for the fallback's readings."""
        outcome = attempt.outcome
        assert outcome is not None
        if outcome.restarts is not None:
            self._primary_restarts = outcome.restarts
        return outcome

    def _primary_answered(self, outcome: SourceReading) -> SourceReading:
        if outcome.failure is not None:
            self._count_failure(self._why_failed(outcome))
            return self._from_fallback()
        short = self._too_few(outcome)
        if short is not None:
            return self._primary_short(outcome, short)
        return self._primary_good(outcome)

    def _primary_good(self, outcome: SourceReading) -> SourceReading:
        self._produced = self.primary  # its failures of the last minute still count (a busy thread)
        self._note = None
        return outcome

    def _beside_slow_primary(self, attempt: _Attempt) -> SourceReading:
        """The primary has not answered within ``hedge_s``: read the fallback now.  The primary's
        answer, if it comes meanwhile, still wins; a fallback that cannot answer leaves the primary
        its own deadline (a slow start is not a hang); a primary still running when the fallback
        has answered is hung, and the fallback takes over."""
        assert self.fallback is not None
        fallback = self.fallback.read()
        if fallback.reading is None and not attempt.done:
            attempt.wait(None)  # bounded by the primary's own deadline (its worker's)
        if attempt.done:
            outcome = self._seen(attempt)
            if outcome.failure is not None:
                self._count_failure(self._why_failed(outcome))
                return self._fallbacks(fallback)
            short = self._too_few(outcome)
            if short is not None and fallback.reading is not None and _listed(fallback) > _listed(outcome):
                self._count_failure(self._why(short))
                return self._fallbacks(fallback)
            return self._primary_good(outcome)
        waited_s = self._clock() - attempt.started_at
        name, other = self.primary.probe_name, self.fallback.probe_name
        self._note = (
            f"{name} has not answered for {waited_s:.1f} s: reading through {other}; "
            f"{name} is tried again in the background"
        )
        self._attempt = attempt  # still running: its end is taken by a later tick
        self._switch()
        return self._fallbacks(fallback)

    def _primary_short(self, outcome: SourceReading, short: str) -> SourceReading:
        """The primary listed fewer chips than the machine has: the fallback's reading when it lists
        more; the primary's otherwise (and the fallback rests for ``RETRY_PRIMARY_S``)."""
        assert self.fallback is not None
        now = self._clock()
        if self._short_since is not None and now - self._short_since < RETRY_PRIMARY_S:
            self._produced = self.primary
            return outcome
        fallback = self.fallback.read()
        if fallback.reading is not None and _listed(fallback) > _listed(outcome):
            self._short_since = None
            self._count_failure(self._why(short))
            return self._fallbacks(fallback)
        self._short_since = now  # the fallback sees no more: the primary's reading stands
        return self._primary_good(outcome)

    def _count_failure(self, why: Callable[[int], str]) -> None:
        """One more primary failure: ``SWITCH_AFTER_FAILURES`` of them within ``SWITCH_WINDOW_S``
        (good ticks between them or not) make the fallback the source; ``why(count)`` says why."""
        now = self._clock()
        self._failures_at = [at for at in self._failures_at if now - at < SWITCH_WINDOW_S] + [now]
        self._note = why(len(self._failures_at))
        if len(self._failures_at) >= SWITCH_AFTER_FAILURES:
            self._switch()

    def _switch(self) -> None:
        assert self.fallback is not None
        self._active = self.fallback
        self._tried_at = self._clock()

    def _retry_due(self) -> bool:
        return self._tried_at is None or self._clock() - self._tried_at >= RETRY_PRIMARY_S

    def _take_finished_attempt(self) -> None:
        """A background primary read that has ended: a good one puts the primary back in charge
        (this tick reads it afresh); a failed one leaves the fallback in charge, with its reason."""
        attempt = self._attempt
        if attempt is None or not attempt.done:
            return
        self._attempt = None
        outcome = self._seen(attempt)
        if outcome.failure is None and self._too_few(outcome) is None:
            self._active = self.primary
            self._failures_at = []  # a minute on the fallback at least: a fresh start
            self._note = None
            return
        if outcome.failure is not None:
            name = self.primary.probe_name
            other = self.fallback.probe_name if self.fallback is not None else "the fallback"
            self._note = (
                f"{name} failed ({outcome.failure.message}): reading through {other}; "
                f"{name} is tried again in the background at most once a minute"
            )
        self._switch()  # the next retry is a minute after this one ended, not after it began

    # the fallback -------------------------------------------------------------------------------

    def _from_fallback(self) -> SourceReading:
        assert self.fallback is not None
        return self._fallbacks(self.fallback.read())

    def _fallbacks(self, outcome: SourceReading) -> SourceReading:
        """The fallback's reading, with why it is the fallback's and the primary's restarts."""
        assert self.fallback is not None
        self._produced = self.fallback
        restarts = self._primary_restarts
        of = None if restarts is None else self.primary.probe_name
        return replace(outcome, note=self._note, restarts=restarts, restarts_of=of)

    # what the notes say -------------------------------------------------------------------------

    def _too_few(self, outcome: SourceReading) -> Optional[str]:
        """``lists 0 of 8 chips (8 Ascend PCI functions, 8 /dev/davinciN)`` when the reading lists
        fewer chips than the machine has; ``None`` when it lists them all or nothing says how many."""
        if self.expected_chips is None or outcome.reading is None:
            return None
        try:
            machine = self.expected_chips()
        except Exception:  # sysfs unreadable: nothing to compare with, the sampler reports it
            return None
        if machine is None or machine.count <= 0:
            return None
        listed = len({chip.identity.key for chip in outcome.reading.chips})
        if listed >= machine.count:
            return None
        return f"lists {listed} of {machine.count} chips ({', '.join(machine.evidence)})"

    def _why(self, what: str) -> Callable[[int], str]:
        """What the note says after ``count`` recent failures: ``dcmi failed (…): this tick read
        through npu-smi`` — or, from the switch on, ``dcmi failed (…) (3 times within 60 s):
        reading through npu-smi; dcmi is tried again in the background at most once a minute``."""
        name = self.primary.probe_name
        other = self.fallback.probe_name if self.fallback is not None else "the fallback"

        def why(count: int) -> str:
            if count < SWITCH_AFTER_FAILURES:
                return f"{name} {what}: this tick read through {other}"
            return f"{name} {what} ({_times(count)}): reading through {other}; {_RETRIED.format(name)}"

        return why

    def _why_failed(self, outcome: SourceReading) -> Callable[[int], str]:
        failure = outcome.failure
        return self._why(f"failed ({failure.message if failure is not None else 'no reading'})")


_RETRIED = "{} is tried again in the background at most once a minute"


def _times(count: int) -> str:
    return f"{count} times within {SWITCH_WINDOW_S:g} s"


def _listed(outcome: SourceReading) -> int:
    """How many chips a reading lists (0 for a failure)."""
    reading = outcome.reading
    return 0 if reading is None else len({chip.identity.key for chip in reading.chips})
