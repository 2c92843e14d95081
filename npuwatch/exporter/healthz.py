"""Provides judge_healthz(): the ``/healthz`` status and one-line reason from the latest sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional

from npuwatch.exporter.metrics import ExporterView
from npuwatch.health import chip_problems, judge_chips
from npuwatch.model import MetricStatus
from npuwatch.verdict import HealthVerdict, Problem, Reason


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
    """Judge the latest sample as ``npuwatch check`` judges a fresh one (the same health.py code).

    Unhealthy, in this order: the latest sample failed; no sample yet; the sample is older than
    ``max_age_s``; the chip source (npu-smi, DCMI: named as it declares itself) did not answer;
    no chip; an NPU asked for with ``--devices`` is missing; the source lists fewer chips than
    the machine has; a chip is not ``OK`` (Warning, Alarm,
    Critical or Unknown) or is hotter than ``check``'s default limit.  ``age_s`` is the sample's age now.
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
    report = snapshot.chip_source_report
    source = snapshot.described  # the source that read (or failed to), as it declares itself
    if report is not None and report.status is not MetricStatus.OK:
        reason = _one_line(report.message or report.status.value)
        return HealthzAnswer(503, f"unhealthy: {source.title} {report.status.value}: {reason}")
    # No npu-smi query (a scrape never runs one): the codes are those the sampler attached.
    chips = judge_chips(snapshot.chips, None, snapshot.processes, snapshot.described.process_table)
    problems = chip_problems(snapshot.chips, chips, devices, backend=source.name)
    unlisted = snapshot.probe("chips")  # the sampler's health.unreported_chips, as `check` judges it
    if unlisted is not None and unlisted.status is not MetricStatus.OK and devices is None:
        missing = unlisted.message or f"{source.title} misses chips"
        problems.insert(0, Problem(Reason.CHIP_MISSING, _one_line(missing)))
    verdict = HealthVerdict(problems=tuple(problems), chips=chips, source=snapshot.source)
    return HealthzAnswer(200 if verdict.healthy else 503, verdict.line)


def _one_line(text: str) -> str:
    return " ".join(text.split())
