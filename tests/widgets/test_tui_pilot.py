"""Pilot tests for the dashboard: every key, the sampling worker, a failing and a hung sampler.

Plain test functions run the async Pilot with ``asyncio.run`` (no pytest-asyncio needed).
Assertions are on widget state, never on how long anything took.
"""

from __future__ import annotations

import asyncio
import io
import re
import threading
from typing import Awaitable, Callable, List, Tuple

import pytest
from rich.console import Console
from textual.dom import DOMNode
from textual.pilot import Pilot
from textual.widgets import Input, Static

from npuwatch.model import Health, Snapshot
from npuwatch.widgets.tui.app import INTERVALS_S, NpuwatchApp
from npuwatch.widgets.tui.card_paint import Card
from npuwatch.widgets.tui.chip_grid import ChipGrid
from npuwatch.widgets.tui.detail_screen import DetailScreen
from npuwatch.widgets.tui.help_screen import HelpScreen
from npuwatch.widgets.tui.line import Line
from npuwatch.widgets.tui.processes import ProcessTable
from tests.widgets.fakes import (
    ME,
    FailingSampler,
    FakeSampler,
    HungSampler,
    capture_snapshot,
    card_text,
    chip_cards,
    focused_card,
    wait_for,
    with_health,
)

WIDE = (160, 48)
NARROW = (80, 24)
A3 = capture_snapshot("100")  # 8 NPUs × 2 chips
DUO = capture_snapshot("044")  # 310P Duo: NPU 1 and 2, two chips each, Device IDs 0-3
B910 = capture_snapshot("001")  # 8 × 910B2, 15 process rows

Scenario = Callable[[NpuwatchApp, Pilot], Awaitable[None]]


def drive(
    sampler: FakeSampler,
    scenario: Scenario,
    size: Tuple[int, int] = WIDE,
    *,
    first_sample: bool = True,
) -> NpuwatchApp:
    """Run ``scenario`` against a dashboard around ``sampler``; return the app after it stopped."""
    app = NpuwatchApp(sampler)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            if first_sample:
                assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
                await pilot.pause()
            await scenario(app, pilot)

    asyncio.run(main())
    return app


def plain(renderable: object) -> str:
    """The text of a Rich renderable without styles."""
    if isinstance(renderable, str):
        return renderable
    if isinstance(getattr(renderable, "plain", None), str):
        return renderable.plain  # type: ignore[attr-defined]
    console = Console(width=200, file=io.StringIO(), color_system=None)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


def text(node: DOMNode, selector: str) -> str:
    """The plain text a header/alerts line or a Static shows."""
    widget = node.query_one(selector)
    return plain(widget.text if isinstance(widget, Line) else widget.content)


def card_lines(app: NpuwatchApp, card: Card) -> List[str]:
    """What a chip card of the dashboard shows, line by line."""
    return card_text(app, card)


def screen_lines(app: NpuwatchApp) -> List[str]:
    """What the terminal shows, line by line (the composited screen, without styles)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def table_column(app: NpuwatchApp, column: int) -> List[str]:
    table = app.query_one(ProcessTable)
    return [plain(table.get_row_at(row)[column]) for row in range(table.row_count)]


def pids(app: NpuwatchApp) -> List[int]:
    return [int(pid) for pid in table_column(app, 2)]


# --- layout and grouping -----------------------------------------------------------------


def test_a3_groups_two_chips_per_npu_card():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        grid = app.query_one(ChipGrid)
        titles = [grid.labels(i)[0] for i in range(len(grid.groups))]
        assert titles == [f"NPU {n} · Ascend910 · 2 chips" for n in range(8)]
        assert [[grid.cards[i].key for i in group] for group in grid.groups] == [
            [(n, 0), (n, 1)] for n in range(8)
        ]
        assert len(chip_cards(app)) == 16
        assert not grid.compact
        # Two cards side by side in each box.
        assert all(grid.cards[i].place.y == grid.cards[i + 1].place.y for i in range(0, 16, 2))
        # The box names the NPU, each card its chip.
        assert card_lines(app, chip_cards(app)[1])[0].startswith("chip 1 phy 1")
        assert any("╭─ NPU 0 · Ascend910 · 2 chips ─" in line for line in screen_lines(app))

    drive(FakeSampler([A3]), scenario)


def test_310p_duo_groups_two_chips_per_npu_with_sparse_ids():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        grid = app.query_one(ChipGrid)
        titles = [grid.labels(i)[0] for i in range(len(grid.groups))]
        assert titles == ["NPU 1 · 310P3 · 2 chips", "NPU 2 · 310P3 · 2 chips"]
        keys = [[grid.cards[i].key for i in group] for group in grid.groups]
        assert keys == [[(1, 0), (1, 1)], [(2, 0), (2, 1)]]
        heads = [card_lines(app, card)[0] for card in chip_cards(app)]
        assert [h.split(" 0000")[0] for h in heads] == [
            "chip 0 dev 0",
            "chip 1 dev 1",
            "chip 0 dev 2",
            "chip 1 dev 3",
        ]
        # 310P has no HBM: the memory bar is DDR.
        assert card_lines(app, chip_cards(app)[0])[2].startswith("DDR")

    drive(FakeSampler([DUO]), scenario)


def test_compact_layout_is_one_line_per_chip_at_80_columns():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        cards = chip_cards(app)
        assert app.query_one(ChipGrid).compact
        assert all(card.place.height == 1 for card in cards)
        assert [card.place.y for card in cards] == [0, 1, 2, 3]
        lines = [card_lines(app, card)[0] for card in cards]
        assert lines[0].startswith("  1  310P3")
        assert lines[1].startswith(" └c1 310P3")

    drive(FakeSampler([DUO]), scenario, NARROW)


def test_alarm_chip_shows_its_badge_and_an_alert():
    snapshot = with_health(B910, (3, 0), Health.ALARM)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        card = next(c for c in chip_cards(app) if c.key == (3, 0))
        assert "✖ Alarm" in card_lines(app, card)[0]
        others = [c for c in chip_cards(app) if c is not card]
        assert all("✔ OK" in card_lines(app, c)[0] for c in others)
        assert "NPU 3 Alarm" in text(app, "#alerts")

    drive(FakeSampler([snapshot]), scenario)


def test_alarm_chip_in_a_group_sets_the_group_badge():
    snapshot = with_health(DUO, (2, 1), Health.ALARM)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        grid = app.query_one(ChipGrid)
        subtitles = {grid.cards[group[0]].key[0]: grid.labels(i)[1] for i, group in enumerate(grid.groups)}
        assert subtitles == {1: "✔ OK", 2: "✖ Alarm"}
        assert any(line.rstrip().endswith("─ ✖ Alarm ─╯") for line in screen_lines(app))

    drive(FakeSampler([snapshot]), scenario)


def test_a_group_badge_follows_its_chips_from_sample_to_sample():
    """The box's subtitle (its chips' worst health) is redrawn when a chip's health changes, and
    back again: the box frames are kept between samples only while they read the same."""
    alarm = with_health(DUO, (2, 1), Health.ALARM)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        def bottoms() -> List[str]:
            return [found for line in screen_lines(app) for found in re.findall(r"─ (\S+ \S+) ─╯", line)]

        assert bottoms() == ["✔ OK", "✔ OK"]
        app.show(alarm)
        await pilot.pause()
        assert bottoms() == ["✔ OK", "✖ Alarm"]
        app.show(DUO)
        await pilot.pause()
        assert bottoms() == ["✔ OK", "✔ OK"]

    drive(FakeSampler([DUO], interval_s=3600.0), scenario)


def test_process_table_rows_and_own_rows(monkeypatch):
    monkeypatch.setattr("npuwatch.widgets.tui.processes.me", lambda: ME)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        assert table.row_count == 15
        assert table.border_title == "Processes (15) · sort NPU ▲"
        by_chip = sorted(B910.processes, key=lambda p: (p.npu_id, p.chip_id, p.pid))
        assert pids(app) == [p.pid for p in by_chip]
        mine = [row for row in table.rows if row[3].plain == ME]
        assert len(mine) == 5
        assert all("bold" in str(cell.style) for row in mine for cell in row)
        others = [row for row in table.rows if row[3].plain != ME]
        assert not any("bold" in str(cell.style) for row in others for cell in row)

    drive(FakeSampler([B910]), scenario)


# --- keys ----------------------------------------------------------------------------------


def test_q_quits():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("q")
        await pilot.pause()
        assert app._exit  # the app asked to exit
        assert app.return_code in (None, 0)

    app = drive(FakeSampler([A3]), scenario)
    assert not app.is_running


def test_question_mark_opens_help_and_escape_closes_it():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = " ".join(plain(static.content) for static in app.screen.query(Static))
        assert "npuwatch keys" in shown
        assert "filter processes" in shown
        box = app.screen.query_one("#help-box")
        assert box.size.width > 40  # the box is laid out around its text, not collapsed
        assert box.size.height >= 10
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        assert len(app.screen_stack) == 1

    drive(FakeSampler([A3]), scenario)


def test_p_pauses_sampling_and_resumes():
    sampler = FakeSampler([A3], interval_s=0.05)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, lambda: sampler.calls >= 3)
        await pilot.press("p")
        assert app.paused
        assert "⏸ PAUSED" in text(app, "#header")
        # A sample already in flight may finish; after it, none starts while paused.
        assert await wait_for(pilot, lambda: sampler.active == 0 and app._sampling_since is None)
        calls = sampler.calls
        await pilot.pause(0.5)  # ten intervals
        assert sampler.calls == calls
        await pilot.press("p")
        assert not app.paused
        assert "PAUSED" not in text(app, "#header")
        assert await wait_for(pilot, lambda: sampler.calls >= calls + 2)

    drive(sampler, scenario)


def test_plus_and_minus_step_through_the_intervals():
    sampler = FakeSampler([A3], interval_s=1.0)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        seen = []
        for _ in range(len(INTERVALS_S) + 1):
            await pilot.press("plus")
            seen.append(sampler.interval_s)
        assert seen == [2.0, 5.0, 10.0, 30.0, 30.0, 30.0, 30.0]
        assert "every 30 s" in text(app, "#header")
        seen = []
        for _ in range(len(INTERVALS_S) + 1):
            await pilot.press("minus")
            seen.append(sampler.interval_s)
        assert seen == [10.0, 5.0, 2.0, 1.0, 0.5, 0.5, 0.5]
        assert "every 0.5 s" in text(app, "#header")
        await pilot.press("equals_sign")  # `+` without shift
        assert sampler.interval_s == 1.0

    drive(sampler, scenario)


def test_s_cycles_the_process_sort():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        await pilot.press("s")
        assert table.border_title == "Processes (15) · sort NPU mem ▼"
        by_memory = sorted(B910.processes, key=lambda p: p.npu_memory_mib or 0, reverse=True)
        assert pids(app) == [p.pid for p in by_memory]
        elapsed_before = table_column(app, 7)
        titles = []
        for _ in range(4):
            await pilot.press("s")
            titles.append(table.border_title.split(" · ", 1)[1])
        assert titles == ["sort %CPU ▼", "sort PID ▲", "sort User ▲", "sort NPU ▲"]
        await pilot.press("s")
        # Re-sorting keeps the snapshot's clock: Elapsed does not jump to the wall clock.
        assert table_column(app, 7) == elapsed_before

    drive(FakeSampler([B910]), scenario)


def test_slash_filters_processes_enter_keeps_escape_clears():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        assert app.filter_box() is None  # mounted the first time it is opened
        await pilot.press("slash")
        box = app.filter_box()
        assert box is not None and box.display
        assert app.focused is box
        await pilot.press(*"bob")
        assert set(table_column(app, 3)) == {"bob"}
        assert table.row_count == 5
        await pilot.press("enter")
        assert not box.display
        assert app.focused is table
        assert table.row_count == 5
        assert "filter “bob”" in table.border_title
        await pilot.press("escape")
        assert table.row_count == 15
        assert box.value == ""
        # Esc while typing clears too.
        await pilot.press("slash", *"train.py --rank 1")
        assert sorted(pids(app)) == sorted(B910.processes[i].pid for i in (1, 10, 11, 12, 13, 14))
        await pilot.press("escape")
        assert not box.display
        assert table.row_count == 15
        await pilot.press("slash")  # opened again: the same box, empty
        assert app.filter_box() is box and box.display and box.value == ""

    drive(FakeSampler([B910]), scenario)


def test_typing_key_letters_into_the_filter_does_not_trigger_their_keys():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("slash", *"pqst")
        await pilot.pause()
        assert app.query_one("#filter", Input).value == "pqst"
        assert not app.paused
        assert app.theme == "textual-dark"
        assert app.query_one(ProcessTable).sort_index == 0
        assert app.is_running

    drive(FakeSampler([B910]), scenario)


def test_the_chip_area_has_the_focus_as_soon_as_its_first_chips_are_shown():
    # Given with the chips, not after the next refresh: Enter pressed the moment the chips appear
    # opens the first one (it was lost now and then in a real terminal).
    sampler = HungSampler([A3], answer=0)  # the app's own first sample never comes

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, sampler.hung.is_set)
        assert app.focused is None
        app.show(A3)
        assert app.focused is app.query_one(ChipGrid)
        sampler.release.set()

    drive(sampler, scenario, first_sample=False)


def test_enter_on_a_focused_card_opens_its_detail_and_escape_goes_back():
    sampler = FakeSampler([A3])

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        app.query_one(ChipGrid).focus_card(3)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.key == (1, 1)
        assert "NPU 1 · chip 1 · Ascend910" in text(app.screen, "#detail-now")
        assert await wait_for(pilot, lambda: sampler.details_asked == [(1, 1)])
        # The process table's keys do nothing here (the table is not on this screen).
        await pilot.press("slash", "s")
        await pilot.pause()
        assert app.filter_box() is None
        assert app.query_one(ProcessTable).sort_index == 0
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1
        assert not isinstance(app.screen, DetailScreen)
        assert app.focused is not None and app.focused.id != "filter"

    drive(sampler, scenario)


def test_clicking_a_card_opens_its_detail():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        grid = app.query_one(ChipGrid)
        place = next(c for c in grid.cards if c.key == (2, 1)).place
        assert await pilot.click(grid, offset=(place.x + 2, place.y + 1))
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.key == (2, 1)
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1

    drive(FakeSampler([DUO]), scenario)


def test_t_flips_the_theme():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.theme == "textual-dark"
        await pilot.press("t")
        assert app.theme == "textual-light"
        await pilot.press("t")
        assert app.theme == "textual-dark"

    drive(FakeSampler([A3]), scenario)


@pytest.mark.parametrize("size", [WIDE, NARROW], ids=["wide", "compact"])
def test_tab_moves_focus_between_cards(size):
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        for _ in range(3):  # to the first card
            if focused_card(app) is not None:
                break
            await pilot.press("tab")
        focused = []
        for _ in range(4):
            card = focused_card(app)
            assert card is not None
            focused.append(card.key)
            await pilot.press("tab")
        assert focused == [(0, 0), (0, 1), (1, 0), (1, 1)]
        await pilot.press("shift+tab")
        card = focused_card(app)
        assert card is not None and card.key == (1, 1)

    drive(FakeSampler([A3]), scenario, size)


# --- the sampling worker -------------------------------------------------------------------


def test_worker_keeps_sampling_and_never_overlaps():
    second = with_health(A3, (0, 0), Health.WARNING)
    sampler = FakeSampler([A3, A3, second], interval_s=0.05)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, lambda: sampler.calls >= 6)
        assert sampler.max_active == 1
        assert await wait_for(pilot, lambda: app.snapshot is second)
        card = chip_cards(app)[0]
        assert "▲ Warning" in card_lines(app, card)[0]
        assert len(sampler.history.values((0, 0), "aicore_percent")) >= 6

    drive(sampler, scenario)


def test_failing_sampler_shows_the_error_keeps_running_and_retries():
    sampler = FailingSampler([A3], interval_s=0.05)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, lambda: "sampler error" in text(app, "#alerts"))
        assert "RuntimeError: probe exploded" in text(app, "#alerts")
        assert await wait_for(pilot, lambda: sampler.calls >= 4)  # it retries
        assert app.is_running
        assert app.snapshot is None
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)

    drive(sampler, scenario, first_sample=False)


def test_a_sampler_that_recovers_clears_the_error():
    class FlakySampler(FakeSampler):
        def produce(self, call: int) -> Snapshot:
            if call <= 2:
                raise OSError("npu-smi went away")
            return super().produce(call)

    sampler = FlakySampler([A3], interval_s=0.05)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, lambda: app.snapshot is not None)
        await pilot.pause()
        assert "sampler error" not in text(app, "#alerts")

    drive(sampler, scenario, first_sample=False)


def test_hung_sampler_leaves_the_ui_responsive_and_q_exits():
    sampler = HungSampler([B910], answer=1, interval_s=0.5)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, sampler.hung.is_set)
        await pilot.press("s")
        assert app.query_one(ProcessTable).border_title.startswith("Processes (15) · sort NPU mem")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1
        await pilot.press("t")
        assert app.theme == "textual-light"
        assert await wait_for(pilot, lambda: "(stale)" in text(app, "#header"))
        assert "⏳ sampling for" in text(app, "#header")
        assert sampler.calls == 2  # nothing piles up behind the hung call
        await pilot.press("q")
        await pilot.pause()
        assert app._exit

    # Generous deadlines turn "q does not exit" into a failure instead of a hung suite: the
    # watchdog releases the hung call, and the test then fails because it had to.
    watchdog = threading.Timer(60.0, sampler.release.set)
    watchdog.start()
    try:
        app = drive(sampler, _deadline(scenario, 30))
    finally:
        watchdog.cancel()
        released_by_watchdog = sampler.release.is_set()
        sampler.release.set()
    assert not released_by_watchdog, "q exited only after the hung sample was released"
    assert not app.is_running


def _deadline(scenario: Scenario, seconds: float) -> Scenario:
    async def bounded(app: NpuwatchApp, pilot: Pilot) -> None:
        await asyncio.wait_for(scenario(app, pilot), seconds)

    return bounded


def test_the_first_chip_has_the_focus_so_enter_opens_it():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.pause()
        card = focused_card(app)
        assert card is not None and card.key == (0, 0)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.key == (0, 0)

    drive(FakeSampler([A3]), scenario)


# --- the first sample, taken while the app started ----------------------------------------


def test_a_first_sample_taken_during_start_up_is_shown_without_sampling_again():
    sampler = FakeSampler([B910, A3])
    handed: List[int] = []

    def first_sample() -> Tuple[Snapshot, float]:
        handed.append(1)
        return A3, 0.2

    app = NpuwatchApp(sampler, first_sample=first_sample)

    async def main() -> None:
        async with app.run_test(size=WIDE) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
            assert app.snapshot is A3
            assert sampler.calls == 0  # the next sample comes after the interval, from the feed
            assert len(chip_cards(app)) == 16

    asyncio.run(main())
    assert handed == [1]


def test_no_first_sample_from_start_up_means_the_app_samples_as_usual():
    sampler = FakeSampler([B910])
    app = NpuwatchApp(sampler, first_sample=lambda: None)

    async def main() -> None:
        async with app.run_test(size=WIDE) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
            assert app.snapshot is B910 and sampler.calls == 1

    asyncio.run(main())
