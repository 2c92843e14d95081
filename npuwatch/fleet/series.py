"""Provides PrometheusSource: the fleet read from Prometheus, ``npuwatch serve`` and npu-exporter alike.

Both exporters use npu-exporter's names (docs/design.md §2.4), so the same queries read both.  A refresh asks
Prometheus' time once (``time()``), then runs these instant queries at that time, side by side:

* ``last_over_time(<name>{selector}[lookback])`` for every per-chip name: the last value of every
  series seen within the lookback (default 5 min), so a node that stopped reporting keeps its last
  chips instead of vanishing.  The health gauge keeps every label (node names, model, bus); the
  others are reduced to ``max by (instance, npu_id, chip_id, id)`` (and ``== 1`` for the state sets
  ``npuwatch_chip_level``, ``…_workload``, ``…_throttling``), which makes the answers a third the size;
* ``max by (instance) (timestamp(npu_chip_info_health_status{selector}))``: when each node was
  last sampled, counting only series present at the evaluation (a target that went down has its
  series ended by Prometheus' staleness markers, and drops out of this one at once);
* ``up{selector}`` and ``timestamp(up{selector})``: whether Prometheus' latest scrape of it worked;
* ``npuwatch_last_sample_timestamp_seconds`` (its value is the node's clock, its timestamp
  Prometheus') and ``npuwatch_sample_age_seconds``: how far the node's clock is from Prometheus'.

A node is **stale** when its latest scrape failed (``up == 0``), when its series are missing at the
latest evaluation though present within the lookback, when Prometheus no longer scrapes it, or when
its newest sample is older than ``stale_after_s`` (npu-exporter stamps its samples with its own clock,
so a clock that is behind, or an exporter serving a frozen cache, shows here).  Ages are measured on
Prometheus' clock (the query's evaluation time), never on ours.

Levels: ``npuwatch_chip_level{level}`` when the node runs ``npuwatch serve``; with npu-exporter's
series only, the chips rebuilt from them (health, temperature, error codes, memory, processes) are
judged by ``npuwatch.judge`` — the same rules, never a second rulebook.  npu-exporter's health gauge
has one "unhealthy" value (0) for DCMI's minor, major and critical health: it reads as ``Alarm``,
critical, as the shipped alerting rule has it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Collection, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from npuwatch.fleet.model import Exporter, FleetChip, FleetNode, worst_first
from npuwatch.fleet.prometheus import Sample
from npuwatch.judge.rules import judge_chip
from npuwatch.judge.workload import _NEXT_STEPS
from npuwatch.metrics_table import METRICS
from npuwatch.model import (
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    Level,
    NpuProcess,
    Snapshot,
    Throttling,
    Workload,
    WorkloadClass,
    worst,
)

#: Labels that name a node, first found wins (a relabelled ``node`` from Kubernetes, …); else ``instance``.
NODE_LABELS: Tuple[str, ...] = ("node", "node_name", "nodename", "kubernetes_node", "hostname")
#: Each exported per-chip metric's name → its ``ChipSample`` field (the metric table's ``exporter_name``).
EXPORTED_CHIP_METRICS: Dict[str, str] = {row.exporter_name: row.name for row in METRICS if row.exporter_name}
HEALTH = "npu_chip_info_health_status"
LEVEL = "npuwatch_chip_level"
WORKLOAD = "npuwatch_chip_workload"
THROTTLING = "npuwatch_chip_throttling"
PROCESS = "npu_chip_info_process_info"
ERROR_CODES: Tuple[str, ...] = (
    "npu_chip_info_error_code",
    *(f"npu_chip_info_error_code_{i}" for i in range(1, 10)),
)
#: Per-node npuwatch series read for the clock check.
LAST_SAMPLE = "npuwatch_last_sample_timestamp_seconds"
SAMPLE_AGE = "npuwatch_sample_age_seconds"
#: Every per-chip name read with ``last_over_time``.
CHIP_NAMES: Tuple[str, ...] = (
    HEALTH,
    *EXPORTED_CHIP_METRICS,
    LEVEL,
    WORKLOAD,
    THROTTLING,
    PROCESS,
    *ERROR_CODES,
)
_FLOAT_FIELDS = frozenset({"power_w", "voltage_v"})
#: A node clock this far from Prometheus' is reported (seconds).
CLOCK_TOLERANCE_S = 30.0
DEFAULT_LOOKBACK_S = 300.0
DEFAULT_STALE_AFTER_S = 60.0

_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"(?:{_MATCHER}(?:,{_MATCHER})*,?\s*)?")


def selector_matchers(selector: Optional[str]) -> str:
    """The inside of a ``{…}`` selector (``{job="npu"}`` or ``job="npu"``); ``ValueError`` when it
    is not a list of label matchers."""
    text = (selector or "").strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    if not _SELECTOR.fullmatch(text):
        raise ValueError(
            f'not a series selector: {selector!r} (label matchers such as {{job="npu"}} or '
            f'{{job="npu",cluster=~"a|b"}})'
        )
    return text.strip().rstrip(",").strip()


#: The state-set families and their state label: only the series at 1 are read.
STATE_SETS: Dict[str, str] = {LEVEL: "level", WORKLOAD: "class", THROTTLING: "reason"}
_CHIP_KEY = "instance, npu_id, chip_id, id"


def fleet_queries(matchers: str, lookback_s: float = DEFAULT_LOOKBACK_S) -> Tuple[Tuple[str, str], ...]:
    """The (tag, query) pairs of a refresh (see the module's docstring), the health gauge first."""
    window = f"{max(1, int(lookback_s))}s"
    queries: List[Tuple[str, str]] = []
    for name in CHIP_NAMES:
        last = f"last_over_time({name}{{{matchers}}}[{window}])"
        if name == HEALTH:
            expr = last
        elif name in STATE_SETS:
            expr = f"max by ({_CHIP_KEY}, {STATE_SETS[name]}) ({last} == 1)"
        elif name == PROCESS:
            expr = f"max by ({_CHIP_KEY}, process_id, process_name) ({last})"
        else:
            expr = f"max by ({_CHIP_KEY}) ({last})"
        queries.append((name, expr))
    queries += [
        ("health_time", f"max by (instance) (timestamp({HEALTH}{{{matchers}}}))"),
        ("up", f"up{{{matchers}}}"),
        ("up_time", f"timestamp(up{{{matchers}}})"),
        (LAST_SAMPLE, f"{LAST_SAMPLE}{{{matchers}}}"),
        ("last_sample_scraped", f"timestamp({LAST_SAMPLE}{{{matchers}}})"),
        (SAMPLE_AGE, f"{SAMPLE_AGE}{{{matchers}}}"),
    ]
    return tuple(queries)


def last_seen_query(matchers: str, instances: Iterable[str], lookback_s: float, step_s: float) -> str:
    """When each of ``instances`` (stale nodes) last had a sample, within the lookback."""
    names = "|".join(re.escape(i).replace("\\", "\\\\") for i in sorted(instances))
    inner = ", ".join(m for m in (matchers, f'instance=~"{names}"') if m)
    window = f"{max(1, int(lookback_s))}s:{max(1, int(step_s))}s"
    return f"max by (instance) (max_over_time(timestamp({HEALTH}{{{inner}}})[{window}]))"


@dataclass
class _Chip:
    labels: Mapping[str, str]
    values: Dict[str, float] = field(default_factory=dict)
    health: Optional[float] = None
    level: Optional[Level] = None
    workload: Optional[WorkloadClass] = None
    throttling: Optional[Throttling] = None
    errors: Dict[int, float] = field(default_factory=dict)


@dataclass
class _Node:
    instance: str
    name: str = ""
    chips: Dict[Tuple[int, int], _Chip] = field(default_factory=dict)
    processes: List[NpuProcess] = field(default_factory=list)
    health_time: Optional[float] = None
    up: Optional[float] = None
    up_time: Optional[float] = None
    last_sample: Optional[float] = None
    last_sample_scraped: Optional[float] = None
    sample_age: Optional[float] = None
    npuwatch: bool = False


@dataclass(frozen=True)
class Reading:
    """What one refresh's answer says: the nodes (worst first) and what was skipped."""

    nodes: Tuple[FleetNode, ...]
    warnings: Tuple[str, ...]
    evaluated_at: float
    #: The stale nodes whose last sample time is not known yet (``last_seen_query`` tells).
    unseen: Tuple[str, ...] = ()


def read_nodes(
    samples: Iterable[Tuple[str, Sample]],
    evaluated_at: float,
    *,
    with_up_only: bool,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
    last_seen: Optional[Mapping[str, float]] = None,
    node_label: Optional[str] = None,
    unread: Collection[str] = (),
) -> Reading:
    """The fleet in the answers of ``fleet_queries`` as (tag, sample) pairs.  ``with_up_only``: a target
    that has ``up`` but no NPU series is a (stale) node too — only when a selector says which targets
    are NPU nodes.  ``unread``: the tags whose answer was not read (too large)."""
    nodes: Dict[str, _Node] = {}
    skipped: Dict[str, int] = {}
    for tag, sample in samples:
        _take(tag, sample, nodes, skipped, node_label)
    warnings = [_skipped_line(why, count) for why, count in sorted(skipped.items())]
    built: List[FleetNode] = []
    unseen: List[str] = []
    for node in nodes.values():
        if not node.chips and not (with_up_only and node.up is not None):
            continue
        seen = (last_seen or {}).get(node.instance)
        fleet_node = _fleet_node(node, evaluated_at, stale_after_s, seen, PROCESS not in unread)
        if fleet_node.stale and fleet_node.taken_at is None and node.chips:
            unseen.append(node.instance)
        built.append(fleet_node)
    return Reading(worst_first(tuple(built)), tuple(warnings), evaluated_at, tuple(unseen))


def _take(
    tag: str, sample: Sample, nodes: Dict[str, _Node], skipped: Dict[str, int], node_label: Optional[str]
) -> None:
    labels = sample.labels
    instance = labels.get("instance")
    if not instance:
        skipped["no instance label"] = skipped.get("no instance label", 0) + 1
        return
    node = nodes.get(instance)
    if node is None:
        node = nodes[instance] = _Node(instance)
    if not node.name and tag in (HEALTH, "up"):  # the series that keep every label
        node.name = _node_name(labels, node_label)
    value = sample.value
    if tag in _NODE_FIELDS:
        setattr(node, _NODE_FIELDS[tag], value)
        node.npuwatch = node.npuwatch or tag in (LAST_SAMPLE, SAMPLE_AGE)
        return
    if not math.isfinite(value):  # NaN, ±Inf: no measurement
        return
    key = _chip_key(labels)
    if key is None:
        skipped["no npu_id or id label"] = skipped.get("no npu_id or id label", 0) + 1
        return
    if tag == PROCESS:
        _take_process(node, key, labels, value, skipped)
        return
    chip = node.chips.get(key)
    if chip is None:
        chip = node.chips[key] = _Chip(labels)
    elif tag == HEALTH:
        chip.labels = labels  # the one series with every label (model, bus)
    _take_chip(chip, tag, labels, value)
    node.npuwatch = node.npuwatch or tag.startswith("npuwatch_")


_NODE_FIELDS = {
    "health_time": "health_time",
    "up": "up",
    "up_time": "up_time",
    LAST_SAMPLE: "last_sample",
    "last_sample_scraped": "last_sample_scraped",
    SAMPLE_AGE: "sample_age",
}


def _take_chip(chip: _Chip, tag: str, labels: Mapping[str, str], value: float) -> None:
    if tag == HEALTH:
        chip.health = value
    elif tag == LEVEL:
        if value == 1:
            chip.level = _enum(Level, labels.get("level"))
    elif tag == WORKLOAD:
        if value == 1:
            chip.workload = _enum(WorkloadClass, labels.get("class"))
    elif tag == THROTTLING:
        if value == 1:
            chip.throttling = _enum(Throttling, labels.get("reason"))
    elif tag in ERROR_CODES:
        chip.errors[ERROR_CODES.index(tag)] = value
    elif tag in EXPORTED_CHIP_METRICS:
        chip.values[EXPORTED_CHIP_METRICS[tag]] = value


def _take_process(
    node: _Node, key: Tuple[int, int], labels: Mapping[str, str], value: float, skipped: Dict[str, int]
) -> None:
    pid = _int_label(labels, "process_id")
    if pid is None:
        skipped["a process series without process_id"] = (
            skipped.get("a process series without process_id", 0) + 1
        )
        return
    name = labels.get("process_name") or None
    node.processes.append(NpuProcess(key[0], key[1], pid, name, round(value)))


def _node_name(labels: Mapping[str, str], node_label: Optional[str]) -> str:
    for name in (node_label,) if node_label else NODE_LABELS:
        if name and labels.get(name):
            return labels[name]
    return ""


def _chip_key(labels: Mapping[str, str]) -> Optional[Tuple[int, int]]:
    npu_id = _int_label(labels, "npu_id")
    if npu_id is not None:
        return npu_id, _int_label(labels, "chip_id") or 0
    phy_id = _int_label(labels, "id")
    return None if phy_id is None else (phy_id, 0)


def _int_label(labels: Mapping[str, str], name: str) -> Optional[int]:
    text = labels.get(name, "")
    return int(text) if text.isdigit() and len(text) < 10 else None


def _enum(kind: type, value: Optional[str]):  # type: ignore[no-untyped-def]  # noqa: ANN202
    try:
        return kind(value)
    except ValueError:
        return None


def _skipped_line(why: str, count: int) -> str:
    return f"{count} series skipped: {why} (the fleet needs instance and npu_id or id on every NPU series)"


def _fleet_node(
    node: _Node, now: float, stale_after_s: float, last_seen: Optional[float], processes_read: bool
) -> FleetNode:
    seen = node.health_time if node.health_time is not None else last_seen
    stale_reason = _stale_reason(node, now, stale_after_s, seen)
    clock = _clock_offset(node)
    warnings: List[str] = []
    if clock is not None and abs(clock) > CLOCK_TOLERANCE_S:
        warnings.append(_clock_line(clock))
    taken_at = datetime.fromtimestamp(seen, timezone.utc) if seen is not None else None
    exporter = Exporter.NPUWATCH if node.npuwatch else Exporter.NPU_EXPORTER if node.chips else Exporter.NONE
    samples = [_chip_sample(key, chip, exporter) for key, chip in sorted(node.chips.items())]
    chips = tuple(
        _judged(sample, chip, node.processes if processes_read else None)
        for sample, chip in zip(samples, sorted(node.chips.items()))
    )
    level = worst(chip.level for chip in chips)
    reasons = [
        f"{chip.label}: {text}"
        for chip in sorted(chips, key=lambda c: -c.level.rank)
        for text in chip.reasons
    ]
    if stale_reason is not None:
        level = worst((level, Level.UNKNOWN))
        reasons.insert(0, f"stale: {stale_reason}")
    snapshot = Snapshot(
        taken_at=taken_at or datetime.fromtimestamp(now, timezone.utc),
        source=f"prometheus:{node.instance}",
        chips=tuple(samples),
        processes=tuple(node.processes),
        warnings=tuple(warnings),
    )
    return FleetNode(
        node=node.name or node.instance,
        instance=node.instance,
        chips=chips,
        level=level,
        reasons=tuple(reasons),
        stale=stale_reason is not None,
        stale_reason=stale_reason,
        taken_at=taken_at,
        age_s=None if seen is None else max(0.0, now - seen),
        exporter=exporter,
        snapshot=snapshot,
        clock_offset_s=clock,
        warnings=tuple(warnings),
    )


def _stale_reason(node: _Node, now: float, stale_after_s: float, seen: Optional[float]) -> Optional[str]:
    if node.up == 0:
        return "Prometheus cannot scrape it (up == 0): the exporter is down or unreachable"
    if not node.chips:
        return (
            "it answers Prometheus but sends no NPU series at or before now: its clock may be ahead, "
            "or it exports no chips"
            if node.up is not None
            else "no NPU series"
        )
    if node.health_time is None:
        if node.up is None:
            return "Prometheus no longer scrapes it (its target is gone)"
        return "its NPU series stopped at the latest scrape"
    age = now - node.health_time
    if seen is not None and age > stale_after_s:
        behind = (
            " though it answers Prometheus: its clock is behind, or it serves old data"
            if node.up == 1
            else ""
        )
        return f"its newest sample is {age:.0f} s old (limit {stale_after_s:g} s){behind}"
    return None


def _clock_offset(node: _Node) -> Optional[float]:
    """The node's clock minus Prometheus' (seconds), when the node says its own time."""
    if node.last_sample is None or node.last_sample_scraped is None:
        return None
    return node.last_sample + (node.sample_age or 0.0) - node.last_sample_scraped


def _clock_line(offset: float) -> str:
    way = "ahead of" if offset > 0 else "behind"
    return f"its clock is {abs(offset):.0f} s {way} Prometheus' (fix NTP on the node)"


def _chip_sample(key: Tuple[int, int], chip: _Chip, exporter: Exporter) -> ChipSample:
    labels = chip.labels
    identity = ChipIdentity(
        npu_id=key[0],
        chip_id=key[1],
        name=labels.get("model_name") or None,
        bus_id=labels.get("pcie_bus_info") or None,
        phy_id=_int_label(labels, "id"),
    )
    values = {
        name: (value if name in _FLOAT_FIELDS else round(value))
        for name, value in chip.values.items()
        if math.isfinite(value)
    }
    return ChipSample(
        identity=identity,
        health=_health(chip),
        errors=_errors(chip),
        workload=_workload(chip) if exporter is Exporter.NPUWATCH else None,
        **values,  # type: ignore[arg-type]
    )


def _health(chip: _Chip) -> Health:
    if chip.health == 1:
        return Health.OK
    if chip.health != 0:
        return Health.UNKNOWN  # npuwatch's -1, npu-exporter's failed values, or no series
    # 0 is "unhealthy": npuwatch's level tells a Warning apart; npu-exporter's cannot.
    return Health.WARNING if chip.level is Level.WARNING else Health.ALARM


def _errors(chip: _Chip) -> Tuple[ChipError, ...]:
    codes = (chip.errors[index] for index in sorted(chip.errors))
    return tuple(ChipError(f"{int(code):08X}") for code in codes if code and 0 < code < 2**32)


def _workload(chip: _Chip) -> Optional[Workload]:
    kind = chip.workload
    if kind is None:
        return None
    step = _NEXT_STEPS.get(kind, "")
    return Workload(
        kind=kind,
        summary=kind.value,
        next_step=step[:1].upper() + step[1:],
        throttling=chip.throttling,
    )


def _judged(
    sample: ChipSample, chip: Tuple[Tuple[int, int], _Chip], processes: Optional[Sequence[NpuProcess]]
) -> FleetChip:
    """``processes`` ``None``: their answer was not read, so no "held, no process" is said."""
    key, raw = chip
    mine = [p for p in processes or () if (p.npu_id, p.chip_id) == key]
    judgement = judge_chip(sample, mine, process_table=processes is not None)
    texts = judgement.texts
    level = raw.level if raw.level is not None else judgement.level
    if level is not judgement.level:  # npuwatch serve knew more (its history, its host)
        texts = (*texts, f"{level.value} (npuwatch serve's judge)")
    return FleetChip(sample, level, texts)
