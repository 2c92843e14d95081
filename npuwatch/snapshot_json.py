"""Provides the ``npuwatch/snapshot/v1`` JSON form of a Snapshot, both ways (docs/design.md §2.2):
writing here, reading back in ``npuwatch.snapshot_json_read`` (``from_dict`` and its names are
re-exported)."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional

from npuwatch.judge.fault_codes import handling_of
from npuwatch.judge.rules import Judgement, LinkVerdict, judge_snapshot, link_verdicts
from npuwatch.metrics_table import SHOWN_WHEN_REPORTED
from npuwatch.model import (
    CHIP_METRICS,
    SCHEMA,
    ChipError,
    ChipSample,
    HostInfo,
    MetricNote,
    MetricStatus,
    NpuProcess,
    ProcessHostInfo,
    Snapshot,
    Workload,
)
from npuwatch.snapshot_json_read import (
    _HOST_FIELDS,
    _IDENTITY_FIELDS,
    _LINK_FIELDS,
    _PCIE_FIELDS,
    _PROCESS_HOST_FIELDS,
    _VERSION_FIELDS,
    NOT_FINITE,
    NOT_RECORDED,
    derived_info,
    from_dict,
)
from npuwatch.source_info import SourceInfo
from npuwatch.text_safety import inert_json

__all__ = ["NOT_FINITE", "NOT_RECORDED", "derived_info", "dumps", "from_dict", "strict_dumps", "to_dict"]


def to_dict(snapshot: Snapshot) -> Dict[str, Any]:
    """The snapshot as plain JSON-ready data, in the schema's field order."""
    judged = judge_snapshot(snapshot)
    return {
        "schema": SCHEMA,
        "taken_at": snapshot.taken_at.isoformat(),
        "source": snapshot.source,
        # Which chip source read the chips, and why it is not the one asked for (docs/design.md §2.2).
        "backend": snapshot.chip_source,
        "backend_note": snapshot.backend_note,
        # What that source could read, and read this tick (docs/design.md §2.2 additions); null
        # for a snapshot that does not say (built by hand, not sampled).
        "source_info": None if snapshot.source_info is None else _source_info_dict(snapshot.source_info),
        "versions": {name: getattr(snapshot.versions, name) for name in _VERSION_FIELDS},
        "chips": [_chip_dict(chip, judged[chip.identity.key]) for chip in snapshot.chips],
        "processes": [_process_dict(p) for p in snapshot.processes],
        "host": None if snapshot.host is None else _host_dict(snapshot.host),
        "warnings": list(snapshot.warnings),
        "probes": [
            {
                "name": p.name,
                "status": p.status.value,
                "duration_s": p.duration_s,
                "message": p.message,
                "found": p.found,
            }
            for p in snapshot.probes
        ],
    }


def dumps(snapshot: Snapshot, indent: Optional[int] = 2, ensure_ascii: bool = False) -> str:
    """The snapshot as a JSON document (``indent=None`` gives one line, for NDJSON).

    Exact values, and nothing a terminal obeys: control characters are ``\\uXXXX`` escapes.
    ``ensure_ascii`` escapes every non-ASCII character too (for a stream that cannot encode them).
    """
    return strict_dumps(to_dict(snapshot), indent=indent, ensure_ascii=ensure_ascii)


def strict_dumps(data: Any, indent: Optional[int] = 2, ensure_ascii: bool = False) -> str:
    """``data`` (plain JSON-ready values) as strict, inert JSON: every NaN or infinity is ``null``,
    control characters are escapes; ``indent=None`` gives one line.  The one writer of our documents
    (``snapshot --json``, ``npuwatch fleet --json``, both recordings)."""
    separators = (",", ":") if indent is None else None
    text = json.dumps(
        _finite(data),
        indent=indent,
        separators=separators,
        ensure_ascii=ensure_ascii,
        allow_nan=False,  # strict JSON: readers such as jq and JavaScript reject NaN
    )
    return inert_json(text)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity written as ``null``: a number no probe can have
    measured (recordings are cleaned on the way in; this keeps a live probe's slip strict too)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _source_info_dict(info: SourceInfo) -> Dict[str, Any]:
    return {
        "name": info.name,
        "title": info.title,
        "process_table": info.process_table,
        "metrics": [name for name in CHIP_METRICS if name in info.metrics],
        "scopes": [
            {"npu_id": s.npu_id, "chip_id": s.chip_id, "metric": s.metric, "scope": s.scope}
            for s in info.scopes
        ],
    }


def _chip_dict(chip: ChipSample, judgement: Judgement) -> Dict[str, Any]:
    out: Dict[str, Any] = {name: getattr(chip.identity, name) for name in _IDENTITY_FIELDS}
    out["health"] = chip.health.value
    out.update({metric: getattr(chip, metric) for metric in CHIP_METRICS})
    out["unavailable"] = chip.unavailable()
    # A driver-only metric the chip does not have (every one of them when npu-smi read it) is said
    # once, in ``unavailable``: its status is the default ``unsupported`` (docs/design.md §2.2).
    notes = {name: note for name, note in chip.notes.items() if not _only_unavailable(chip, name, note)}
    out["metric_status"] = {name: note.status.value for name, note in notes.items()}
    out["metric_notes"] = {name: note.reason for name, note in notes.items()}
    out["pcie"] = None if chip.pcie is None else {f: getattr(chip.pcie, f) for f in _PCIE_FIELDS}
    # Every link as read, with the judge's verdict on it (derived: judged again when read back).
    out["links"] = [_link_dict(verdict) for verdict in link_verdicts(chip)]
    out["error_codes"] = [_error_dict(e) for e in chip.errors]  # docs/design.md §2.2 (+ handling)
    out["lost_reason"] = chip.lost_reason
    # The judge's verdict (docs/design.md §2.2): derived, so reading a snapshot back judges it again.
    out["judgement"] = {"level": judgement.level.value, "reasons": list(judgement.texts)}
    # What the chip is limited by, over the feed's window (npuwatch.judge.workload); derived too.
    out["workload"] = None if chip.workload is None else _workload_dict(chip.workload)
    return out


def _link_dict(verdict: LinkVerdict) -> Dict[str, Any]:
    link = verdict.link
    out: Dict[str, Any] = {name: getattr(link, name) for name in _LINK_FIELDS}
    out["state"] = link.state.value
    out["verdict"] = {"state": verdict.state.value, "level": verdict.level.value, "text": verdict.text}
    return out


def _error_dict(error: ChipError) -> Dict[str, Any]:
    handling = handling_of(error.code)
    return {
        "code": error.code,
        "text": error.meaning,
        "handling": None if handling is None else handling.value,
        "action": None if handling is None else handling.action,
    }


def _workload_dict(workload: Workload) -> Dict[str, Any]:
    owner = workload.owner
    return {
        "class": workload.kind.value,
        "throttling": None if workload.throttling is None else workload.throttling.value,
        "evidence": dict(workload.evidence),
        "summary": workload.summary,
        "next_step": workload.next_step,
        "needs_dcmi": list(workload.needs_dcmi),
        "needs_reading": list(workload.needs_reading),
        "owner": None
        if owner is None
        else {
            "pid": owner.pid,
            "name": owner.name,
            "user": owner.user,
            "command": owner.command,
            "npu_memory_mib": owner.npu_memory_mib,
            "last_seen": None if owner.last_seen is None else owner.last_seen.isoformat(),
        },
        "samples": workload.samples,
        "window_s": workload.window_s,
    }


def _only_unavailable(chip: ChipSample, name: str, note: MetricNote) -> bool:
    """Whether ``unavailable`` says all of the note: an unsupported driver-only metric that is null."""
    return (
        name in SHOWN_WHEN_REPORTED
        and note.status is MetricStatus.UNSUPPORTED
        and getattr(chip, name) is None
    )


def _process_dict(process: NpuProcess) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        "npu_id": process.npu_id,
        "chip_id": process.chip_id,
        "pid": process.pid,
        "name": process.name,
        "npu_memory_mib": process.npu_memory_mib,
        "container_pid": process.container_pid,
    }
    host = process.host or ProcessHostInfo()
    out.update({f: getattr(host, f) for f in _PROCESS_HOST_FIELDS})
    out["host_unavailable"] = process.host_unavailable
    return out


def _host_dict(host: HostInfo) -> Dict[str, Any]:
    out: Dict[str, Any] = {f: getattr(host, f) for f in _HOST_FIELDS}
    out["load_average"] = None if host.load_average is None else list(host.load_average)
    out["per_cpu_percent"] = list(host.per_cpu_percent)
    out["in_container"] = host.in_container
    out["host_pid_namespace"] = host.host_pid_namespace
    return out
