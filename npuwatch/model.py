"""Provides the snapshot data model: the frozen records every probe fills and every view renders."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Mapping, Optional, Tuple, Union

# The PCIe reading lives beside the link record; named here too, where its users import it.
from npuwatch.chip_link import PCIE_GENERATIONS as PCIE_GENERATIONS
from npuwatch.chip_link import ChipLink
from npuwatch.chip_link import PcieLink as PcieLink
from npuwatch.chip_link import pcie_speed_label as pcie_speed_label
from npuwatch.metrics_table import METRICS
from npuwatch.source_info import SourceInfo, title_for

SCHEMA = "npuwatch/snapshot/v1"

#: The per-chip metrics, in the order the JSON schema lists them (the rows of ``metrics_table.METRICS``,
#: which says how every layer labels, scales, keeps and exports each).  Every one is a number or
#: ``None``; a ``None`` always has its reason in ``ChipSample.notes``.
CHIP_METRICS: Tuple[str, ...] = tuple(row.name for row in METRICS)


class Level(enum.Enum):
    """How a chip stands, as the judge (``npuwatch.judge``) rules: the one scale every surface uses.

    ``unknown`` means it cannot be judged (no health, stale values); like ``critical`` it makes
    ``npuwatch check`` and ``/healthz`` unhealthy.  Members order by ``rank``.
    """

    OK = "ok"
    WARNING = "warning"
    UNKNOWN = "unknown"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 ok, 1 warning, 2 unknown, 3 critical: the worse, the higher."""
        return _LEVEL_RANKS[self]

    @property
    def unhealthy(self) -> bool:
        """True for ``critical`` and ``unknown``: what fails ``check`` and ``/healthz``."""
        return self in (Level.CRITICAL, Level.UNKNOWN)


_LEVEL_RANKS = {Level.OK: 0, Level.WARNING: 1, Level.UNKNOWN: 2, Level.CRITICAL: 3}


def worst(levels: Iterable[Level]) -> Level:
    """The worst of ``levels`` (``ok`` when there are none)."""
    return max(levels, key=lambda level: level.rank, default=Level.OK)


class Health(enum.Enum):
    """A chip's health as npu-smi and DCMI report it (0 OK … 3 critical)."""

    OK = "OK"
    WARNING = "Warning"
    ALARM = "Alarm"
    CRITICAL = "Critical"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, text: Optional[str]) -> Health:
        """Map npu-smi's spelling (``OK``, ``Warning``, ``UNKNOWN`` …) to a member."""
        wanted = (text or "").strip().lower()
        for member in cls:
            if member.value.lower() == wanted:
                return member
        return cls.UNKNOWN

    @property
    def level(self) -> Level:
        """The level this health gives a chip: DCMI's 1 "minor alarm" (npu-smi's ``Warning``) is a
        warning, 2 "major" (``Alarm``) and 3 (``Critical``) are critical, no health is unknown
        (docs/reference/driver-interfaces.md §6: ``dcmi_get_device_health`` 0/1/2/3)."""
        return _HEALTH_LEVELS[self]


_HEALTH_LEVELS = {
    Health.OK: Level.OK,
    Health.WARNING: Level.WARNING,
    Health.ALARM: Level.CRITICAL,
    Health.CRITICAL: Level.CRITICAL,
    Health.UNKNOWN: Level.UNKNOWN,
}


class MetricStatus(enum.Enum):
    """Why a metric is not a fresh number (docs/design.md §3 'Per-metric status')."""

    OK = "ok"
    STALE = "stale"
    UNSUPPORTED = "unsupported"
    PERMISSION = "permission"
    TIMEOUT = "timeout"
    ERROR = "error"
    #: A value outside what any Ascend chip can report (``npuwatch.plausible``): set aside, not shown.
    IMPLAUSIBLE = "implausible"


@dataclass(frozen=True)
class MetricNote:
    """The status of one metric that is not a fresh number, and the reason in words."""

    status: MetricStatus
    reason: str


@dataclass(frozen=True)
class ChipIdentity:
    """Who a chip is: the IDs npu-smi prints and its PCI address."""

    npu_id: int
    chip_id: int
    name: Optional[str] = None
    bus_id: Optional[str] = None
    phy_id: Optional[int] = None
    device_id: Optional[int] = None
    logic_id: Optional[int] = None

    @property
    def key(self) -> Tuple[int, int]:
        """The (npu_id, chip_id) pair that identifies a chip across samples."""
        return (self.npu_id, self.chip_id)

    @property
    def label(self) -> str:
        """A short human label such as ``NPU 3`` or ``NPU 3 chip 1``."""
        return f"NPU {self.npu_id}" if self.chip_id == 0 else f"NPU {self.npu_id} chip {self.chip_id}"


@dataclass(frozen=True)
class ChipError:
    """An error code npu-smi's health report gives a chip that is not OK, and what it means."""

    code: str  # hex as npu-smi prints it: 80E01801
    meaning: Optional[str] = None  # npu-smi's Error Information for it, when it printed one

    @property
    def text(self) -> str:
        """``80E01801 HBM multi-bit ECC error``, or the code alone."""
        return f"{self.code} {self.meaning}" if self.meaning else self.code


class WorkloadClass(enum.Enum):
    """What a chip is limited by, as the judge (``npuwatch.judge.workload``) reads it over a window."""

    COMPUTE_BOUND = "compute-bound"
    MEMORY_BOUND = "memory-bound"
    AICPU_BOUND = "aicpu-bound"
    INPUT_BOUND = "input-bound"
    WAITING = "waiting"
    IDLE = "idle"
    IDLE_HOLDING_HBM = "idle-holding-hbm"
    UNKNOWN = "unknown"  # no current AI Core reading: the chip is lost, stale or not reported
    #: A process holds the chip and AI Core has done nothing for minutes: an idle server, a
    #: parked notebook.  Not a problem of the job's.
    ALLOCATED_IDLE = "allocated-idle"
    #: AI Core busy with no process listed: a process not visible here (another container, an
    #: older driver), never memory to free.
    IN_USE_ELSEWHERE = "in-use-elsewhere"
    #: AI Core low in a job, and the signal that would say why is not read here (AI CPU, the host
    #: side): the summary says what it may be and what would tell.
    UNDETERMINED = "undetermined"

    @property
    def tag(self) -> str:
        """A card's short word for it."""
        return _WORKLOAD_TAGS[self]

    @property
    def problem(self) -> bool:
        """True for the classes that say the job is held back by something other than compute."""
        return self in _WORKLOAD_PROBLEMS


_WORKLOAD_TAGS = {
    WorkloadClass.COMPUTE_BOUND: "compute",
    WorkloadClass.MEMORY_BOUND: "memory",
    WorkloadClass.AICPU_BOUND: "AI CPU",
    WorkloadClass.INPUT_BOUND: "input",
    WorkloadClass.WAITING: "waiting",
    WorkloadClass.IDLE: "idle",
    WorkloadClass.IDLE_HOLDING_HBM: "HBM held",
    WorkloadClass.UNKNOWN: "?",
    WorkloadClass.ALLOCATED_IDLE: "no work",
    WorkloadClass.IN_USE_ELSEWHERE: "elsewhere",
    WorkloadClass.UNDETERMINED: "unclear",
}
_WORKLOAD_PROBLEMS = frozenset(
    {
        WorkloadClass.MEMORY_BOUND,
        WorkloadClass.AICPU_BOUND,
        WorkloadClass.INPUT_BOUND,
        WorkloadClass.WAITING,
        WorkloadClass.IDLE_HOLDING_HBM,
    }
)


class Throttling(enum.Enum):
    """Why AI Core runs below its rated frequency while busy."""

    THERMAL = "thermal"
    POWER = "power"
    UNREPORTED = "unreported"  # below rated while busy, neither heat nor a power cap in the readings


@dataclass(frozen=True)
class LastOwner:
    """The process that last held a chip's memory, as npuwatch saw it (the likely owner of a leak)."""

    pid: int
    name: Optional[str] = None
    user: Optional[str] = None
    command: Optional[str] = None
    npu_memory_mib: Optional[int] = None
    last_seen: Optional[datetime] = None


#: An evidence value: a number (a window's mean), a name, or ``None`` when not read.
EvidenceValue = Optional[Union[float, int, str]]


@dataclass(frozen=True)
class Workload:
    """A chip's workload class over the judge's window, with the numbers that decided it.

    ``needs_dcmi`` names the classes the chip source could not decide (npu-smi has no HBM
    bandwidth, AI CPU or frequency) and ``needs_reading`` the metrics it would need to read
    ("needs a source that reads X"); ``owner`` is the likely owner of memory held with no process.
    """

    kind: WorkloadClass
    summary: str
    next_step: str
    throttling: Optional[Throttling] = None
    evidence: Mapping[str, EvidenceValue] = field(default_factory=dict)
    needs_dcmi: Tuple[str, ...] = ()
    owner: Optional[LastOwner] = None
    samples: int = 1
    window_s: float = 0.0
    needs_reading: Tuple[str, ...] = ()  # ``CHIP_METRICS`` names; host_cpu_percent: the host side

    @property
    def tag(self) -> str:
        """A card's short word for the class."""
        return self.kind.tag

    @property
    def throttle_tag(self) -> str:
        """``throttled: thermal`` / ``throttled: power``, or empty."""
        return f"throttled: {self.throttling.value}" if self.throttling is not None else ""


@dataclass(frozen=True)
class ChipSample:
    """One chip at one instant: identity, health and every metric (``None`` + a note when absent)."""

    identity: ChipIdentity
    health: Health = Health.UNKNOWN
    power_w: Optional[float] = None
    temperature_c: Optional[int] = None
    aicore_percent: Optional[int] = None
    npu_util_percent: Optional[int] = None
    hbm_used_mib: Optional[int] = None
    hbm_total_mib: Optional[int] = None
    memory_used_mib: Optional[int] = None
    memory_total_mib: Optional[int] = None
    hugepages_used: Optional[int] = None
    hugepages_total: Optional[int] = None
    notes: Mapping[str, MetricNote] = field(default_factory=dict)
    pcie: Optional[PcieLink] = None
    errors: Tuple[ChipError, ...] = ()  # from `npu-smi info -t health`, asked only when not OK
    #: Why the chip is gone (the source stopped listing it, its PCI config space reads ff ff):
    #: a fact the sampler sets, so no rule has to read it out of a message's wording.
    lost_reason: Optional[str] = None
    # The driver-only metrics (DCMI reads them; npu-smi's table prints none, so its chips have
    # each as None with a note naming the DCMI backend).  After the fields above, so that no
    # positional construction moves.
    aicore_freq_mhz: Optional[int] = None  # AI Core's current frequency
    aicore_rated_freq_mhz: Optional[int] = None  # its rated (maximum) frequency
    vector_percent: Optional[int] = None
    cube_percent: Optional[int] = None  # the 950's AI Cube
    aicpu_percent: Optional[int] = None
    ctrlcpu_percent: Optional[int] = None
    hbm_bandwidth_percent: Optional[int] = None
    hbm_temperature_c: Optional[int] = None
    voltage_v: Optional[float] = None
    ecc_single_bit_errors: Optional[int] = None  # HBM ECC counts (DCMI's ECC info of the HBM)
    ecc_double_bit_errors: Optional[int] = None
    ecc_isolated_pages: Optional[int] = None
    #: What the chip is limited by, judged over a window by the feed (``npuwatch.judge.workload``);
    #: ``None`` until a feed has judged it.
    workload: Optional[Workload] = None
    #: Every link of the chip the link enrichers read (``npuwatch.links``: its PCIe link first);
    #: ``pcie`` above stays the raw sysfs reading.  The judge says what each means.
    links: Tuple[ChipLink, ...] = ()

    def with_workload(self, workload: Optional[Workload]) -> ChipSample:
        """A copy with ``workload`` set (the feed's judge sets it on every chip each tick)."""
        return self._with(workload=workload)

    def with_pcie(self, pcie: Optional[PcieLink]) -> ChipSample:
        """A copy with ``pcie`` set (the sampler adds every chip's link from sysfs each tick)."""
        return self._with(pcie=pcie)

    def with_link(self, link: ChipLink) -> ChipSample:
        """A copy with ``link`` added to ``links`` (each link enricher adds its kind's, each tick)."""
        return self._with(links=(*self.links, link))

    def _with(self, **fields: object) -> ChipSample:
        """``dataclasses.replace`` without re-running ``__init__``, ten times cheaper for this
        record of some fifty fields: for the fields the feed sets on every chip each tick, whose
        values are already records of their own type."""
        copy = object.__new__(ChipSample)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(fields)
        return copy

    def metric(self, name: str) -> Optional[float]:
        """Return the metric called ``name`` (one of ``CHIP_METRICS``)."""
        value = getattr(self, name)
        return None if value is None else float(value)

    def unavailable(self) -> dict[str, str]:
        """The reason for every ``None`` metric (the JSON ``unavailable`` map)."""
        return {
            name: note.reason
            for name, note in self.notes.items()
            if name in CHIP_METRICS and getattr(self, name) is None
        }


@dataclass(frozen=True)
class ProcessHostInfo:
    """What the host knows about a process that holds NPU memory."""

    user: Optional[str] = None
    command: Optional[str] = None
    cpu_percent: Optional[float] = None
    rss_bytes: Optional[int] = None
    start_time_s: Optional[float] = None  # seconds since the epoch
    #: Its child processes (data-loader workers), all generations: how many and their CPU summed,
    #: in % of one core; None when not read.
    children: Optional[int] = None
    children_cpu_percent: Optional[float] = None

    @property
    def tree_cpu_percent(self) -> Optional[float]:
        """The process and its children's CPU, in % of one core (the job's host side)."""
        if self.cpu_percent is None:
            return None
        return self.cpu_percent + (self.children_cpu_percent or 0.0)


@dataclass(frozen=True)
class NpuProcess:
    """One row of npu-smi's process table, enriched with host details where they are visible."""

    npu_id: int
    chip_id: int
    pid: int
    name: Optional[str] = None
    npu_memory_mib: Optional[int] = None
    container_pid: Optional[int] = None
    host: Optional[ProcessHostInfo] = None
    host_unavailable: Optional[str] = None  # why ``host`` is None


@dataclass(frozen=True)
class HostInfo:
    """The machine npuwatch runs on: CPU, memory and load."""

    hostname: str
    cpu_percent: Optional[float] = None
    per_cpu_percent: Tuple[float, ...] = ()
    memory_used_bytes: Optional[int] = None
    memory_total_bytes: Optional[int] = None
    load_average: Optional[Tuple[float, float, float]] = None
    in_container: bool = False
    host_pid_namespace: Optional[bool] = None


@dataclass(frozen=True)
class Versions:
    """Software versions: npu-smi (header), driver, firmware, CANN toolkit and the DCMI library.

    A chip source's own version is the field named after its probe (``Snapshot.chip_source_version``).
    """

    npu_smi: Optional[str] = None
    driver: Optional[str] = None
    firmware: Optional[str] = None
    cann: Optional[str] = None
    dcmi: Optional[str] = None  # the DCMI library's version (``dcmi_get_dcmi_version``)


@dataclass(frozen=True)
class ProbeReport:
    """How one probe fared in this sample (``npu-smi``, ``sysfs``, ``host``)."""

    name: str
    status: MetricStatus
    duration_s: Optional[float] = None
    message: Optional[str] = None
    found: Optional[int] = None  # how many things it found (PCI functions, chips), when it counts
    #: How many times the probe restarted its reader process since it started (the DCMI worker);
    #: ``None`` for a probe that runs no such process.
    restarts: Optional[int] = None
    #: The probe whose process ``restarts`` counts, when it is not this one (``dcmi``, counted on
    #: npu-smi's report while ``auto`` reads through npu-smi).
    restarts_of: Optional[str] = None


@dataclass(frozen=True)
class OwnMemory:
    """This process's torch_npu caching-allocator figures on one chip (the notebook's "this kernel")."""

    torch_device: int  # the torch device index (``npu:0``): the runtime's logical device
    allocated_bytes: int
    reserved_bytes: int


@dataclass(frozen=True)
class Snapshot:
    """Everything npuwatch knows at one instant: the unit every view renders and every check judges."""

    taken_at: datetime
    source: str
    versions: Versions = field(default_factory=Versions)
    chips: Tuple[ChipSample, ...] = ()
    processes: Tuple[NpuProcess, ...] = ()
    host: Optional[HostInfo] = None
    warnings: Tuple[str, ...] = ()
    probes: Tuple[ProbeReport, ...] = ()
    #: The ``probe_name`` of the chip source that read the chips (``npu-smi``; ``dcmi``): its report
    #: is ``chip_source_report``; the JSON's ``backend``.  A recording made before the JSON said it
    #: reads back as ``npu-smi`` (the only backend then).
    chip_source: str = "npu-smi"
    #: Why this backend read the chips instead of the one asked for (``auto`` fell back from DCMI to
    #: npu-smi, and why); None when no fallback happened.  The JSON's ``backend_note``.
    backend_note: Optional[str] = None
    #: What read the chips and what it could read (``npuwatch.source_info``); None only for a
    #: snapshot built by hand or a recording made before the JSON carried it: ask ``described``.
    source_info: Optional[SourceInfo] = None

    @property
    def described(self) -> SourceInfo:
        """``source_info``, or for a snapshot without one what it is taken to be: its
        ``chip_source`` reading every metric and a process table."""
        if self.source_info is not None:
            return self.source_info
        return SourceInfo(self.chip_source, title_for(self.chip_source), True, frozenset(CHIP_METRICS))

    def probe(self, name: str) -> Optional[ProbeReport]:
        """The report of the probe called ``name``, if it ran."""
        return next((report for report in self.probes if report.name == name), None)

    @property
    def chip_source_report(self) -> Optional[ProbeReport]:
        """How the chip source fared in this sample, whichever backend it is; ``None`` when it
        left no report (a recording may carry none)."""
        return self.probe(self.chip_source)

    @property
    def chip_source_version(self) -> Optional[str]:
        """The chip source's own version: the ``Versions`` field named after its probe
        (``npu_smi`` for ``npu-smi``, ``dcmi`` for ``dcmi``), else ``None``."""
        value = getattr(self.versions, self.chip_source.replace("-", "_"), None)
        return value if isinstance(value, str) else None

    def chip(self, npu_id: int, chip_id: int = 0) -> Optional[ChipSample]:
        """The chip with these IDs, if present."""
        return next((c for c in self.chips if c.identity.key == (npu_id, chip_id)), None)
