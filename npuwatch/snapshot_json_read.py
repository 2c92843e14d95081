"""Provides the ``npuwatch/snapshot/v1`` JSON read back into a Snapshot (recordings, ``--replay``):
every field checked against its schema type and bounded; and the field lists both directions
share (``npuwatch.snapshot_json`` writes them).  docs/design.md §2.2."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from npuwatch.chip_link import ChipLink, LinkState
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
from npuwatch.source_info import SCOPES, MetricScope, SourceInfo

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
_LINK_FIELDS = ("kind", "title", "state", "present", "up", "reason", "detail", "shared_by", "hint")
#: A chip has a link or two (PCIe; RoCE, HCCS): more in a file is not a chip's.
_MAX_LINKS = 16
_VERSION_FIELDS = ("npu_smi", "driver", "firmware", "cann", "dcmi")
_PROCESS_HOST_FIELDS = (
    "user",
    "command",
    "cpu_percent",
    "rss_bytes",
    "start_time_s",
    "children",
    "children_cpu_percent",
)
_HOST_FIELDS = ("hostname", "cpu_percent", "memory_used_bytes", "memory_total_bytes")


# --- reading back (recordings, --replay of an NDJSON file) ------------------------------------


class _BadFieldError(ValueError):
    """A field of a JSON snapshot that is not of its schema type; the message names the field."""


#: Integers beyond this are no count or measurement (a 401-digit integer is an attack).
_MAX_INT = 1 << 63
#: Text fields longer than this are not a name, version or message.
_MAX_TEXT = 1 << 20
NOT_FINITE = "recorded as a non-finite number (NaN or Infinity)"
#: The reason of a metric a recording does not have at all (made before npuwatch read it).
NOT_RECORDED = "not in the recording (made before npuwatch read this metric)"


def from_dict(data: Mapping[str, Any]) -> Snapshot:
    """Rebuild a Snapshot from its v1 JSON form; unknown fields are ignored.

    Every field is checked against its schema type: a wrong one raises ``ValueError`` naming
    it.  A non-finite number (NaN, Infinity) becomes ``None`` (a chip metric's note says why).
    """
    data = _dict(data, "the snapshot")
    if data.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document (schema: {str(data.get('schema'))[:40]!r})")
    taken_at = datetime.fromisoformat(_text(data, "taken_at", required=True) or "")
    if taken_at.tzinfo is None:
        taken_at = taken_at.replace(tzinfo=timezone.utc)
    versions = _dict(data.get("versions") or {}, "versions")
    host = data.get("host")
    # A recording made before the JSON named its backend was read by npu-smi, the only one then.
    backend = _text(data, "backend") or "npu-smi"
    chips = tuple(_chip_from(_dict(c, "a chip")) for c in _list(data, "chips"))
    processes = tuple(_process_from(_dict(p, "a process")) for p in _list(data, "processes"))
    return Snapshot(
        taken_at=taken_at,
        source=_text(data, "source") or "",
        versions=Versions(**{k: _text(versions, k) for k in _VERSION_FIELDS}),
        chips=chips,
        processes=processes,
        host=None if host is None else _host_from(_dict(host, "host")),
        warnings=tuple(_plain_text(w, "a warning") for w in _list(data, "warnings")),
        probes=tuple(_probe_from(_dict(p, "a probe")) for p in _list(data, "probes")),
        chip_source=backend,
        backend_note=_text(data, "backend_note"),
        source_info=_source_info_of(data, backend, chips, processes),
    )


def _source_info_of(
    data: Mapping[str, Any], backend: str, chips: Tuple[ChipSample, ...], processes: Tuple[NpuProcess, ...]
) -> Optional[SourceInfo]:
    """The snapshot's ``source_info``: as written; ``None`` when written as null (a snapshot that
    did not say); derived (``derived_info``) when absent, in a recording made before the field."""
    if "source_info" not in data:
        return derived_info(backend, chips, processes)
    info = data["source_info"]
    return None if info is None else _source_info_from(_dict(info, "source_info"))


def derived_info(
    backend: str, chips: Tuple[ChipSample, ...], processes: Tuple[NpuProcess, ...]
) -> SourceInfo:
    """What a snapshot written before the JSON carried ``source_info`` can truthfully be said to
    have read: its backend's declaration (an npu-smi recording never read AI CPU), or for a
    backend npuwatch does not know the metrics its chips hold values for; a process table only
    when it lists a process (an empty list may be a source that read none)."""
    declared: Optional[SourceInfo] = None
    if backend == "npu-smi":
        from npuwatch.probes.npu_smi import source as npu_smi

        declared = npu_smi.SOURCE_INFO
    elif backend == "dcmi":
        from npuwatch.probes.dcmi import source as dcmi

        declared = dcmi.SOURCE_INFO
    if declared is None:
        shown = frozenset(name for name in CHIP_METRICS if any(c.metric(name) is not None for c in chips))
        declared = SourceInfo(backend, backend, True, shown)
    return declared.for_tick(bool(processes))


def _source_info_from(data: Mapping[str, Any]) -> SourceInfo:
    """``source_info`` as written; a metric or a scope this version does not know is left out."""
    known = frozenset(CHIP_METRICS)
    metrics = frozenset(m for m in _list(data, "metrics") if _plain_text(m, "source_info.metrics[]") in known)
    scopes = []
    for item in _list(data, "scopes"):
        scope = _dict(item, "source_info.scopes[]")
        word = _text(scope, "scope", required=True) or ""
        metric = _text(scope, "metric", required=True) or ""
        if word in SCOPES and metric in CHIP_METRICS:
            npu_id, chip_id = _int(scope, "npu_id", required=True) or 0, _int(scope, "chip_id") or 0
            scopes.append(MetricScope(npu_id, chip_id, metric, word))
    name = _text(data, "name", required=True) or ""
    return SourceInfo(
        name=name,
        title=_text(data, "title") or name,
        process_table=bool(_bool(data, "process_table")),
        metrics=metrics,
        scopes=tuple(scopes),
    )


def _probe_from(data: Mapping[str, Any]) -> ProbeReport:
    return ProbeReport(
        name=_text(data, "name", required=True) or "",
        status=MetricStatus(_text(data, "status", required=True)),
        duration_s=_float(data, "duration_s"),
        message=_text(data, "message"),
        found=_int(data, "found"),
    )


def _chip_from(data: Mapping[str, Any]) -> ChipSample:
    identity = ChipIdentity(
        npu_id=_int(data, "npu_id", required=True) or 0,
        chip_id=_int(data, "chip_id") or 0,
        name=_text(data, "name"),
        bus_id=_text(data, "bus_id"),
        phy_id=_int(data, "phy_id"),
        device_id=_int(data, "device_id"),
        logic_id=_int(data, "logic_id"),
    )
    statuses = _dict(data.get("metric_status") or {}, "metric_status")
    reasons: Dict[str, str] = {
        str(k): _plain_text(v, f"the note on {k}")
        for k, v in {
            **_dict(data.get("unavailable") or {}, "unavailable"),
            **_dict(data.get("metric_notes") or {}, "metric_notes"),
        }.items()
    }
    metrics: Dict[str, Any] = {}
    for metric in CHIP_METRICS:
        if metric not in data and metric not in reasons:  # a recording older than the metric
            reasons[metric] = NOT_RECORDED
        value = _number(data, metric)
        if value is not None and not math.isfinite(value):
            value = None
            reasons[metric] = NOT_FINITE
        metrics[metric] = value
    notes = {
        name: MetricNote(MetricStatus(_plain_text(statuses.get(name, "unsupported"), name)), reason)
        for name, reason in reasons.items()
    }
    pcie_data = data.get("pcie")
    pcie = None if pcie_data is None else _pcie_from(_dict(pcie_data, "pcie"))
    # A recording older than the links has none: the judge takes its PCIe reading as its link.
    links = tuple(_link_from(_dict(item, "a link")) for item in _list(data, "links")[:_MAX_LINKS])
    return ChipSample(
        identity=identity,
        health=Health.parse(_text(data, "health")),
        notes=notes,
        pcie=pcie,
        errors=tuple(_error_from(_dict(e, "an error code")) for e in _list(data, "error_codes")),
        lost_reason=_text(data, "lost_reason"),
        links=links,
        **metrics,
    )


def _link_from(data: Mapping[str, Any]) -> ChipLink:
    state = _text(data, "state", required=True)
    try:
        read = LinkState(state)
    except ValueError:
        raise _BadFieldError(f"state: {state!r} is no link state") from None
    return ChipLink(
        kind=_text(data, "kind", required=True) or "",
        state=read,
        present=_bool(data, "present") is not False,
        up=_bool(data, "up") is not False,
        reason=_text(data, "reason") or "",
        detail=_text(data, "detail") or "",
        shared_by=_text(data, "shared_by"),
        hint=_text(data, "hint") or "",
        title=_text(data, "title") or "",
    )


def _pcie_from(data: Mapping[str, Any]) -> PcieLink:
    values: Dict[str, Any] = {}
    for name in _PCIE_FIELDS:
        if name not in data:
            continue
        if name == "present":
            values[name] = _bool(data, name)
        elif name.endswith("_gt_s"):
            values[name] = _float(data, name)
        else:
            values[name] = _int(data, name)
    return PcieLink(**values)


def _error_from(data: Mapping[str, Any]) -> ChipError:
    code = data.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        code = str(_int(data, "code"))
    return ChipError(_plain_text(code, "an error code"), _text(data, "text"))


def _process_from(data: Mapping[str, Any]) -> NpuProcess:
    has_host = any(data.get(f) is not None for f in _PROCESS_HOST_FIELDS)
    host = ProcessHostInfo(
        user=_text(data, "user"),
        command=_text(data, "command"),
        cpu_percent=_float(data, "cpu_percent"),
        rss_bytes=_int(data, "rss_bytes"),
        start_time_s=_float(data, "start_time_s"),
        children=_int(data, "children"),
        children_cpu_percent=_float(data, "children_cpu_percent"),
    )
    return NpuProcess(
        npu_id=_int(data, "npu_id", required=True) or 0,
        chip_id=_int(data, "chip_id") or 0,
        pid=_int(data, "pid", required=True) or 0,
        name=_text(data, "name"),
        npu_memory_mib=_int(data, "npu_memory_mib"),
        container_pid=_int(data, "container_pid"),
        host=host if has_host else None,
        host_unavailable=_text(data, "host_unavailable"),
    )


def _host_from(data: Mapping[str, Any]) -> HostInfo:
    load = data.get("load_average")
    triple: Optional[Tuple[float, float, float]] = None
    if load is not None:
        numbers = [_float({"load_average": x}, "load_average") for x in _list(data, "load_average")]
        if len(numbers) != 3:
            raise _BadFieldError("load_average: not three numbers")
        if None not in numbers:
            triple = (float(numbers[0] or 0), float(numbers[1] or 0), float(numbers[2] or 0))
    per_cpu = [_float({"per_cpu_percent": x}, "per_cpu_percent") for x in _list(data, "per_cpu_percent")]
    return HostInfo(
        hostname=_text(data, "hostname") or "",
        cpu_percent=_float(data, "cpu_percent"),
        per_cpu_percent=tuple(x for x in per_cpu if x is not None),
        memory_used_bytes=_int(data, "memory_used_bytes"),
        memory_total_bytes=_int(data, "memory_total_bytes"),
        load_average=triple,
        in_container=bool(_bool(data, "in_container")),
        host_pid_namespace=_bool(data, "host_pid_namespace"),
    )


# --- field checks: each raises _BadFieldError naming the field ----------------------------------------


def _dict(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _BadFieldError(f"{what}: {type(value).__name__} where an object belongs")
    return value


def _list(data: Mapping[str, Any], key: str) -> List[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadFieldError(f"{key}: {type(value).__name__} where a list belongs")
    return value


def _plain_text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _BadFieldError(f"{what}: {type(value).__name__} where text belongs")
    if len(value) > _MAX_TEXT:
        raise _BadFieldError(f"{what}: text longer than {_MAX_TEXT} characters")
    return value


def _text(data: Mapping[str, Any], key: str, *, required: bool = False) -> Optional[str]:
    value = data.get(key)
    if value is None:
        if required:
            raise _BadFieldError(f"{key}: missing")
        return None
    return _plain_text(value, key)


def _number(data: Mapping[str, Any], key: str) -> Optional[Union[int, float]]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _BadFieldError(f"{key}: {type(value).__name__} where a number belongs")
    if isinstance(value, int) and abs(value) >= _MAX_INT:
        raise _BadFieldError(f"{key}: an integer of {len(str(abs(value)))} digits")
    return value


def _float(data: Mapping[str, Any], key: str) -> Optional[float]:
    """A number field; a non-finite one (NaN, Infinity) becomes None."""
    value = _number(data, key)
    return None if value is None or not math.isfinite(value) else float(value)


def _int(data: Mapping[str, Any], key: str, *, required: bool = False) -> Optional[int]:
    value = _number(data, key)
    if value is None:
        if required:
            raise _BadFieldError(f"{key}: missing")
        return None
    if isinstance(value, float):
        if not value.is_integer():
            raise _BadFieldError(f"{key}: {value!r} where a whole number belongs")
        return int(value)
    return value


def _bool(data: Mapping[str, Any], key: str) -> Optional[bool]:
    value = data.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise _BadFieldError(f"{key}: {type(value).__name__} where true or false belongs")
