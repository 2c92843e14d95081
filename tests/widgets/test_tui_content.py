"""What the dashboard's cards, lines and tables say in the first minute: NO_COLOR, chips npu-smi
could not read, bars, alarm codes and degraded links (Pilot and the card renderers)."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Awaitable, Callable, Dict, List, Tuple

import pytest
from textual.pilot import Pilot

from npuwatch.history import History
from npuwatch.model import (
    CHIP_METRICS,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    PcieLink,
    Snapshot,
)
from npuwatch.widgets.tui.app import NpuwatchApp
from npuwatch.widgets.tui.chips import card_lines, compact_line
from npuwatch.widgets.tui.line import Line
from npuwatch.widgets.tui.processes import ProcessTable
from tests.widgets.fakes import (
    FakeSampler,
    capture_snapshot,
    card_text,
    chip_cards,
    simulated_snapshots,
    wait_for,
)

Scenario = Callable[[NpuwatchApp, Pilot], Awaitable[None]]
BAR = re.compile(r"^(?:AIC|NPU|HBM|DDR|MEM|PWR|TEMP) +([█▏▎▍▌▋▊▉·]+)")


def drive(snapshots: List[Snapshot], scenario: Scenario, size: Tuple[int, int] = (160, 48)) -> NpuwatchApp:
    """Run ``scenario`` against a dashboard showing ``snapshots``; return the app after it stopped."""
    app = NpuwatchApp(FakeSampler(snapshots))

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
            await pilot.pause()
            await scenario(app, pilot)

    asyncio.run(main())
    return app


def failed_chip(name: str, npu: int = 0) -> ChipSample:
    """A chip as chip_state lists it from PCI sysfs when npu-smi never answered: every metric null."""
    note = MetricNote(MetricStatus.ERROR, "npu-smi failed with DCMI error -8005 (INNER_ERR)")
    identity = ChipIdentity(npu, 0, name=name, bus_id=f"0000:{npu + 1:02X}:00.0")
    return ChipSample(identity=identity, health=Health.UNKNOWN, notes={m: note for m in CHIP_METRICS})


def bars(lines: List[str]) -> Dict[str, str]:
    """The bar (filled cells and track) of every metric line, by its label."""
    found = {}
    for line in lines:
        match = BAR.match(line)
        if match:
            found[line.split()[0]] = match.group(1)
    return found


# --- 1. NO_COLOR ---------------------------------------------------------------------------


def test_no_color_renders_the_whole_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    # textual reads NO_COLOR when the app is created and then drops every colour with a filter
    # that needs a style on every segment of every line.
    monkeypatch.setenv("NO_COLOR", "1")
    snapshot = capture_snapshot("001")  # 8 × 910B2 with 15 processes

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.no_color
        await pilot.pause(0.2)
        screen = app.export_screenshot().replace("&#160;", " ")  # every line of the screen, drawn
        assert "python3 train.py --rank 0" in screen
        assert app.query_one(ProcessTable).row_count == 15

    drive([snapshot], scenario)


# --- 2. npu-smi failing: memory kind and n/a -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Ascend 910B", "HBM"),
        ("Ascend 910", "HBM"),
        ("910B3", "HBM"),
        ("Ascend 310P", "DDR"),
        ("310B4", "DDR"),
    ],
)
def test_memory_of_a_chip_npu_smi_could_not_read_is_named_from_its_model(name: str, kind: str) -> None:
    chip = failed_chip(name)
    card = [line.plain for line in card_lines(chip, History(), 36, in_group=False)]
    assert card[2].startswith(f"{kind}  "), card
    assert f" {kind} " in compact_line(chip, History(), 80, in_group=False).plain


def test_one_line_row_of_a_chip_without_memory_figures_says_n_a_once() -> None:
    line = compact_line(failed_chip("Ascend 910B"), History(), 80, in_group=False).plain
    assert "n/a/n/a" not in line
    assert re.search(r"HBM ·+ +n/a ", line), line


def test_demo_no_driver_cards_show_hbm_and_no_broken_figures() -> None:
    snapshot = simulated_snapshots("no-driver", 1)[0]

    async def wide(app: NpuwatchApp, pilot: Pilot) -> None:
        for card in chip_cards(app):
            lines = card_text(app, card)
            assert lines[2].startswith("HBM "), lines

    async def narrow(app: NpuwatchApp, pilot: Pilot) -> None:
        for card in chip_cards(app):
            line = card_text(app, card)[0]
            assert " HBM " in line and "n/a/n/a" not in line, line
            assert "910B" in line, line  # the model is not cut to "Ascend 910"

    drive([snapshot], wide)
    drive([snapshot], narrow, size=(80, 24))


# --- 3. equal values, equal bars ------------------------------------------------------------


def test_equal_values_draw_equal_bars_in_cards_of_every_width() -> None:
    chip = capture_snapshot("001").chips[0]
    drawn = {
        width: bars([line.plain for line in card_lines(chip, History(), width, False)])
        for width in range(33, 61)
    }
    first = drawn[33]
    assert set(first) == {"AIC", "HBM", "PWR", "TEMP"}
    for width, found in drawn.items():
        assert found == first, f"width {width}: {found} != {first}"


@pytest.mark.parametrize("capture", ["001", "100"])
def test_equal_values_draw_equal_bars_on_the_dashboard(capture: str) -> None:
    snapshot = capture_snapshot(capture)
    model = snapshot.chips[0]
    values = {metric: getattr(model, metric) for metric in CHIP_METRICS}
    same = replace(snapshot, chips=tuple(replace(chip, **values) for chip in snapshot.chips))

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        cards = chip_cards(app)
        assert len({card.place.width for card in cards}) > 1, "the grid gives cards different widths"
        drawn = [bars(card_text(app, card)) for card in cards]
        assert drawn[0] and all(found == drawn[0] for found in drawn), drawn

    drive([same], scenario)


# --- 5. a degraded PCIe link ------------------------------------------------------------------


def test_a_degraded_link_is_on_its_chip_card() -> None:
    snapshot = simulated_snapshots("pcie-degraded", 1)[0]  # NPU 5: 16 GT/s x8 of 32 GT/s x16

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.pause(0.1)
        for card in chip_cards(app):
            lines = card_text(app, card)
            if card.key == (5, 0):
                assert any("PCIe Gen4 x8 of Gen5 x16" in line and "narrow" in line for line in lines), lines
                assert card.place.height == len(lines), "the card grows to show the link"
            else:
                assert not any("PCIe" in line for line in lines), lines

    drive([snapshot], scenario)


def test_a_card_draws_a_link_below_its_maximum_speed_or_width() -> None:
    chip = capture_snapshot("001").chips[0]
    slow = replace(chip, pcie=PcieLink(8.0, 16.0, 8, 16))
    lines = [line.plain for line in card_lines(slow, History(), 36, in_group=False)]
    assert "▲ PCIe Gen3 x8 of Gen4 x16 narrow" in lines
    full = replace(chip, pcie=PcieLink(16.0, 16.0, 16, 16))
    assert len(card_lines(full, History(), 36, in_group=False)) == 5
    # Slower only while the chip is idle (AI Core 0 % here): link power saving, no line.
    assert chip.aicore_percent == 0
    idle = replace(chip, pcie=PcieLink(2.5, 16.0, 16, 16))
    assert len(card_lines(idle, History(), 36, in_group=False)) == 5


# --- 4. an alarm's error code -----------------------------------------------------------------


def test_an_alarm_shows_its_error_code_and_meaning_on_the_card_and_the_alerts_line() -> None:
    snapshot = simulated_snapshots("chip-alarm", 1)[0]  # NPU 3 in Alarm, 80E01801

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.pause(0.1)
        card = next(card for card in chip_cards(app) if card.key == (3, 0))
        lines = card_text(app, card)
        assert any("80E01801 HBM multi-bit ECC error" in line for line in lines), lines
        assert card.place.height == len(lines)
        alerts = app.query_one("#alerts", Line).text.plain
        assert "NPU 3 Alarm 80E01801 HBM multi-bit ECC error" in alerts

    drive([snapshot], scenario)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_the_alerts_line_names_a_failing_npu_smi_and_the_doctor_from_the_first_sample(
    size: Tuple[int, int],
) -> None:
    snapshot = simulated_snapshots("container-missing-nodes", 1)[0]

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        alerts = app.query_one("#alerts", Line).text.plain
        assert alerts == "⚠ npu-smi failed with DCMI error -8005 (INNER_ERR) — run `npuwatch doctor`"

    drive([snapshot], scenario, size=size)
