"""The line widgets' fast Text → Strip path draws exactly what Rich's Text.render would."""

from __future__ import annotations

import dataclasses
from typing import List

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.strip import Strip

from npuwatch.history import History
from npuwatch.widgets.tui.card_paint import card_strips
from npuwatch.widgets.tui.chips import card_lines, compact_line
from npuwatch.widgets.tui.host_panel import host_lines
from npuwatch.widgets.tui.line import text_strip
from npuwatch.widgets.tui.processes import row_strip, visible_rows
from npuwatch.widgets.view_model import chip_row
from tests.widgets.fakes import FIXED_HOST, ME, capture_snapshot, simulated_snapshots, with_dcmi_values

BASES = (Style.null(), Style(color="grey82", bgcolor="grey11"), Style(bold=True, bgcolor="#202020"))


def reference_strip(text: Text, console: Console, width: int, base: Style) -> Strip:
    """What the dashboard drew before the fast path: Rich's own Text.render, every segment over ``base``."""
    if text.spans or not text.style:
        segments = list(text.render(console))
    else:
        segments = [Segment(text.plain, console.get_style(text.style, default=Style.null()))]
    styled = [Segment(cells, base + style) for cells, style, _ in segments if cells]
    return Strip(styled).adjust_cell_length(width, base)


def dashboard_texts() -> List[Text]:
    """Every kind of line the dashboard draws: cards, one-line rows, host panel, process rows."""
    snapshot = capture_snapshot("100")
    history = History()
    history.add(snapshot)
    texts: List[Text] = []
    for chip in snapshot.chips:
        texts += card_lines(chip, history, 38, True)
        texts.append(compact_line(chip, history, 100, True))
    texts += host_lines(FIXED_HOST, 160).split("\n")
    for row in visible_rows(snapshot.processes, 0, "", ME, 0.0):
        line = Text()
        for cell in row:
            line.append(" ")
            line.append_text(cell.text())
        texts.append(line)
    return texts


def crafted_texts() -> List[Text]:
    nested = Text("outer inner outer", style="bold")
    nested.stylize("red", 0, 17)
    nested.stylize("underline", 6, 11)  # a span inside another: Rich combines them
    beyond = Text("short")
    beyond.spans.append(Span(2, 40, "blue"))  # a span past the end: cut at the end
    empty_span = Text("abc")
    empty_span.stylize("green", 1, 1)
    wide = Text("名前 python3 训练.py", style="italic")
    wide.stylize("bold cyan", 0, 2)
    plain_styled = Text("red words, no spans", style="bold red")
    styled_obj = Text("a Style object")
    styled_obj.stylize(Style(color="magenta", dim=True), 2, 7)
    gaps = Text.assemble("  ", ("x", "bold"), " gap ", ("y", "dim"), "  ")
    return [Text(), Text("plain"), nested, beyond, empty_span, wide, plain_styled, styled_obj, gaps]


@pytest.mark.parametrize("base", BASES, ids=["null", "colours", "bold-bg"])
@pytest.mark.parametrize("width", [12, 38, 200])
def test_fast_strip_equals_rich_rendering(base: Style, width: int) -> None:
    console = Console(color_system="truecolor", width=200)
    for text in [*dashboard_texts(), *crafted_texts()]:
        fast = text_strip(text, console, width, base)
        slow = reference_strip(text, console, width, base)
        assert list(fast) == list(slow), text.plain
        assert fast.cell_length == slow.cell_length == width


@pytest.mark.parametrize("scenario", ["a3", "chip-alarm", "pcie-degraded", "950"])
def test_card_strips_equal_the_card_lines_drawn(scenario: str) -> None:
    """The chip cards cut their metric lines straight into segments: exactly what ``text_strip``
    makes of ``card_lines`` (every chip of the scenario, bars at their edges, n/a cells, widths
    and bases a card meets)."""
    console = Console(color_system="truecolor", width=200)
    snapshots = simulated_snapshots(scenario, 8)
    history = History()
    for snapshot in snapshots:
        history.add(snapshot)
    shares = (None, -0.5, 0.0, 0.01, 0.0624, 0.5, 0.93, 0.9999, 1.0, 1.7)
    for chip in snapshots[-1].chips:
        row = chip_row(chip)
        for share in shares:
            cells = tuple(cell._replace(fraction=share) for cell in row.metrics)
            varied = dataclasses.replace(row, metrics=cells) if share != 0.5 else row
            for width, base in ((38, BASES[0]), (47, BASES[1]), (99, BASES[2]), (20, BASES[1])):
                fast = card_strips(chip, history, width, True, varied, console, width + 3, base)
                slow = [
                    text_strip(t, console, width + 3, base)
                    for t in card_lines(chip, history, width, True, varied)
                ]
                assert [list(s) for s in fast] == [list(s) for s in slow], (chip.identity.key, share, width)
                assert all(s.cell_length == width + 3 for s in fast)


@pytest.mark.parametrize("scenario", ["a3", "chip-alarm"])
def test_cards_with_the_dcmi_metrics_draw_what_their_lines_say(scenario: str) -> None:
    """The frequency line, and the Vector / HBM bandwidth bars side by side, cut straight into
    segments: on screen exactly what ``text_strip`` makes of ``card_lines`` (the same characters
    in the same styles; the stretch between two side-by-side bars is cut per part), at widths
    from the 120-column grid's 26 to 99, bars at their edges."""
    console = Console(color_system="truecolor", width=200)
    snapshots = [with_dcmi_values(snapshot) for snapshot in simulated_snapshots(scenario, 8)]
    history = History()
    for snapshot in snapshots:
        history.add(snapshot)
    for vector, bandwidth in ((45, 62), (0, 100), (100, 0), (3, None)):
        for chip in snapshots[-1].chips:
            shown = dataclasses.replace(chip, vector_percent=vector, hbm_bandwidth_percent=bandwidth)
            row = chip_row(shown)
            for width, base in ((26, BASES[0]), (38, BASES[1]), (47, BASES[2]), (99, BASES[1])):
                fast = card_strips(shown, history, width, True, row, console, width + 3, base)
                slow = [
                    text_strip(t, console, width + 3, base)
                    for t in card_lines(shown, history, width, True, row)
                ]
                assert [list(Segment.simplify(s)) for s in fast] == [
                    list(Segment.simplify(s)) for s in slow
                ], (
                    chip.identity.key,
                    width,
                )
                assert all(s.cell_length == width + 3 for s in fast)


@pytest.mark.parametrize("base", BASES, ids=["null", "colours", "bold-bg"])
def test_process_row_strips_equal_the_rows_drawn(base: Style) -> None:
    """The process table cuts each row straight into segments: exactly what ``text_strip`` makes of
    the row joined as one Text (own rows bold, others plain, a process the host cannot see)."""
    console = Console(color_system="truecolor", width=200)
    snapshots = [capture_snapshot("100"), *simulated_snapshots("910b-training", 2)]
    rows = [row for snapshot in snapshots for row in visible_rows(snapshot.processes, 0, "", ME, 0.0)]
    hidden = dataclasses.replace(snapshots[0].processes[0], host=None)
    rows += visible_rows((hidden,), 0, "", ME, 0.0)
    widths = [max(len(row[i].plain) for row in rows) + 1 for i in range(len(rows[0]))]
    for row in rows:
        line = Text()
        for cell, column in zip(row, widths):
            line.append(" ")
            line.append_text(cell.text())
            line.append(" " * (column - len(cell.plain) + 1))
        for width in (40, 200):
            fast = row_strip(row, widths, console, width, base)
            assert list(fast) == list(text_strip(line, console, width, base)), line.plain
            assert fast.cell_length == width


def test_a_changed_process_row_is_what_the_screen_shows() -> None:
    """The process table repaints only the rows that changed: each lands on its own screen line
    (the border above the header offsets them), and the unchanged lines stay right."""
    import asyncio

    from npuwatch.widgets.tui.app import NpuwatchApp
    from npuwatch.widgets.tui.processes import ProcessTable
    from tests.widgets.fakes import FakeSampler, wait_for

    first = capture_snapshot("100")
    host = first.processes[1].host
    assert host is not None
    busier = dataclasses.replace(
        first.processes[1], host=dataclasses.replace(host, cpu_percent=86.0)
    )  # as wide as its 17 %: the columns stay
    second = dataclasses.replace(first, processes=(first.processes[0], busier, *first.processes[2:]))
    app = NpuwatchApp(FakeSampler([first], interval_s=3600.0))
    seen = {}

    async def main() -> None:
        async with app.run_test(size=(200, 50)) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
            await pilot.pause()
            app.show(first)  # laid out and drawn: the next sample repaints only what changed
            await pilot.pause()
            app.show(second)
            await pilot.pause()
            table = app.query_one(ProcessTable)
            top = table.region.y
            lines = [strip.text for strip in app.screen._compositor.render_strips()]
            seen["screen"] = lines[top : top + 1 + 1 + table.row_count]
            seen["rows"] = [" ".join(table.get_row_at(i)) for i in range(table.row_count)]

    asyncio.run(main())
    screen = seen["screen"]
    assert screen[0].lstrip("─ ").startswith("Processes"), screen[0]
    assert screen[1].split()[:3] == ["NPU", "Chip", "PID"]
    for row, line in zip(seen["rows"], screen[2:]):
        assert line.split() == row.split(), (row, line)
    assert any("86%" in line for line in screen[2:])


def test_a_changed_process_row_below_the_table_repaints_nothing_outside_it() -> None:
    """A row scrolled out of the table (more processes than lines) that changes is not repainted:
    textual clips a widget's repaint to the screen, not to the widget, so repainting it marked
    the line under the table (the footer) dirty every second, and the compositor then redrew
    every widget of the screen."""
    import asyncio

    from npuwatch.widgets.tui.app import NpuwatchApp
    from npuwatch.widgets.tui.processes import ProcessTable
    from tests.widgets.fakes import FakeSampler, wait_for

    first = capture_snapshot("001")  # 15 processes: the table at 80×24 shows a few
    last = first.processes[-1]
    assert last.host is not None
    busier = dataclasses.replace(last, host=dataclasses.replace(last.host, cpu_percent=11.0))
    second = dataclasses.replace(first, processes=(*first.processes[:-1], busier))
    app = NpuwatchApp(FakeSampler([first], interval_s=3600.0))
    seen = {}

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None), "no first sample"
            await pilot.pause()
            table = app.query_one(ProcessTable)
            table.scroll_home(animate=False)
            await pilot.pause()
            table.show(second.processes, second.taken_at.timestamp())
            shown = table.size.height
            seen["rows"] = (table.row_count, shown)
            seen["repaint"] = [(r.y, r.height) for r in table._repaint_regions]
            seen["height"] = table.region.height

    asyncio.run(main())
    rows, shown = seen["rows"]
    assert rows + 1 > shown, seen  # the changed row is below the table's last line
    assert all(y + height <= seen["height"] for y, height in seen["repaint"]), seen


@pytest.mark.parametrize("scenario", ["a3", "chip-alarm", "950"])
def test_a_card_kept_from_sample_to_sample_draws_what_a_fresh_card_draws(scenario: str) -> None:
    """A card keeps its lines between samples (a line's label, bar and value while they read the
    same, its sparkline shifted by one cell as the history moves): second after second, exactly
    the lines a card drawn from nothing gives; asked again with nothing changed, the very same
    line objects (the chip area repaints by identity)."""
    from npuwatch.widgets.tui.card_paint import CardPainter

    console = Console(color_system="truecolor", width=200)
    snapshots = simulated_snapshots(scenario, 40)
    history = History(capacity=30)  # full before the end: the sparklines scroll
    painters = {chip.identity.key: CardPainter() for chip in snapshots[0].chips}
    for snapshot in snapshots:
        history.add(snapshot)
        for chip in snapshot.chips:
            row = chip_row(chip)
            for width in (38, 60):
                kept = painters[chip.identity.key].card(
                    chip, history, width, True, row, console, width, BASES[1]
                )
                fresh = CardPainter().card(chip, history, width, True, row, console, width, BASES[1])
                assert kept == fresh, (chip.identity.key, width)
        chip = snapshot.chips[0]
        painter = painters[chip.identity.key]
        first = painter.card(chip, history, 60, True, chip_row(chip), console, 60, BASES[1])
        again = painter.card(chip, history, 60, True, chip_row(chip), console, 60, BASES[1])
        assert all(a is b for a, b in zip(first, again))


def test_the_dashboard_runs_with_fewer_cycle_collections_and_restores_them() -> None:
    """While the dashboard runs in a terminal Python's cycle collector waits for more new objects
    (a second's repaint makes thousands of short-lived ones); the setting is restored after."""
    import gc
    from pathlib import Path

    from npuwatch.widgets.tui import app as app_module
    from npuwatch.widgets.tui.app import NpuwatchApp
    from npuwatch.widgets.tui.app_base import GC_GEN0_THRESHOLD
    from tests.widgets.fakes import FakeSampler

    class Probe(NpuwatchApp):
        CSS_PATH = str(Path(app_module.__file__).with_name("npuwatch.tcss"))  # not next to this file
        seen = (0, 0, 0)

        def on_mount(self) -> None:
            super().on_mount()
            Probe.seen = gc.get_threshold()
            self.exit()

    before = gc.get_threshold()
    Probe(FakeSampler([capture_snapshot("001")], interval_s=3600.0)).run(headless=True)
    assert Probe.seen[0] >= GC_GEN0_THRESHOLD > before[0]
    assert Probe.seen[1:] == before[1:]
    assert gc.get_threshold() == before
