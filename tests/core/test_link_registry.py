"""The link enrichers' registry (npuwatch/links): each kind on its own cadence, a failing one
its own probe's error, and a second kind of link judged, alerted and exported with no change
outside its own enricher — the seam the interconnect issue adds RoCE and HCCS through."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Callable, List, Tuple

from npuwatch.alerts import AlertKind, AlertTracker, Severity
from npuwatch.chip_link import ChipLink, LinkState
from npuwatch.exporter.metrics import ExporterView, render
from npuwatch.judge.rules import judge_chip, link_verdicts
from npuwatch.links.enricher import EnrichInputs
from npuwatch.links.pcie import PcieEnricher
from npuwatch.links.registry import ENRICHERS, LinkEnrichers
from npuwatch.model import (
    ChipIdentity,
    ChipSample,
    Health,
    Level,
    MetricStatus,
    PcieLink,
    ProbeReport,
    Snapshot,
)
from npuwatch.probes.pci import PciFunction, PciInventory
from npuwatch.probes.sysroot import Sysroot


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


class RoceStandIn:
    """A second kind of link as the interconnect issue would add it: reads every 30 s."""

    kind = "roce"
    refresh_s = 30.0

    def __init__(self) -> None:
        self.refreshes = 0
        self.fail = False

    def refresh(self, inputs: EnrichInputs) -> None:
        self.refreshes += 1
        if self.fail:
            raise OSError("hccn_tool did not answer")

    def enrich(self, chip: ChipSample) -> ChipSample:
        return chip.with_link(
            ChipLink("roce", LinkState.DOWN, True, False, "port down", "eth0 down", title="RoCE")
        )


def chip(aicore: int = 80) -> ChipSample:
    identity = ChipIdentity(0, 0, "910B3", bus_id="0000:C1:00.0")
    return ChipSample(identity, health=Health.OK, aicore_percent=aicore)


def inventory(link: PcieLink) -> PciInventory:
    return PciInventory(functions=(PciFunction(bdf="0000:c1:00.0", device_id=0xD802, link=link),))


def test_the_pcie_enricher_is_the_registrys_first_line():
    assert ENRICHERS[0] is PcieEnricher


def test_each_enricher_refreshes_on_its_own_cadence(tmp_path):
    clock, roce = Clock(), RoceStandIn()
    enrichers = LinkEnrichers((PcieEnricher, lambda: roce), monotonic=clock)
    calls: List[str] = []

    def guard(name: str, read: Callable[[], None]) -> None:
        calls.append(name)
        read()

    scan = inventory(PcieLink(2.5, 32.0, 16, 16))
    for now_s in (100.0, 101.0, 129.0, 130.0):
        clock.now_s = now_s
        enrichers.refresh(EnrichInputs(Sysroot(str(tmp_path)), scan), guard)
    assert roce.refreshes == 2  # at 100 s and 130 s, not in between
    assert calls.count("link-pcie") == 4 and calls.count("link-roce") == 2
    enriched = enrichers.enrich(chip())
    assert [link.kind for link in enriched.links] == ["pcie", "roce"]
    assert enriched.pcie == PcieLink(2.5, 32.0, 16, 16)  # the raw reading is kept beside the record
    assert enriched.links[0].state is LinkState.SLOW and enriched.links[0].shared_by == "0000:c1:00.0"


def test_a_new_scan_replaces_the_links_and_a_chip_no_function_matches_keeps_none(tmp_path):
    enrichers = LinkEnrichers((PcieEnricher,), monotonic=Clock())
    sysroot = Sysroot(str(tmp_path))

    def guard(name: str, read: Callable[[], None]) -> None:
        read()

    enrichers.refresh(EnrichInputs(sysroot, inventory(PcieLink(32.0, 32.0, 8, 16))), guard)
    assert enrichers.enrich(chip()).links[0].state is LinkState.NARROW
    enrichers.refresh(EnrichInputs(sysroot, inventory(PcieLink(32.0, 32.0, 16, 16))), guard)
    assert enrichers.enrich(chip()).links[0].state is LinkState.UP
    elsewhere = replace(chip(), identity=replace(chip().identity, bus_id="0000:02:00.0"))
    assert enrichers.enrich(elsewhere).links == ()


def test_a_failing_enricher_is_its_own_probes_error_and_the_others_still_run(tmp_path):
    roce = RoceStandIn()
    roce.fail = True
    enrichers = LinkEnrichers((lambda: roce, PcieEnricher), monotonic=Clock())
    failed: List[Tuple[str, str]] = []

    def guard(name: str, read: Callable[[], None]) -> None:
        try:
            read()
        except OSError as exc:
            failed.append((name, str(exc)))

    enrichers.refresh(EnrichInputs(Sysroot(str(tmp_path)), inventory(PcieLink(32.0, 32.0, 16, 16))), guard)
    assert failed == [("link-roce", "hccn_tool did not answer")]
    assert [link.kind for link in enrichers.enrich(chip()).links] == ["roce", "pcie"]


def test_a_second_kind_is_judged_alerted_and_exported_as_it_comes():
    down = RoceStandIn().enrich(chip())
    (verdict,) = link_verdicts(down)
    assert (verdict.state, verdict.level) == (LinkState.DOWN, Level.WARNING)
    judged = judge_chip(down)
    assert judged.level is Level.WARNING and judged.reasons[0].link == "roce"
    snapshot = Snapshot(
        datetime(2026, 11, 28, tzinfo=timezone.utc),
        "npu-smi",
        chips=(down,),
        probes=(ProbeReport("npu-smi", MetricStatus.OK, 0.1),),
    )
    tracker = AlertTracker()
    for second in range(3):  # three samples (the tracker counts samples, not calls)
        alerts = tracker.update(replace(snapshot, taken_at=snapshot.taken_at + timedelta(seconds=second)))
    (alert,) = [a for a in alerts if a.kind is AlertKind.LINK_DEGRADED]
    assert (alert.key, alert.severity, alert.message) == (
        ("roce", 0, 0),
        Severity.WARNING,
        "NPU 0 RoCE port down",
    )
    metrics = render(ExporterView(snapshot=snapshot)).decode()
    assert any(
        line.startswith("npuwatch_link_state{") and 'kind="roce"' in line and 'state="down"' in line
        for line in metrics.splitlines()
        if line.endswith(" 1.0")
    )
