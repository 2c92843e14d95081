"""The text form of a snapshot (``npuwatch snapshot``): what it says about chips that need attention."""

from __future__ import annotations

from npuwatch.widgets.text import render_snapshot
from tests.widgets.fakes import simulated_snapshots


def test_a_degraded_pcie_link_is_in_the_text_snapshot() -> None:
    snapshot = simulated_snapshots("pcie-degraded", 1)[0]
    text = render_snapshot(snapshot)
    lines = [line for line in text.splitlines() if "PCIe" in line]
    assert len(lines) == 1, text
    assert "NPU 5" in lines[0] and "PCIe Gen4 x8 of Gen5 x16" in lines[0] and "degraded" in lines[0]
    bus_id = snapshot.chip(5).identity.bus_id  # type: ignore[union-attr]
    assert bus_id and bus_id in lines[0]


def test_links_at_their_maximum_are_not_mentioned() -> None:
    text = render_snapshot(simulated_snapshots("910b-training", 1)[0])
    assert "PCIe" not in text


def test_an_alarm_names_its_error_code_in_the_text_snapshot() -> None:
    text = render_snapshot(simulated_snapshots("chip-alarm", 1)[0])
    lines = [line for line in text.splitlines() if "80E01801" in line]
    assert len(lines) == 1, text
    assert lines[0].startswith("✖ NPU 3 (") and "Alarm 80E01801 HBM multi-bit ECC error" in lines[0]
