"""Provides judge_healthz(): the ``/healthz`` status and one-line reason from the latest sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, List, Optional

from npuwatch.exporter.metrics import ExporterView
from npuwatch.health import ChipCheck, HealthVerdict, Problem, Reason, default_max_temp_c
from npuwatch.model import Health, MetricStatus


@dataclass(frozen=True)
class HealthzAnswer:
    """What ``/healthz`` answers: 200 or 503, and one line of plain text."""

    status: int
    line: str

    @property
    def healthy(self) -> bool:
        """True for 200."""
        return self.status == 200


def stale_after_s(interval_s: float, timeout_s: float) -> float:
    """How old the latest sample may be before ``/healthz`` calls it stale.

    A tick waits ``interval_s`` and then lasts up to the npu-smi timeout, so a sample that is
    older than three intervals and one timeout means the sampling thread is stuck, not slow.
    """
    return 3.0 * interval_s + timeout_s


def judge_healthz(
    view: ExporterView,
    age_s: Optional[float],
    max_age_s: float,
    devices: Optional[Collection[int]] = None,
) -> HealthzAnswer:
    """Judge the latest sample as ``npuwatch check`` judges a fresh one (health.py's ChipCheck).

    Unhealthy, in this order: the latest sample failed; no sample yet; the sample is older than
    ``max_age_s``; npu-smi did not answer; no chip; an NPU asked for with ``--devices`` is
    missing; a chip is not ``OK`` (Warning, Alarm, Critical or Unknown) or is hotter than
    ``check``'s default limit.  ``age_s`` is the sample's age now.
    """
    if view.sample_error is not None:
        return HealthzAnswer(503, f"unhealthy: sampling failed: {_one_line(view.sample_error)}")
    snapshot = view.snapshot
    if snapshot is None:
        return HealthzAnswer(503, "unhealthy: no sample yet")
    if age_s is not None and age_s > max_age_s:
        return HealthzAnswer(
            503, f"unhealthy: stale: the latest sample is {age_s:.1f} s old (limit {max_age_s:g} s)"
        )
    report = snapshot.probe("npu-smi")
    if report is not None and report.status is not MetricStatus.OK:
        reason = _one_line(report.message or report.status.value)
        return HealthzAnswer(503, f"unhealthy: npu-smi {report.status.value}: {reason}")
    chips = tuple(
        ChipCheck(
            npu_id=c.identity.npu_id,
            chip_id=c.identity.chip_id,
            name=c.identity.name,
            health=c.health,
            temperature_c=c.temperature_c,
            max_temp_c=default_max_temp_c(c.identity.name),
        )
        for c in snapshot.chips
    )
    problems: List[Problem] = []
    if not chips:
        problems.append(Problem(Reason.NO_CHIPS, "npu-smi lists no chip"))
    listed = {chip.npu_id for chip in chips}
    for npu_id in sorted(set(devices or ()) - listed):
        problems.append(Problem(Reason.CHIP_MISSING, f"NPU {npu_id} not listed by npu-smi", npu_id=npu_id))
    for chip in chips:
        if chip.health is not Health.OK:
            state = "health unknown" if chip.health is Health.UNKNOWN else chip.health.value
            problems.append(Problem(Reason.CHIP_HEALTH, f"{chip.label} {state}", npu_id=chip.npu_id))
        if chip.too_hot:
            message = f"{chip.label} {chip.temperature_c} °C (limit {chip.max_temp_c:g} °C)"
            problems.append(Problem(Reason.TEMPERATURE, message, npu_id=chip.npu_id))
    verdict = HealthVerdict(problems=tuple(problems), chips=chips, source=snapshot.source)
    return HealthzAnswer(200 if verdict.healthy else 503, verdict.line)


def _one_line(text: str) -> str:
    return " ".join(text.split())
