"""The fleet app under textual's Pilot, on a fake fleet feed: the table worst first, sort, filter,
a node's cards and back, the source's error in the header, a slow refresh never freezing keys.

Plain test functions run the async Pilot with ``asyncio.run`` (no pytest-asyncio needed); waits
poll for a condition under a generous deadline, nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable

from textual.pilot import Pilot
from textual.widgets import DataTable

from npuwatch.history import History
from npuwatch.widgets.fleet.app import FleetApp, run_fleet_app
from npuwatch.widgets.fleet.node_screen import NodeScreen
from npuwatch.widgets.tui.chip_grid import ChipGrid
from npuwatch.widgets.tui.detail_screen import DetailScreen
from npuwatch.widgets.tui.line import Line
from tests.fleet_views.fakes import FakeFleetFeed

DEADLINE_S = 30.0


async def until(pilot: Pilot, condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"never saw {what}")


def line(app: FleetApp, ident: str) -> str:
    return app.screen.query_one(f"#{ident}", Line).text.plain


def table_names(app: FleetApp) -> list:
    table = app.query_one("#nodes", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


def drive(feed, body, size=(160, 44)) -> FleetApp:
    app = FleetApp(feed)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda: app.fleet is not None, "the first refresh")
            await body(app, pilot)

    asyncio.run(main())
    return app


def test_nodes_worst_first_sort_and_filter():
    async def body(app: FleetApp, pilot: Pilot) -> None:
        assert table_names(app) == ["node-alarm", "node-gone", "node-a3", "node-ok"]
        assert "prometheus:http://prometheus.example:9090" in line(app, "header")
        assert "worst first" in line(app, "header")
        assert line(app, "alerts") == "4 nodes · 1 stale · 27/28 chips OK"
        await pilot.press("s")
        assert app.sort == "node"
        assert table_names(app) == ["node-a3", "node-alarm", "node-gone", "node-ok"]
        assert "by node" in line(app, "header")
        await pilot.press("slash", "a", "3")
        await until(pilot, lambda: table_names(app) == ["node-a3"], "the filtered table")
        assert "filter “a3”" in line(app, "header")
        await pilot.press("enter")  # keeps the filter, back to the table
        await pilot.press("escape")  # clears it
        await until(pilot, lambda: len(table_names(app)) == 4, "every node again")

    drive(FakeFleetFeed(interval_s=0.2), body)


def test_enter_opens_a_node_with_its_chip_cards_and_esc_goes_back():
    async def body(app: FleetApp, pilot: Pilot) -> None:
        await pilot.press("enter")  # the cursor is on the worst node
        await until(pilot, lambda: isinstance(app.screen, NodeScreen), "the node screen")
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        assert screen.node_name == "node-alarm"
        assert "node-alarm ✖ critical · 7/8 chips OK" in line(app, "header")
        assert line(app, "alerts") == "NPU 3: Alarm"
        grid = screen.query_one(ChipGrid)
        await until(pilot, lambda: len(grid.cards) == 8, "eight chip cards")
        texts = "\n".join("\n".join(grid.card_texts(card)) for card in grid.cards)
        assert "✖ Alarm" in texts
        # Refreshes go on while the node is open: its history grows, the screen follows.
        before = app.feed.samples
        await until(pilot, lambda: app.feed.samples >= before + 2, "two more refreshes")
        assert len(screen.history.series((0, 0), "power_w")) >= 2
        await pilot.press("enter")  # the focused chip's detail screen
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), "the detail screen")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, NodeScreen), "the node screen again")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, NodeScreen), "the fleet table")
        assert table_names(app)[0] == "node-alarm"

    drive(FakeFleetFeed(interval_s=0.2), body)


def test_a_failing_source_puts_the_reason_in_the_header_and_keeps_the_rows_stale():
    feed = FakeFleetFeed(
        interval_s=0.2, errors={n: "Prometheus answered 401 Unauthorized" for n in range(3, 999)}
    )

    async def body(app: FleetApp, pilot: Pilot) -> None:
        await until(pilot, lambda: "401" in line(app, "alerts"), "the error in the header")
        assert line(app, "alerts").startswith("✖ Prometheus answered 401 Unauthorized")
        assert "showing the last data, marked stale" in line(app, "alerts")
        assert len(table_names(app)) == 4
        assert all(row.stale for row in app.rows)

    drive(feed, body)


def test_a_slow_refresh_never_freezes_the_keys():
    class Stuck(FakeFleetFeed):
        def __init__(self) -> None:
            super().__init__(interval_s=0.1)
            self.release = threading.Event()

        def sample(self):
            if self.samples >= 1:
                self.release.wait(DEADLINE_S)
            return super().sample()

    feed = Stuck()

    async def body(app: FleetApp, pilot: Pilot) -> None:
        await until(pilot, lambda: app._sampling_since is not None, "the second refresh under way")
        await pilot.press("s")  # handled while the refresh hangs
        assert app.sort == "node"
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NodeScreen), "the node screen")
        await until(pilot, lambda: "refreshing for" in app.query_one("#header", Line).text.plain, "⏳")
        feed.release.set()

    drive(feed, body)


def test_the_feeds_node_history_is_fetched_off_the_ui_thread_and_drawn():
    fetched = History(50)

    threads = []

    class WithHistory(FakeFleetFeed):
        def node_history(self, name):
            threads.append(threading.current_thread().name)
            fetched.add(self.sample().node(name).snapshot)
            return fetched

    feed = WithHistory(interval_s=0.3)

    async def body(app: FleetApp, pilot: Pilot) -> None:
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NodeScreen), "the node screen")
        await until(pilot, lambda: app.screen.history is fetched, "the feed's history in use")
        assert app.screen.query_one(ChipGrid).history is fetched
        assert threads == ["npuwatch-fleet-history"]
        points = len(fetched.series((0, 0), "power_w"))
        await until(pilot, lambda: len(fetched.series((0, 0), "power_w")) > points, "refreshes added to it")

    drive(feed, body)


def test_a_feed_that_raises_shows_one_internal_error_line_and_the_view_keeps_running(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))  # the traceback file goes there

    class Broken(FakeFleetFeed):
        def sample(self):
            raise RuntimeError("boom")

    def run(self, **kwargs):  # no terminal here: run headless, as the Pilot does, and quit
        async def main() -> None:
            async with self.run_test(size=(100, 30)) as pilot:
                await until(
                    pilot, lambda: "internal error" in self.query_one("#alerts", Line).text.plain, "it"
                )
                await pilot.press("q")

        asyncio.run(main())

    monkeypatch.setattr(FleetApp, "run", run)
    # The bug was shown in the view, never raised, and q quits; an internal error is never exit 0.
    assert run_fleet_app(Broken()) == 70
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1
    assert said[0].startswith("npuwatch: internal error in the fleet refresh: RuntimeError: boom")


def test_a_long_reason_is_cut_so_every_column_stays_on_screen():
    from dataclasses import replace

    long = "stale: cannot reach Prometheus at http://prometheus.example:9090: connection refused " * 3

    class Long(FakeFleetFeed):
        def sample(self):
            fleet = super().sample()
            nodes = tuple(replace(node, reasons=(long, *node.reasons)) for node in fleet.nodes)
            return replace(fleet, nodes=nodes)

    async def body(app: FleetApp, pilot: Pilot) -> None:
        table = app.query_one("#nodes", DataTable)
        await until(pilot, lambda: table.row_count == 4, "the rows")
        await pilot.pause(0.1)
        assert table.virtual_size.width <= app.size.width
        assert str(table.get_row_at(0)[3]).endswith("…")
        assert app.rows[0].reason == long  # the row keeps it whole (the node screen shows it)

    drive(Long(interval_s=0.2), body, size=(160, 30))


def test_the_tables_keys_do_nothing_on_a_node_screen_and_help_lists_the_keys():
    from npuwatch.widgets.tui.help_screen import HelpScreen

    async def body(app: FleetApp, pilot: Pilot) -> None:
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NodeScreen), "the node screen")
        await pilot.press("slash", "s")
        assert app.sort == "worst"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, NodeScreen), "the fleet table")
        assert app.filter_box() is None  # no filter box was opened behind the node screen
        assert app.focused is app.query_one("#nodes")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        keys = dict(app.screen.keys)
        assert "filter nodes by name (Enter keeps it, Esc clears it)" in keys.values()
        assert any("node" in what and "chips" in what for what in keys.values())
        await pilot.press("escape")

    drive(FakeFleetFeed(interval_s=0.2), body)


def test_a_refresh_updates_the_cells_that_changed_in_place():
    async def body(app: FleetApp, pilot: Pilot) -> None:
        table = app.query_one("#nodes", DataTable)
        first = str(table.get_row_at(1)[9])  # node-gone's age: 95 s + the feed's clock
        await until(pilot, lambda: str(table.get_row_at(1)[9]) != first, "the age to move on")
        assert str(table.get_row_at(1)[0]) == "node-gone"
        assert app.rows[1].age == str(table.get_row_at(1)[9])

    drive(FakeFleetFeed(interval_s=0.5), body)
