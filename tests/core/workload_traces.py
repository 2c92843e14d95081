"""Recorded traces of situations real Ascend nodes produce, written as `npuwatch record` writes
them, and played back through the replay feed the dashboard runs (``ReplaySampler``: every
sample judged in order by the live judge) with the dashboard's alert tracker beside it.

A trace is a function of the second: each chip's values, the processes on it (with their host
side) and the host.  ``play`` returns what a user sees at each recorded sample.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from npuwatch import snapshot_json
from npuwatch.alerts import Alert, AlertTracker
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    HostInfo,
    MetricStatus,
    NpuProcess,
    ProbeReport,
    ProcessHostInfo,
    Snapshot,
    Workload,
    WorkloadClass,
)
from npuwatch.replay import ReplaySampler
from npuwatch.source_info import SourceInfo

T0 = datetime(2026, 11, 24, 2, 0, tzinfo=timezone.utc)
DCMI_METRICS = frozenset(
    {
        "power_w",
        "temperature_c",
        "aicore_percent",
        "hbm_used_mib",
        "hbm_total_mib",
        "aicore_freq_mhz",
        "aicore_rated_freq_mhz",
        "hbm_bandwidth_percent",
        "aicpu_percent",
    }
)


def chip(npu_id: int = 0, chip_id: int = 0, name: str = "910B3", **values: object) -> ChipSample:
    """A healthy 910B3 under the values given (DCMI reads every one of them)."""
    fields: Dict[str, object] = {
        "health": Health.OK,
        "power_w": 300.0,
        "temperature_c": 55,
        "aicore_percent": 90,
        "hbm_used_mib": 50000,
        "hbm_total_mib": 65536,
        "aicore_freq_mhz": 1800,
        "aicore_rated_freq_mhz": 1800,
        "hbm_bandwidth_percent": 35,
        "aicpu_percent": 3,
    }
    fields.update(values)
    identity = ChipIdentity(npu_id, chip_id, name=name, bus_id=f"0000:{0xC1 + npu_id:02x}:00.0")
    return ChipSample(identity=identity, **fields)  # type: ignore[arg-type]


def job(
    npu_id: int = 0,
    cpu: Optional[float] = 100.0,
    *,
    pid: int = 4242,
    chip_id: int = 0,
    children: Optional[int] = None,
    children_cpu: Optional[float] = None,
    memory_mib: int = 46000,
    name: str = "python3",
) -> NpuProcess:
    """A process on a chip; ``cpu=None``: the host cannot see it."""
    host = (
        None
        if cpu is None
        else ProcessHostInfo(
            user="ai",
            command="python3 train.py",
            cpu_percent=cpu,
            children=children,
            children_cpu_percent=children_cpu,
        )
    )
    why = None if host is not None else "npuwatch runs in a container PID namespace"
    return NpuProcess(npu_id, chip_id, pid, name, memory_mib, host=host, host_unavailable=why)


def host(cpu: Optional[float] = 20.0, *, pid_namespace: Optional[bool] = True, cores: int = 32) -> HostInfo:
    return HostInfo(
        "node-7",
        cpu_percent=cpu,
        per_cpu_percent=(cpu or 0.0,) * cores,
        in_container=pid_namespace is False,
        host_pid_namespace=pid_namespace,
    )


Moment = Tuple[Sequence[ChipSample], Sequence[NpuProcess], Optional[HostInfo]]


def snapshot(
    second: float, moment: Moment, source: str = "dcmi", info: Optional[SourceInfo] = None
) -> Snapshot:
    chips, processes, machine = moment
    return Snapshot(
        T0 + timedelta(seconds=second),
        "node-7",
        chips=tuple(chips),
        processes=tuple(processes),
        host=machine,
        probes=(ProbeReport(source, MetricStatus.OK, 0.05),),
        chip_source=source,
        source_info=info,
    )


def write(
    path: Path,
    seconds: Sequence[float],
    at: Callable[[float], Moment],
    source: str = "dcmi",
    info: Optional[SourceInfo] = None,
) -> Path:
    """Write the trace as `npuwatch record` does: one snapshot JSON object a line."""
    with path.open("w", encoding="utf-8") as out:
        for second in seconds:
            data = snapshot_json.to_dict(snapshot(second, at(second), source, info))
            out.write(json.dumps(data, ensure_ascii=False) + "\n")
    return path


@dataclass(frozen=True)
class Seen:
    """What the user sees at one recorded sample."""

    second: float
    chips: Dict[Tuple[int, int], ChipSample]
    alerts: Tuple[Alert, ...]
    judgements: Dict[Tuple[int, int], Tuple[str, Tuple[str, ...]]]  # level, reasons (snapshot --json)

    def workload(self, key: Tuple[int, int] = (0, 0)) -> Workload:
        found = self.chips[key].workload
        assert found is not None
        return found

    def alert_kinds(self, key: Tuple[int, int] = (0, 0)) -> List[str]:
        return sorted(a.kind.value for a in self.alerts if a.chip == key)


def play(path: Path) -> List[Seen]:
    """Every recorded sample as the replay feed judges it, with the alert line beside it."""
    tracker = AlertTracker()
    seen: List[Seen] = []
    with ReplaySampler.open(path) as replay:
        deadline = time.monotonic() + 30.0
        while not replay.indexed and time.monotonic() < deadline:
            time.sleep(0.01)  # past OPENING_LINES the rest is indexed on a thread
        replay.pause()
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        first = datetime.fromisoformat(lines[0]["taken_at"]).timestamp()
        for line in lines:
            offset = datetime.fromisoformat(line["taken_at"]).timestamp() - first
            replay.seek_to(offset)
            shown = replay.sample()
            alerts = tracker.update(shown)
            data = snapshot_json.to_dict(shown)
            judged = {
                (c["npu_id"], c["chip_id"]): (c["judgement"]["level"], tuple(c["judgement"]["reasons"]))
                for c in data["chips"]
            }
            seen.append(Seen(offset, {c.identity.key: c for c in shown.chips}, alerts, judged))
    return seen


def kinds(seen: Sequence[Seen], key: Tuple[int, int] = (0, 0)) -> List[WorkloadClass]:
    return [s.workload(key).kind for s in seen]


def changes(values: Sequence[object]) -> int:
    """How many times a series changes value."""
    return sum(1 for a, b in zip(values, values[1:]) if a != b)
