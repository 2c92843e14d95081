"""Each 'limited by' condition appears within the window and clears with hysteresis, live.

A demo sampled second by simulated second through the product's own path — the Sampler (which
runs the WorkloadJudge) over the demo's fake npu-smi or its fake DCMI library, the simulated host
processes — with the simulator's clock and the sampler's clock stepped together.  The DCMI
worker reads its environment once, at spawn, so its state file is written here for each second
(its own refresh is switched off) instead of following a frozen ``NPUWATCH_SIM_NOW``.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Optional, Tuple

import pytest

from npuwatch.chip_source import ChipSource, close_source
from npuwatch.judge.limits import DEFAULT_THRESHOLDS
from npuwatch.judge.workload import observe
from npuwatch.model import ChipSample, Snapshot, Throttling, Workload, WorkloadClass
from npuwatch.probes.dcmi.source import open_dcmi_source
from npuwatch.probes.host import HostProbe
from npuwatch.probes.npu_smi import NpuSmi
from npuwatch.probes.npu_smi.source import NpuSmiSource
from npuwatch.probes.simulator import Simulation
from npuwatch.probes.simulator.dcmi_fake.state import REFRESH_VARIABLE, STATE_VARIABLE, write_for
from npuwatch.probes.sysroot import Sysroot
from npuwatch.sampler import Sampler

EPOCH_S = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc).timestamp()
SETTLE = DEFAULT_THRESHOLDS.settle_samples
THROTTLE_SETTLE = DEFAULT_THRESHOLDS.throttle_settle_samples
THROTTLE_CLEAR_S = DEFAULT_THRESHOLDS.throttle_clear_s
# held memory settles in samples and seconds: at one sample a second, the larger of the two
HELD_SETTLE = max(DEFAULT_THRESHOLDS.held_settle_samples, int(DEFAULT_THRESHOLDS.held_settle_s) + 1)

Sample = Callable[[float], Snapshot]
COMPUTE, MEMORY, AICPU = WorkloadClass.COMPUTE_BOUND, WorkloadClass.MEMORY_BOUND, WorkloadClass.AICPU_BOUND
INPUT, IDLE, HELD = WorkloadClass.INPUT_BOUND, WorkloadClass.IDLE, WorkloadClass.IDLE_HOLDING_HBM


@contextmanager
def _demo(scenario: str, backend: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sample]:
    """A function sampling ``scenario`` at a simulated second, through ``backend``."""
    now = {"s": 0.0}
    sim = Simulation.start(scenario, started_at=EPOCH_S)
    source: Optional[ChipSource] = None
    try:
        state_path: Optional[Path] = None
        if backend == "dcmi":
            environ = {k: v for k, v in sim.environ.items() if k != REFRESH_VARIABLE}
            state_path = Path(environ[STATE_VARIABLE])
            source = open_dcmi_source(sim.dcmi_library, str(sim.root), f"demo:{scenario}", 30.0, environ)
        else:
            source = NpuSmiSource(NpuSmi(sim.npu_smi, timeout_s=30.0), label=f"demo:{scenario}")
        sampler = Sampler(
            source,
            Sysroot(sim.root, environ=sim.environ),
            HostProbe(lookup=sim.process_lookup, in_container=False, host_pid_namespace=True),
            clock=lambda: EPOCH_S + now["s"],
            monotonic=lambda: now["s"],
        )

        def sample(at_s: float) -> Snapshot:
            now["s"] = at_s
            monkeypatch.setenv("NPUWATCH_SIM_NOW", str(at_s))
            if state_path is not None:
                write_for(sim.scenario, state_path, sim.started_at, sim.seed)
            snapshot = sampler.sample()
            assert snapshot.chip_source == backend
            return snapshot

        yield sample
    finally:
        if source is not None:
            close_source(source)
        sim.close()


def _seconds(start: int, end: int) -> List[float]:
    return [float(s) for s in range(start, end + 1)]


Row = Tuple[float, Workload, WorkloadClass, Optional[Throttling]]


def _track(sample: Sample, times: Iterable[float], npu_id: int) -> List[Row]:
    """Per sample: time, the shown workload and the sample's own reading (class, throttling)."""
    rows = []
    for at_s in times:
        snapshot = sample(at_s)
        chip = _chip(snapshot, npu_id)
        processes = [p for p in snapshot.processes if p.npu_id == npu_id]
        seen = observe(chip, processes, at_s)
        assert chip.workload is not None
        rows.append((at_s, chip.workload, seen.kind, seen.throttling))
    return rows


def _chip(snapshot: Snapshot, npu_id: int) -> ChipSample:
    return next(c for c in snapshot.chips if c.identity.npu_id == npu_id)


def _first(rows: List[Row], test: Callable[[Row], bool]) -> int:
    return next(i for i, row in enumerate(rows) if test(row))


def _appears_then_clears(
    rows: List[Row],
    shown: Callable[[Workload], bool],
    seen: Callable[[Row], bool],
    settle: int,
    clear: Optional[int] = None,
) -> None:
    """The condition shows ``settle`` samples after the raw readings start to say so (not at
    once, not later), holds while they do, and stays shown for the first samples after they stop
    (hysteresis) before it clears, ``clear`` (default ``settle``) samples after."""
    clear = settle if clear is None else clear
    start = _first(rows, seen)
    assert not any(shown(row[1]) for row in rows[:start])
    assert all(seen(row) for row in rows[start : start + settle])
    assert not any(shown(row[1]) for row in rows[start : start + settle - 1])  # not at once
    assert shown(rows[start + settle - 1][1])
    stop = _first(rows[start:], lambda row: not seen(row)) + start
    assert all(shown(row[1]) for row in rows[start + settle - 1 : stop])
    assert all(not seen(row) for row in rows[stop : stop + clear])
    assert clear > 1 and all(shown(row[1]) for row in rows[stop : stop + clear - 1])  # hysteresis
    assert not shown(rows[stop + clear - 1][1])


def _shows(kind: WorkloadClass) -> Callable[[Workload], bool]:
    return lambda workload: workload.kind is kind


def _reads(kind: WorkloadClass) -> Callable[[Row], bool]:
    return lambda row: row[2] is kind


def _throttled_then_recovered(track: List[Row], cause: Throttling) -> None:
    """The flag shows ``throttle_settle_samples`` after the readings start to say so, keeps its
    cause while the clock recovers (the tail reads below rated, cool and under the cap), and
    clears ``throttle_clear_s`` after the last throttled reading (1 sample a second)."""
    start = _first(track, lambda row: row[3] is cause)
    assert track[start][0] <= 20.0  # onset within ~20 s of the demo's start
    assert not any(row[1].throttling for row in track[: start + THROTTLE_SETTLE - 1])
    assert track[start + THROTTLE_SETTLE - 1][1].throttling is cause
    last = max(i for i, row in enumerate(track) if row[3] is not None)
    assert all(row[1].throttling is cause for row in track[start + THROTTLE_SETTLE - 1 : last + 1])
    clear = int(THROTTLE_CLEAR_S)
    assert all(row[1].throttling is cause for row in track[last + 1 : last + clear])  # hysteresis
    assert all(row[1].throttling is None for row in track[last + clear :]) and len(track) > last + clear
    assert all(row[1].kind is COMPUTE for row in track)  # AI Core stays busy throughout
    flagged = next(row[1] for row in track if row[1].throttling is cause)
    assert flagged.evidence["aicore_freq_mhz"] < flagged.evidence["aicore_rated_freq_mhz"]
    assert flagged.throttle_tag == f"throttled: {cause.value}"


def test_throttling_appears_within_the_window_and_clears_with_hysteresis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _demo("throttling", "dcmi", monkeypatch) as sample:
        rows = {n: _track(sample, _seconds(9, 28) + _seconds(145, 195), n) for n in (2, 5)}
        others = sample(60.0)
    for npu_id, cause in ((2, Throttling.THERMAL), (5, Throttling.POWER)):
        _throttled_then_recovered(rows[npu_id], cause)
    assert [c.workload.throttling for c in others.chips if c.workload is not None] == [
        None, None, Throttling.THERMAL, None, None, Throttling.POWER, None, None,
    ]  # fmt: skip


def test_memory_bound_appears_within_the_window_and_clears_with_hysteresis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _demo("memory-bound", "dcmi", monkeypatch) as sample:
        rows = _track(sample, _seconds(4, 16) + _seconds(152, 166), 3)
    assert rows[_first(rows, _reads(MEMORY))][0] <= 10.0
    _appears_then_clears(rows, _shows(MEMORY), _reads(MEMORY), SETTLE)
    assert rows[-1][1].kind is COMPUTE  # the prefill burst
    shown = next(row[1] for row in rows if row[1].kind is MEMORY and row[1].samples >= 5)
    assert shown.evidence["hbm_bandwidth_percent"] >= 80 and shown.window_s > 3


def test_aicpu_bound_appears_within_the_window_and_clears_with_hysteresis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _demo("aicpu-fallback", "dcmi", monkeypatch) as sample:
        rows = _track(sample, _seconds(2, 14) + _seconds(160, 174), 0)
        idle = sample(175.0)
    assert rows[_first(rows, _reads(AICPU))][0] <= 10.0
    _appears_then_clears(rows, _shows(AICPU), _reads(AICPU), SETTLE)
    assert rows[-1][1].kind is COMPUTE  # the validation pass on the AI Core
    assert [c.workload.kind for c in idle.chips[4:] if c.workload is not None] == [IDLE] * 4


def test_input_bound_appears_and_clears_through_npu_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    with _demo("input-bound", "npu-smi", monkeypatch) as sample:
        rows = _track(sample, _seconds(2, 14) + _seconds(160, 174), 5)
    assert rows[_first(rows, _reads(INPUT))][0] <= 10.0
    _appears_then_clears(rows, _shows(INPUT), _reads(INPUT), SETTLE)
    assert rows[-1][1].kind is COMPUTE
    shown = next(row[1] for row in rows if row[1].kind is INPUT and row[1].samples >= 5)
    assert shown.evidence["host_cpu_percent"] is not None and shown.evidence["host_cpu_percent"] >= 300
    assert set(shown.needs_dcmi) >= {"memory-bound", "aicpu-bound"}


def test_leaked_hbm_names_its_owner_and_clears_when_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    with _demo("hbm-leak", "npu-smi", monkeypatch) as sample:
        rows = _track(sample, _seconds(10, 30) + _seconds(163, 175), 0)
    assert rows[0][1].kind is COMPUTE
    assert rows[_first(rows, _reads(HELD))][0] == 18.0  # the job exited at 18 s
    _appears_then_clears(rows, _shows(HELD), _reads(HELD), HELD_SETTLE, SETTLE)
    assert rows[-1][1].kind is IDLE
    held = next(row[1] for row in rows if row[1].kind is HELD)
    owner = held.owner
    assert owner is not None and (owner.pid, owner.user) == (60113, "alice")
    assert owner.command is not None and "finetune.py" in owner.command
    assert owner.last_seen == datetime.fromtimestamp(EPOCH_S + 17.0, timezone.utc)
    assert "60113" in held.summary


def test_the_training_demo_stalls_every_chip_together_and_recovers(monkeypatch: pytest.MonkeyPatch) -> None:
    with _demo("910b-training", "npu-smi", monkeypatch) as sample:
        warm_up = [sample(float(s)) for s in range(0, 40, 3)]
        stall = [sample(s) for s in _seconds(144, 166)]
    # The graph compile runs in CANN's own workers: warm-up is not input-bound.
    assert not [c for s in warm_up for c in s.chips if c.workload is not None and c.workload.kind is INPUT]
    for npu_id in range(8):
        kinds = [_chip(s, npu_id).workload for s in stall]
        assert all(w is not None for w in kinds)
        shown = [w.kind if w is not None else None for w in kinds]
        # 144-147 compute; the stall 148-159 shows once settled; compute again from 160, settled.
        begin, end = 4 + SETTLE - 1, 16 + SETTLE - 1
        assert shown == [COMPUTE] * begin + [INPUT] * (end - begin) + [COMPUTE] * (len(shown) - end), (
            npu_id,
            shown,
        )
