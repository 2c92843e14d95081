"""What a user meets in the dashboard's first minute: keys, layout, header, host panel, detail screen.

Pilot tests on fixed snapshots (captures, or the simulator with its clock frozen), asserting on what
the screen shows and where the focus is, never on how long anything took.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from typing import List, Set, Tuple

import pytest
from rich.text import Text
from textual.containers import VerticalScroll
from textual.events import Key
from textual.geometry import Size
from textual.pilot import Pilot
from textual.widgets import Static

from npuwatch.model import Health, MetricStatus, ProbeReport, Snapshot
from npuwatch.widgets.tui.app import NpuwatchApp
from npuwatch.widgets.tui.chip_layout import GroupShape, choose_layout, grid_height
from npuwatch.widgets.tui.detail_screen import DetailScreen, chip_summary, graphs
from npuwatch.widgets.tui.help_screen import HelpScreen
from npuwatch.widgets.tui.host_panel import HostPanel
from npuwatch.widgets.tui.messages import SnapshotReady
from npuwatch.widgets.tui.processes import ProcessTable
from tests.widgets.fakes import (
    FakeSampler,
    HungSampler,
    capture_snapshot,
    focused_card,
    simulated_snapshots,
    wait_for,
)
from tests.widgets.test_tui_pilot import A3, B910, DUO, NARROW, WIDE, drive, plain

ChipKey = Tuple[int, int]


def screen_lines(app: NpuwatchApp) -> List[str]:
    """What the terminal shows, line by line (the composited screen, without styles)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def static_text(static: Static) -> str:
    """A Static's text without markup or styles."""
    content = static.content
    return Text.from_markup(content).plain if isinstance(content, str) else plain(content)


def focused_key(app: NpuwatchApp) -> ChipKey:
    card = focused_card(app)
    assert card is not None, app.focused
    return card.key


async def press_and_read(pilot: Pilot, key: str) -> ChipKey:
    await pilot.press(key)
    await pilot.pause()
    return focused_key(pilot.app)  # type: ignore[arg-type]


@cache
def demo(scenario: str) -> Tuple[Snapshot, ...]:
    return tuple(simulated_snapshots(scenario, 3))


def demo_sampler(scenario: str) -> FakeSampler:
    snapshots = demo(scenario)
    sampler = FakeSampler([snapshots[-1]], record_history=False, label=f"demo:{scenario}")
    for snapshot in snapshots:
        sampler.history.add(snapshot)
    return sampler


# --- 1. arrows move between chips --------------------------------------------------------------


def test_arrows_move_between_cards_in_the_grid():
    # 160 columns: two A3 NPUs (four chip cards) a row.
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert not app.compact
        assert focused_key(app) == (0, 0)
        assert await press_and_read(pilot, "right") == (0, 1)
        assert await press_and_read(pilot, "right") == (1, 0)
        assert await press_and_read(pilot, "down") == (3, 0)  # the card below, same column
        assert await press_and_read(pilot, "down") == (5, 0)
        assert await press_and_read(pilot, "up") == (3, 0)
        assert await press_and_read(pilot, "left") == (2, 1)
        assert await press_and_read(pilot, "up") == (0, 1)
        assert await press_and_read(pilot, "up") == (0, 1)  # the top row: nowhere further up

    drive(FakeSampler([A3]), scenario, WIDE)


def test_arrow_keys_typed_in_one_burst_each_move_once():
    # A terminal delivers fast typing (or a held key) in one read: every key must still count.
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert focused_key(app) == (0, 0)
        app.post_message(Key("right", None))
        app.post_message(Key("right", None))
        app.post_message(Key("down", None))
        await pilot.pause()
        assert focused_key(app) == (3, 0)

    drive(FakeSampler([A3]), scenario, WIDE)


def test_arrows_move_one_chip_at_a_time_in_the_one_line_form_and_scroll_to_it():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.compact
        assert await press_and_read(pilot, "down") == (0, 1)
        assert await press_and_read(pilot, "down") == (1, 0)
        assert await press_and_read(pilot, "up") == (0, 1)
        for _ in range(20):
            await pilot.press("down")
        await pilot.pause()
        assert focused_key(app) == (7, 1)
        assert any(line.startswith(" └c1 Ascend910") for line in screen_lines(app))  # scrolled to it
        assert await press_and_read(pilot, "left") == (7, 0)
        assert await press_and_read(pilot, "right") == (7, 1)

    drive(FakeSampler([A3]), scenario, NARROW)


def test_arrows_keep_moving_the_process_tables_rows_when_it_has_the_focus():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        table = app.query_one(ProcessTable)
        table.focus()
        await pilot.pause()
        assert table.max_scroll_y >= 2
        before = table.scroll_y
        await pilot.press("down", "down")
        await pilot.pause()
        assert app.focused is table
        assert table.scroll_y == before + 2

    drive(FakeSampler([B910]), scenario, NARROW)


# --- 2. the detail screen scrolls with the keyboard -------------------------------------------


def test_the_detail_screen_scrolls_with_the_keyboard():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen)
        body = app.screen.query_one(VerticalScroll)
        assert await wait_for(pilot, lambda: body.max_scroll_y > 0)
        await pilot.press("end")
        await pilot.pause()
        assert body.scroll_y == body.max_scroll_y
        await pilot.press("home")
        await pilot.pause()
        assert body.scroll_y == 0
        await pilot.press("down")
        await pilot.pause()
        assert body.scroll_y == 1
        await pilot.press("pagedown")
        await pilot.pause()
        assert body.scroll_y > 1
        await pilot.press("pageup")
        await pilot.pause()
        assert body.scroll_y == 0
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DetailScreen)

    drive(FakeSampler([A3]), scenario, NARROW)


# --- 3. the help says what + and - do ----------------------------------------------------------


def test_help_says_plus_samples_less_often_and_minus_more_often():
    sampler = FakeSampler([A3], interval_s=1.0)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("plus")
        assert sampler.interval_s > 1.0  # `+` lengthens the interval
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box")
        lines = [line.strip() for s in box.query(Static) for line in static_text(s).splitlines()]
        plus = [line for line in lines if re.search(r"(^|\s)\+\s", line)]
        minus = [line for line in lines if re.search(r"(^|\s)-\s", line)]
        assert len(plus) == 1 and len(minus) == 1, lines
        assert "less often" in plus[0] and "more often" not in plus[0]
        assert "more often" in minus[0] and "less often" not in minus[0]

    drive(sampler, scenario)


# --- 4. every NPU on screen when it fits ----------------------------------------------------


def shown_npus(app: NpuwatchApp) -> Set[int]:
    """The NPU IDs the screen shows: card titles (``NPU 3 ·``) or one-line rows (``  3  Ascend910``)."""
    found: Set[int] = set()
    for line in screen_lines(app):
        found.update(int(n) for n in re.findall(r"NPU (\d+) ·", line))
        row = re.match(r"^\s*(\d+)\s+(Ascend|910|310)", line)
        if row:
            found.add(int(row.group(1)))
    return found


def test_a3_demo_at_120x40_shows_every_npu():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert shown_npus(app) == set(range(8))
        assert "Processes (16)" in "\n".join(screen_lines(app))

    drive(demo_sampler("a3"), scenario, (120, 40))


@pytest.mark.parametrize(
    ("snapshot", "size", "compact"),
    [
        (B910, (120, 40), False),  # 3 rows of cards fit
        (B910, (120, 30), True),  # cards would leave the processes no room; 8 lines fit
        (A3, (160, 48), False),
        (A3, (120, 40), True),
    ],
    ids=["910b-120x40-cards", "910b-120x30-lines", "a3-160x48-cards", "a3-120x40-lines"],
)
def test_cards_when_they_fit_the_height_else_one_line_per_chip(snapshot, size, compact):
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.pause()
        assert app.compact is compact
        npus = {chip.identity.npu_id for chip in snapshot.chips}
        assert shown_npus(app) == npus

    drive(FakeSampler([snapshot]), scenario, size)


def test_a_card_taller_by_a_problem_line_counts_in_the_fit():
    # 8 single-chip NPUs at 120 columns: three rows of boxes, 7 rows each (5 card lines + frame).
    plain_boxes = [GroupShape(chips=1, card_rows=7)] * 8
    assert grid_height(plain_boxes, 3) == 21
    one_taller = [*plain_boxes[:5], GroupShape(chips=1, card_rows=8), *plain_boxes[6:]]
    assert grid_height(one_taller, 3) == 22
    # 33 rows leave the chips 33 - 1 (header) - 5 - 6 (processes) = 21 rows.
    assert not choose_layout(Size(120, 33), plain_boxes).compact
    assert choose_layout(Size(120, 33), one_taller).compact
    # Two-chip boxes span two columns and start a new row when they do not fit.
    assert grid_height([GroupShape(chips=2, card_rows=7)] * 8, 4) == 28
    assert grid_height([GroupShape(chips=1, card_rows=7), GroupShape(chips=2, card_rows=7)], 2) == 14


def test_chips_scroll_when_even_lines_do_not_fit():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.compact
        assert app.query_one("#chips").max_scroll_y > 0
        assert app.query_one(ProcessTable).size.height >= 4  # the processes keep their rows

    drive(FakeSampler([A3]), scenario, NARROW)


# --- 5. the header: state first, versions cut, the real cadence -------------------------------


@pytest.mark.parametrize("width", [80, 100, 120])
def test_paused_shows_in_the_header_at_any_width(width):
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("p")
        await pilot.pause()
        assert "⏸ PAUSED" in screen_lines(app)[0]

    drive(FakeSampler([A3], label="demo:910b-training"), scenario, (width, 40))


def test_stale_sampling_shows_in_a_narrow_header():
    sampler = HungSampler([B910], answer=1, interval_s=0.1)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, sampler.hung.is_set)
        assert await wait_for(pilot, lambda: "(stale)" in screen_lines(app)[0])
        assert "⏳ sampling for" in screen_lines(app)[0]
        sampler.release.set()

    try:
        drive(sampler, scenario, (100, 30))
    finally:
        sampler.release.set()


def test_the_header_says_when_samples_take_longer_than_the_interval():
    sampler = FakeSampler([B910], interval_s=1.0)

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        await pilot.press("p")  # no new sample replaces the slow one below
        assert await wait_for(pilot, lambda: app._sampling_since is None)
        app.post_message(SnapshotReady(B910, 6.2))
        assert await wait_for(pilot, lambda: "samples take 6 s" in screen_lines(app)[0])
        assert "every 1 s (samples take 6 s)" in screen_lines(app)[0]
        app.post_message(SnapshotReady(B910, 0.3))
        assert await wait_for(pilot, lambda: "samples take" not in screen_lines(app)[0])
        assert "every 1 s" in screen_lines(app)[0]

    drive(sampler, scenario, (160, 40))


def test_versions_are_what_a_narrow_header_leaves_out():
    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        head = screen_lines(app)[0].rstrip()
        assert "every 1 s" in head
        assert "09:30:00" in head or ":30:00" in head
        assert not head.endswith("·")
        # A version is shown whole or not at all.
        assert not re.search(r"(npu-smi|CANN|driver|firmware)\s*$", head)

    drive(FakeSampler([B910]), scenario, (80, 24))


# --- 6. the host panel tells the truth -------------------------------------------------------


def test_the_host_panel_waits_for_the_first_sample_instead_of_claiming_a_replay():
    sampler = HungSampler([B910], answer=0, label="demo:npu-smi-hang")

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert await wait_for(pilot, sampler.hung.is_set)
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert "replay" not in shown
        assert "waiting for the first sample" in plain(app.query_one(HostPanel).lines()[0])
        sampler.release.set()

    try:
        drive(sampler, scenario, (120, 40), first_sample=False)
    finally:
        sampler.release.set()


def host_text(snapshot: Snapshot) -> str:
    panel_lines: List[str] = []

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        panel_lines.extend(line.plain for line in app.query_one(HostPanel).lines())

    drive(FakeSampler([snapshot]), scenario, (120, 40))
    return "\n".join(panel_lines)


def test_a_live_snapshot_without_host_says_why():
    failed = ProbeReport("host", MetricStatus.ERROR, None, "PermissionError: /proc/stat")
    live = replace(B910, source="demo:no-driver", host=None, probes=(*B910.probes, failed))
    shown = host_text(live)
    assert "replay" not in shown
    assert "could not be read" in shown and "PermissionError: /proc/stat" in shown


def test_a_replayed_capture_says_it_has_no_host():
    shown = host_text(replace(B910, source="replay:capture-001", host=None))
    assert "replayed capture" in shown


# --- 7. the detail screen: labels with units, only the metrics the chip has -------------------


def summary(snapshot: Snapshot, key: ChipKey) -> str:
    chip = snapshot.chip(*key)
    assert chip is not None
    return plain(chip_summary(chip, snapshot))


def test_detail_of_a_910b_labels_metrics_with_units_and_has_no_ddr():
    shown = summary(B910, (0, 0))
    chip = B910.chip(0, 0)
    assert chip is not None
    for raw in ("power_w", "hbm_used_mib", "temperature_c", "aicore_percent", "memory_used_mib"):
        assert raw not in shown
    assert re.search(r"Power\s+\d+\.\d W", shown)
    assert re.search(r"Temperature\s+\d+ °C", shown)
    assert re.search(r"AI Core\s+\d+%", shown)
    assert re.search(r"HBM used\s+\d+\.\d/64\.0 GiB", shown)
    assert "DDR" not in shown
    assert "0/0" not in shown
    assert "NPU Util" not in shown  # this npu-smi layout does not print it


def test_detail_of_a_310p_shows_ddr_not_hbm():
    shown = summary(DUO, (1, 0))
    assert re.search(r"DDR used\s+\d+\.\d/\d+\.\d GiB", shown)
    assert "HBM" not in shown
    assert re.search(r"Power\s+n/a", shown)  # 310P prints NA: said, with the reason
    assert "does not report it" in shown


def test_detail_graphs_of_a_910b_have_no_ddr_graph():
    sampler = FakeSampler([B910])
    for _ in range(3):
        sampler.history.add(B910)
    chip = B910.chip(0, 0)
    assert chip is not None
    shown = plain(graphs(sampler, chip, 60))
    assert "HBM" in shown and "GiB" in shown
    assert "Power" in shown and " W" in shown
    assert "DDR" not in shown and "MiB" not in shown


def test_detail_says_a_shared_reason_once():
    snapshot = demo("container-missing-nodes")[-1]
    chip = snapshot.chips[0]
    reasons = {note.reason for note in chip.notes.values()}
    assert len(reasons) == 1
    shown = summary(snapshot, chip.identity.key)
    reason = next(iter(reasons))
    assert shown.count("-8005") == 1, shown
    assert "HBM" in shown and "DDR" not in shown  # a 910B whose npu-smi failed still has HBM
    assert reason


def test_detail_of_an_alarm_chip_still_labels_its_metrics():
    snapshot = capture_snapshot("001", health={(3, 0): Health.ALARM})
    shown = summary(snapshot, (3, 0))
    assert "✖ Alarm" in shown and "Power" in shown
