"""A view tells a replay from a live feed by its transport controls, never by importing the replay."""

from __future__ import annotations

from pathlib import Path

from npuwatch.feed import ReplayControls
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.recording import Recording
from npuwatch.replay import ReplaySampler
from tests.conftest import CAPTURES
from tests.widgets.fakes import FakeSampler, capture_snapshot


def test_a_replay_has_transport_controls_a_capture_and_the_fakes_do_not():
    snapshot = capture_snapshot("001")
    assert isinstance(ReplaySampler(Recording(Path("x.ndjson"), (snapshot,))), ReplayControls)
    with open_feed(FeedOptions(replay=str(next(CAPTURES.glob("001_*.txt"))))) as capture:
        assert not isinstance(capture, ReplayControls)
    assert not isinstance(FakeSampler([snapshot]), ReplayControls)
