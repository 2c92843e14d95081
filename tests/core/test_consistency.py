"""One chip, one verdict: every surface gives the same level, reasons and limits (issue 15).

Each case is a crafted snapshot of one chip.  The judge's level and reasons from
``snapshot --json`` must agree with ``npuwatch check`` (its verdict and ``--json``),
``/healthz``, the alert line, the dashboard's colour class and the notebook's level class.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Dict, Tuple

import pytest

from npuwatch import snapshot_json
from npuwatch.alerts import AlertKind, AlertTracker, Severity
from npuwatch.chip_source import ChipReading, SourceReading
from npuwatch.exporter.healthz import judge_healthz
from npuwatch.exporter.metrics import ExporterView
from npuwatch.health import check_health
from npuwatch.model import (
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    NpuProcess,
    PcieLink,
    ProbeReport,
    Snapshot,
)

NOW = datetime(2026, 11, 24, 5, 0, tzinfo=timezone.utc)
FULL = PcieLink(32.0, 32.0, 16, 16)
SLOW = PcieLink(2.5, 32.0, 16, 16)  # Gen1 of Gen5 at full width


def chip(name: str = "910B3", **values: object) -> ChipSample:
    values.setdefault("health", Health.OK)
    values.setdefault("temperature_c", 40)
    values.setdefault("pcie", FULL)
    values.setdefault("hbm_used_mib", 3400)
    values.setdefault("hbm_total_mib", 65536)
    values.setdefault("aicore_percent", 30)
    return ChipSample(ChipIdentity(0, 0, name, bus_id="0000:c1:00.0"), **values)  # type: ignore[arg-type]


STALE = {"temperature_c": MetricNote(MetricStatus.STALE, "npu-smi hung; showing the value from 4 s ago")}
WORKER = NpuProcess(0, 0, 4242, "python", 16000)


@dataclass(frozen=True)
class Case:
    chip: ChipSample
    level: str
    reasons: Tuple[str, ...]
    processes: Tuple[NpuProcess, ...] = ()
    extra: Dict[str, object] = field(default_factory=dict)


CASES: Dict[str, Case] = {
    "910B at 80 °C": Case(chip(temperature_c=80), "ok", ()),
    "910B at 88 °C": Case(chip(temperature_c=88), "warning", ("88 °C (limit 85 °C)",)),
    "910B at 97 °C": Case(chip(temperature_c=97), "critical", ("97 °C (critical limit 95 °C)",)),
    "310P at 78 °C": Case(chip("310P3", temperature_c=78), "ok", ()),
    "310P at 82 °C": Case(chip("310P3", temperature_c=82), "warning", ("82 °C (limit 80 °C)",)),
    "310P at 92 °C": Case(chip("310P3", temperature_c=92), "critical", ("92 °C (critical limit 90 °C)",)),
    "health OK": Case(chip(), "ok", ()),
    "health Warning": Case(chip(health=Health.WARNING), "warning", ("Warning",)),
    "health Alarm": Case(
        chip(health=Health.ALARM, errors=(ChipError("80E01801", "HBM multi-bit ECC error"),)),
        "critical",
        ("Alarm 80E01801 HBM multi-bit ECC error → restart-business",),
    ),
    "health Critical": Case(chip(health=Health.CRITICAL), "critical", ("Critical",)),
    "health Unknown": Case(chip(health=Health.UNKNOWN), "unknown", ("health unknown",)),
    "HBM held, no process": Case(
        chip(hbm_used_mib=20000, aicore_percent=0), "warning", ("19.5 GiB HBM held, no process",)
    ),
    "HBM held by a process": Case(chip(hbm_used_mib=20000), "ok", (), (WORKER,)),
    "link degraded": Case(chip(pcie=PcieLink(32.0, 32.0, 8, 16)), "warning", ("PCIe x8 of x16",)),
    "link lost": Case(chip(pcie=PcieLink(present=False)), "critical", ("off the PCIe bus",)),
    # A link below its maximum speed only while the chip is idle is link power saving (issue 28).
    "link slow, chip idle": Case(chip(pcie=SLOW, aicore_percent=0), "ok", ()),
    "link slow, chip busy": Case(
        chip(pcie=SLOW, aicore_percent=90), "warning", ("PCIe Gen1 of Gen5 under load",)
    ),
    "link narrow, chip idle": Case(
        chip(pcie=PcieLink(32.0, 32.0, 8, 16), aicore_percent=0), "warning", ("PCIe x8 of x16",)
    ),
    "stale": Case(chip(notes=STALE), "unknown", ("values stale",)),
}

#: The alert severity a chip's reasons of each level show with.
SEVERITY = {"warning": Severity.WARNING, "critical": Severity.CRITICAL}


def snapshot_of(case: Case) -> Snapshot:
    report = ProbeReport("npu-smi", MetricStatus.OK, 0.1)
    return Snapshot(NOW, "npu-smi", chips=(case.chip,), processes=case.processes, probes=(report,))


class OneReading:
    """A chip source that answers one crafted reading (the seam every surface reads)."""

    probe_name = "npu-smi"
    label = "npu-smi"
    provides_details = False
    provides_processes = True
    provides_logic_ids = False

    def __init__(self, case: Case) -> None:
        self._reading = ChipReading(chips=(case.chip,), processes=case.processes, process_table=True)

    def read(self) -> SourceReading:
        return SourceReading(self._reading, None, 0.01)

    def chip_details(self, npu_id: int, chip_id: int) -> None:
        return None


def alerts_of(snapshot: Snapshot) -> Tuple[Tuple[Severity, str], ...]:
    tracker = AlertTracker()
    for second in range(4):  # past every raise_after: four samples (the tracker counts their times)
        shown = tracker.update(replace(snapshot, taken_at=snapshot.taken_at + timedelta(seconds=second)))
    return tuple(
        (a.severity, a.message) for a in shown if a.chip == (0, 0) and a.kind is not AlertKind.INPUT_BOUND
    )


@pytest.mark.parametrize("name", list(CASES))
def test_every_surface_gives_the_chip_the_same_level_and_reasons(name):
    case = CASES[name]
    snapshot = snapshot_of(case)
    unhealthy = case.level in ("critical", "unknown")

    # snapshot --json: the judge's verdict as scripts, the exporter and the fleet view see it.
    judgement = snapshot_json.to_dict(snapshot)["chips"][0]["judgement"]
    assert (judgement["level"], tuple(judgement["reasons"])) == (case.level, case.reasons)

    # npuwatch check: unhealthy exactly for critical and unknown; --json carries the same verdict.
    verdict = check_health(None, OneReading(case))
    assert verdict.healthy is not unhealthy, verdict.line
    doc = verdict.to_dict()["chips"][0]
    assert (doc["level"], tuple(doc["reasons"]), doc["ok"]) == (case.level, case.reasons, not unhealthy)

    # /healthz judges the sampler's latest snapshot the same way.
    answer = judge_healthz(ExporterView(snapshot=snapshot), age_s=0.0, max_age_s=10.0)
    assert answer.healthy is not unhealthy, answer.line

    # The alert line shows every warning and critical reason of the chip, with the chip's label.
    shown = alerts_of(snapshot)
    expected = {(SEVERITY[case.level], f"NPU 0 {text}") for text in case.reasons if case.level in SEVERITY}
    assert expected <= set(shown), shown
    if case.level == "ok":
        assert not [s for s in shown if s[0] is not Severity.INFO], shown


#: The cases about a link: the judge's state of it, and whether it is wanting (a warning).
LINK_CASES = {
    "health OK": ("up", False),
    "link degraded": ("narrow", True),
    "link slow, chip idle": ("power-saving", False),
    "link slow, chip busy": ("slow", True),
    "link narrow, chip idle": ("narrow", True),
}


@pytest.mark.parametrize("name", list(LINK_CASES))
def test_every_surface_gives_the_link_the_same_verdict(name):
    from npuwatch.exporter.metrics import render
    from npuwatch.history import History
    from npuwatch.judge.rules import link_verdicts
    from npuwatch.widgets.text import render_snapshot
    from npuwatch.widgets.tui.chips import card_lines
    from npuwatch.widgets.tui.detail_screen import pcie_text

    state, wanting = LINK_CASES[name]
    case = CASES[name]
    snapshot = snapshot_of(case)
    (verdict,) = link_verdicts(case.chip)
    assert (verdict.state.value, verdict.level.value) == (state, "warning" if wanting else "ok")
    # snapshot --json: the link as read and the judge's verdict on it.
    (link,) = snapshot_json.to_dict(snapshot)["chips"][0]["links"]
    assert (link["kind"], link["verdict"]["state"], link["verdict"]["level"]) == (
        "pcie",
        state,
        verdict.level.value,
    )
    # /metrics: the state set is 1 on the judge's state alone.
    ones = [
        line
        for line in render(ExporterView(snapshot=snapshot)).decode().splitlines()
        if line.startswith("npuwatch_link_state{") and line.endswith(" 1.0")
    ]
    assert len(ones) == 1 and f'state="{state}"' in ones[0], ones
    # The alert line: a warning exactly for a wanting link; never a note for one that is fine.
    links = [severity for severity, message in alerts_of(snapshot) if "PCIe" in message]
    assert links == ([Severity.WARNING] if wanting else []), links
    # The card, the text view and the detail screen: a ▲ exactly for a wanting link.
    card = [line.plain for line in card_lines(case.chip, History(), 40, in_group=False)]
    assert any(line.startswith("▲ PCIe") for line in card) is wanting, card
    text = render_snapshot(snapshot)
    assert any(line.startswith("▲ NPU 0 (") and "PCIe" in line for line in text.splitlines()) is wanting, text
    assert ("▲" in pcie_text(case.chip).plain) is wanting


def test_a_source_that_fails_makes_check_and_healthz_unhealthy_and_the_chip_unknown():
    failed = chip(
        health=Health.UNKNOWN, notes={"temperature_c": MetricNote(MetricStatus.TIMEOUT, "npu-smi hung")}
    )
    report = ProbeReport("npu-smi", MetricStatus.TIMEOUT, 5.0, "npu-smi did not answer in 5 s")
    snapshot = Snapshot(NOW, "npu-smi", chips=(failed,), probes=(report,))
    assert snapshot_json.to_dict(snapshot)["chips"][0]["judgement"]["level"] == "unknown"
    assert not judge_healthz(ExporterView(snapshot=snapshot), 0.0, 10.0).healthy
    kinds = {a.kind for a in AlertTracker().update(snapshot)}
    assert kinds == {AlertKind.NPU_SMI}, "one alert for the source, none per chip"


def test_a_replayed_snapshot_is_judged_the_same_as_the_live_one():
    for case in CASES.values():
        snapshot = snapshot_of(case)
        again = snapshot_json.from_dict(snapshot_json.to_dict(snapshot))
        assert (
            snapshot_json.to_dict(again)["chips"][0]["judgement"]
            == snapshot_json.to_dict(snapshot)["chips"][0]["judgement"]
        )


def all_cases_in_one_snapshot() -> Tuple[Snapshot, Dict[int, Case]]:
    """Every case as its own NPU of one machine (NPU i is case i): what the views draw at once."""
    chips, processes, by_npu = [], [], {}
    for npu, case in enumerate(CASES.values()):
        identity = replace(case.chip.identity, npu_id=npu, bus_id=f"0000:{npu + 0xC1:02x}:00.0")
        chips.append(replace(case.chip, identity=identity))
        processes.extend(replace(p, npu_id=npu) for p in case.processes)
        by_npu[npu] = case
    report = ProbeReport("npu-smi", MetricStatus.OK, 0.1)
    return Snapshot(NOW, "npu-smi", chips=tuple(chips), processes=tuple(processes), probes=(report,)), by_npu


def test_the_notebook_colours_each_chip_by_its_level():
    from npuwatch.history import History
    from npuwatch.widgets.notebook.live_html import chips_html
    from npuwatch.widgets.view_model import build_view

    snapshot, by_npu = all_cases_in_one_snapshot()
    html = chips_html(build_view(snapshot, History()), slots=60)
    levels = {
        int(npu): level for level, npu in re.findall(r'npuwatch-chip-level-(\w+)" data-npu="(\d+)"', html)
    }
    assert levels == {npu: case.level for npu, case in by_npu.items()}


def test_the_dashboard_colours_each_chip_card_by_its_level():
    from npuwatch.widgets.tui.app import NpuwatchApp
    from npuwatch.widgets.tui.chip_grid import ChipGrid
    from tests.widgets.fakes import FakeSampler, wait_for

    snapshot, by_npu = all_cases_in_one_snapshot()
    app = NpuwatchApp(FakeSampler([snapshot]))
    levels: Dict[int, str] = {}

    async def main() -> None:
        async with app.run_test(size=(200, 80)) as pilot:
            grid = app.query_one(ChipGrid)
            assert await wait_for(pilot, lambda: len(grid.cards) == len(by_npu)), "no cards"
            await pilot.pause()
            for card in grid.cards:
                levels[card.chip.identity.npu_id] = card.level.value

    asyncio.run(main())
    assert levels == {npu: case.level for npu, case in by_npu.items()}


#: The doctor's words for the judge's levels: a warning warns, what fails `check` fails.
DOCTOR_STATUS = {"ok": "pass", "warning": "warn", "critical": "fail", "unknown": "fail"}
HEALTH_CASES = [name for name in CASES if name.startswith("health ")]


@pytest.mark.parametrize("name", HEALTH_CASES)
def test_the_doctors_chip_health_fails_exactly_where_check_does(name, tmp_path):
    from npuwatch.doctor.checks import chip_health
    from npuwatch.doctor.machine import Machine
    from npuwatch.probes.sysroot import Sysroot

    case = CASES[name]
    reading = ChipReading(chips=(case.chip,), processes=case.processes, process_table=True)

    class Crafted(Machine):
        """The doctor's machine reading the crafted chip through its source."""

        def info_table(self) -> ChipReading:
            return reading

        def with_error_codes(self, reading: ChipReading, budget_s: float) -> ChipReading:
            return reading  # the crafted chip carries its codes already

        def unreported_chips(self) -> None:
            return None

    finding = chip_health.run(Crafted(Sysroot(tmp_path), None))
    assert finding.status.value == DOCTOR_STATUS[case.level], finding.summary


@pytest.mark.parametrize("backend", ["dcmi", "npu-smi"])
def test_a_failing_source_is_named_alike_on_every_surface(backend):
    """Issue 28 group 7: the alert line, check, /healthz, the no-data reason and the JSON all name
    the source that failed as it declares itself (``SourceInfo``), whatever its message says."""
    from npuwatch.availability import no_data_reason
    from npuwatch.chip_source import SourceFailure
    from npuwatch.probes.dcmi.source import SOURCE_INFO as DCMI
    from npuwatch.probes.npu_smi.source import SOURCE_INFO as NPU_SMI
    from npuwatch.sampler import Sampler

    info = {"dcmi": DCMI, "npu-smi": NPU_SMI}[backend]
    other = {"dcmi": NPU_SMI, "npu-smi": DCMI}[backend].title
    failure = SourceFailure("error", "init failed with -8002", "see the doctor")

    class Failing:
        probe_name = label = backend
        source_info = info
        provides_details = provides_logic_ids = False
        provides_processes = True

        def read(self) -> SourceReading:
            return SourceReading(None, failure, 0.01, source_info=info.for_tick(False))

        def chip_details(self, npu_id: int, chip_id: int) -> None:
            return None

    snapshot = Sampler(Failing(), None, None).sample()
    said = f"{info.title} failed: init failed with -8002"
    assert snapshot_json.to_dict(snapshot)["source_info"]["title"] == info.title
    (alert,) = AlertTracker().update(snapshot)
    assert alert.message.startswith(said) and other not in alert.message + alert.detail
    line = check_health(None, Failing()).line
    assert line.startswith(f"unhealthy: {said}") and other not in line
    answer = judge_healthz(ExporterView(snapshot=snapshot), 0.0, 10.0).line
    assert answer.startswith(f"unhealthy: {info.title} error: init failed") and other not in answer
    reason = no_data_reason(snapshot) or ""
    assert said in reason and other not in reason
