"""Provides the ``npuwatch/snapshot/v1`` JSON form of a Snapshot, both ways (DESIGN §2.2)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional

from npuwatch.model import (
    CHIP_METRICS,
    SCHEMA,
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    HostInfo,
    MetricNote,
    MetricStatus,
    NpuProcess,
    PcieLink,
    ProbeReport,
    ProcessHostInfo,
    Snapshot,
    Versions,
)
from npuwatch.text_safety import inert_json

_IDENTITY_FIELDS = ("npu_id", "chip_id", "phy_id", "device_id", "logic_id", "name", "bus_id")
_PCIE_FIELDS = (
    "current_speed_gt_s",
    "max_speed_gt_s",
    "current_width",
    "max_width",
    "numa_node",
    "aer_correctable_total",
    "aer_nonfatal_total",
    "aer_fatal_total",
    "present",
)
_PROCESS_HOST_FIELDS = ("user", "command", "cpu_percent", "rss_bytes", "start_time_s")
_HOST_FIELDS = ("hostname", "cpu_percent", "memory_used_bytes", "memory_total_bytes")


def to_dict(snapshot: Snapshot) -> Dict[str, Any]:
    """The snapshot as plain JSON-ready data, in the schema's field order."""
    return {
        "schema": SCHEMA,
        "taken_at": snapshot.taken_at.isoformat(),
        "source": snapshot.source,
        "versions": {
            "npu_smi": snapshot.versions.npu_smi,
            "driver": snapshot.versions.driver,
            "firmware": snapshot.versions.firmware,
            "cann": snapshot.versions.cann,
        },
        "chips": [_chip_dict(chip) for chip in snapshot.chips],
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
    separators = (",", ":") if indent is None else None
    text = json.dumps(to_dict(snapshot), indent=indent, separators=separators, ensure_ascii=ensure_ascii)
    return inert_json(text)


def _chip_dict(chip: ChipSample) -> Dict[str, Any]:
    out: Dict[str, Any] = {name: getattr(chip.identity, name) for name in _IDENTITY_FIELDS}
    out["health"] = chip.health.value
    out.update({metric: getattr(chip, metric) for metric in CHIP_METRICS})
    out["unavailable"] = chip.unavailable()
    out["metric_status"] = {name: note.status.value for name, note in chip.notes.items()}
    out["metric_notes"] = {name: note.reason for name, note in chip.notes.items()}
    out["pcie"] = None if chip.pcie is None else {f: getattr(chip.pcie, f) for f in _PCIE_FIELDS}
    out["error_codes"] = [{"code": e.code, "text": e.meaning} for e in chip.errors]  # DESIGN §2.2
    return out


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


# --- reading back (recordings, --replay of an NDJSON file) ------------------------------------


def from_dict(data: Mapping[str, Any]) -> Snapshot:
    """Rebuild a Snapshot from its v1 JSON form; unknown fields are ignored."""
    if data.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document (schema: {data.get('schema')!r})")
    taken_at = datetime.fromisoformat(str(data["taken_at"]))
    if taken_at.tzinfo is None:
        taken_at = taken_at.replace(tzinfo=timezone.utc)
    versions = data.get("versions") or {}
    host = data.get("host")
    return Snapshot(
        taken_at=taken_at,
        source=str(data.get("source", "")),
        versions=Versions(**{k: versions.get(k) for k in ("npu_smi", "driver", "firmware", "cann")}),
        chips=tuple(_chip_from(c) for c in data.get("chips") or ()),
        processes=tuple(_process_from(p) for p in data.get("processes") or ()),
        host=None if host is None else _host_from(host),
        warnings=tuple(str(w) for w in data.get("warnings") or ()),
        probes=tuple(
            ProbeReport(
                name=str(p["name"]),
                status=MetricStatus(p["status"]),
                duration_s=p.get("duration_s"),
                message=p.get("message"),
                found=p.get("found"),
            )
            for p in data.get("probes") or ()
        ),
    )


def _chip_from(data: Mapping[str, Any]) -> ChipSample:
    identity = ChipIdentity(
        npu_id=int(data["npu_id"]),
        chip_id=int(data.get("chip_id") or 0),
        name=data.get("name"),
        bus_id=data.get("bus_id"),
        phy_id=data.get("phy_id"),
        device_id=data.get("device_id"),
        logic_id=data.get("logic_id"),
    )
    statuses: Mapping[str, str] = data.get("metric_status") or {}
    reasons: Dict[str, str] = {
        **(data.get("unavailable") or {}),
        **(data.get("metric_notes") or {}),
    }
    notes = {
        name: MetricNote(MetricStatus(statuses.get(name, "unsupported")), reason)
        for name, reason in reasons.items()
    }
    pcie = data.get("pcie")
    return ChipSample(
        identity=identity,
        health=Health.parse(data.get("health")),
        notes=notes,
        pcie=None if pcie is None else PcieLink(**{f: pcie.get(f) for f in _PCIE_FIELDS if f in pcie}),
        errors=tuple(ChipError(str(e["code"]), e.get("text")) for e in data.get("error_codes") or ()),
        **{metric: data.get(metric) for metric in CHIP_METRICS},
    )


def _process_from(data: Mapping[str, Any]) -> NpuProcess:
    has_host = any(data.get(f) is not None for f in _PROCESS_HOST_FIELDS)
    return NpuProcess(
        npu_id=int(data["npu_id"]),
        chip_id=int(data.get("chip_id") or 0),
        pid=int(data["pid"]),
        name=data.get("name"),
        npu_memory_mib=data.get("npu_memory_mib"),
        container_pid=data.get("container_pid"),
        host=ProcessHostInfo(**{f: data.get(f) for f in _PROCESS_HOST_FIELDS}) if has_host else None,
        host_unavailable=data.get("host_unavailable"),
    )


def _host_from(data: Mapping[str, Any]) -> HostInfo:
    load = data.get("load_average")
    return HostInfo(
        hostname=str(data.get("hostname", "")),
        cpu_percent=data.get("cpu_percent"),
        per_cpu_percent=tuple(data.get("per_cpu_percent") or ()),
        memory_used_bytes=data.get("memory_used_bytes"),
        memory_total_bytes=data.get("memory_total_bytes"),
        load_average=None if load is None else (float(load[0]), float(load[1]), float(load[2])),
        in_container=bool(data.get("in_container", False)),
        host_pid_namespace=data.get("host_pid_namespace"),
    )
