"""Provides a Snapshot's Prometheus exposition, npu-exporter's names (docs/design.md §2.4): pure, no I/O.

Names, labels and value conventions follow Huawei MindCluster npu-exporter
(``component/npu-exporter/collector/metrics/collector_for_npu.go`` and ``common_utils.go`` in
Ascend/mind-cluster), so dashboards written for it work unchanged.  Where npuwatch differs:

* A metric npu-smi did not report (``None``) is left out for that chip: never NaN, never a fake 0.
  A memory pair whose total is 0 (910B prints DDR as ``0 / 0``) is left out too: it is a
  placeholder, and a used/total panel would divide by zero.
* ``npu_chip_info_health_status`` is 1 for OK and 0 for Warning, Alarm or Critical (npu-exporter's
  ``getHealth``: any non-zero DCMI health is unhealthy); Unknown is -1, what npu-exporter puts on the
  wire when DCMI fails (``getHealthCode`` gives ``FailedValue``, which ``doUpdateMetric`` turns
  into ``FailedMetricValue`` -1), so ``npu_chip_info_health_status != 1`` catches every chip
  that is not known to be healthy.
* The 950 prints ``NPU Util`` instead of AI Core: it becomes ``npu_chip_info_overall_utilization``,
  the name npu-exporter gives DCMI's NPU utilization (``collectUtilCommon``), and
  ``npu_chip_info_utilization`` (AI Core) is left out there.
* No ``node``/``host`` label: Prometheus adds ``instance`` to every scraped series, and an extra
  label would break queries written for npu-exporter.
* A per-chip family no chip has a value for is left out whole (no ``# HELP`` line for a metric
  nothing reports: the driver-only metrics when npu-smi read the chips).
* The driver-only metrics (DCMI) keep npu-exporter's names where it has one
  (``npu_chip_info_aicore_current_freq``, ``…_vector_utilization``, ``…_hbm_temperature`` …) and an
  ``npuwatch_chip_`` name otherwise (the metric table's ``exporter_name``).
* ``npu_chip_info_error_code`` is a chip's first error code as a number (``80E01801`` hex →
  2162169857), ``npu_chip_info_error_code_1`` … ``_9`` its next ones, as npu-exporter v6 gives
  them (``updateErrorCodesInfo`` in ``collector/metrics/collector_for_npu.go``, at most
  ``MaxErrorCodeLen`` = 10 per chip); a chip without error codes has none of these series.
* Every label value (a chip or process name, a version, the source) is made inert as on every
  other surface (``text_safety.inert``: ``ESC`` is written ``\x1b``, a byte that is not UTF-8
  ``\udcff``), then escaped as the exposition format says (``\\``, ``\"``, ``\n``): no control
  byte reaches a scraper's parser or the terminal of whoever reads ``/metrics``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from npuwatch import __version__
from npuwatch.chip_link import LinkState
from npuwatch.judge.rules import judge_snapshot, link_verdicts
from npuwatch.metrics_table import METRICS, ChipMetric
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    Level,
    MetricStatus,
    Snapshot,
    Throttling,
    Workload,
    WorkloadClass,
)
from npuwatch.text_safety import inert

#: Labels of every per-chip series: npu-exporter's card labels that npu-smi can fill, plus
#: npu-smi's own IDs (``npu_id`` can be 2048+ or sparse, so it is not the same as ``id``).
CHIP_LABELS: Tuple[str, ...] = ("id", "model_name", "pcie_bus_info", "npu_id", "chip_id")
#: npu-exporter's process labels add ``process_id`` (and container labels npu-smi cannot know).
PROCESS_LABELS: Tuple[str, ...] = (*CHIP_LABELS, "process_id", "process_name")

HEALTH_CODES: Mapping[Health, int] = {
    Health.OK: 1,
    Health.WARNING: 0,
    Health.ALARM: 0,
    Health.CRITICAL: 0,
    Health.UNKNOWN: -1,
}

#: The per-chip gauges: the metric table's rows with an exporter name, in its order.
_CHIP_GAUGES: Tuple[ChipMetric, ...] = tuple(row for row in METRICS if row.exporter_name)
#: The error-code families: the first code, then ``_1`` … ``_9`` (npu-exporter's MaxErrorCodeLen 10).
ERROR_CODE_FAMILIES: Tuple[str, ...] = (
    "npu_chip_info_error_code",
    *(f"npu_chip_info_error_code_{index}" for index in range(1, 10)),
)


@dataclass(frozen=True)
class ExporterView:
    """What ``/metrics`` shows: the latest sample (``None`` before the first) and the sampler's record."""

    snapshot: Optional[Snapshot] = None
    sample_duration_s: Optional[float] = None  # how long the latest ``sample()`` took
    sample_error: Optional[str] = None  # the latest ``sample()`` raised this instead
    probe_errors: Mapping[str, int] = field(default_factory=dict)  # non-OK reports per probe, since start
    #: Per probe that runs a reader process (the DCMI worker), how many times it was restarted
    #: since start: the most its reports said (``ProbeReport.restarts``).
    restarts: Mapping[str, int] = field(default_factory=dict)

    @property
    def up(self) -> bool:
        """Whether the latest read of the chip source (npu-smi, DCMI) succeeded."""
        snapshot = self.snapshot
        if snapshot is None or self.sample_error is not None:
            return False
        report = snapshot.chip_source_report
        if report is None:  # a replayed recording may carry no probe reports: its chips say it
            return bool(snapshot.chips)
        return report.status is MetricStatus.OK


def chip_id_label(identity: ChipIdentity) -> str:
    """The ``id`` label: the chip's physical ID as npu-exporter gives it, or the best stand-in.

    npu-exporter v6 labels ``id`` with the chip's ``PhyId`` (``collectCardLabelValue`` in
    ``collector/metrics/common_utils.go``); npu-smi prints it only on A3 (``Phy-ID``).  Elsewhere
    the logic ID (``npu-smi info -m``; equal to the physical ID outside containers that remap
    devices), then the 310 family's ``Device`` column, then the NPU ID (``3``, or ``3-1`` for a
    second chip) so that ``id`` always names one chip.
    """
    for value in (identity.phy_id, identity.logic_id, identity.device_id):
        if value is not None:
            return str(value)
    return str(identity.npu_id) if identity.chip_id == 0 else f"{identity.npu_id}-{identity.chip_id}"


def chip_labels(identity: ChipIdentity) -> List[str]:
    """The values of ``CHIP_LABELS`` for one chip (a missing name or Bus-Id is an empty label)."""
    return [
        chip_id_label(identity),
        identity.name or "",
        identity.bus_id or "",
        str(identity.npu_id),
        str(identity.chip_id),
    ]


def snapshot_families(snapshot: Snapshot) -> List[Metric]:
    """The npu-exporter families of one snapshot: machine counts, per-chip gauges, processes."""
    chips = snapshot.chips
    out: List[Metric] = [
        GaugeMetricFamily("machine_npu_nums", "Amount of npu installed on the machine.", len(chips)),
        GaugeMetricFamily(
            "machine_healthy_npu_nums",
            "Amount of npu whose health is OK.",
            sum(1 for c in chips if c.health is Health.OK),
        ),
        GaugeMetricFamily(
            "machine_unhealthy_npu_nums",
            "Amount of npu whose health is Warning, Alarm or Critical.",
            sum(1 for c in chips if HEALTH_CODES[c.health] == 0),
        ),
        GaugeMetricFamily(
            "machine_unknown_npu_nums",
            "Amount of npu whose health could not be read.",
            sum(1 for c in chips if c.health is Health.UNKNOWN),
        ),
    ]
    health = GaugeMetricFamily(
        "npu_chip_info_health_status",
        "the npu health status: 1 healthy (OK), 0 unhealthy (Warning/Alarm/Critical), -1 unknown",
        labels=CHIP_LABELS,
    )
    for chip in chips:
        health.add_metric(chip_labels(chip.identity), HEALTH_CODES[chip.health])
    out.append(health)
    out.append(_level_family(snapshot))
    out.extend(_link_family(chips))
    out.extend(_workload_families(chips))
    for row in _CHIP_GAUGES:
        total = row.total
        # A memory whose total is None or a 0 placeholder is left out, its use with it.
        shown = chips if total is None else [c for c in chips if getattr(c, total)]
        family = _chip_gauge(row.exporter_name or row.name, row.exporter_help, shown, row.name)
        if family.samples:
            out.append(family)
    out.extend(_error_code_families(chips))
    out.append(_process_family(snapshot))
    return out


def error_code_value(code: str) -> Optional[float]:
    """An error code as npu-exporter exports it, the driver's unsigned 32-bit number (``80E01801``
    → 2162169857); ``None`` for a code that is not 1 to 8 hexadecimal digits."""
    return float(int(code, 16)) if _HEX_CODE.fullmatch(code) else None


_HEX_CODE = re.compile(r"[0-9A-Fa-f]{1,8}")


def _error_code_families(chips: Sequence[ChipSample]) -> List[Metric]:
    """``npu_chip_info_error_code`` (each chip's first code) and ``…_1`` … ``…_9`` (the next ones)."""
    families: List[GaugeMetricFamily] = []
    for chip in chips:
        values = [v for v in (error_code_value(e.code) for e in chip.errors) if v is not None]
        for index, value in enumerate(values[: len(ERROR_CODE_FAMILIES)]):
            if index == len(families):
                families.append(
                    GaugeMetricFamily(ERROR_CODE_FAMILIES[index], "the npu error code", labels=CHIP_LABELS)
                )
            families[index].add_metric(chip_labels(chip.identity), value)
    return list(families)


def own_families(view: ExporterView) -> List[Metric]:
    """npuwatch's own health: up, how long the sample took, probe errors, when it was taken."""
    out: List[Metric] = [
        GaugeMetricFamily(
            "npuwatch_up",
            "1 when the latest read of the chips (DCMI or npu-smi) succeeded, else 0.",
            1 if view.up else 0,
        )
    ]
    if view.sample_duration_s is not None:
        out.append(
            GaugeMetricFamily(
                "npuwatch_scrape_duration_seconds",
                "How long the latest sample of the NPUs took (scrapes only read it).",
                view.sample_duration_s,
            )
        )
    errors = CounterMetricFamily(
        "npuwatch_probe_errors",
        "Probe reports with a status other than ok (timeout, error, permission, …) since start.",
        labels=("probe",),
    )
    for probe, count in sorted(view.probe_errors.items()):
        errors.add_metric([probe], count)
    out.append(errors)
    if view.restarts:
        restarts = CounterMetricFamily(
            "npuwatch_worker_restarts",
            "Times a probe's reader process (the DCMI worker) was killed and started again since "
            "start: a hung call, a crash, or past its memory or CPU bound.",
            labels=("probe",),
        )
        for probe, count in sorted(view.restarts.items()):
            restarts.add_metric([probe], count)
        out.append(restarts)
    snapshot = view.snapshot
    if snapshot is not None:
        out.append(
            GaugeMetricFamily(
                "npuwatch_last_sample_timestamp_seconds",
                "When the latest sample was taken, in seconds since the epoch.",
                snapshot.taken_at.timestamp(),
            )
        )
        info = GaugeMetricFamily(
            "npuwatch_info",
            "npuwatch's version, the source it reads and the backend that read the chips, with value 1.",
            labels=("version", "source", "npu_smi_version", "driver_version", "backend"),
        )
        versions = snapshot.versions
        info.add_metric(
            [
                __version__,
                snapshot.source,
                versions.npu_smi or "",
                versions.driver or "",
                snapshot.chip_source,
            ],
            1,
        )
        out.append(info)
    return out


class ViewCollector:
    """A prometheus_client Collector over one ExporterView."""

    def __init__(self, view: ExporterView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        """npuwatch's own families, then the snapshot's (none before the first sample)."""
        yield from own_families(self.view)
        if self.view.snapshot is not None:
            yield from snapshot_families(self.view.snapshot)


class _AgeCollector:
    def __init__(self, age_s: Optional[float]) -> None:
        self.age_s = age_s

    def collect(self) -> Iterator[Metric]:
        if self.age_s is not None:
            yield GaugeMetricFamily(
                "npuwatch_sample_age_seconds",
                "Seconds since the latest sample was taken, at the time of this scrape.",
                self.age_s,
            )


def render(view: ExporterView) -> bytes:
    """The text exposition of ``view`` (rendered once per sample; scrapes serve these bytes)."""
    return _render(ViewCollector(view))


def render_age(age_s: Optional[float]) -> bytes:
    """The one family that changes between samples: appended to the cached bytes at each scrape."""
    return _render(_AgeCollector(age_s))


def _render(collector: Union[ViewCollector, _AgeCollector]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_InertLabels(collector))
    return generate_latest(registry)


class _InertLabels:
    """The families of ``collector`` with every label value inert (whatever family it is in)."""

    def __init__(self, collector: Union[ViewCollector, _AgeCollector]) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Metric]:
        for family in self.collector.collect():
            family.samples = [
                sample._replace(labels={name: inert(value) for name, value in sample.labels.items()})
                for sample in family.samples
            ]
            yield family


def _level_family(snapshot: Snapshot) -> GaugeMetricFamily:
    """``npuwatch_chip_level{level}``: the judge's verdict, one series per level, 1 on the chip's
    (the state-set shape: ``npuwatch_chip_level{level=~"critical|unknown"} == 1`` alerts as
    ``npuwatch check`` would fail)."""
    family = GaugeMetricFamily(
        "npuwatch_chip_level",
        "the judge's level of the chip (npuwatch.judge): 1 for its level, 0 for the others",
        labels=(*CHIP_LABELS, "level"),
    )
    judged = judge_snapshot(snapshot)
    for chip in snapshot.chips:
        labels = chip_labels(chip.identity)
        level = judged[chip.identity.key].level
        for each in Level:
            family.add_metric([*labels, each.value], 1 if each is level else 0)
    return family


def _link_family(chips: Sequence[ChipSample]) -> List[Metric]:
    """``npuwatch_link_state{kind,state}``: the judge's state of each link of each chip (a state
    set, as ``npuwatch_chip_level``: ``power-saving`` is a slow link on an idle chip, fine;
    ``slow`` under load, ``narrow`` and ``down`` are warnings); left out when no chip has a link."""
    family = GaugeMetricFamily(
        "npuwatch_link_state",
        "the judge's state of the chip's link of this kind (npuwatch.judge.rules.link_verdict): "
        "1 for its state, 0 for the others",
        labels=(*CHIP_LABELS, "kind", "state"),
    )
    for chip in chips:
        labels = chip_labels(chip.identity)
        for verdict in link_verdicts(chip):
            kind = inert(verdict.link.kind)
            for state in LinkState:
                family.add_metric([*labels, kind, state.value], 1 if state is verdict.state else 0)
    return [family] if family.samples else []


def _workload_families(chips: Sequence[ChipSample]) -> List[Metric]:
    """``npuwatch_chip_workload{class}`` and ``npuwatch_chip_throttling{reason}`` (state sets, as
    ``npuwatch_chip_level``); a family no chip has a series in is left out whole."""
    workload = GaugeMetricFamily(
        "npuwatch_chip_workload",
        "what the chip is limited by over npuwatch's window (npuwatch.judge.workload): "
        "1 for its class, 0 for the others",
        labels=(*CHIP_LABELS, "class"),
    )
    throttling = GaugeMetricFamily(
        "npuwatch_chip_throttling",
        "1 when AI Core runs below its rated frequency for this reason (thermal: near the temperature "
        "limit; power: at the power cap), sustained; no series where the frequency is not read",
        labels=(*CHIP_LABELS, "reason"),
    )
    for chip in chips:
        judged = chip.workload
        if judged is None:
            continue
        labels = chip_labels(chip.identity)
        for kind in WorkloadClass:
            workload.add_metric([*labels, kind.value], 1 if kind is judged.kind else 0)
        if _throttling_known(chip, judged):
            for reason in Throttling:
                throttling.add_metric([*labels, reason.value], 1 if reason is judged.throttling else 0)
    return [family for family in (workload, throttling) if family.samples]


def _throttling_known(chip: ChipSample, judged: Workload) -> bool:
    """Whether the judge could tell throttling: it found it, or it read the AI Core frequency and
    its rated value of a chip it has a current reading of."""
    if judged.throttling is not None:
        return True
    if judged.kind is WorkloadClass.UNKNOWN or "throttling" in judged.needs_dcmi:
        return False
    return chip.aicore_freq_mhz is not None and bool(chip.aicore_rated_freq_mhz)


def _chip_gauge(name: str, help_text: str, chips: Sequence[ChipSample], metric: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=CHIP_LABELS)
    for chip in chips:
        value = chip.metric(metric)
        if value is not None:
            family.add_metric(chip_labels(chip.identity), float(value))
    return family


def _process_family(snapshot: Snapshot) -> GaugeMetricFamily:
    """``npu_chip_info_process_info``: NPU memory (MB) per process; a PID listed twice on a chip is summed."""
    family = GaugeMetricFamily(
        "npu_chip_info_process_info",
        "the npu process info, unit is 'MB': the NPU memory each process holds",
        labels=PROCESS_LABELS,
    )
    chips = {c.identity.key: c.identity for c in snapshot.chips}
    memory: Dict[Tuple[int, int, int], float] = {}
    names: Dict[Tuple[int, int, int], str] = {}
    for process in snapshot.processes:
        key = (process.npu_id, process.chip_id, process.pid)
        if process.npu_memory_mib is None or (process.npu_id, process.chip_id) not in chips:
            continue
        memory[key] = memory.get(key, 0.0) + process.npu_memory_mib
        names.setdefault(key, process.name or "")
    for (npu_id, chip_id, pid), mib in memory.items():
        labels = chip_labels(chips[(npu_id, chip_id)])
        family.add_metric([*labels, str(pid), names[(npu_id, chip_id, pid)]], mib)
    return family
