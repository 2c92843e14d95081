"""The workload judge: each class from its inputs, the window's evidence, hysteresis, throttling,
the likely owner of held memory, and a replay judging as the live feed did."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List, Optional, Sequence

import pytest

from npuwatch.judge.rules import judge_chip
from npuwatch.judge.workload import WorkloadJudge, observe
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    NpuProcess,
    ProcessHostInfo,
    Snapshot,
    Throttling,
    Workload,
    WorkloadClass,
)
from npuwatch.recording import Recording
from npuwatch.replay import ReplaySampler
from npuwatch.snapshot_json import to_dict

T0 = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)


def chip(**values: object) -> ChipSample:
    fields: dict = {
        "health": Health.OK,
        "power_w": 280.0,
        "temperature_c": 60,
        "aicore_percent": 90,
        "hbm_used_mib": 40000,
        "hbm_total_mib": 65536,
        "aicore_freq_mhz": 1800,
        "aicore_rated_freq_mhz": 1800,
        "hbm_bandwidth_percent": 40,
        "aicpu_percent": 2,
    }
    fields.update(values)
    return ChipSample(identity=ChipIdentity(0, 0, name="910B3", bus_id="0000:C1:00.0"), **fields)


def proc(cpu: Optional[float] = 100.0, pid: int = 4242, memory_mib: int = 30000) -> NpuProcess:
    host = None if cpu is None else ProcessHostInfo(user="ai", command="python train.py", cpu_percent=cpu)
    return NpuProcess(0, 0, pid, "python3", memory_mib, host=host)


def snap(
    sample: ChipSample, processes: Sequence[NpuProcess] = (), second: float = 0.0, source: str = "dcmi"
) -> Snapshot:
    return Snapshot(
        T0 + timedelta(seconds=second),
        "test",
        chips=(sample,),
        processes=tuple(processes),
        chip_source=source,
    )


def workload_of(snapshot: Snapshot) -> Workload:
    workload = snapshot.chips[0].workload
    assert workload is not None
    return workload


def timeline(judge: WorkloadJudge, samples: Sequence[Snapshot]) -> List[Workload]:
    return [workload_of(judge.judge(s)) for s in samples]


# --- 1. one sample: each class from its inputs ---------------------------------------------------


@pytest.mark.parametrize(
    ("values", "processes", "expected"),
    [
        ({"aicore_percent": 92}, [proc(110.0)], WorkloadClass.COMPUTE_BOUND),
        ({"aicore_percent": 35, "hbm_bandwidth_percent": 88}, [proc(100.0)], WorkloadClass.MEMORY_BOUND),
        ({"aicore_percent": 4, "aicpu_percent": 75}, [proc(40.0)], WorkloadClass.AICPU_BOUND),
        ({"aicore_percent": 3}, [proc(380.0)], WorkloadClass.INPUT_BOUND),
        ({"aicore_percent": 12}, [proc(30.0)], WorkloadClass.WAITING),
        ({"aicore_percent": 12}, [proc(None)], WorkloadClass.UNDETERMINED),  # host not visible: says so
        ({"aicore_percent": 0, "hbm_used_mib": 3300}, [], WorkloadClass.IDLE),
        ({"aicore_percent": 0, "hbm_used_mib": 30000}, [], WorkloadClass.IDLE_HOLDING_HBM),
        ({"aicore_percent": None}, [proc()], WorkloadClass.UNKNOWN),
    ],
)
def test_one_sample_reads_as_its_class(values, processes, expected):
    assert workload_of(WorkloadJudge().judge(snap(chip(**values), processes))).kind is expected


def test_a_lost_chip_is_unknown_at_once():
    judge = WorkloadJudge()
    judge.judge(snap(chip(), [proc()]))
    lost = chip(lost_reason="the chip source no longer lists it")
    assert workload_of(judge.judge(snap(lost, [proc()], 1.0))).kind is WorkloadClass.UNKNOWN


def test_memory_bound_needs_ai_core_below_busy():
    busy = chip(aicore_percent=85, hbm_bandwidth_percent=90)
    assert workload_of(WorkloadJudge().judge(snap(busy, [proc()]))).kind is WorkloadClass.COMPUTE_BOUND


def test_evidence_summary_and_next_step_say_what_decided():
    workload = workload_of(
        WorkloadJudge().judge(snap(chip(aicore_percent=4, aicpu_percent=75), [proc(40.0)]))
    )
    assert workload.evidence["aicpu_percent"] == 75.0
    assert workload.evidence["aicore_percent"] == 4.0
    assert workload.summary == "AI CPU 75 %, AI Core 4 %"
    assert "msprof --aicpu=on" in workload.next_step
    assert workload.needs_dcmi == ()
    assert (workload.samples, workload.window_s) == (1, 0.0)


def test_through_npu_smi_the_driver_only_classes_say_they_need_dcmi():
    table = chip(aicore_percent=12, hbm_bandwidth_percent=None, aicpu_percent=None, aicore_freq_mhz=None)
    workload = workload_of(WorkloadJudge().judge(snap(table, [proc(30.0)], source="npu-smi")))
    assert workload.kind is WorkloadClass.WAITING
    assert workload.needs_dcmi == ("memory-bound", "aicpu-bound", "throttling")
    assert workload.evidence["aicpu_percent"] is None
    assert workload.summary == "AI Core 12 %, host 30 % (or AI CPU-bound — needs a source that reads AI CPU)"
    assert workload.needs_reading == ("aicpu_percent",)


def test_input_bound_through_npu_smi_is_reachable():
    table = chip(aicore_percent=3, hbm_bandwidth_percent=None, aicpu_percent=None, aicore_freq_mhz=None)
    workload = workload_of(WorkloadJudge().judge(snap(table, [proc(380.0, pid=77)], source="npu-smi")))
    assert workload.kind is WorkloadClass.INPUT_BOUND
    assert workload.summary == "AI Core 3 %, PID 77 at 380 % host CPU"
    assert (workload.evidence["pid"], workload.evidence["process"]) == (77, "python3")


# --- 2. the window and hysteresis ---------------------------------------------------------------


def test_a_class_shows_after_settling_and_clears_the_same_way():
    busy, stalled = chip(aicore_percent=92), chip(aicore_percent=3)
    samples = [snap(busy, [proc(110.0)], t) for t in range(3)]
    samples += [snap(stalled, [proc(380.0)], t) for t in range(3, 7)]  # a 4 s data-loading stall
    samples += [snap(busy, [proc(110.0)], t) for t in range(7, 10)]
    kinds = [w.kind for w in timeline(WorkloadJudge(), samples)]
    compute, stall = WorkloadClass.COMPUTE_BOUND, WorkloadClass.INPUT_BOUND
    assert kinds == [compute] * 4 + [stall] * 4 + [compute] * 2


def test_one_odd_sample_does_not_flip_the_class():
    samples = [snap(chip(aicore_percent=92), [proc()], t) for t in range(5)]
    samples[2] = snap(chip(aicore_percent=3), [proc(380.0)], 2)
    kinds = {w.kind for w in timeline(WorkloadJudge(), samples)}
    assert kinds == {WorkloadClass.COMPUTE_BOUND}


def test_settling_is_by_time_too_when_samples_come_fast():
    samples = [snap(chip(aicore_percent=92), [proc()], 0.0)]
    samples += [snap(chip(aicore_percent=3), [proc(380.0)], 0.2 * t) for t in range(1, 7)]
    kinds = [w.kind for w in timeline(WorkloadJudge(), samples)]
    # the stall starts at 0.2 s and has held 1.0 s at 1.2 s
    assert kinds.index(WorkloadClass.INPUT_BOUND) == 6


def test_evidence_is_the_mean_over_the_window_of_the_samples_that_read_the_class():
    samples = [snap(chip(aicore_percent=a), [proc()], t) for t, a in enumerate([80, 90, 100])]
    samples += [snap(chip(aicore_percent=50), [proc()], t) for t in range(3, 15)]
    workloads = timeline(WorkloadJudge(), samples)
    assert workloads[2].evidence["aicore_percent"] == 90.0
    assert workloads[2].samples == 3 and workloads[2].window_s == 2.0
    assert workloads[-1].evidence["aicore_percent"] == 50.0  # the window is 10 s
    assert workloads[-1].samples == 11


def test_time_going_back_starts_afresh():
    judge = WorkloadJudge()
    timeline(judge, [snap(chip(aicore_percent=92), [proc()], t) for t in range(5, 8)])
    back = workload_of(judge.judge(snap(chip(aicore_percent=3), [proc(380.0)], 1.0)))
    assert back.kind is WorkloadClass.INPUT_BOUND


# --- 3. throttling ------------------------------------------------------------------------------


def test_thermal_throttling_shows_when_sustained_and_clears_the_same_way():
    cool = chip(temperature_c=70)
    hot = chip(temperature_c=83, aicore_freq_mhz=1300)  # within 5 °C of the 910B's 85 °C
    samples = [snap(cool, [proc()], t) for t in range(2)]
    samples += [snap(hot, [proc()], t) for t in range(2, 6)]
    samples += [snap(cool, [proc()], t) for t in range(6, 24)]
    flags = [w.throttling for w in timeline(WorkloadJudge(), samples)]
    # shows at the third throttled sample; clears once none has been for throttle_clear_s (15 s)
    assert flags == [None] * 4 + [Throttling.THERMAL] * 16 + [None] * 4


def test_power_throttling_at_the_rated_power():
    capped = chip(power_w=392.0, aicore_freq_mhz=1500)  # the 910B's rated 400 W
    workload = workload_of(WorkloadJudge().judge(snap(capped, [proc()])))
    assert workload.throttling is Throttling.POWER
    assert workload.throttle_tag == "throttled: power"
    assert workload.summary == "AI Core 90 %; throttled (power): 1500 of 1800 MHz at 392 W of 400 W"
    assert workload.next_step.startswith("AI Core is throttled at its power cap")
    assert workload.evidence["rated_power_w"] == 400.0


@pytest.mark.parametrize(
    "values",
    [
        {"aicore_freq_mhz": 1300, "aicore_percent": 5, "temperature_c": 83},  # idle: clocks down on purpose
        {"aicore_freq_mhz": 1750, "temperature_c": 84},  # within the 5 % margin
    ],
)
def test_no_throttling_otherwise(values):
    workload = workload_of(WorkloadJudge().judge(snap(chip(**values), [proc(380.0)])))
    assert workload.throttling is None


# --- 4. held memory names its likely owner -------------------------------------------------------


def test_memory_held_after_the_job_exits_names_the_process_that_held_it_last():
    judge = WorkloadJudge()
    running = [snap(chip(), [proc(pid=31337, memory_mib=38000)], t) for t in range(3)]
    gone = [snap(chip(aicore_percent=0, hbm_used_mib=38000), [], t) for t in range(3, 10)]
    workloads = timeline(judge, running + gone)
    kinds = [w.kind for w in workloads]
    # held_settle_samples (4) spanning held_settle_s (5 s): shown at 8 s
    assert kinds == [WorkloadClass.COMPUTE_BOUND] * 8 + [WorkloadClass.IDLE_HOLDING_HBM] * 2
    owner = workloads[-1].owner
    assert owner is not None
    assert (owner.pid, owner.name, owner.user, owner.command) == (31337, "python3", "ai", "python train.py")
    assert owner.last_seen == T0 + timedelta(seconds=2)
    assert workloads[-1].summary == "37.1 GiB held, no process; last held by PID 31337"
    held = replace(gone[-1].chips[0], workload=workloads[-1])
    reason = judge_chip(held).reasons[0]
    assert (
        "The last process npuwatch saw holding it was PID 31337 (python3, ai) at 12:00:02." in reason.detail
    )


def test_snapshot_json_carries_the_workload():
    judged = WorkloadJudge().judge(snap(chip(aicore_percent=3), [proc(380.0)]))
    out = to_dict(judged)["chips"][0]["workload"]
    assert out["class"] == "input-bound"
    assert out["throttling"] is None
    assert out["evidence"]["host_cpu_percent"] == 380.0
    assert out["next_step"].startswith("The host does not feed the chip fast enough")
    assert (out["owner"], out["samples"], out["window_s"], out["needs_dcmi"]) == (None, 1, 0.0, [])


# --- 5. a replay judges the same way ------------------------------------------------------------


def test_a_replay_judges_each_snapshot_as_the_live_feed_did(tmp_path: Path):
    stall = [chip(aicore_percent=3)] * 4
    chips = [chip(aicore_percent=92)] * 3 + stall + [chip(aicore_percent=92)] * 3
    raw = [snap(c, [proc(380.0 if c.aicore_percent == 3 else 110.0)], t) for t, c in enumerate(chips)]
    live = [w.kind for w in timeline(WorkloadJudge(), raw)]
    clock = [0.0]
    replay = ReplaySampler(Recording(tmp_path / "r.ndjson", tuple(raw)), clock=lambda: clock[0])
    replayed = []
    for second in range(len(raw)):
        clock[0] = float(second)
        replayed.append(workload_of(replay.sample()).kind)
    assert replayed == live
    clock[0] = 2.0  # seek back: the same snapshot is judged the same again
    assert workload_of(replay.sample()).kind is live[2]


def test_observe_is_per_sample():
    seen = observe(chip(aicore_percent=3), [proc(380.0)], 5.0)
    assert (seen.kind, seen.time_s, seen.inputs["host_cpu_percent"]) == (
        WorkloadClass.INPUT_BOUND,
        5.0,
        380.0,
    )
