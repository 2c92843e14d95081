"""The notebook's fleet view: its HTML from crafted fleets, the live FleetView on a fake feed,
``npuwatch.notebook.fleet(...)`` and ``%npuwatch fleet …`` on a fleet recording (no network)."""

from __future__ import annotations

import json
import re
import threading

import pytest

from npuwatch.widgets.fleet.rows import fleet_header, fleet_rows
from npuwatch.widgets.notebook import fleet_html
from tests.conftest import need
from tests.fleet_views.fakes import FakeFleetFeed, crafted_fleet
from tests.notebook.helpers import magic_shell, wait_for

ROW = re.compile(r'<tr class="npuwatch-fleet-node ([^"]*)" data-node="([^"]+)"')


@pytest.fixture(autouse=True)
def crash_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture
def widgets_ok():
    import importlib.util

    missing = [m for m in ("IPython", "ipywidgets") if importlib.util.find_spec(m) is None]
    need(not missing, f"{', '.join(missing)} not installed: pip install -e '.[test]'")


def rows_of(html):
    return [(name, classes.split()) for classes, name in ROW.findall(html)]


# --- the HTML -----------------------------------------------------------------------------------


def test_table_lists_nodes_worst_first_with_levels_coloured_and_stale_dimmed():
    fleet = crafted_fleet()
    html = fleet_html.table_html(fleet_rows(fleet))
    found = rows_of(html)
    assert [name for name, _ in found] == ["node-alarm", "node-gone", "node-a3", "node-ok"]
    assert "npuwatch-level-critical" in found[0][1]
    assert "npuwatch-stale" in found[1][1] and "npuwatch-stale" not in found[0][1]
    for column in ("Chips OK", "AI Core avg/min", "HBM", "Power", "Hottest", "Workload", "Age"):
        assert f">{column}</th>" in html
    assert "#c62828" in html  # critical's red, as the single-node notebook colours it
    assert "stale: no scrape for 95 s (up == 0)" in html
    assert "6 compute · 2 input" in html
    assert "opacity:0.55" in html  # the stale row


def test_header_says_the_source_the_summary_or_the_error():
    ok = fleet_html.header_html(fleet_header(crafted_fleet()), "live")
    assert "prometheus:http://prometheus.example:9090" in ok
    assert "4 nodes · 1 stale · 27/28 chips OK" in ok
    failing = fleet_html.header_html(
        fleet_header(crafted_fleet(error="Prometheus answered 403 Forbidden")), "x"
    )
    assert "npuwatch-fleet-error" in failing
    assert "✖ Prometheus answered 403 Forbidden — showing the last data, marked stale" in failing


def test_names_are_escaped():
    fleet = crafted_fleet()
    evil = fleet.nodes[0].__class__(**{**fleet.nodes[0].__dict__, "node": "<script>x</script>"})
    html = fleet_html.table_html(fleet_rows(fleet.__class__(fleet.taken_at, fleet.source, (evil,))))
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_text_fallback_is_an_aligned_table():
    fleet = crafted_fleet()
    text = fleet_html.fleet_text(fleet_rows(fleet), fleet_header(fleet), "live")
    lines = text.splitlines()
    assert lines[1] == "4 nodes · 1 stale · 27/28 chips OK"
    assert lines[2].split()[:2] == ["Node", "Level"]
    assert [line.split()[0] for line in lines[3:]] == ["node-alarm", "node-gone", "node-a3", "node-ok"]


# --- the live view ----------------------------------------------------------------------------------


def test_live_view_refreshes_on_its_thread_sorts_filters_and_stops(widgets_ok):
    from npuwatch.widgets.notebook.fleet_view import FleetView

    feed = FakeFleetFeed(interval_s=0.05)
    view = FleetView(feed)
    assert view.wait_first(30)
    wait_for(lambda: view.updates >= 2, "two refreshes")
    state = view.state()
    assert state["nodes"] == ["node-alarm", "node-gone", "node-a3", "node-ok"]
    assert state["stale"] == ["node-gone"]
    assert state["status"] == "live"
    assert view.thread.name == "npuwatch-notebook-fleet"
    view.sorter.value = "node"  # the front-end's dropdown
    assert view.state()["nodes"] == ["node-a3", "node-alarm", "node-gone", "node-ok"]
    view.filter_box.value = "ok"
    assert view.state()["nodes"] == ["node-ok"]
    bundle = view._repr_mimebundle_()
    assert "node-ok" in bundle["text/plain"] and "npuwatch-fleet" in bundle["text/html"]
    view.widget.close()  # closing the widget stops it; its thread closes the feed
    wait_for(lambda: not view.thread.is_alive(), "the refresh thread to end")
    assert feed.closed and not view.running


def test_picking_a_node_shows_its_chips_with_the_single_node_cards_and_plots(widgets_ok):
    from npuwatch.widgets.notebook.fleet_view import FleetView

    view = FleetView(FakeFleetFeed(interval_s=0.05))
    wait_for(lambda: view.updates >= 1, "the first refresh")
    assert [value for _, value in view.node_picker.options] == [
        "",
        "node-a3",
        "node-alarm",
        "node-gone",
        "node-ok",
    ]
    view.node_picker.value = "node-alarm"  # the front-end's choice
    html = view.state()["node_html"]
    assert 'class="npuwatch-fleet-opened" data-node="node-alarm"' in html
    assert "<li>NPU 3: Alarm</li>" in html
    assert html.count("npuwatch-chip npuwatch-health-") == 8  # the single-node notebook's chips
    assert "npuwatch-health-alarm" in html
    updates = view.updates
    wait_for(lambda: view.updates >= updates + 2, "two more refreshes")
    assert view.node_picker.value == "node-alarm"  # kept across refreshes
    assert len(view.histories.of("node-alarm").series((0, 0), "power_w")) >= 2
    assert "<svg" in view.state()["node_html"]  # its plots
    view.node_picker.value = ""
    assert view.state()["node_html"] == ""
    view.stop()


def test_a_failing_source_keeps_the_rows_and_says_why(widgets_ok):
    from npuwatch.widgets.notebook.fleet_view import FleetView

    feed = FakeFleetFeed(
        interval_s=0.05, errors={n: "Prometheus unreachable: timed out" for n in range(2, 999)}
    )
    view = FleetView(feed)
    wait_for(lambda: view.state()["error"] is not None, "the error")
    state = view.state()
    assert state["status"] == "source failing"
    assert len(state["nodes"]) == 4 and len(state["stale"]) == 4
    assert "Prometheus unreachable: timed out" in view.header.value
    view.stop()


def test_a_hung_refresh_never_holds_the_caller_and_a_bug_is_one_line(widgets_ok):
    from npuwatch.widgets.notebook.fleet_view import FleetView

    gate = threading.Event()

    class Hung(FakeFleetFeed):
        def sample(self):
            gate.wait(30)
            raise RuntimeError("boom")

    view = FleetView(Hung(interval_s=0.05))
    assert not view.wait_first(0.2)  # the caller got its view back while the refresh hangs
    assert view.state()["status"] == "waiting for the first refresh…"
    gate.set()
    wait_for(lambda: view.crash_line is not None, "the crash line")
    assert view.crash_line.startswith("npuwatch: internal error in the notebook fleet view")
    assert "npuwatch-crash" in view.crash.value
    view.stop()
    wait_for(lambda: not view.thread.is_alive(), "the thread to end")


# --- the API and the magic, on a fleet recording ---------------------------------------------------


@pytest.fixture
def recording(tmp_path):
    from npuwatch.fleet.feed import FleetRecordingWriter

    path = tmp_path / "fleet.ndjson"
    with FleetRecordingWriter(path) as writer:
        for shift in (0, 1, 2):
            writer.write_fleet(crafted_fleet(shift_s=shift))
    return path


@pytest.fixture
def ip(widgets_ok):
    with magic_shell() as shell:
        yield shell


def test_notebook_fleet_api_on_a_recording(widgets_ok, recording):
    from npuwatch import notebook

    view = notebook.fleet(replay=str(recording), interval=0.2)
    wait_for(lambda: view.updates >= 1, "the first refresh")
    assert view.state()["nodes"] == ["node-alarm", "node-gone", "node-a3", "node-ok"]
    assert view.state()["source"] == "prometheus:http://prometheus.example:9090"  # as recorded
    assert notebook.stop_all() >= 1
    wait_for(lambda: not view.thread.is_alive(), "the refresh thread to end")


def test_notebook_fleet_api_refuses_a_bad_combination_with_one_usage_error(widgets_ok, recording):
    from npuwatch import notebook

    with pytest.raises(notebook.NotebookUsageError, match="one of --prometheus"):
        notebook.fleet(prometheus="http://127.0.0.1:9", hosts=["a:1", "b:2"])
    with pytest.raises(notebook.NotebookUsageError, match="fleet: argument --interval"):
        notebook.fleet(replay=str(recording), interval="soon")


def test_magic_fleet_live_view_json_and_stop(ip, recording, capsys):
    view = ip.run_line_magic("npuwatch", f"fleet --replay {recording} --interval 0.2")
    wait_for(lambda: view.updates >= 1, "the first refresh")
    assert view.state()["nodes"][0] == "node-alarm"
    assert "npuwatch-fleet-live" in view.widget._dom_classes
    ip.run_line_magic("npuwatch", "stop")
    assert "stopped 1 live view" in capsys.readouterr().out
    assert not view.running
    assert ip.run_line_magic("npuwatch", f"fleet --replay {recording} --json") is None
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "npuwatch/fleet/v1"
    assert document["nodes"][0]["node"] == "node-alarm"


def test_magic_fleet_bad_input_is_one_line(ip, capsys, recording):
    assert ip.run_line_magic("npuwatch", "fleet --prometheus") is None
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().startswith("%npuwatch: ") and "--prometheus" in err
    assert ip.run_line_magic("npuwatch", f"fleet --replay {recording} --record x.ndjson") is None
    err = capsys.readouterr().err.strip()
    assert err.startswith("%npuwatch: fleet --record is the command line's")
