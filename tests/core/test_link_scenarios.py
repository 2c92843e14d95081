"""Issue 28 item 3: one idle link at Gen1 of Gen5 (link power saving) and links wanting on busy
chips, through `--root` as users run it: the judge, the alert line, the card, the text view, the
detail screen, the JSON and /metrics say the same thing of each link."""

from __future__ import annotations

import json
from typing import Dict, List

import pytest

from npuwatch.alerts import AlertKind, AlertTracker
from npuwatch.cli import main
from npuwatch.exporter.metrics import ExporterView, render
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.history import History
from npuwatch.judge import judge_snapshot
from npuwatch.model import Level, Snapshot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.widgets.text import render_snapshot
from npuwatch.widgets.tui.chips import card_lines
from npuwatch.widgets.tui.detail_screen import pcie_text
from tests.conftest import capture_text

GEN1, GEN4, GEN5 = "2.5 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe"


@pytest.fixture(autouse=True)
def trusted_trees(monkeypatch):
    """The tree carries a fake npu-smi the test means to run."""
    monkeypatch.setenv("NPUWATCH_TRUST_ROOT", "1")


@pytest.fixture
def tree(tmp_path) -> SysrootBuilder:
    """Capture 001 (eight 910B2, AI Core 0 %) with NPU 1 and NPU 2 made busy (95 %), and links:
    NPU 0 idle at Gen1 of Gen5 (power saving), NPU 1 busy at x8 of x16, NPU 2 busy at Gen1 of Gen5,
    NPU 3 idle at x8 of x16, NPU 4 at its maximum."""
    text = capture_text("001")
    for bus in ("0000:C2:00.0", "0000:81:00.0"):
        text = text.replace(f"| {bus}  | 0           0", f"| {bus}  | 95          0", 1)
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes(range(8))
    path = builder.write_file("/capture.txt", text)
    builder.install_executable("/usr/local/bin/npu-smi", f"#!/bin/sh\ncat {path}\n")
    links = {
        "0000:c1:00.0": dict(current_speed=GEN1, max_speed=GEN5),
        "0000:c2:00.0": dict(current_speed=GEN5, current_width=8),
        "0000:81:00.0": dict(current_speed=GEN1, max_speed=GEN5),
        "0000:82:00.0": dict(current_speed=GEN4, max_speed=GEN4, current_width=8),
        "0000:01:00.0": dict(current_speed=GEN5),
    }
    for bdf, link in links.items():
        builder.add_pci_function(bdf, 0xD802, **link)
    return builder


def sampled(tree: SysrootBuilder, count: int) -> List[Snapshot]:
    feed = open_feed(FeedOptions(root=str(tree.root), backend="npu-smi"))
    try:
        return [feed.sample() for _ in range(count)]
    finally:
        feed.close()


#: NPU → (the judge's link state, its level): what every surface must agree on.
EXPECTED = {
    0: ("power-saving", "ok"),
    1: ("narrow", "warning"),
    2: ("slow", "warning"),
    3: ("narrow", "warning"),  # narrow counts idle or busy
    4: ("up", "ok"),
}


def test_the_json_carries_each_link_and_the_judges_verdict(tree, capsys):
    assert main(["snapshot", "--root", str(tree.root), "--backend", "npu-smi", "--json"]) == 0
    chips = {chip["npu_id"]: chip for chip in json.loads(capsys.readouterr().out)["chips"]}
    for npu, (state, level) in EXPECTED.items():
        (link,) = chips[npu]["links"]
        assert (link["kind"], link["verdict"]["state"], link["verdict"]["level"]) == ("pcie", state, level)
        assert chips[npu]["pcie"] is not None  # the raw reading stays, added to, never renamed
    assert chips[0]["links"][0]["state"] == "slow"  # the reading; power saving is the judge's word
    assert chips[0]["judgement"] == {"level": "ok", "reasons": []}
    assert chips[2]["judgement"]["reasons"] == ["PCIe Gen1 of Gen5 under load"]
    assert chips[1]["judgement"]["level"] == "warning"


def test_every_surface_agrees_on_each_link(tree):
    snapshots = sampled(tree, 3)
    snapshot = snapshots[-1]
    chips = {chip.identity.npu_id: chip for chip in snapshot.chips}
    judged = judge_snapshot(snapshot)
    tracker = AlertTracker()
    for each in snapshots:
        alerts = tracker.update(each)
    link_alerts: Dict[int, str] = {
        a.chip[0]: a.severity.value for a in alerts if a.kind is AlertKind.PCIE_DEGRADED and a.chip
    }
    text = render_snapshot(snapshot)
    metrics = render(ExporterView(snapshot=snapshot)).decode()
    for npu, (state, level) in EXPECTED.items():
        chip = chips[npu]
        wanting = level == "warning"
        # The judge: the chip's reasons hold the link exactly when the verdict is a warning.
        has_reason = any(r.text.startswith("PCIe") for r in judged[chip.identity.key].reasons)
        assert has_reason is wanting, npu
        # The alert line: a warning for a wanting link, nothing (not even a note) for the others.
        assert link_alerts.get(npu) == ("warning" if wanting else None), (npu, alerts)
        # The card: a ▲ line exactly for a wanting link.
        card = [line.plain for line in card_lines(chip, History(), 40, in_group=False)]
        assert any(line.startswith("▲ PCIe") for line in card) is wanting, (npu, card)
        # The text view: a ▲ line under the table exactly for a wanting link.
        listed = [line for line in text.splitlines() if line.startswith(f"▲ NPU {npu} (") and "PCIe" in line]
        assert bool(listed) is wanting, (npu, text)
        # The detail screen: the judge's word, marked only when wanting.
        detail = pcie_text(chip).plain
        assert ("▲" in detail) is wanting, (npu, detail)
        # /metrics: the state set is 1 on the judge's state.
        ones = [
            line
            for line in metrics.splitlines()
            if line.startswith("npuwatch_link_state{") and f'npu_id="{npu}"' in line and line.endswith(" 1.0")
        ]
        assert len(ones) == 1 and f'state="{state}"' in ones[0] and 'kind="pcie"' in ones[0], (npu, ones)
    assert "power saving at idle" in pcie_text(chips[0]).plain
    assert "slow under load" in pcie_text(chips[2]).plain
    assert judged[chips[0].identity.key].level is Level.OK
