"""Provides the fleet's records: every node's chips, levels and freshness at one instant.

A ``FleetSnapshot`` is to ``npuwatch fleet`` what a ``Snapshot`` is to one node: the unit every fleet
view renders and ``--json`` writes.  Each ``FleetNode`` carries its chips as an ordinary node
``Snapshot`` (``FleetNode.snapshot``, rebuilt from Prometheus series or read from a node's
``/snapshot``), so a view that opens a node shows it with the single-node cards; the node's level and
reasons are the judge's (``npuwatch.judge``), never a rule of the fleet's own.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, Optional, Tuple

from npuwatch.model import ChipSample, Level, Snapshot, WorkloadClass, worst

FLEET_SCHEMA = "npuwatch/fleet/v1"


class Exporter(enum.Enum):
    """What a node's data came from."""

    NPUWATCH = "npuwatch"  # ``npuwatch serve`` /metrics (its npuwatch_* series present)
    NPU_EXPORTER = "npu-exporter"  # Huawei npu-exporter's series only: levels judged here
    SNAPSHOT = "snapshot"  # ``npuwatch serve`` /snapshot, polled with ``--hosts``
    NONE = "none"  # nothing read (a node that never answered)


@dataclass(frozen=True)
class FleetChip:
    """One chip of a node: its sample (identity, health, metrics, workload when known) and the
    judge's level with the reasons' short texts."""

    sample: ChipSample
    level: Level = Level.OK
    reasons: Tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``NPU 3`` / ``NPU 3 chip 1``."""
        return self.sample.identity.label

    @property
    def key(self) -> Tuple[int, int]:
        """(npu_id, chip_id)."""
        return self.sample.identity.key

    @property
    def workload_class(self) -> Optional[WorkloadClass]:
        """What the chip is limited by, when its exporter or snapshot said."""
        workload = self.sample.workload
        return workload.kind if workload is not None else None


@dataclass(frozen=True)
class FleetNode:
    """One node of the fleet.

    ``node`` is its name (a node-name label when the series carry one, else Prometheus'
    ``instance``; with ``--hosts`` the host name its snapshot gives, else ``host:port``);
    ``instance`` where it is scraped or polled.  ``stale`` nodes stopped reporting (or answer with
    a clock that is off): they keep their last chips, ``stale_reason`` says why, and their level is
    at least ``unknown``.  ``reasons`` are ``NPU 3: Alarm 80E01801 → restart-business`` lines,
    worst first.  ``age_s`` is how old the node's data is at ``FleetSnapshot.taken_at``.
    """

    node: str
    instance: str
    chips: Tuple[FleetChip, ...] = ()
    level: Level = Level.OK
    reasons: Tuple[str, ...] = ()
    stale: bool = False
    stale_reason: Optional[str] = None
    taken_at: Optional[datetime] = None
    age_s: Optional[float] = None
    exporter: Exporter = Exporter.NONE
    #: The node's chips (and, with --hosts, processes, host and versions) as one node Snapshot,
    #: for a view that opens the node; ``None`` when nothing was ever read.
    snapshot: Optional[Snapshot] = None
    #: How far the node's clock is from ours (seconds, positive: ahead), when it could be told.
    clock_offset_s: Optional[float] = None
    warnings: Tuple[str, ...] = ()

    @property
    def chips_total(self) -> int:
        """How many chips the node lists."""
        return len(self.chips)

    @property
    def chips_ok(self) -> int:
        """How many of them the judge calls ``ok``."""
        return sum(1 for chip in self.chips if chip.level is Level.OK)

    @property
    def reason(self) -> str:
        """The first (worst) reason, or empty."""
        return self.reasons[0] if self.reasons else ""

    @property
    def aicore_mean(self) -> Optional[float]:
        """Mean AI Core % over the chips that report it."""
        values = _values(self.chips, "aicore_percent")
        return sum(values) / len(values) if values else None

    @property
    def aicore_min(self) -> Optional[float]:
        """Lowest AI Core % of the chips that report it."""
        values = _values(self.chips, "aicore_percent")
        return min(values) if values else None

    @property
    def hbm_used_mib(self) -> Optional[float]:
        """HBM in use over every chip that reports it (MiB)."""
        values = _values(self.chips, "hbm_used_mib")
        return sum(values) if values else None

    @property
    def hbm_total_mib(self) -> Optional[float]:
        """HBM over every chip that reports it (MiB)."""
        values = _values(self.chips, "hbm_total_mib")
        return sum(values) if values else None

    @property
    def power_w(self) -> Optional[float]:
        """Power drawn by every chip that reports it (W)."""
        values = _values(self.chips, "power_w")
        return sum(values) if values else None

    @property
    def hottest(self) -> Optional[FleetChip]:
        """The chip with the highest temperature, when any reports one."""
        hot = [chip for chip in self.chips if chip.sample.temperature_c is not None]
        return max(hot, key=lambda chip: chip.sample.temperature_c or 0) if hot else None

    @property
    def workload_classes(self) -> Dict[str, int]:
        """How many chips are in each workload class (``{"compute-bound": 6, "idle": 2}``);
        empty when no exporter says."""
        counts: Dict[str, int] = {}
        for chip in self.chips:
            kind = chip.workload_class
            if kind is not None:
                counts[kind.value] = counts.get(kind.value, 0) + 1
        return counts


@dataclass(frozen=True)
class FleetSnapshot:
    """Every node at one instant, worst first (level, then stale, then name).

    ``source`` is ``prometheus:<url>`` or ``hosts:<n>``; ``error`` is set when the source itself
    failed this time (Prometheus unreachable, 401 …): a live view shows it in its header and keeps
    the last nodes marked stale; ``warnings`` are what was skipped (series missing labels …).
    """

    taken_at: datetime
    source: str
    nodes: Tuple[FleetNode, ...] = ()
    warnings: Tuple[str, ...] = ()
    error: Optional[str] = None
    schema: str = field(default=FLEET_SCHEMA)

    @property
    def chips_total(self) -> int:
        """Chips over every node."""
        return sum(node.chips_total for node in self.nodes)

    @property
    def chips_ok(self) -> int:
        """``ok`` chips over every node."""
        return sum(node.chips_ok for node in self.nodes)

    @property
    def level(self) -> Level:
        """The worst node's level."""
        return worst(node.level for node in self.nodes)

    @property
    def stale_nodes(self) -> Tuple[FleetNode, ...]:
        """The nodes that stopped reporting."""
        return tuple(node for node in self.nodes if node.stale)

    def node(self, name: str) -> Optional[FleetNode]:
        """The node called ``name`` (or scraped at that instance), if present."""
        return next((n for n in self.nodes if name in (n.node, n.instance)), None)


def sort_key(node: FleetNode) -> Tuple[int, int, int, str]:
    """Worst first: level, stale before fresh, fewer OK chips, then name."""
    return (-node.level.rank, 0 if node.stale else 1, node.chips_ok - node.chips_total, node.node)


def worst_first(nodes: Tuple[FleetNode, ...]) -> Tuple[FleetNode, ...]:
    """``nodes`` ordered by ``sort_key``."""
    return tuple(sorted(nodes, key=sort_key))


def _values(chips: Tuple[FleetChip, ...], metric: str) -> Tuple[float, ...]:
    found = (chip.sample.metric(metric) for chip in chips)
    return tuple(value for value in found if value is not None)
