"""A recording made from `--demo` replays in the dashboard with the recorded values; replay keys."""

from __future__ import annotations

import subprocess
import sys
from typing import List

import pytest
from textual.pilot import Pilot

from npuwatch.model import Snapshot
from npuwatch.recording import Recording, read_recording
from npuwatch.replay import ReplaySampler
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui.app import NpuwatchApp
from tests.widgets.fakes import chip_cards, wait_for
from tests.widgets.test_tui_pilot import WIDE, card_lines, drive, text


@pytest.fixture(scope="module")
def demo_recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """3 s of the a3 demo, recorded by the real command at 0.25 s steps."""
    path = tmp_path_factory.mktemp("rec") / "a3.ndjson.gz"
    argv = ["record", str(path), "--demo", "a3", "--interval", "0.25", "--duration", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "npuwatch", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    recording = read_recording(path)
    assert len(recording.snapshots) >= 4
    return recording


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def shown_values(app: NpuwatchApp) -> List[str]:
    return [" ".join(card_lines(app, card)) for card in chip_cards(app)]


def expected_values(snapshot: Snapshot) -> List[tuple]:
    return [
        (fmt.watts(c.power_w).replace(" W", "W"), fmt.celsius(c.temperature_c), fmt.percent(c.aicore_percent))
        for c in snapshot.chips
    ]


def cards_show(app: NpuwatchApp, snapshot: Snapshot) -> bool:
    """Whether the cards show ``snapshot``'s values (no assertion: for waiting on a redraw)."""
    try:
        assert_cards_show(app, snapshot)
    except AssertionError:
        return False
    return True


def assert_cards_show(app: NpuwatchApp, snapshot: Snapshot) -> None:
    cards = shown_values(app)
    assert len(cards) == len(snapshot.chips) == 16
    for card, values in zip(cards, expected_values(snapshot)):
        for value in values:
            assert value in card, (value, card)


def test_the_dashboard_shows_each_recorded_snapshot_at_its_time(demo_recording: Recording) -> None:
    clock = Clock()
    replay = ReplaySampler(demo_recording, clock=clock)
    snapshots = demo_recording.snapshots
    first, third = snapshots[0], snapshots[2]

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.snapshot is not None and app.snapshot.taken_at == first.taken_at
        assert_cards_show(app, first)
        assert "replay:a3.ndjson.gz" in text(app, "#header")
        clock.now = (third.taken_at - first.taken_at).total_seconds()
        assert await wait_for(
            pilot, lambda: app.snapshot is not None and app.snapshot.taken_at == third.taken_at
        )
        await wait_for(pilot, lambda: cards_show(app, third))  # drawn on a refresh after it
        assert_cards_show(app, third)
        # The sparklines were fed every recorded point up to here.
        assert replay.history.values((0, 0), "power_w") == [s.chips[0].power_w for s in snapshots[:3]]

    drive(replay, scenario, WIDE)  # type: ignore[arg-type]


def test_replay_keys_pause_seek_and_change_speed(demo_recording: Recording) -> None:
    clock = Clock()
    replay = ReplaySampler(demo_recording, clock=clock)
    last = demo_recording.snapshots[-1]

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert "▶ 00:00 / 00:0" in text(app, "#header")
        await pilot.press("p")
        assert replay.paused and "⏸ 00:00" in text(app, "#header")
        await pilot.press("right_square_bracket")  # +10 s: past the end, shown at once while paused
        await pilot.pause()
        assert app.snapshot is not None and app.snapshot.taken_at == last.taken_at
        assert_cards_show(app, last)
        assert "end of recording" in text(app, "#header")
        assert "end of recording" in app.snapshot.warnings[-1]
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert replay.position_s == 0.0
        assert app.snapshot.taken_at == demo_recording.snapshots[0].taken_at
        await pilot.press("greater_than_sign", "greater_than_sign")
        assert replay.speed == 4.0 and "×4" in text(app, "#header")
        await pilot.press("less_than_sign")
        assert replay.speed == 2.0
        await pilot.press("p")
        assert not replay.paused

    drive(replay, scenario, WIDE)  # type: ignore[arg-type]


def test_replay_keys_are_absent_from_a_live_dashboard() -> None:
    from tests.widgets.fakes import FakeSampler, capture_snapshot

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.replay is None
        assert app.check_action("seek", (10,)) is False
        await pilot.press("right_square_bracket", "greater_than_sign")
        assert app.sampler.interval_s == 1.0

    drive(FakeSampler([capture_snapshot("001")]), scenario, WIDE)
