"""The ``auto`` backend's policy: DCMI first, npu-smi for a failed tick, switch after 3, retry each minute."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Callable, List, Optional, Tuple

from npuwatch.chip_source import ChipReading, SourceFailure, SourceReading
from npuwatch.fallback_source import RETRY_PRIMARY_S, SWITCH_AFTER_FAILURES, FallbackSource
from npuwatch.model import ChipIdentity, ChipSample


class _Scripted:
    """A chip source whose reads succeed or fail as a script says (True: a reading)."""

    provides_details = False
    provides_processes = True
    provides_logic_ids = True

    def __init__(self, name: str, script: List[bool], details: bool = False) -> None:
        self.probe_name = name
        self.label = name
        self.script = list(script)
        self.reads = 0
        self.closed = 0
        self.provides_details = details

    def read(self) -> SourceReading:
        self.reads += 1
        good = self.script.pop(0) if self.script else True
        if good:
            chip = ChipSample(ChipIdentity(0, 0, name=self.probe_name))
            return SourceReading(ChipReading(chips=(chip,)), None, 0.01)
        return SourceReading(None, SourceFailure("timeout", f"{self.probe_name} timed out", "wait"), 2.0)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[object]:
        return f"details of {npu_id}/{chip_id} from {self.probe_name}"

    def close(self) -> None:
        self.closed += 1


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _until(condition: Callable[[], bool], within_s: float = 30.0) -> None:
    """Wait for a background read to end (a generous deadline; nothing asserts how long it took)."""
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "the background read did not end"
        time.sleep(0.01)


def _name(outcome: SourceReading) -> Optional[str]:
    return None if outcome.reading is None else outcome.reading.chips[0].identity.name


def test_a_working_primary_is_the_only_source_read() -> None:
    dcmi, npu_smi = _Scripted("dcmi", [True] * 5), _Scripted("npu-smi", [])
    source = FallbackSource(dcmi, npu_smi)
    for _ in range(5):
        outcome = source.read()
        assert (_name(outcome), source.probe_name, outcome.note) == ("dcmi", "dcmi", None)
    assert (dcmi.reads, npu_smi.reads) == (5, 0)


def test_a_failed_tick_is_read_through_the_fallback_and_says_why() -> None:
    dcmi, npu_smi = _Scripted("dcmi", [False, True]), _Scripted("npu-smi", [])
    source = FallbackSource(dcmi, npu_smi)
    first = source.read()
    assert (_name(first), source.probe_name) == ("npu-smi", "npu-smi")
    assert first.note == "dcmi failed (dcmi timed out): this tick read through npu-smi"
    second = source.read()  # the primary is asked again on the next tick
    assert (_name(second), source.probe_name, second.note) == ("dcmi", "dcmi", None)
    assert not source.on_fallback


def test_three_failed_ticks_switch_and_the_primary_is_retried_once_a_minute() -> None:
    clock = _Clock()
    dcmi = _Scripted("dcmi", [False] * SWITCH_AFTER_FAILURES + [False, True])
    npu_smi = _Scripted("npu-smi", [])
    source = FallbackSource(dcmi, npu_smi, clock=clock)
    for _ in range(SWITCH_AFTER_FAILURES):
        outcome = source.read()
    assert source.on_fallback
    assert outcome.note == (
        "dcmi failed (dcmi timed out) (3 times within 60 s): reading through npu-smi; "
        "dcmi is tried again in the background at most once a minute"
    )
    for _ in range(10):  # within the minute: npu-smi only, the note stays
        clock.now += 1.0
        outcome = source.read()
        assert (_name(outcome), outcome.note is not None) == ("npu-smi", True)
    assert dcmi.reads == SWITCH_AFTER_FAILURES
    clock.now += RETRY_PRIMARY_S  # the retry runs in the background: this tick is npu-smi's
    assert _name(source.read()) == "npu-smi"
    _until(lambda: dcmi.reads == SWITCH_AFTER_FAILURES + 1 and not source.primary_busy)
    clock.now += 1.0
    assert _name(source.read()) == "npu-smi"  # the retry failed: npu-smi still, no new retry
    assert dcmi.reads == SWITCH_AFTER_FAILURES + 1
    clock.now += RETRY_PRIMARY_S  # the next retry works: the tick after it is the primary's again
    assert _name(source.read()) == "npu-smi"
    _until(lambda: dcmi.reads == SWITCH_AFTER_FAILURES + 2 and not source.primary_busy)
    clock.now += 1.0
    outcome = source.read()
    assert (_name(outcome), source.probe_name, outcome.note, source.on_fallback) == (
        "dcmi",
        "dcmi",
        None,
        False,
    )


def test_an_explicit_choice_never_switches() -> None:
    dcmi, npu_smi = _Scripted("dcmi", [False] * 6), _Scripted("npu-smi", [], details=True)
    source = FallbackSource(dcmi, npu_smi, switching=False)
    for _ in range(6):
        outcome = source.read()
        assert outcome.failure is not None and source.probe_name == "dcmi"
    assert npu_smi.reads == 0
    assert source.chip_details(1, 0) == "details of 1/0 from npu-smi"  # details still come from npu-smi


def test_both_failing_gives_the_fallbacks_failure_with_the_note() -> None:
    dcmi, npu_smi = _Scripted("dcmi", [False]), _Scripted("npu-smi", [False])
    outcome = FallbackSource(dcmi, npu_smi).read()
    assert outcome.failure is not None and outcome.failure.message == "npu-smi timed out"
    assert outcome.note is not None and outcome.note.startswith("dcmi failed")


def test_close_closes_every_side_once_each() -> None:
    dcmi, npu_smi = _Scripted("dcmi", []), _Scripted("npu-smi", [])
    FallbackSource(dcmi, npu_smi).close()
    assert (dcmi.closed, npu_smi.closed) == (1, 1)  # npu-smi is both the fallback and the details source


def test_the_snapshot_names_the_backend_that_read_it_and_why_it_fell_back() -> None:
    from npuwatch.sampler import Sampler
    from npuwatch.snapshot_json import to_dict

    dcmi, npu_smi = _Scripted("dcmi", [True, False]), _Scripted("npu-smi", [])
    with Sampler(FallbackSource(dcmi, npu_smi), None) as sampler:
        first, second = sampler.sample(), sampler.sample()
    assert (first.chip_source, first.backend_note, first.chip_source_report.name) == ("dcmi", None, "dcmi")
    assert (second.chip_source, second.chip_source_report.name) == ("npu-smi", "npu-smi")
    data = to_dict(second)
    assert data["backend"] == "npu-smi"
    assert data["backend_note"] == "dcmi failed (dcmi timed out): this tick read through npu-smi"


class _Hanging:
    """A chip source whose reads block until ``release`` is set (a hung driver call), then answer."""

    provides_details = False
    provides_processes = True
    provides_logic_ids = True

    def __init__(self, name: str, good: bool = True, chips: int = 1, hang_s: float = 60.0) -> None:
        self.probe_name = self.label = name
        self.release = threading.Event()
        self.reads = 0
        self.good = good
        self.chips = chips
        self.hang_s = hang_s  # its own deadline: then it fails, as the worker kills a hung call

    def read(self) -> SourceReading:
        self.reads += 1
        if not self.release.wait(self.hang_s) or not self.good:
            return SourceReading(None, SourceFailure("timeout", f"{self.probe_name} hung", "wait"), 60.0)
        listed = tuple(ChipSample(ChipIdentity(n, 0, name=self.probe_name)) for n in range(self.chips))
        return SourceReading(ChipReading(chips=listed), None, 0.01)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[object]:
        return None


def _timed(read: Callable[[], SourceReading]) -> Tuple[SourceReading, float]:
    began = time.monotonic()
    outcome = read()
    return outcome, time.monotonic() - began


def test_a_hung_primary_costs_one_hedge_then_the_fallback_reads_without_waiting_on_it() -> None:
    dcmi, npu_smi = _Hanging("dcmi"), _Scripted("npu-smi", [])
    source = FallbackSource(dcmi, npu_smi, hedge_s=0.2)
    try:
        first, waited_s = _timed(source.read)
        assert (_name(first), source.probe_name, source.on_fallback) == ("npu-smi", "npu-smi", True)
        assert first.note is not None and "dcmi has not answered for" in first.note
        assert "tried again in the background" in first.note
        assert waited_s < 0.2 + 5.0  # the hedge, then npu-smi: never the hung call's own deadline
        for _ in range(5):  # the hung read is not asked again, nor waited for
            outcome = source.read()
            assert _name(outcome) == "npu-smi" and outcome.note == first.note
        assert dcmi.reads == 1 and source.primary_busy
    finally:
        dcmi.release.set()
    _until(lambda: not source.primary_busy)
    back = source.read()  # the hung call finally answered well: the primary is back in charge
    assert (_name(back), source.probe_name, back.note, source.on_fallback) == ("dcmi", "dcmi", None, False)


def test_a_slow_primary_that_answers_while_the_fallback_runs_wins() -> None:
    dcmi = _Hanging("dcmi")

    class _SlowFallback(_Scripted):
        def read(self) -> SourceReading:
            dcmi.release.set()  # the primary answers while npu-smi runs
            time.sleep(0.2)
            return super().read()

    npu_smi = _SlowFallback("npu-smi", [])
    source = FallbackSource(dcmi, npu_smi, hedge_s=0.05)
    outcome = source.read()
    assert (_name(outcome), source.probe_name, outcome.note, source.on_fallback) == (
        "dcmi",
        "dcmi",
        None,
        False,
    )
    assert npu_smi.reads == 1


def test_both_hung_end_within_the_hedge_and_the_slower_of_their_own_limits() -> None:
    dcmi = _Hanging("dcmi", hang_s=0.5)

    class _TimingOut(_Scripted):
        def read(self) -> SourceReading:
            time.sleep(0.3)  # npu-smi's timeout, as its runner enforces it
            return super().read()

    source = FallbackSource(dcmi, _TimingOut("npu-smi", [False]), hedge_s=0.1)
    try:
        outcome, waited_s = _timed(source.read)
    finally:
        dcmi.release.set()
    assert outcome.failure is not None and outcome.failure.message == "npu-smi timed out"
    assert outcome.note == "dcmi failed (dcmi hung): this tick read through npu-smi"
    assert waited_s < 0.1 + 0.5 + 5.0  # the primary's own deadline, no more


def test_a_slow_primary_is_waited_for_when_the_fallback_cannot_answer() -> None:
    """A DCMI that starts slowly (past the hedge) where npu-smi is missing still reads the chips."""
    dcmi = _Hanging("dcmi", chips=8)

    class _Missing(_Scripted):
        def read(self) -> SourceReading:
            threading.Timer(0.3, dcmi.release.set).start()  # DCMI answers after npu-smi failed
            return super().read()

    source = FallbackSource(dcmi, _Missing("npu-smi", [False]), hedge_s=0.05)
    outcome = source.read()
    assert (source.probe_name, outcome.note, source.on_fallback) == ("dcmi", None, False)
    assert outcome.reading is not None and len(outcome.reading.chips) == 8


def test_failures_between_good_ticks_switch_too() -> None:
    """A primary killed every other tick (a busy library thread) stops being the source."""
    clock = _Clock()
    dcmi = _Scripted("dcmi", [False, True, False, True, False])
    source = FallbackSource(dcmi, _Scripted("npu-smi", []), clock=clock)
    for _ in range(5):
        clock.now += 1.0
        outcome = source.read()
    assert source.on_fallback and _name(outcome) == "npu-smi"
    assert outcome.note is not None and "3 times within 60 s" in outcome.note


def test_the_primarys_worker_restarts_ride_on_the_fallbacks_readings() -> None:
    class _Restarting(_Scripted):
        def read(self) -> SourceReading:
            return replace(super().read(), restarts=self.reads)

    source = FallbackSource(_Restarting("dcmi", [False, False]), _Scripted("npu-smi", []))
    first, second = source.read(), source.read()
    assert (first.restarts, first.restarts_of) == (1, "dcmi")
    assert (second.restarts, second.restarts_of) == (2, "dcmi")


def test_a_background_retry_that_hangs_never_holds_a_tick() -> None:
    clock = _Clock()
    dcmi = _Hanging("dcmi", good=False)
    source = FallbackSource(dcmi, _Scripted("npu-smi", []), hedge_s=0.05, clock=clock)
    try:
        source.read()  # hung: the fallback takes over
        clock.now += RETRY_PRIMARY_S
        for _ in range(3):  # the first read made is still running: no second one is started
            assert _name(source.read()) == "npu-smi"
        assert dcmi.reads == 1
    finally:
        dcmi.release.set()
    _until(lambda: not source.primary_busy)
    clock.now += 1.0
    outcome = source.read()  # it ended in a failure: the fallback stays, the reason is said
    assert _name(outcome) == "npu-smi" and outcome.note is not None and "dcmi hung" in outcome.note
    clock.now += RETRY_PRIMARY_S  # the next retry starts in the background, on its own schedule
    assert _name(source.read()) == "npu-smi"
    _until(lambda: dcmi.reads == 2)


class _Machine:
    def __init__(self, count: int) -> None:
        from npuwatch.machine_chips import MachineChips

        self.chips = MachineChips(count, (f"{count} Ascend PCI functions",))
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        return self.chips


def test_a_primary_listing_no_chip_on_a_machine_with_chips_is_read_through_the_fallback() -> None:
    dcmi, npu_smi = _Hanging("dcmi", chips=0), _Hanging("npu-smi", chips=8)
    dcmi.release.set()
    npu_smi.release.set()
    source = FallbackSource(dcmi, npu_smi, expected_chips=_Machine(8))  # type: ignore[arg-type]
    outcome = source.read()
    assert outcome.reading is not None and len(outcome.reading.chips) == 8
    assert source.probe_name == "npu-smi"
    assert outcome.note == "dcmi lists 0 of 8 chips (8 Ascend PCI functions): this tick read through npu-smi"
    for _ in range(SWITCH_AFTER_FAILURES - 1):
        outcome = source.read()
    assert source.on_fallback and outcome.note is not None and "(3 times within 60 s)" in outcome.note


def test_a_short_listing_stands_when_the_fallback_sees_no_more_and_the_fallback_rests() -> None:
    clock = _Clock()
    dcmi, npu_smi = _Hanging("dcmi", chips=6), _Hanging("npu-smi", chips=6)
    dcmi.release.set()
    npu_smi.release.set()
    source = FallbackSource(dcmi, npu_smi, clock=clock, expected_chips=_Machine(8))  # type: ignore[arg-type]
    for _ in range(5):
        clock.now += 1.0
        outcome = source.read()
        assert (source.probe_name, outcome.note) == ("dcmi", None)
        assert outcome.reading is not None and len(outcome.reading.chips) == 6
    assert (dcmi.reads, npu_smi.reads) == (5, 1)  # npu-smi was asked once, not every tick
    clock.now += RETRY_PRIMARY_S
    source.read()
    assert npu_smi.reads == 2


def test_a_full_listing_never_asks_the_fallback() -> None:
    machine = _Machine(8)
    dcmi, npu_smi = _Hanging("dcmi", chips=8), _Scripted("npu-smi", [])
    dcmi.release.set()
    source = FallbackSource(dcmi, npu_smi, expected_chips=machine)  # type: ignore[arg-type]
    for _ in range(3):
        assert source.read().note is None
    assert npu_smi.reads == 0 and machine.calls == 3


def test_auto_without_any_libdcmi_reads_npu_smi_alone_and_starts_no_worker() -> None:
    from npuwatch.feeds import FeedOptions, open_feed
    from npuwatch.probes.npu_smi.source import NpuSmiSource

    with open_feed(FeedOptions(demo="dcmi-missing")) as feed:
        assert isinstance(feed.source, NpuSmiSource)  # no DCMI worker: nothing to load
        snapshot = feed.sample()
    assert (snapshot.chip_source, snapshot.backend_note, len(snapshot.chips)) == ("npu-smi", None, 8)
