"""Provides a chip's workload as the views show it: the card's tag and the explanation (summary,
the evidence with units, next step, what the source cannot tell, the likely owner of held memory)."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Dict, Optional, Tuple

from npuwatch.judge.workload_text import needs_sentence
from npuwatch.metrics_table import BY_NAME, metric
from npuwatch.model import (
    EvidenceValue,
    LastOwner,
    Level,
    Throttling,
    Workload,
    WorkloadClass,
)
from npuwatch.widgets import format as fmt
from npuwatch.widgets.view_model.rows import EvidenceRow, WorkloadExplanation, WorkloadTag


def workload_tag(workload: Workload) -> WorkloadTag:
    """The card's tag of a chip's workload (one object per class and throttling cause)."""
    return _workload_tag(workload.kind, workload.throttling)


@lru_cache(maxsize=64)
def _workload_tag(kind: WorkloadClass, throttling: Optional[Throttling]) -> WorkloadTag:
    level = Level.UNKNOWN if kind is WorkloadClass.UNKNOWN else Level.WARNING if kind.problem else Level.OK
    return WorkloadTag(kind.value, kind.tag, level, "" if throttling is None else throttling.value)


def explain(workload: Workload, now: datetime) -> WorkloadExplanation:
    """A chip's workload explained, at the snapshot time ``now``: the class, the numbers that
    decided it with their units, the next step, what the chip source cannot tell, and the likely
    owner of memory held with no process."""
    tag = workload_tag(workload)
    evidence = tuple(
        EvidenceRow(key, evidence_label(key), evidence_text(key, value))
        for key, value in workload.evidence.items()
        if value is not None
    )
    return WorkloadExplanation(
        kind=tag.kind,
        tag=tag.tag,
        level=tag.level,
        throttling=workload.throttle_tag,
        summary=workload.summary,
        next_step=workload.next_step,
        evidence=evidence,
        window=_window(workload),
        needs_dcmi=needs_sentence(workload.needs_dcmi),
        owner=None if workload.owner is None else owner_text(workload.owner, now),
    )


def _window(workload: Workload) -> str:
    """``over 10 s (10 samples)``; ``from one sample`` for a one-shot snapshot."""
    if workload.samples <= 1:
        return "from one sample"
    return f"over {workload.window_s:.0f} s ({workload.samples} samples)"


_METRIC_NAMES = frozenset(BY_NAME)


#: The evidence that is no metric of the table: its label and unit.
_EVIDENCE: Dict[str, Tuple[str, str]] = {
    "host_cpu_percent": ("Job's host CPU", "%"),
    "pid": ("Job's PID", ""),
    "process": ("Job's process", ""),
    "idle_hbm_mib": ("HBM an idle chip holds", "MiB"),
    "temperature_limit_c": ("Temperature warning", "°C"),
    "rated_power_w": ("Rated power", "W"),
}


def _evidence_row(key: str) -> Tuple[str, str]:
    if key in _EVIDENCE:
        return _EVIDENCE[key]
    if key in _METRIC_NAMES:
        row = metric(key)
        return row.title, row.unit
    return key.replace("_", " ").capitalize(), ""


def evidence_label(key: str) -> str:
    """The label of an evidence value: ``AI Core``, ``HBM bandwidth utilisation``, ``Job's host CPU``."""
    return _evidence_row(key)[0]


def evidence_text(key: str, value: EvidenceValue) -> str:
    """An evidence value in its unit: ``88%``, ``52.5 GiB``, ``1300 MHz``, ``372.4 W``, ``84 °C``."""
    if value is None:
        return fmt.NA
    if isinstance(value, str):
        return value
    unit = _evidence_row(key)[1]
    if unit == "W" and float(value).is_integer():  # a rating: 400 W, not 400.0 W
        return f"{value:.0f} W"
    if unit in ("%", "MiB", "W", "°C"):
        return fmt.with_unit(value, unit)
    number = f"{value:.0f}" if abs(value) >= 100 or float(value).is_integer() else f"{value:g}"
    return f"{number} {unit}" if unit else number


def owner_text(owner: LastOwner, now: datetime) -> str:
    """``PID 48211 · alice · python3 train.py · 50337 MiB · last seen 10:01:02, 2:05 before this
    sample``: who held a chip's memory last, from what npuwatch saw."""
    parts = [f"PID {owner.pid}"]
    if owner.user:
        parts.append(owner.user)
    command = owner.command or owner.name
    if command:
        parts.append(command)
    if owner.npu_memory_mib is not None:
        parts.append(fmt.mib(owner.npu_memory_mib))
    if owner.last_seen is not None:
        ago = (now - owner.last_seen).total_seconds()
        seen = f"last seen {owner.last_seen.astimezone().strftime('%H:%M:%S')}"
        parts.append(f"{seen}, {fmt.duration(ago)} before this sample" if ago >= 1 else seen)
    return " · ".join(parts)
