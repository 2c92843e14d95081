"""Provides the fleet's presentation model: a FleetSnapshot → one plain row of display strings per node.

The terminal fleet app and the notebook's fleet view render these rows; neither chooses a level,
an order or a figure itself.  Levels and reasons are the judge's, as the fleet records carry them
(``npuwatch.fleet.model``); the default order is the records' own (worst first), so the views list
nodes as ``npuwatch fleet --json`` does.  A node that stopped reporting keeps its row, marked
stale with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from npuwatch.fleet.model import FleetNode, FleetSnapshot, sort_key
from npuwatch.model import Level, WorkloadClass
from npuwatch.widgets import format as fmt

#: A level's glyph, so a row reads without colour (NO_COLOR, plain text).
LEVEL_GLYPHS = {Level.OK: "✔", Level.WARNING: "▲", Level.UNKNOWN: "?", Level.CRITICAL: "✖"}
STALE_GLYPH = "◌"

#: The column headers, in order (both views).
COLUMNS = (
    "Node",
    "Level",
    "Chips OK",
    "Reason",
    "AI Core avg/min",
    "HBM",
    "Power",
    "Hottest",
    "Workload",
    "Age",
)

#: The orders ``s`` steps through: (key, what the header says).
SORTS: Tuple[Tuple[str, str], ...] = (
    ("worst", "worst first"),
    ("node", "by node"),
    ("aicore", "lowest AI Core first"),
    ("power", "most power first"),
    ("hottest", "hottest first"),
    ("age", "oldest data first"),
)
SORT_KEYS = tuple(key for key, _ in SORTS)


@dataclass(frozen=True)
class FleetRow:
    """One node as the fleet views show it."""

    node: str
    instance: str
    level: Level
    level_text: str  # ✖ critical / ◌ stale
    chips: str  # 7/8
    reason: str  # the worst reason; a stale node's first says why it is stale
    aicore: str  # 45% / 3%
    hbm: str  # 412.0/512.0 GiB
    power: str  # 1234 W
    hottest: str  # 71 °C NPU 3
    workload: str  # 6 compute · 2 input
    age: str  # 2 s, 1:05
    stale: bool
    chips_ok: int
    chips_total: int
    reasons: Tuple[str, ...] = ()

    def cells(self) -> Tuple[str, ...]:
        """The row's texts in ``COLUMNS`` order."""
        return (
            self.node,
            self.level_text,
            self.chips,
            self.reason,
            self.aicore,
            self.hbm,
            self.power,
            self.hottest,
            self.workload,
            self.age,
        )


@dataclass(frozen=True)
class FleetHeader:
    """What a fleet view's header says: the source, when, how many nodes and chips, any error."""

    source: str  # prometheus:http://prom:9090 · hosts:3
    updated: str  # HH:MM:SS of the fleet snapshot, local time
    summary: str  # 12 nodes · 2 stale · 90/96 chips OK
    level: Level
    error: Optional[str]  # the source failed this refresh: the rows are the last ones, marked stale
    warnings: Tuple[str, ...]
    nodes: int = 0

    @property
    def error_line(self) -> str:
        """``✖ <error> — showing the last data, marked stale`` (``(no data yet)`` before any); empty
        when the source answered."""
        if not self.error:
            return ""
        if not self.nodes:
            return f"✖ {self.error} (no data yet)"
        return f"✖ {self.error} — showing the last data, marked stale"


def fleet_rows(snapshot: FleetSnapshot, sort: str = "worst", filter_text: str = "") -> Tuple[FleetRow, ...]:
    """A row per node of ``snapshot`` whose name or instance contains ``filter_text`` (any case),
    in the ``sort`` order (``SORT_KEYS``; ``worst``: the records' worst-first order)."""
    wanted = filter_text.strip().lower()
    nodes = [node for node in snapshot.nodes if not wanted or _matches(node, wanted)]
    return tuple(node_row(node) for node in sort_nodes(nodes, sort))


def sort_nodes(nodes: Sequence[FleetNode], sort: str) -> Tuple[FleetNode, ...]:
    """``nodes`` in the ``sort`` order; ties keep the worst-first order."""
    if sort not in _ORDERS:
        raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}, got {sort!r}")
    worst_first = sorted(nodes, key=sort_key)
    order = _ORDERS[sort]
    return tuple(worst_first if order is None else sorted(worst_first, key=order))


def next_sort(sort: str) -> str:
    """The order after ``sort`` (``s``), back to worst first after the last."""
    index = SORT_KEYS.index(sort) if sort in SORT_KEYS else -1
    return SORT_KEYS[(index + 1) % len(SORT_KEYS)]


def sort_label(sort: str) -> str:
    """``worst first``, ``by node`` …"""
    return dict(SORTS).get(sort, sort)


def fleet_header(snapshot: FleetSnapshot) -> FleetHeader:
    """The header facts of ``snapshot``."""
    nodes = len(snapshot.nodes)
    parts = [f"{nodes} node{'s' if nodes != 1 else ''}"]
    stale = len(snapshot.stale_nodes)
    if stale:
        parts.append(f"{stale} stale")
    parts.append(f"{snapshot.chips_ok}/{snapshot.chips_total} chips OK")
    return FleetHeader(
        source=snapshot.source,
        updated=snapshot.taken_at.astimezone().strftime("%H:%M:%S"),
        summary=" · ".join(parts),
        level=snapshot.level,
        error=snapshot.error,
        warnings=snapshot.warnings,
        nodes=nodes,
    )


def node_row(node: FleetNode) -> FleetRow:
    """One node's row."""
    reasons = node.reasons
    if node.stale:
        reasons = (f"stale: {node.stale_reason or 'no data'}", *reasons)
    hottest = node.hottest
    return FleetRow(
        node=node.node,
        instance=node.instance,
        level=node.level,
        level_text=level_text(node),
        chips=f"{node.chips_ok}/{node.chips_total}",
        reason=reasons[0] if reasons else "",
        aicore=_aicore(node.aicore_mean, node.aicore_min),
        hbm=fmt.used_total_gib(node.hbm_used_mib, node.hbm_total_mib),
        power=fmt.NA if node.power_w is None else f"{node.power_w:.0f} W",
        hottest=fmt.NA if hottest is None else f"{fmt.celsius(hottest.sample.temperature_c)} {hottest.label}",
        workload=workload_text(node.workload_classes),
        age=age_text(node.age_s),
        stale=node.stale,
        chips_ok=node.chips_ok,
        chips_total=node.chips_total,
        reasons=tuple(reasons),
    )


def level_text(node: FleetNode) -> str:
    """``✖ critical``; a node that stopped reporting: ``◌ stale``, or ``✖ critical · stale`` when its
    last data was worse than unknown."""
    if node.stale:
        if node.level in (Level.OK, Level.UNKNOWN):
            return f"{STALE_GLYPH} stale"
        return f"{LEVEL_GLYPHS[node.level]} {node.level.value} · stale"
    return f"{LEVEL_GLYPHS[node.level]} {node.level.value}"


def workload_text(counts: Dict[str, int]) -> str:
    """``6 compute · 2 input``: the chips per workload class, most first; empty when none said."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return " · ".join(f"{count} {_tag(kind)}" for kind, count in ordered)


def age_text(age_s: Optional[float]) -> str:
    """``3 s`` under a minute, then ``1:05`` (``1:02:05``); ``n/a`` when unknown."""
    if age_s is None:
        return fmt.NA
    if age_s < 60:
        return f"{max(0.0, age_s):.0f} s"
    return fmt.duration(age_s)


def _tag(kind: str) -> str:
    try:
        return WorkloadClass(kind).tag
    except ValueError:  # a class a newer exporter names: shown as it is
        return kind


def _aicore(mean: Optional[float], low: Optional[float]) -> str:
    if mean is None or low is None:
        return fmt.NA
    return f"{fmt.percent(mean)} / {fmt.percent(low)}"


def _matches(node: FleetNode, wanted: str) -> bool:
    return wanted in node.node.lower() or wanted in node.instance.lower()


def _minus(value: Optional[float]) -> float:
    return -value if value is not None else float("inf")


def _plus(value: Optional[float]) -> float:
    return value if value is not None else float("inf")


_ORDERS: Dict[str, Optional[Callable[[FleetNode], Any]]] = {
    "worst": None,
    "node": lambda node: node.node,
    "aicore": lambda node: _plus(node.aicore_mean),
    "power": lambda node: _minus(node.power_w),
    "hottest": lambda node: _minus(node.hottest.sample.temperature_c if node.hottest else None),
    "age": lambda node: _minus(node.age_s),
}
