"""Provides the ``npuwatch/fleet/v1`` JSON of a FleetSnapshot (``npuwatch fleet --json``, fleet recordings).

Each node carries its chips as ``npuwatch/snapshot/v1`` chip objects (the same keys as
``snapshot --json``), whose ``judgement`` is the fleet's level and reasons for the chip, and its
processes (and, read through ``--hosts``, its host) as that schema has them.  ``from_dict`` reads a
document back (a replayed fleet recording); it checks every field through the node schema's reader.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npuwatch import snapshot_json
from npuwatch.fleet.model import FLEET_SCHEMA, Exporter, FleetChip, FleetNode, FleetSnapshot
from npuwatch.model import (
    SCHEMA,
    EvidenceValue,
    LastOwner,
    Level,
    Throttling,
    Workload,
    WorkloadClass,
)


def to_dict(fleet: FleetSnapshot) -> Dict[str, Any]:
    """The fleet as plain JSON-ready data, worst node first."""
    return {
        "schema": FLEET_SCHEMA,
        "taken_at": fleet.taken_at.isoformat(),
        "source": fleet.source,
        "error": fleet.error,
        "warnings": list(fleet.warnings),
        "level": fleet.level.value,
        "nodes_total": len(fleet.nodes),
        "nodes_stale": len(fleet.stale_nodes),
        "chips_total": fleet.chips_total,
        "chips_ok": fleet.chips_ok,
        "nodes": [_node_dict(node) for node in fleet.nodes],
    }


def dumps(fleet: FleetSnapshot, indent: Optional[int] = 2, ensure_ascii: bool = False) -> str:
    """The fleet as a JSON document (``indent=None``: one line, for NDJSON); strict JSON, inert text."""
    return snapshot_json.strict_dumps(to_dict(fleet), indent=indent, ensure_ascii=ensure_ascii)


def _node_dict(node: FleetNode) -> Dict[str, Any]:
    hottest = node.hottest
    snapshot = node.snapshot
    full = snapshot_json.to_dict(snapshot) if snapshot is not None else {}
    chips: List[Dict[str, Any]] = []
    for chip, data in zip(node.chips, full.get("chips", ())):
        data["judgement"] = {"level": chip.level.value, "reasons": list(chip.reasons)}
        chips.append(data)
    return {
        "node": node.node,
        "instance": node.instance,
        "exporter": node.exporter.value,
        "level": node.level.value,
        "reasons": list(node.reasons),
        "stale": node.stale,
        "stale_reason": node.stale_reason,
        "taken_at": None if node.taken_at is None else node.taken_at.isoformat(),
        "age_s": None if node.age_s is None else round(node.age_s, 3),
        "clock_offset_s": None if node.clock_offset_s is None else round(node.clock_offset_s, 3),
        "warnings": list(node.warnings),
        "chips_total": node.chips_total,
        "chips_ok": node.chips_ok,
        "aicore_mean_percent": _round(node.aicore_mean),
        "aicore_min_percent": _round(node.aicore_min),
        "hbm_used_mib": _round(node.hbm_used_mib),
        "hbm_total_mib": _round(node.hbm_total_mib),
        "power_w": _round(node.power_w),
        "hottest": None
        if hottest is None
        else {
            "npu_id": hottest.key[0],
            "chip_id": hottest.key[1],
            "label": hottest.label,
            "temperature_c": hottest.sample.temperature_c,
        },
        "workload_classes": node.workload_classes,
        "chips": chips,
        "processes": full.get("processes", []),
        "host": full.get("host"),
        "versions": full.get("versions"),
        # What read the node's chips (its /snapshot's), so a fleet replay keeps it.
        "backend": full.get("backend"),
        "source_info": full.get("source_info"),
    }


def _round(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 2)


def from_dict(data: Mapping[str, Any]) -> FleetSnapshot:
    """A FleetSnapshot from its JSON form; ``ValueError`` naming what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("not a JSON object")
    if data.get("schema") != FLEET_SCHEMA:
        raise ValueError(f"not a {FLEET_SCHEMA} document (schema: {str(data.get('schema'))[:40]!r})")
    taken_at = _time(data.get("taken_at"), "taken_at")
    if taken_at is None:
        raise ValueError("taken_at is missing")
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise ValueError("nodes is not a list")
    return FleetSnapshot(
        taken_at=taken_at,
        source=_text(data.get("source"), "source") or "",
        nodes=tuple(_node_from(node, taken_at) for node in nodes),
        warnings=tuple(_text(w, "a warning") or "" for w in _items(data.get("warnings"), "warnings")),
        error=_text(data.get("error"), "error"),
    )


def _node_from(data: Any, fleet_taken_at: datetime) -> FleetNode:
    if not isinstance(data, Mapping):
        raise ValueError("a node is not an object")
    taken_at = _time(data.get("taken_at"), "a node's taken_at")
    chips_data = _items(data.get("chips"), "a node's chips")
    snapshot = snapshot_json.from_dict(
        {
            "schema": SCHEMA,
            "taken_at": (taken_at or fleet_taken_at).isoformat(),
            "source": f"fleet:{data.get('instance', '')}",
            "chips": chips_data,
            "processes": _items(data.get("processes"), "a node's processes"),
            "host": data.get("host"),
            "versions": data.get("versions") or {},
            "backend": data.get("backend"),
            # A node that did not say (from Prometheus, or recorded before it): none, not derived.
            "source_info": data.get("source_info"),
        }
    )
    chips = []
    for sample, raw in zip(snapshot.chips, chips_data):
        level, reasons = judgement_from(raw)
        chips.append(FleetChip(sample.with_workload(workload_from(raw.get("workload"))), level, reasons))
    snapshot = replace(snapshot, chips=tuple(chip.sample for chip in chips))
    return FleetNode(
        node=_text(data.get("node"), "node") or "",
        instance=_text(data.get("instance"), "instance") or "",
        chips=tuple(chips),
        level=_level(data.get("level")),
        reasons=tuple(_text(r, "a reason") or "" for r in _items(data.get("reasons"), "reasons")),
        stale=bool(data.get("stale")),
        stale_reason=_text(data.get("stale_reason"), "stale_reason"),
        taken_at=taken_at,
        age_s=_float(data.get("age_s"), "age_s"),
        exporter=_exporter(data.get("exporter")),
        snapshot=snapshot,
        clock_offset_s=_float(data.get("clock_offset_s"), "clock_offset_s"),
        warnings=tuple(_text(w, "a warning") or "" for w in _items(data.get("warnings"), "warnings")),
    )


def judgement_from(chip: Mapping[str, Any]) -> Tuple[Level, Tuple[str, ...]]:
    """A chip object's ``judgement`` (level, reasons); ``unknown`` when it has none."""
    judgement = chip.get("judgement")
    if not isinstance(judgement, Mapping):
        return Level.UNKNOWN, ("no judgement",)
    reasons = tuple(str(r) for r in _items(judgement.get("reasons"), "reasons"))
    return _level(judgement.get("level")), reasons


def workload_from(data: Any) -> Optional[Workload]:
    """A chip's ``workload`` object (``snapshot --json``) as a Workload; ``None`` when absent or bad."""
    if not isinstance(data, Mapping):
        return None
    try:
        kind = WorkloadClass(data.get("class"))
    except ValueError:
        return None
    throttling = data.get("throttling")
    evidence = data.get("evidence")
    owner = data.get("owner")
    return Workload(
        kind=kind,
        summary=str(data.get("summary") or ""),
        next_step=str(data.get("next_step") or ""),
        throttling=Throttling(throttling) if throttling in {t.value for t in Throttling} else None,
        evidence=_evidence(evidence) if isinstance(evidence, Mapping) else {},
        needs_dcmi=tuple(str(n) for n in data.get("needs_dcmi") or () if isinstance(n, str)),
        owner=_owner(owner) if isinstance(owner, Mapping) else None,
        samples=int(data["samples"]) if isinstance(data.get("samples"), int) else 1,
        window_s=float(data["window_s"]) if isinstance(data.get("window_s"), (int, float)) else 0.0,
        needs_reading=tuple(str(n) for n in data.get("needs_reading") or () if isinstance(n, str)),
    )


def _evidence(data: Mapping[str, Any]) -> Dict[str, EvidenceValue]:
    return {
        str(k): v
        for k, v in data.items()
        if v is None or (isinstance(v, (int, float, str)) and v is not True)
    }


def _owner(data: Mapping[str, Any]) -> Optional[LastOwner]:
    pid = data.get("pid")
    if not isinstance(pid, int):
        return None
    memory = data.get("npu_memory_mib")
    return LastOwner(
        pid=pid,
        name=_maybe_str(data.get("name")),
        user=_maybe_str(data.get("user")),
        command=_maybe_str(data.get("command")),
        npu_memory_mib=memory if isinstance(memory, int) else None,
        last_seen=_time(data.get("last_seen"), "last_seen"),
    )


def _maybe_str(value: Any) -> Optional[str]:
    return value if isinstance(value, str) else None


def _items(value: Any, what: str) -> List[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def _text(value: Any, what: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{what} is not text")
    return value


def _float(value: Any, what: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} is not a number")
    return float(value)


def _time(value: Any, what: str) -> Optional[datetime]:
    text = _text(value, what)
    if text is None:
        return None
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def _level(value: Any) -> Level:
    try:
        return Level(value)
    except ValueError:
        return Level.UNKNOWN


def _exporter(value: Any) -> Exporter:
    try:
        return Exporter(value)
    except ValueError:
        return Exporter.NONE
