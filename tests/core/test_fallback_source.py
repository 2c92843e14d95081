"""The ``auto`` backend's policy: DCMI first, npu-smi for a failed tick, switch after 3, retry each minute."""

from __future__ import annotations

from typing import List, Optional

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
        "dcmi failed 3 ticks in a row (dcmi timed out): reading through npu-smi; "
        "dcmi is tried again at most once a minute"
    )
    for _ in range(10):  # within the minute: npu-smi only, the note stays
        clock.now += 1.0
        outcome = source.read()
        assert (_name(outcome), outcome.note is not None) == ("npu-smi", True)
    assert dcmi.reads == SWITCH_AFTER_FAILURES
    clock.now += RETRY_PRIMARY_S  # the retry fails: still npu-smi, one more primary read
    assert _name(source.read()) == "npu-smi"
    assert dcmi.reads == SWITCH_AFTER_FAILURES + 1
    clock.now += 1.0
    source.read()
    assert dcmi.reads == SWITCH_AFTER_FAILURES + 1
    clock.now += RETRY_PRIMARY_S  # the next retry works: back on the primary, no note
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
