"""Provides machine_state(): a scenario's live values in closed form of (elapsed time, seed).

The fake npu-smi is a fresh process per call, so nothing here keeps state: every value is a
pure function of the scenario, the seconds since the demo started and a seed.  Noise is a
hash of (seed, what, whole second), so a frozen time (``NPUWATCH_SIM_NOW``) prints the same
table every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from npuwatch.probes.simulator.scenarios import (
    ChipSpec,
    HealthOverride,
    Layout,
    LoadProfile,
    Phase,
    ProcessSpec,
    Scenario,
    Throttle,
    ThrottleReason,
)

#: Temperature lags power: the average load over this window, sampled at a few points.
THERMAL_WINDOW_S = 30.0
_THERMAL_SAMPLES = 6
_AMBIENT_C = 33.0
_HEATING_C = 26.0  # full load for the whole window warms a chip this much above ambient


@dataclass(frozen=True)
class ChipReading:
    """One chip's values at one instant; ``power_w`` is None where npu-smi prints `-`/`NA`.

    The fields after ``hugepages_used`` are what DCMI reads beyond npu-smi's table (issue 16);
    each is the same number the fake npu-smi prints in ``-t usages|common|memory`` where it
    prints one, and ``None`` where the chip has no such unit.
    """

    spec: ChipSpec
    health: str
    power_w: Optional[float]
    temperature_c: int
    aicore_percent: int
    hbm_used_mib: int
    memory_used_mib: int
    hugepages_used: int
    aicore_freq_mhz: int = 0
    aicore_rated_freq_mhz: int = 0
    vector_percent: int = 0
    cube_percent: Optional[int] = None  # 950 only (DCMI utilisation type 14)
    aicpu_percent: int = 0
    ctrlcpu_percent: int = 0
    hbm_bandwidth_percent: Optional[int] = None  # HBM chips
    ddr_bandwidth_percent: Optional[int] = None  # DDR chips (310P)
    hbm_temperature_c: Optional[int] = None  # HBM chips
    voltage_v: float = 0.0
    ecc_single_bit_errors: int = 0
    ecc_double_bit_errors: int = 0
    ecc_isolated_pages: int = 0
    #: The fault the chip reports at this instant (health, error code and text), if any.
    fault: Optional[HealthOverride] = None


@dataclass(frozen=True)
class ProcessReading:
    """One process at one instant: its NPU memory and the host CPU it burns."""

    spec: ProcessSpec
    npu_memory_mib: int
    cpu_percent: float


@dataclass(frozen=True)
class MachineState:
    """Everything the fake npu-smi prints at ``elapsed_s``."""

    scenario: Scenario
    elapsed_s: float
    chips: Tuple[ChipReading, ...]
    processes: Tuple[ProcessReading, ...]
    #: (NPU ID, W) of cards whose power only the board reports (310P: ``dcmi_mcu_get_power_info``).
    board_power_w: Tuple[Tuple[int, float], ...] = ()


def noise(seed: int, *keys: float) -> float:
    """A deterministic pseudo-random number in [0, 1) for ``keys`` (splitmix64 mixing)."""
    value = (seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    for key in keys:
        value = (value ^ (int(key) & 0xFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        value ^= value >> 31
        value = (value * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        value ^= value >> 29
    return (value >> 11) / float(1 << 53)


def _active_at(process: ProcessSpec, elapsed_s: float) -> Optional[float]:
    """Seconds the process has been running at ``elapsed_s``, or None when it is not running."""
    since = elapsed_s - process.start_s
    if since < 0:
        return None
    if process.period_s is not None:
        since = since % process.period_s
    if process.duration_s is not None and since >= process.duration_s:
        return None
    return since


def _phase(profile: LoadProfile, running_s: float) -> str:
    """warmup, checkpoint, dip or steady."""
    if running_s < profile.warmup_s:
        return "warmup"
    after = running_s - profile.warmup_s
    every = profile.checkpoint_every_s
    if every > 0 and after >= every and after % every < profile.checkpoint_s:
        return "checkpoint"
    if profile.dip_every_s > 0 and after % profile.dip_every_s >= profile.dip_every_s - profile.dip_s:
        return "dip"
    return "steady"


def _phase_spec(profile: LoadProfile, phase: str) -> Optional[Phase]:
    """The ranges of a steady or dip phase; None during warm-up and checkpoints."""
    return {"steady": profile.steady, "dip": profile.dip}.get(phase)


def _draw(span: Tuple[float, float], jitter: float) -> float:
    low, high = span
    return low + (high - low) * jitter


def process_load_percent(process: ProcessSpec, running_s: float, seed: int) -> float:
    """The AI Core load (0-100) the process puts on its chip after ``running_s`` seconds."""
    profile = process.profile
    jitter = noise(seed, process.pid, running_s)
    phase = _phase(profile, running_s)
    if phase == "warmup":
        # Graph compile first (almost idle), then the first steps ramp up.
        ramp = max(0.0, running_s / profile.warmup_s - 0.6) / 0.4
        return min(100.0, ramp * profile.steady.aicore_percent[0] + 8.0 * jitter)
    if phase == "checkpoint":
        return 3.0 * jitter
    if phase == "dip":
        return _draw(profile.dip.aicore_percent, jitter)
    low, high = profile.steady.aicore_percent
    if profile.swing_period_s > 0:
        # Inference traffic: a slow swing across the range plus a little noise.
        wave = 0.5 + 0.4 * math.sin(2 * math.pi * running_s / profile.swing_period_s)
        return low + (high - low) * min(1.0, max(0.0, wave + 0.2 * (jitter - 0.5)))
    return low + (high - low) * jitter


def process_units_percent(process: ProcessSpec, running_s: float, seed: int, load: float) -> Tuple[int, int]:
    """(HBM bandwidth %, AI CPU %) the process drives with AI Core ``load`` after ``running_s``.

    A compute-bound phase moves HBM at two thirds of its AI Core % and barely uses the AI CPU;
    a phase that says otherwise (decode streaming the KV cache, operators falling back to the
    AI CPU) draws its own numbers.
    """
    spec = _phase_spec(process.profile, _phase(process.profile, running_s))
    bandwidth = None if spec is None else spec.hbm_bandwidth_percent
    aicpu = None if spec is None else spec.aicpu_percent
    hbm = (
        int(load) * 2 // 3
        if bandwidth is None
        else round(_draw(bandwidth, noise(seed, process.pid, running_s, 13)))
    )
    cpu = (
        (1 if int(load) > 0 else 0)
        if aicpu is None
        else round(_draw(aicpu, noise(seed, process.pid, running_s, 17)))
    )
    return hbm, cpu


#: Host CPU % of a process while it checkpoints (writing to disk: busy, not pegged).
_CHECKPOINT_CPU = (55.0, 75.0)


def process_cpu_percent(process: ProcessSpec, elapsed_s: float, seed: int) -> float:
    """Host CPU % of the process: data loaders keep it busy while the NPU waits in a dip."""
    running_s = _active_at(process, elapsed_s)
    if running_s is None:
        return 0.0
    jitter = noise(seed, process.pid, running_s, 7)
    profile = process.profile
    phase = _phase(profile, running_s)
    spec = _phase_spec(profile, phase)
    if spec is not None:
        span = spec.host_cpu_percent
    else:
        span = profile.warmup_cpu_percent if phase == "warmup" else _CHECKPOINT_CPU
    return round(_draw(span, jitter), 1)


def process_memory_mib(process: ProcessSpec, running_s: float) -> int:
    """NPU memory of the process: it grows in steps during warm-up, then stays flat."""
    warm = process.profile.warmup_s
    fraction = 1.0 if warm <= 0 else min(1.0, math.floor(running_s / warm * 8 + 1) / 8)
    return int(process.hbm_mib * fraction)


def leaked_memory_mib(process: ProcessSpec, elapsed_s: float) -> int:
    """NPU memory the process left held after it exited (``holds_hbm_s``), 0 when none is."""
    since = elapsed_s - process.start_s
    if process.holds_hbm_s <= 0 or process.duration_s is None or since < 0:
        return 0
    if process.period_s is not None:
        since = since % process.period_s
    if process.duration_s <= since < process.duration_s + process.holds_hbm_s:
        return process_memory_mib(process, process.duration_s)
    return 0


#: Each scenario's processes by chip, built once (the DCMI fake's state is written every tick):
#: id(scenario) → (the scenario itself, to tell a reused id apart; the index).
_BY_CHIP: Dict[int, Tuple[Scenario, Dict[Tuple[int, int], Tuple[ProcessSpec, ...]]]] = {}


def _processes_on(scenario: Scenario, key: Tuple[int, int]) -> Tuple[ProcessSpec, ...]:
    known = _BY_CHIP.get(id(scenario))
    if known is None or known[0] is not scenario:
        if len(_BY_CHIP) > 64:
            _BY_CHIP.clear()
        index: Dict[Tuple[int, int], List[ProcessSpec]] = {}
        for process in scenario.processes:
            index.setdefault((process.npu_id, process.chip_id), []).append(process)
        known = _BY_CHIP[id(scenario)] = (scenario, {k: tuple(v) for k, v in index.items()})
    return known[1].get(key, ())


def chip_load_percent(scenario: Scenario, chip: ChipSpec, elapsed_s: float, seed: int) -> float:
    """The AI Core load of a chip: the busiest process on it (0 when none runs or it is faulty)."""
    if scenario.health_of(chip.npu_id, chip.chip_id, elapsed_s) is not None:
        return 0.0
    load = 0.0
    for process in _processes_on(scenario, (chip.npu_id, chip.chip_id)):
        running_s = _active_at(process, elapsed_s)
        if running_s is not None:
            load = max(load, process_load_percent(process, running_s, seed))
    return min(100.0, max(0.0, load))


def _chip_units(scenario: Scenario, chip: ChipSpec, elapsed_s: float, seed: int) -> Tuple[int, int]:
    """(HBM bandwidth %, AI CPU %) of a chip: the most any process on it drives."""
    if scenario.health_of(chip.npu_id, chip.chip_id, elapsed_s) is not None:
        return 0, 0
    hbm, aicpu = 0, 0
    for process in _processes_on(scenario, (chip.npu_id, chip.chip_id)):
        running_s = _active_at(process, elapsed_s)
        if running_s is not None:
            load = process_load_percent(process, running_s, seed)
            bandwidth, cpu = process_units_percent(process, running_s, seed, load)
            hbm, aicpu = max(hbm, bandwidth), max(aicpu, cpu)
    return min(100, hbm), min(100, aicpu)


@dataclass(frozen=True)
class ThrottleState:
    """Where a throttling chip is in its cycle: how far towards its limit, how many steps down."""

    level: float  # 0: not climbing, 1: at the limit
    steps: int  # AI Core frequency steps below rated


def throttle_state(throttle: Throttle, elapsed_s: float, rated_mhz: int) -> ThrottleState:
    """The chip's climb towards its limit and its frequency steps at ``elapsed_s``."""
    cycle = (elapsed_s - throttle.start_s) % throttle.period_s
    release, every = throttle.release_s, throttle.step_every_s
    if cycle < throttle.climb_s:
        level = cycle / throttle.climb_s
    elif cycle < release:
        level = 1.0
    else:
        level = max(0.0, 1.0 - (cycle - release) / throttle.recover_s)
    most = max(0, (rated_mhz - throttle.floor_mhz) // throttle.step_mhz)
    if cycle < throttle.steps_from_s:
        steps = 0
    elif cycle < release:
        steps = min(most, 1 + int((cycle - throttle.steps_from_s) // every))
    else:
        held = min(most, 1 + int(max(0.0, release - throttle.steps_from_s) // every))
        steps = max(0, held - 1 - int((cycle - release) // every))
    return ThrottleState(level, steps)


#: AI Core frequencies (MHz): the rated one npu-smi prints as ``Aicore Freq`` (capture 031, a real
#: 910B1: 1800; 061, a 310P: 1080) and the current one (``Aicore curFreq``: 800 at idle in 031).
#: The fake npu-smi's ``-t common`` prints the same numbers (render_kv._common).  A3 and 950 reuse
#: the 910B's 1800: our demo value, not a measured one.
_RATED_HBM_MHZ = 1800
_RATED_DDR_MHZ = 1080
_IDLE_MHZ = 800
_BUSY_DDR_MHZ = 960
#: Core voltage (V) at idle and its rise at full load: our demo values (DCMI reports 0.01 V units).
_VOLTAGE_IDLE_V = 0.80
_VOLTAGE_SPAN_V = 0.10
#: A 310P Duo card's board power (W) at idle and its rise at full load: our demo values (npu-smi
#: prints `NA` for the chips; DCMI reports the board through the card's MCU).
_BOARD_IDLE_W = 28.0
_BOARD_SPAN_W = 120.0


def rated_aicore_mhz(chip: ChipSpec) -> int:
    """The chip's rated AI Core frequency (DCMI frequency type 9, npu-smi ``Aicore Freq``)."""
    return _RATED_HBM_MHZ if chip.hbm_total_mib else _RATED_DDR_MHZ


def current_aicore_mhz(chip: ChipSpec, load: float) -> int:
    """The current AI Core frequency (type 7, ``Aicore curFreq``): rated when busy, 800 when idle."""
    if int(load) <= 0:
        return _IDLE_MHZ
    return _RATED_HBM_MHZ if chip.hbm_total_mib else _BUSY_DDR_MHZ


def aicore_count(chip: ChipSpec) -> int:
    """AI Cores of the chip (``Aicore Count``): 20 on a 910B3, 24 on other HBM parts, 8 on a 310P."""
    if not chip.hbm_total_mib:
        return 8
    return 20 if "B3" in chip.name else 24


@dataclass(frozen=True)
class _ChipNow:
    """What a chip's processes, fault and throttle make of it at one instant."""

    load: float
    hbm_bandwidth: int
    aicpu: int
    freq_mhz: int
    fault: Optional[HealthOverride]
    throttle: Optional[Throttle]
    throttled: Optional[ThrottleState]


def _chip_now(scenario: Scenario, chip: ChipSpec, elapsed_s: float, seed: int) -> _ChipNow:
    load = chip_load_percent(scenario, chip, elapsed_s, seed)
    hbm, aicpu = _chip_units(scenario, chip, elapsed_s, seed)
    freq = current_aicore_mhz(chip, load)
    throttle = scenario.throttle_of(chip.npu_id, chip.chip_id)
    state = None
    if throttle is not None and int(load) > 0:  # an idle chip is at its idle clock anyway
        state = throttle_state(throttle, elapsed_s, rated_aicore_mhz(chip))
        freq = rated_aicore_mhz(chip) - throttle.step_mhz * state.steps
    fault = scenario.health_of(chip.npu_id, chip.chip_id, elapsed_s)
    return _ChipNow(load, hbm, aicpu, freq, fault, throttle, state)


def _with_units(scenario: Scenario, base: ChipReading, now: _ChipNow) -> ChipReading:
    """``base`` (npu-smi's table values) plus the other units' values: the same numbers the fake
    npu-smi prints in ``-t usages``, ``common`` and ``memory`` wherever it prints one."""
    chip = base.spec
    hbm = bool(chip.hbm_total_mib)
    aicore = base.aicore_percent
    rated = rated_aicore_mhz(chip)
    # A throttled chip lowers its voltage with its clock (DVFS).
    clock = now.freq_mhz / rated if now.throttled is not None else 1.0
    override = now.fault
    return replace(
        base,
        aicore_freq_mhz=now.freq_mhz,
        aicore_rated_freq_mhz=rated,
        vector_percent=max(0, aicore - 12) if hbm else aicore // 3,
        cube_percent=aicore if scenario.layout is Layout.A5 else None,
        aicpu_percent=now.aicpu,
        ctrlcpu_percent=3 + aicore // 20,
        hbm_bandwidth_percent=now.hbm_bandwidth if hbm else None,
        ddr_bandwidth_percent=None if hbm else aicore // 4,
        hbm_temperature_c=base.temperature_c - 2 if hbm else None,
        voltage_v=round(_VOLTAGE_IDLE_V + _VOLTAGE_SPAN_V * now.load / 100.0 * clock, 2),
        ecc_single_bit_errors=override.ecc_single_bit_errors if override else 0,
        ecc_double_bit_errors=override.ecc_double_bit_errors if override else 0,
        ecc_isolated_pages=override.ecc_isolated_pages if override else 0,
        fault=override,
    )


def _board_power(
    scenario: Scenario, loads: Dict[Tuple[int, int], float], seed: int, elapsed_s: float
) -> Tuple[Tuple[int, float], ...]:
    """Board power of each 310P card (its chips show none): idle plus a share of the mean load."""
    if scenario.layout is not Layout.P310:
        return ()
    found = []
    for npu_id in scenario.npu_ids:
        chips = [c for c in scenario.chips if c.npu_id == npu_id]
        if any(c.power_shown for c in chips):
            continue
        mean = sum(loads[(c.npu_id, c.chip_id)] for c in chips) / len(chips)
        jitter = noise(seed, npu_id, elapsed_s, 11)
        found.append((npu_id, round(_BOARD_IDLE_W + _BOARD_SPAN_W * mean / 100.0 + 2.0 * jitter, 1)))
    return tuple(found)


def _power_w(chip: ChipSpec, now: _ChipNow, jitter: float) -> float:
    span = chip.max_power_w - chip.idle_power_w
    fraction = min(1.0, now.load / 100.0 * 0.94 + 0.04 * jitter)
    throttle, state = now.throttle, now.throttled
    if throttle is not None and state is not None and throttle.reason is ThrottleReason.THERMAL:
        fraction *= now.freq_mhz / rated_aicore_mhz(chip)  # a slower clock draws less
    watts = chip.idle_power_w + span * fraction
    if throttle is not None and state is not None and throttle.reason is ThrottleReason.POWER:
        capped = min(chip.max_power_w, throttle.limit + 1.5 * (jitter - 0.5))
        watts += (capped - watts) * state.level
    return round(min(chip.max_power_w, watts), 1)


def _temperature_c(scenario: Scenario, chip: ChipSpec, now: _ChipNow, elapsed_s: float, seed: int) -> int:
    step = THERMAL_WINDOW_S / _THERMAL_SAMPLES
    past = [max(0.0, elapsed_s - k * step) for k in range(_THERMAL_SAMPLES)]
    mean = sum(chip_load_percent(scenario, chip, t, seed) for t in past) / len(past)
    offset = 4.0 * noise(seed, chip.phy_id, 1_000_003)  # slot position: some chips run warmer
    fault = scenario.health_of(chip.npu_id, chip.chip_id)
    warmer = fault.warmer_c if fault is not None and fault.active(elapsed_s) else 0.0
    celsius = _AMBIENT_C + offset + warmer + _HEATING_C * mean / 100.0
    throttle, state = now.throttle, now.throttled
    if throttle is not None and state is not None and throttle.reason is ThrottleReason.THERMAL:
        # Its cooling cannot keep up: it climbs to the limit and hovers there, throttled.
        limit = throttle.limit + 2.0 * (noise(seed, chip.phy_id, elapsed_s, 19) - 0.5)
        celsius += (limit - celsius) * state.level
    return round(celsius)


def machine_state(scenario: Scenario, elapsed_s: float, seed: int = 0) -> MachineState:
    """Every chip and process of ``scenario`` at ``elapsed_s`` seconds into the demo."""
    procs: List[ProcessReading] = []
    held: Dict[Tuple[int, int], int] = {}
    for process in scenario.processes:
        key = (process.npu_id, process.chip_id)
        running_s = _active_at(process, elapsed_s)
        if running_s is None:
            leaked = leaked_memory_mib(process, elapsed_s)
            if leaked:
                held[key] = held.get(key, 0) + leaked
            continue
        memory = process_memory_mib(process, running_s)
        held[key] = held.get(key, 0) + memory
        procs.append(ProcessReading(process, memory, process_cpu_percent(process, elapsed_s, seed)))
    chips: List[ChipReading] = []
    loads: Dict[Tuple[int, int], float] = {}
    for chip in scenario.chips:
        key = (chip.npu_id, chip.chip_id)
        now = _chip_now(scenario, chip, elapsed_s, seed)
        loads[key] = now.load
        jitter = noise(seed, chip.phy_id, elapsed_s, 3)
        hbm = chip.hbm_baseline_mib + held.get(key, 0) if chip.hbm_total_mib else 0
        memory = chip.memory_baseline_mib + (0 if chip.hbm_total_mib else held.get(key, 0))
        base = ChipReading(
            spec=chip,
            health=now.fault.health if now.fault is not None else "OK",
            power_w=_power_w(chip, now, jitter) if chip.power_shown else None,
            temperature_c=_temperature_c(scenario, chip, now, elapsed_s, seed),
            aicore_percent=int(now.load),
            hbm_used_mib=min(hbm, chip.hbm_total_mib),
            memory_used_mib=min(memory, chip.memory_total_mib),
            hugepages_used=chip.hugepages_total,
        )
        chips.append(_with_units(scenario, base, now))
    board = _board_power(scenario, loads, seed, elapsed_s)
    return MachineState(scenario, elapsed_s, tuple(chips), tuple(procs), board)
