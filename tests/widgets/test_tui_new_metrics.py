"""The DCMI backend's metrics on the dashboard: AI Core frequency against rated next to AI Core,
Vector and HBM bandwidth bars, error codes on the card, every new metric on the detail screen;
an npu-smi chip (none of them) draws exactly what it drew before."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import List, Tuple

from textual.pilot import Pilot

from npuwatch.history import History
from npuwatch.model import ChipError, Health, Snapshot
from npuwatch.widgets.tui.app import NpuwatchApp
from npuwatch.widgets.tui.chip_grid import ChipGrid
from npuwatch.widgets.tui.chips import card_lines, compact_line
from npuwatch.widgets.tui.detail_screen import DetailScreen
from npuwatch.widgets.view_model import chip_row
from tests.widgets.fakes import (
    FakeSampler,
    capture_snapshot,
    card_text,
    chip_cards,
    wait_for,
    with_dcmi_values,
)

A3 = capture_snapshot("100")  # 8 NPUs × 2 chips, npu-smi
DCMI_A3 = with_dcmi_values(A3)
B910 = capture_snapshot("001")  # 8 × 910B2
DCMI_B910 = with_dcmi_values(B910)


def plain_lines(snapshot: Snapshot, index: int, width: int = 38) -> List[str]:
    chip = snapshot.chips[index]
    history = History()
    history.add(snapshot)
    return [line.plain for line in card_lines(chip, history, width, True, chip_row(chip))]


def screen_lines(app: NpuwatchApp) -> List[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


def drive(snapshot: Snapshot, scenario, size: Tuple[int, int] = (160, 48)) -> NpuwatchApp:  # type: ignore[no-untyped-def]
    app = NpuwatchApp(FakeSampler([snapshot], interval_s=3600.0))

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
            await pilot.pause()
            await scenario(app, pilot)

    asyncio.run(main())
    return app


# --- the card ----------------------------------------------------------------------------------


def test_the_card_shows_the_ai_core_frequency_against_rated_right_under_ai_core() -> None:
    lines = plain_lines(DCMI_A3, 0)
    assert lines[1].startswith("AIC ")
    assert re.match(r"FREQ +[█▏▎▍▌▋▊▉·]+ +1300/1800( MHz)? ", lines[2]), lines
    # The bar is the share of the rated frequency: 1300/1800 = 72 % of 10 cells = 7 and a bit.
    assert lines[2][5:15].startswith("███████") and not lines[2][5:15].startswith("████████"), lines[2]


def test_the_card_draws_vector_and_hbm_bandwidth_bars_under_its_cells() -> None:
    lines = plain_lines(DCMI_A3, 0)
    assert [line.split()[0] for line in lines[1:]] == ["AIC", "FREQ", "HBM", "PWR", "TEMP", "VEC"]
    assert re.search(r"^VEC +[█▏▎▍▌▋▊▉·]+ +45% +HBW +[█▏▎▍▌▋▊▉·]+ +62%", lines[6]), lines[6]


def test_a_single_bar_gets_a_line_of_its_own_with_its_sparkline() -> None:
    only_vector = with_dcmi_values(A3, hbm_bandwidth_percent=None)
    lines = plain_lines(only_vector, 0)
    assert lines[-1].startswith("VEC  ") and "45%" in lines[-1] and "HBW" not in lines[-1], lines


def test_an_npu_smi_chip_draws_the_card_it_always_drew() -> None:
    assert len(plain_lines(A3, 0)) == 5
    history = History()
    history.add(A3)
    chip = A3.chips[0]
    assert "MHz" not in compact_line(chip, history, 200, True, chip_row(chip)).plain


def test_a_narrow_card_keeps_the_frequency_and_a_sparkline() -> None:
    lines = plain_lines(DCMI_A3, 0, width=26)  # the A3 cards at 120 columns
    assert lines[2].startswith("FREQ") and "1300/1800" in lines[2], lines
    assert all(len(line) <= 26 for line in lines[1:])  # the title is cut where it is drawn, as before


def test_the_one_line_form_shows_the_frequency_and_bars_when_they_fit() -> None:
    history = History()
    history.add(DCMI_A3)
    chip = DCMI_A3.chips[0]
    wide = compact_line(chip, history, 160, False, chip_row(chip)).plain
    assert (
        "1300/1800 MHz" in wide and re.search(r"VEC \S+ +45%", wide) and re.search(r"HBW \S+ +62%", wide)
    ), wide
    assert len(wide) <= 160
    narrow = compact_line(chip, history, 80, False, chip_row(chip)).plain
    assert narrow == compact_line(A3.chips[0], history, 80, False, chip_row(A3.chips[0])).plain


# --- the dashboard -------------------------------------------------------------------------------


def test_the_dashboard_keeps_cards_for_16_dcmi_chips_and_shows_the_new_metrics() -> None:
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert not app.compact  # the taller cards still fit 160×48
        cards = chip_cards(app)
        lines = card_text(app, cards[0])
        assert any(line.startswith("FREQ") and "1300/1800" in line for line in lines), lines
        assert any("VEC" in line and "HBW" in line for line in lines), lines
        assert all(card.place.height == len(card_text(app, card)) for card in cards)
        screen = "\n".join(screen_lines(app))
        assert screen.count("1300/1800") == 16

    drive(DCMI_A3, scenario)


def test_error_codes_of_a_dcmi_chip_are_on_its_card() -> None:
    chips = list(DCMI_B910.chips)
    chips[2] = replace(
        chips[2], health=Health.ALARM, errors=(ChipError("80E01801", "HBM multi-bit ECC error"),)
    )
    snapshot = replace(DCMI_B910, chips=tuple(chips))

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        card = next(card for card in chip_cards(app) if card.key == (2, 0))
        lines = card_text(app, card)
        assert any("80E01801 HBM multi-bit ECC error" in line for line in lines), lines
        assert card.place.height == len(lines)
        assert "80E01801" in "\n".join(screen_lines(app))

    drive(snapshot, scenario)


def test_the_detail_screen_lists_every_new_metric_and_graphs_the_graphed_ones() -> None:
    sampler = FakeSampler([DCMI_A3, DCMI_A3, DCMI_A3], interval_s=3600.0)
    app = NpuwatchApp(sampler)
    seen = {}

    async def main() -> None:
        async with app.run_test(size=(160, 100)) as pilot:  # tall: every graph on screen
            assert await wait_for(pilot, lambda: app.snapshot is not None)
            for _ in range(2):
                sampler.history.add(DCMI_A3)
            await pilot.pause()
            app.query_one(ChipGrid).focus_card(0)
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
            await pilot.pause()
            seen["lines"] = screen_lines(app)

    asyncio.run(main())
    text = "\n".join(seen["lines"])
    for expected in (
        r"AI Core frequency +1300/1800 MHz",
        r"Vector utilisation +45%",
        r"Cube utilisation +12%",
        r"AI CPU utilisation +3%",
        r"Control CPU utilisation +7%",
        r"HBM bandwidth utilisation +62%",
        r"HBM temperature +41 °C",
        r"Voltage +0\.85 V",
        r"HBM ECC single-bit errors +2 errors",
        r"HBM ECC double-bit errors +0 errors",
        r"HBM pages isolated after ECC errors +1 page\b",
    ):
        assert re.search(expected, text), expected
    assert "AI Core rated frequency" not in text  # said with the frequency, not as a row of its own
    for graphed in (
        "AI Core frequency  now 1300 MHz",
        "Vector utilisation  now 45%",
        "HBM bandwidth utilisation  now 62%",
        "HBM temperature  now 41 °C",
    ):
        assert graphed in text, graphed
    assert "(graph top 1800 MHz)" in text  # the frequency's graph tops at its rated value


def test_an_npu_smi_chip_has_no_new_metric_rows_on_the_detail_screen() -> None:
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("enter")
        assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
        await pilot.pause()
        text = "\n".join(screen_lines(app))
        assert not any(word in text for word in ("frequency", "Vector", "Cube", "ECC", "Voltage"))

    drive(A3, scenario)
