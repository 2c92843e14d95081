"""The live view's widget tree over fake feeds: state, n/a reasons, alerts, sampling, stop and sharing."""

from __future__ import annotations

import threading

import pytest

from npuwatch.feeds import FeedOptions
from npuwatch.model import Health
from npuwatch.widgets.notebook.live_view import SAMPLING, LiveView
from npuwatch.widgets.view_model import sample_time
from tests.conftest import CAPTURES
from tests.notebook.helpers import Elements, FeedMaker, wait_for
from tests.widgets.fakes import capture_snapshot


@pytest.fixture(autouse=True)
def _needs_ipywidgets(needs_ipywidgets):
    """Every test here builds widgets."""


OPTIONS = FeedOptions(replay="fake.txt", interval_s=0.02)


def _live(hub, options=OPTIONS, **kwargs) -> LiveView:
    return LiveView(options, interval_s=options.interval_s, history_min=1, hub=hub, **kwargs)


def test_view_renders_a_snapshot_into_widget_state(hub_factory, snap_910b):
    hub, _ = hub_factory([snap_910b])
    view = _live(hub)
    try:
        assert view.wait_first(30)
        wait_for(lambda: view.updates >= 3, "three updates")
        assert "npuwatch-live" in view.widget._dom_classes
        assert "npuwatch-updated" in view.updated._dom_classes
        state = view.state()
        assert state["status"] == "live"
        assert len(state["chips"]) == 8
        chip = snap_910b.chips[0]
        assert state["chips"][0]["metrics"]["temperature"] == f"{chip.temperature_c} °C"
        assert state["chips"][0]["metrics"]["util"] == f"{chip.aicore_percent}%"
        assert view.chips.value.count('class="npuwatch-chip ') == 8
        assert view.snapshot is not None
        assert view.updated.value == sample_time(view.snapshot)
        # The terminal dashboard's tracker, fed the same samples, raises the same alerts.
        from npuwatch.alerts import AlertTracker

        tracker = AlertTracker()
        for _ in range(state["updates"]):
            expected = tracker.update(snap_910b)
        assert state["alerts"] == [a.message for a in expected]
        for message in state["alerts"]:
            assert message in view.alerts_html.value
        assert "Processes" not in view.processes.value and "<table" in view.processes.value
    finally:
        view.stop()


def test_updated_time_changes_with_every_sample(hub_factory, snap_910b):
    hub, _ = hub_factory([snap_910b])
    view = _live(hub)
    try:
        seen = set()

        def collect() -> bool:
            seen.add(view.updated.value)
            return len(seen - {"--:--:--"}) >= 3

        wait_for(collect, "three distinct sample times")
    finally:
        view.stop()


def test_alarm_chip_styles_and_raises_the_dashboard_alert(hub_factory):
    snapshot = capture_snapshot("001", health={(2, 0): Health.ALARM})
    hub, _ = hub_factory([snapshot])
    view = _live(hub)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        assert view.state()["alerts"] == ["NPU 2 Alarm"]
        assert 'class="npuwatch-alert npuwatch-severity-critical"' in view.alerts_html.value
        chip_classes = "npuwatch-chip npuwatch-health-alarm npuwatch-chip-level-critical"  # the judge's level
        assert f'class="{chip_classes}" data-npu="2"' in view.chips.value
        assert "✖ Alarm" in view.chips.value
    finally:
        view.stop()


def test_na_values_carry_their_reason(hub_factory):
    hub, _ = hub_factory([capture_snapshot("044")])
    view = _live(hub)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        chip = view.state()["chips"][0]
        assert chip["metrics"]["power"] == "n/a"
        assert chip["reasons"]["power"] == "npu-smi prints 'NA': this chip does not report it"
        assert "this chip does not report it" in view.chips.value
        assert chip["metrics"]["memory"].endswith("GiB")  # DDR on a 310P
        assert ">DDR<" in view.chips.value
    finally:
        view.stop()


def test_hung_feed_shows_sampling_until_the_first_snapshot(hub_factory, snap_910b):
    gate = threading.Event()
    hub, _ = hub_factory([snap_910b], gate=gate)
    view = _live(hub)  # returns although the feed blocks
    try:
        assert not view.wait_first(0.05)
        assert view.status == SAMPLING
        assert SAMPLING in view.chips.value
        assert SAMPLING in view._repr_mimebundle_()["text/plain"]
        gate.set()
        wait_for(lambda: view.updates >= 1, "the first snapshot after the hang")
        assert view.status == "live"
    finally:
        gate.set()
        view.stop()


def test_stop_ends_the_thread_and_closes_the_feed(hub_factory, snap_910b):
    hub, maker = hub_factory([snap_910b])
    view = _live(hub)
    wait_for(lambda: view.updates >= 1, "an update")
    thread = view.thread
    view.stop()
    wait_for(lambda: not thread.is_alive(), "the sampler thread to end")
    assert maker.built[0].closed.is_set()
    assert hub.channels() == []
    frozen = view.updates
    assert not view.running and view.status == "stopped"
    assert view.updates == frozen


def test_closing_the_widget_stops_the_view(hub_factory, snap_910b):
    hub, maker = hub_factory([snap_910b])
    view = _live(hub)
    wait_for(lambda: view.updates >= 1, "an update")
    view.widget.close()
    assert not view.running
    wait_for(lambda: not view.thread.is_alive(), "the sampler thread to end")
    assert maker.built[0].closed.is_set()
    assert "text/plain" in view._repr_mimebundle_()  # a closed widget still has its text


def test_two_views_with_the_same_options_share_one_sampler(hub_factory, snap_910b):
    hub, maker = hub_factory([snap_910b])
    first = _live(hub)
    second = _live(hub)
    other = _live(hub, FeedOptions(replay="other.txt", interval_s=0.02))
    try:
        wait_for(lambda: first.updates and second.updates and other.updates, "every view to update")
        assert first.thread is second.thread
        assert first.subscription.channel is second.subscription.channel
        assert other.thread is not first.thread
        assert len(maker.built) == 2
        first.stop()
        wait_for(lambda: second.updates >= 3, "the second view to keep updating")
        assert second.thread.is_alive()
        second.stop()
        wait_for(lambda: not second.thread.is_alive(), "the shared thread to end with its last view")
        assert maker.built[0].closed.is_set()
        assert not maker.built[1].closed.is_set()
    finally:
        other.stop()


def test_a_view_joining_a_running_sampler_shows_its_latest_snapshot_at_once(hub_factory, snap_910b):
    gate = threading.Event()
    hub, _ = hub_factory([snap_910b], gate=gate)
    first = _live(hub)
    try:
        gate.set()
        wait_for(lambda: first.updates >= 1, "an update")
        gate.clear()  # the next sample hangs: the newcomer must not wait for it
        second = _live(hub)
        assert second.updates == 1
        assert second.snapshot is not None
        second.stop()
    finally:
        gate.set()
        first.stop()


def test_mimebundle_has_the_widget_and_text_fallbacks_with_the_same_numbers(hub_factory, snap_910b):
    hub, _ = hub_factory([snap_910b])
    view = _live(hub)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        bundle = view._repr_mimebundle_()
        assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == view.widget.model_id
        chip = snap_910b.chips[0]
        assert f"{chip.temperature_c} °C" in bundle["text/plain"]
        assert f"{chip.temperature_c} °C" in bundle["text/html"]
        assert 'class="npuwatch-live"' in bundle["text/html"]
        assert 'class="npuwatch-updated"' in bundle["text/html"]
    finally:
        view.stop()


def test_a_feed_that_cannot_start_is_reported_in_the_view(hub_factory, snap_910b):
    from npuwatch.widgets.notebook.hub import SamplerHub

    def broken(options):
        raise ValueError("npu-smi is not installed")

    hub = SamplerHub(factory=broken)
    view = _live(hub)
    try:
        assert view.wait_first(30)
        assert "npu-smi is not installed" in view.status
        assert "npu-smi is not installed" in view.chips.value
    finally:
        view.stop()
        hub.stop_all()


def test_show_validates_options_and_waits_briefly_for_the_first_snapshot(hub_factory, snap_910b):
    from npuwatch import notebook

    hub, maker = hub_factory([snap_910b])
    capture = next(CAPTURES.glob("001_*.txt"))
    view = notebook.show(replay=str(capture), interval_s=0.05, history_min=2, hub=hub, wait_s=30)
    try:
        assert view.updates >= 1  # the first snapshot arrived before show() returned
        assert maker.options[0].replay == str(capture)
        assert maker.options[0].interval_s == 0.05
        assert view.points == 2400
    finally:
        view.stop()
    with pytest.raises(notebook.NotebookUsageError, match="cannot be combined"):
        notebook.show(demo=True, replay=str(capture), hub=hub)
    with pytest.raises(notebook.NotebookUsageError, match="unknown demo scenario"):
        notebook.show(demo="nope", hub=hub)
    with pytest.raises(notebook.NotebookUsageError, match="interval_s"):
        notebook.show(demo=True, interval_s=0, hub=hub)


# --- layout: cards, or a compact table for many chips ------------------------------------------------


def _rows(html: str):
    """The chips shown, as (tag, (npu, chip)) in order."""
    return [
        (e["tag"], (int(e["attrs"]["data-npu"]), int(e["attrs"]["data-chip"])))
        for e in Elements(html).by_class("npuwatch-chip")
    ]


def _assert_table(view, snapshot) -> None:
    keys = [chip.identity.key for chip in snapshot.chips]
    assert view.state()["layout"] == "table"
    assert view.layout_toggle.value == "table"
    found = Elements(view.chips.value)
    assert len(found.by_class("npuwatch-chip-table")) == 1
    assert _rows(view.chips.value) == [("tr", key) for key in keys]
    for row in found.by_class("npuwatch-chip"):  # every row: its badge, four values, four plots
        assert row["text"].count("✔ OK") == 1
    assert len(found.by_class("npuwatch-value")) == 4 * len(keys)
    assert len(found.by_class("npuwatch-miniplot")) == 4 * len(keys)
    assert 'class="npuwatch-chip-table"' in view.html()  # the static fallback follows the view


def _assert_cards(view, snapshot) -> None:
    assert view.state()["layout"] == "cards"
    assert view.layout_toggle.value == "cards"
    assert _rows(view.chips.value) == [("div", chip.identity.key) for chip in snapshot.chips]
    assert "npuwatch-chip-table" not in view.chips.value
    assert "npuwatch-chip-table" not in view.html()


def test_sixteen_chips_default_to_the_compact_table(hub_factory):
    a3 = capture_snapshot("100")  # 8 NPUs × 2 chips
    assert len(a3.chips) == 16
    hub, _ = hub_factory([a3])
    view = _live(hub)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        assert view.state()["layout_choice"] == "auto"
        _assert_table(view, a3)
        assert "npuwatch-layout-toggle" in view.layout_toggle._dom_classes
    finally:
        view.stop()


def test_eight_chips_default_to_cards(hub_factory, snap_910b):
    hub, _ = hub_factory([snap_910b])
    view = _live(hub)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        _assert_cards(view, snap_910b)
    finally:
        view.stop()


def test_the_toggle_switches_between_table_and_cards_and_keeps_the_choice(hub_factory):
    a3 = capture_snapshot("100")
    hub, _ = hub_factory([a3])
    view = _live(hub)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        _assert_table(view, a3)
        view.layout_toggle.value = "cards"  # what a click in the front-end does
        _assert_cards(view, a3)  # at once, without waiting for a sample
        assert view.state()["layout_choice"] == "cards"
        seen = view.updates
        wait_for(lambda: view.updates >= seen + 3, "three more samples")
        _assert_cards(view, a3)  # new samples keep the chosen form
        view.layout_toggle.value = "table"
        _assert_table(view, a3)
    finally:
        view.stop()


@pytest.mark.parametrize(
    ("layout", "number", "shown"), [("table", "001", "table"), ("cards", "100", "cards")]
)
def test_the_layout_option_overrides_auto(hub_factory, layout, number, shown):
    snapshot = capture_snapshot(number)
    hub, _ = hub_factory([snapshot])
    view = _live(hub, layout=layout)
    try:
        wait_for(lambda: view.updates >= 1, "an update")
        (_assert_table if layout == "table" else _assert_cards)(view, snapshot)
        assert view.state()["layout_choice"] == layout
    finally:
        view.stop()


def test_show_takes_a_layout_and_refuses_an_unknown_one(hub_factory, snap_910b):
    from npuwatch import notebook

    hub, _ = hub_factory([snap_910b])
    capture = next(CAPTURES.glob("001_*.txt"))
    view = notebook.show(replay=str(capture), interval_s=0.05, layout="table", hub=hub, wait_s=30)
    try:
        assert view.state()["layout"] == "table"
    finally:
        view.stop()
    with pytest.raises(notebook.NotebookUsageError, match="layout must be one of auto, cards, table"):
        notebook.show(replay=str(capture), layout="grid", hub=hub)


# --- internal errors: one line in the view, the traceback in a file -------------------------------------


def test_a_render_bug_shows_one_line_naming_the_traceback_file_and_the_view_goes_on(
    hub_factory, snap_910b, crash_folder, monkeypatch
):
    from npuwatch.widgets.notebook import live_html

    real = live_html.chips_html
    broken = threading.Event()
    broken.set()

    def chips_html(*args, **kwargs):
        if broken.is_set():
            raise RuntimeError("render bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(live_html, "chips_html", chips_html)
    hub, _ = hub_factory([snap_910b])
    view = _live(hub)
    try:
        assert view.wait_first(30)  # show() is not held for its full wait by a broken render
        wait_for(lambda: view.state()["crash"], "the crash line")
        line = view.state()["crash"]
        prefix = "npuwatch: internal error in the notebook live view: RuntimeError: render bug (traceback in "
        assert line.startswith(prefix) and line.endswith("; please report it)")
        (report,) = crash_folder.glob("npuwatch-crash-*.txt")
        assert str(report) in line
        text = report.read_text()
        assert "Traceback" in text and "RuntimeError: render bug" in text and "chips_html" in text
        shown = Elements(view.crash.value).by_class("npuwatch-crash")
        assert [e["text"] for e in shown] == [line]
        assert "internal error" in view.status
        bundle = view._repr_mimebundle_()
        assert line in bundle["text/plain"] and "npuwatch-crash" in bundle["text/html"]
        samples = view.subscription.channel.samples
        wait_for(lambda: view.subscription.channel.samples >= samples + 3, "three more samples")
        assert len(list(crash_folder.glob("npuwatch-crash-*.txt"))) == 1  # the same bug: one report
        broken.clear()  # the bug goes away: the view was never frozen, it updates again
        wait_for(lambda: view.status == "live" and view.updates >= 1, "the view to update again")
        assert view.chips.value.count('class="npuwatch-chip ') == 8
    finally:
        view.stop()


def test_a_sampler_bug_shows_one_line_naming_the_traceback_file(hub_factory, snap_910b, crash_folder):
    from npuwatch.widgets.notebook.hub import SamplerHub

    maker = FeedMaker([snap_910b], error=KeyError("npu_id"))
    hub = SamplerHub(factory=maker)
    view = _live(hub)
    try:
        wait_for(lambda: view.state()["crash"], "the crash line")
        line = view.state()["crash"]
        assert line.startswith(
            "npuwatch: internal error in the notebook sampler: KeyError: 'npu_id' (traceback in "
        )
        (report,) = crash_folder.glob("npuwatch-crash-*.txt")
        assert str(report) in line and "KeyError" in report.read_text()
        assert line in view.crash.value.replace("&#x27;", "'")
        wait_for(lambda: maker.built[0].calls >= 4, "more samples")
        assert len(list(crash_folder.glob("npuwatch-crash-*.txt"))) == 1
    finally:
        view.stop()
        hub.stop_all()
