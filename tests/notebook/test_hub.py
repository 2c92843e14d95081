"""SamplerHub: one thread per set of options, shared, stopped with its last subscriber or at exit."""

from __future__ import annotations

import threading

import pytest

from npuwatch.feeds import FeedOptions
from npuwatch.widgets.notebook.hub import SamplerHub
from tests.notebook.helpers import FeedMaker, wait_for

FAST = FeedOptions(interval_s=0.02)


def test_equal_options_share_a_channel_whatever_their_order(snap_910b):
    hub = SamplerHub(factory=FeedMaker([snap_910b]))
    first = hub.subscribe(FeedOptions(demo="a3", devices=[1, 0]), lambda s: None, lambda m: None)
    same = hub.subscribe(FeedOptions(devices=(0, 1), demo="a3"), lambda s: None, lambda m: None)
    other = hub.subscribe(FeedOptions(demo="950"), lambda s: None, lambda m: None)
    assert first.channel is same.channel and other.channel is not first.channel
    hub.stop_all()


def test_last_subscriber_stops_the_thread_and_a_new_one_starts_afresh(snap_910b):
    maker = FeedMaker([snap_910b])
    hub = SamplerHub(factory=maker)
    got = []
    first = hub.subscribe(FAST, got.append, lambda message: None)
    second = hub.subscribe(FAST, got.append, lambda message: None)
    channel = first.channel
    assert second.channel is channel and channel.subscribers == 2
    wait_for(lambda: channel.samples >= 2, "samples")
    first.cancel()
    assert not channel.stopped
    second.cancel()
    wait_for(lambda: not channel.thread.is_alive(), "the thread to end")
    assert maker.built[0].closed.is_set()
    again = hub.subscribe(FAST, got.append, lambda message: None)
    assert again.channel is not channel and len(maker.built) == 2
    again.cancel()
    hub.stop_all()


def test_stop_all_at_exit_releases_even_a_feed_stuck_in_npu_smi(snap_910b, monkeypatch):
    registered = []
    monkeypatch.setattr("atexit.register", registered.append)
    gate = threading.Event()  # never set: every sample hangs
    maker = FeedMaker([snap_910b], gate=gate)
    hub = SamplerHub(factory=maker)
    subscription = hub.subscribe(FAST, lambda s: None, lambda m: None)
    assert registered == [hub.stop_all]  # the kernel's exit stops the threads
    wait_for(lambda: maker.built and subscription.channel.feed is not None, "the feed to be built")
    hub.stop_all(timeout_s=0.05)
    assert maker.built[0].closed.is_set()  # closed from outside: the thread is still in sample()
    assert hub.channels() == []
    gate.set()
    wait_for(lambda: not subscription.channel.thread.is_alive(), "the released thread to end")


def test_a_failing_view_callback_does_not_stop_the_others(snap_910b):
    hub = SamplerHub(factory=FeedMaker([snap_910b]))
    got = []

    def broken(snapshot):
        raise RuntimeError("view bug")

    hub.subscribe(FAST, broken, lambda m: None)
    hub.subscribe(FAST, got.append, lambda m: None)
    wait_for(lambda: len(got) >= 3, "the healthy view to keep receiving")
    hub.stop_all()


@pytest.mark.slow
def test_hung_npu_smi_never_blocks_the_magic(needs_ipywidgets):
    from npuwatch import notebook

    # The demo's npu-smi hangs; its timeout is long, so the first sample cannot arrive in time.
    view = notebook.show(demo="npu-smi-hang", timeout_s=3, interval_s=0.5, wait_s=0.2)
    try:
        assert view.updates == 0
        assert view.status == "sampling…"
        assert "sampling…" in view.chips.value
        # The sampler gives up on npu-smi after its timeout and the view says why.
        wait_for(lambda: any("npu-smi hung" in a for a in view.state()["alerts"]), "the npu-smi alert")
        assert "did not answer within 3" in view.chips.value  # each n/a says why
    finally:
        view.stop()
    wait_for(lambda: not view.thread.is_alive(), "the sampler thread to end")


def test_a_view_whose_callback_raises_gets_one_crash_line(snap_910b, crash_folder):
    hub = SamplerHub(factory=FeedMaker([snap_910b]))
    lines = []

    def broken(snapshot):
        raise RuntimeError("view bug")

    subscription = hub.subscribe(FAST, broken, lambda m: None, lines.append)
    wait_for(lambda: subscription.channel.samples >= 3, "three samples")
    assert len(lines) == 1
    assert lines[0].startswith("npuwatch: internal error in a notebook view: RuntimeError: view bug (")
    (report,) = crash_folder.glob("npuwatch-crash-*.txt")
    assert str(report) in lines[0] and "view bug" in report.read_text()
    hub.stop_all()
