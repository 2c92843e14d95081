"""Provides the records a demo scenario is made of: chips, PCI, workload, npu-smi behaviour."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Tuple


class Layout(enum.Enum):
    """Which real ``npu-smi info`` table the fake prints (tests/data/npu_smi/MANIFEST.md)."""

    A2 = "910b"  # 98 columns, `Chip` header (001, 022)
    A2_WIDE = "910b-26x"  # 116 columns, `Process id in container` (008)
    A3 = "a3"  # 98 columns, `Chip  Phy-ID`, chip 1 power `-` (007, 100)
    P310 = "310p"  # 106 columns, `Chip    Device`, no HBM, power `NA` (044)
    A5 = "950"  # 116 columns, `NPU ID | Name` cells, `NPU Util(%)` (037)


class NpuSmiMode(enum.Enum):
    """How the fake npu-smi behaves when called."""

    NORMAL = "normal"
    HANG = "hang"  # sleeps until killed: the product must time out
    ERROR = "error"  # prints ``error_text`` and exits non-zero


@dataclass(frozen=True)
class Phase:
    """What a process drives in one phase of its life: (low, high) ranges, drawn each second."""

    aicore_percent: Tuple[float, float]
    #: Host CPU % of the process (100 = one core busy), what the host probe reports for its PID.
    host_cpu_percent: Tuple[float, float]
    #: HBM bandwidth % the phase drives; None: what a compute-bound job drives (two thirds of
    #: its AI Core %).
    hbm_bandwidth_percent: Optional[Tuple[float, float]] = None
    #: AI CPU %; None: 1 % while the AI Core works (the AI CPU only handles the odd operator).
    aicpu_percent: Optional[Tuple[float, float]] = None


#: A training step on the AI Core: the cube units busy, the host process feeding them.
COMPUTE = Phase((85.0, 98.0), (105.0, 125.0))
#: A data-loading stall: the AI Core waits while the job's python decodes and collates batches.
DATA_STALL = Phase((0.0, 6.0), (380.0, 400.0))


@dataclass(frozen=True)
class LoadProfile:
    """The load a process puts on its chip over its life (closed form, see dynamics).

    Warm-up, then ``steady``; every ``dip_every_s`` the last ``dip_s`` seconds are the ``dip``
    phase (a training job's data-loading stall, another job's other phase), and every
    ``checkpoint_every_s`` a checkpoint save idles the AI Core for ``checkpoint_s``.
    """

    #: Graph compile + HBM allocation: the AI Core almost idle, then the first steps ramp up.
    #: CANN compiles in its own worker processes, so the job's main process is not pegged.
    warmup_s: float = 40.0
    warmup_cpu_percent: Tuple[float, float] = (30.0, 50.0)
    steady: Phase = COMPUTE
    dip_every_s: float = 60.0
    dip_s: float = 12.0
    dip: Phase = DATA_STALL
    checkpoint_every_s: float = 240.0  # checkpoint save: AI Core ~0 for checkpoint_s
    checkpoint_s: float = 15.0
    swing_period_s: float = 0.0  # > 0: the steady load swings slowly (inference traffic)

    @property
    def steady_percent(self) -> Tuple[float, float]:
        """The steady phase's AI Core range."""
        return self.steady.aicore_percent


#: A training job: busy AI Core, a data-loading stall of 12 s every minute (every rank at once:
#: they wait for each other's batches), a checkpoint every 4 min.
TRAINING = LoadProfile()
EVALUATION = LoadProfile(warmup_s=8.0, steady=Phase((35.0, 55.0), (105.0, 125.0)), dip_every_s=0.0)
INFERENCE = LoadProfile(
    warmup_s=10.0,
    steady=Phase((20.0, 75.0), (105.0, 125.0)),
    dip_every_s=0.0,
    checkpoint_every_s=0.0,
    swing_period_s=90.0,
)


@dataclass(frozen=True)
class ChipSpec:
    """One chip as npu-smi prints it, with its physical limits."""

    npu_id: int
    chip_id: int
    phy_id: int  # /dev/davinciN, the A3 `Phy-ID` and the 310P `Device` column
    bus_id: str  # npu-smi spelling, upper-case hex: 0000:C1:00.0
    name: str  # npu-smi spelling: 910B3, Ascend910, 310P3, Ascend950DT
    hbm_total_mib: int  # 0: no HBM column (310P)
    memory_total_mib: int  # the DDR Memory-Usage total (0 / 0 on 910B)
    hbm_baseline_mib: int  # what the driver holds with no process (~3.4 GB on 64 GB parts)
    memory_baseline_mib: int
    idle_power_w: float
    max_power_w: float
    power_shown: bool = True  # False: A3 chip 1 prints `-`, 310P prints `NA`
    hugepages_total: int = 0


@dataclass(frozen=True)
class PciSpec:
    """One PCI function (a 310P Duo's two chips share one, subsystem 0x0110)."""

    bdf: str  # sysfs spelling, lower case
    device_id: int
    subsystem_device_id: int = 0x0100
    current_speed: str = "32.0 GT/s PCIe"
    max_speed: str = "32.0 GT/s PCIe"
    current_width: int = 16
    max_width: int = 16


@dataclass(frozen=True)
class HealthOverride:
    """A chip that is not OK, as ``npu-smi info`` and ``-t health`` report it."""

    health: str  # Warning, Alarm, Critical
    error_code: str
    error_info: str
    #: HBM ECC counts DCMI reports for the chip (``dcmi_get_device_ecc_info``); 0 on healthy chips.
    ecc_single_bit_errors: int = 0
    ecc_double_bit_errors: int = 0
    ecc_isolated_pages: int = 0
    #: Demo second the fault is raised (0: before the demo starts); the chip is OK before it.
    start_s: float = 0.0
    #: How much warmer than its load makes it the faulty chip runs (°C, our demo value).
    warmer_c: float = 14.0

    def active(self, elapsed_s: float) -> bool:
        """Whether the fault is raised ``elapsed_s`` seconds into the demo."""
        return elapsed_s >= self.start_s


@dataclass(frozen=True)
class ProcessSpec:
    """One process npu-smi lists on a chip; recurring when ``period_s`` is set."""

    pid: int
    name: str  # the kernel task name npu-smi prints (≤ 15 characters)
    user: str
    command: str
    npu_id: int
    chip_id: int
    hbm_mib: int  # NPU memory once warmed up
    rss_mib: int
    profile: LoadProfile = TRAINING
    start_s: float = 0.0
    duration_s: Optional[float] = None  # None: runs for ever
    period_s: Optional[float] = None  # appears every period_s for duration_s
    #: Seconds its NPU memory stays held after it exits, with no process listed (a leaked
    #: allocation, a zombie holding the device); 0: freed at exit.
    holds_hbm_s: float = 0.0


class ThrottleReason(enum.Enum):
    """Why a chip lowers its AI Core frequency."""

    THERMAL = "thermal"  # its temperature reached the limit
    POWER = "power"  # its power reached the cap


@dataclass(frozen=True)
class Throttle:
    """A busy chip that slows its AI Core down, in a cycle of ``period_s`` seconds from ``start_s``.

    It climbs to ``limit`` (°C for thermal, W for power) over ``climb_s``, steps its AI Core
    frequency down by ``step_mhz`` every ``step_every_s`` from ``steps_from_s`` into the cycle
    to ``floor_mhz``, holds there until ``release_s``, then recovers over ``recover_s`` (the
    frequency steps back up at the same pace).  ``start_s`` may be negative: the climb began
    before the demo did.
    """

    reason: ThrottleReason
    limit: float
    start_s: float = 0.0
    climb_s: float = 30.0
    steps_from_s: float = 25.0
    release_s: float = 160.0
    recover_s: float = 20.0
    period_s: float = 240.0
    step_mhz: int = 100
    step_every_s: float = 5.0
    floor_mhz: int = 1300


@dataclass(frozen=True)
class Versions:
    """What npu-smi's header and the install files say."""

    npu_smi: str = "24.1.rc2"
    driver: str = "24.1.rc2"
    firmware: str = "7.3.0.1.231"
    cann: str = "8.0.RC2"
    #: The framework pair installed in the machine's Python (a tested pair for ``cann``,
    #: runtime-and-doctor.md §8.1); ``None``: not installed.
    torch: Optional[str] = "2.1.0"
    torch_npu: Optional[str] = "2.1.0.post6"


@dataclass(frozen=True)
class DcmiFault:
    """One fault the fake ``libdcmi.so`` injects into a call (card/device ``-1``: any).

    Exactly one of ``code`` (the call returns it), ``hang_s`` (the call sleeps that long, ``0``:
    for ever) and ``crash`` (the call writes through NULL: a segfault) is set.
    """

    function: str  # a name of abi.PROTOTYPES, e.g. "dcmi_init", "dcmi_get_device_temperature"
    card: int = -1
    device: int = -1
    code: Optional[int] = None
    hang_s: Optional[float] = None
    crash: bool = False


@dataclass(frozen=True)
class DcmiSpec:
    """What the machine's DCMI library (the demo's fake ``libdcmi.so``) is like.

    Card IDs are the scenario's NPU IDs (``Scenario.npu_ids``, not necessarily 0..N-1), chips
    per card its chips; these are the differences a scenario can ask for.
    """

    present: bool = True  # False: no libdcmi.so on the machine at all (npu-smi only)
    mcu: bool = True  # each card has an MCU unit (``mcu_id`` = the card's chip count)
    faults: Tuple[DcmiFault, ...] = ()
    omit: Tuple[str, ...] = ()  # functions the library lacks (a build variant)


@dataclass(frozen=True)
class Scenario:
    """A whole simulated machine: chips, PCI, /dev, install files, npu-smi and its workload."""

    name: str
    description: str
    layout: Layout
    chips: Tuple[ChipSpec, ...]
    pci: Tuple[PciSpec, ...]
    processes: Tuple[ProcessSpec, ...] = ()
    health: Tuple[Tuple[Tuple[int, int], HealthOverride], ...] = ()  # ((npu, chip), override)
    npu_smi_mode: NpuSmiMode = NpuSmiMode.NORMAL
    error_text: str = ""
    error_exit_code: int = 255  # the captures do not show npu-smi's status; -1 → 255 assumed
    davinci_ids: Optional[Tuple[int, ...]] = None  # None: every chip's phy_id
    manager_nodes: bool = True
    driver_bound: bool = True
    container: Optional[str] = None  # "docker", "kubernetes" …: container markers
    host_pid_namespace: bool = True
    versions: Versions = Versions()
    #: Seconds already on the demo clock when it starts, so a one-shot snapshot catches the
    #: job nearly warmed up while a live view still sees HBM finish growing.
    lead_in_s: float = 0.0
    dcmi: DcmiSpec = DcmiSpec()
    throttles: Tuple[Tuple[Tuple[int, int], Throttle], ...] = ()  # ((npu, chip), throttle)

    def health_of(
        self, npu_id: int, chip_id: int, elapsed_s: Optional[float] = None
    ) -> Optional[HealthOverride]:
        """The override for this chip, if it is not OK (at ``elapsed_s``, when given)."""
        found = next((h for key, h in self.health if key == (npu_id, chip_id)), None)
        if found is None or elapsed_s is None or found.active(elapsed_s):
            return found
        return None

    def throttle_of(self, npu_id: int, chip_id: int) -> Optional[Throttle]:
        """How this chip throttles, if it does."""
        return next((t for key, t in self.throttles if key == (npu_id, chip_id)), None)

    @property
    def npu_ids(self) -> Tuple[int, ...]:
        """The NPU IDs in print order, each once."""
        return tuple(dict.fromkeys(chip.npu_id for chip in self.chips))
