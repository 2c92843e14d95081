"""The notebook's pure rendering: view model rows, SVG plots and HTML pieces from fixed snapshots."""

from __future__ import annotations

import re
from dataclasses import replace

from npuwatch.alerts import AlertTracker
from npuwatch.history import History
from npuwatch.model import Health, Level, MetricNote, MetricStatus
from npuwatch.widgets import format as fmt
from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.notebook.sparkline_svg import downsample, sparkline_svg
from npuwatch.widgets.view_model import build_view, chip_row, sample_time
from tests.notebook.helpers import Elements
from tests.widgets.fakes import capture_snapshot


def _view(snapshot, **kwargs):
    history = History(60)
    history.add(snapshot)
    return build_view(snapshot, history, **kwargs)


def test_910b_chip_row_shows_ai_core_hbm_power_against_rating_and_temperature():
    snapshot = capture_snapshot("001")
    view = _view(snapshot)
    row = view.chips[0]
    assert row.title == "NPU 0 · 910B2"
    assert row.badge == "✔ OK"
    assert row.health_class == "ok"
    cells = {cell.key: cell for cell in row.metrics}
    chip = snapshot.chips[0]
    assert cells["util"].label == "AI Core"
    assert cells["util"].text == f"{chip.aicore_percent}%"
    assert cells["memory"].label == "HBM"
    assert cells["memory"].text == f"{chip.hbm_used_mib / 1024:.1f}/{chip.hbm_total_mib / 1024:.1f} GiB"
    assert cells["power"].text == f"{chip.power_w:.1f}/400 W"  # 910B family rated 400 W
    assert cells["temperature"].text == f"{chip.temperature_c} °C"
    assert cells["util"].series == (float(chip.aicore_percent),)
    assert view.updated == sample_time(snapshot)
    assert re.fullmatch(r"\d\d:\d\d:\d\d", view.updated)


def test_310p_shows_ddr_and_the_reason_power_is_na():
    view = _view(capture_snapshot("044"))
    cells = {cell.key: cell for cell in view.chips[0].metrics}
    assert cells["memory"].label == "DDR"
    assert cells["memory"].text.endswith("GiB")
    assert cells["power"].text == "n/a"
    assert cells["power"].level is Level.UNKNOWN
    assert cells["power"].reason == "npu-smi prints 'NA': this chip does not report it"


def test_950_shows_npu_util_instead_of_ai_core():
    view = _view(capture_snapshot("037"))
    util = view.chips[0].metrics[0]
    assert util.label == "NPU Util"
    assert util.text != "n/a"


def test_alarm_chip_gets_its_badge_class_and_the_dashboard_alert():
    snapshot = capture_snapshot("001", health={(3, 0): Health.ALARM})
    alerts = AlertTracker().update(snapshot)
    view = _view(snapshot, alerts=alerts)
    row = next(r for r in view.chips if r.key == (3, 0))
    assert (row.health_class, row.badge) == ("alarm", "✖ Alarm")
    assert [a.message for a in view.alerts] == ["NPU 3 Alarm"]
    assert view.alerts[0].severity == "critical"
    cards = Elements(live_html.chips_html(view, 60)).by_class("npuwatch-chip")
    assert len(cards) == 8
    assert "npuwatch-health-alarm" in cards[3]["classes"]
    assert "✖ Alarm" in cards[3]["text"]
    listed = Elements(live_html.alerts_html(view)).by_class("npuwatch-alert")
    assert "NPU 3 Alarm" in listed[0]["text"]
    assert "npuwatch-severity-critical" in listed[0]["classes"]


def test_no_chips_says_why():
    snapshot = replace(capture_snapshot("001"), chips=())
    html = live_html.chips_html(_view(snapshot), 10, "no NPU could be read: npu-smi failed")
    assert "No NPU chips could be read. no NPU could be read: npu-smi failed" in html


def test_stale_value_is_marked_and_explained():
    snapshot = capture_snapshot("001")
    chip = snapshot.chips[0]
    notes = {**chip.notes, "temperature_c": MetricNote(MetricStatus.STALE, "npu-smi timed out after 5 s")}
    row = chip_row(replace(chip, notes=notes), History(10), 10)
    assert row.stale
    temperature = row.metrics[3]
    assert temperature.reason == "stale: npu-smi timed out after 5 s"
    assert "STALE" in live_html.chip_html(row, "15 min", 10)


def test_numbers_are_visible_text_not_only_svg():
    snapshot = capture_snapshot("001")
    view = _view(snapshot, window="15 min")
    html = live_html.chips_html(view, 60)
    values = Elements(html).by_class("npuwatch-value")
    texts = [v["text"] for v in values]
    assert f"{snapshot.chips[0].temperature_c} °C" in texts
    assert len(values) == 4 * len(snapshot.chips)
    assert "<svg" in html and ">now<" in html


def test_processes_mark_this_kernel_and_host_line():
    snapshot = capture_snapshot("001")
    mine = snapshot.processes[1].pid
    view = _view(snapshot, my_pid=mine)
    expected = [p.pid == mine for p in snapshot.processes]
    assert [p.mine for p in view.processes] == expected
    html = live_html.processes_html(view.processes)
    assert "npuwatch-mine" in html and "this kernel" in html
    host = live_html.host_html(view.host)
    assert f">{fmt.percent(37.5)}<" in host  # the fixed host's CPU
    assert "412.0/1536.0 GiB" in host


def test_sparkline_breaks_at_gaps_and_labels_its_axes():
    svg = sparkline_svg([10.0, 20.0, None, 30.0, 40.0], ceiling=100.0, top_label="100%", window="5 min")
    assert svg.count("<polyline") == 2
    assert ">100%<" in svg and ">0<" in svg and "−5 min" in svg and ">now<" in svg
    lone = sparkline_svg([None, 5.0, None])
    assert "<circle" in lone and "<polyline" not in lone
    assert "<polyline" not in sparkline_svg([])


def test_a_filling_window_spans_its_points_and_says_how_long():
    """40 points of a 15-minute window at 1 s: the plot spans them, labelled −39 s, not −15 min."""
    filling = sparkline_svg([float(i) for i in range(40)], window="15 min", slots=900)
    assert ">−39 s<" in filling and "−15 min" not in filling
    xs = [float(p.split(",")[0]) for p in filling.split('points="')[1].split('"')[0].split()]
    assert xs[0] < 40 and xs[-1] > 190  # from the left edge to "now"
    full = sparkline_svg([float(i % 7) for i in range(900)], window="15 min", slots=900)
    assert ">−15 min<" in full
    later = sparkline_svg([1.0] * 300, window="15 min", slots=900)
    assert ">−5 min<" in later


def test_downsample_keeps_peaks_and_gaps():
    values = [1.0] * 1000
    values[500] = 99.0
    values[900:1000] = [None] * 100
    out = downsample(values, 100)
    assert len(out) == 100
    assert max(v for v in out if v is not None) == 99.0
    assert out[-1] is None
    assert downsample([1.0, 2.0], 100) == [1.0, 2.0]


def _failing_view():
    from npuwatch import notebook

    snapshot = notebook.snapshot(demo="container-missing-nodes").snapshot
    return snapshot, build_view(snapshot, History(2), points=2, window="15 min")


def test_a_failing_npu_smi_reason_is_said_once_and_every_metric_keeps_its_na():
    snapshot, view = _failing_view()
    reason = snapshot.chips[0].notes["power_w"].reason
    assert len(view.chips) == 8 and len(reason) > 100
    for layout in ("cards", "table"):
        html = live_html.chips_html(view, 2, layout=layout)
        found = Elements(html)
        assert found.found[0]["text"].count(reason) == 1, layout
        values = found.by_class("npuwatch-value")
        assert [v["text"] for v in values] == ["n/a"] * 32, layout
        assert all(v["attrs"].get("title") == reason for v in values)  # and on hover, per value


def test_a_reason_of_one_metric_stays_under_that_metric():
    view = _view(capture_snapshot("044"))  # 310P Duo: only power is n/a
    html = live_html.chips_html(view, 60, layout="cards")
    reasons = Elements(html).by_class("npuwatch-reason")
    assert [r["attrs"].get("data-metric") for r in reasons] == ["power"] * 4


def test_a_chip_whose_values_are_all_stale_says_why_once():
    snapshot = capture_snapshot("001")
    stale = MetricNote(MetricStatus.STALE, "npu-smi timed out after 5 s")
    first = snapshot.chips[0]
    notes = {
        **first.notes,
        **{m: stale for m in ("aicore_percent", "hbm_used_mib", "power_w", "temperature_c")},
    }
    snapshot = replace(snapshot, chips=(replace(first, notes=notes), *snapshot.chips[1:]))
    view = _view(snapshot)
    card = Elements(live_html.chips_html(view, 60, layout="cards")).by_class("npuwatch-chip")[0]
    assert card["text"].count("stale: npu-smi timed out after 5 s") == 1


# --- the driver-only metrics on the chip card (issue 16) -----------------------------------------

DCMI_VALUES = {
    "aicore_freq_mhz": 1300,
    "aicore_rated_freq_mhz": 1800,
    "vector_percent": 45,
    "hbm_bandwidth_percent": 60,
    "aicpu_percent": 3,
    "hbm_temperature_c": 41,
    "voltage_v": 0.85,
    "ecc_double_bit_errors": 0,
}


def _dcmi_view():
    from npuwatch.model import ChipError

    snapshot = capture_snapshot("001")
    first = replace(
        snapshot.chips[0],
        health=Health.ALARM,
        errors=(ChipError("80E01801", "HBM multi-bit ECC error"),),
        **DCMI_VALUES,
    )
    return _view(replace(snapshot, chips=(first, *snapshot.chips[1:]), chip_source="dcmi"), window="15 min")


def test_a_dcmi_card_shows_the_frequency_beside_ai_core_two_bars_details_and_error_codes():
    view = _dcmi_view()
    card = live_html.chip_html(view.chips[0], view.window, 60)
    found = Elements(card)
    (beside,) = found.by_class("npuwatch-beside")
    assert (beside["text"], beside["attrs"]["data-metric"]) == ("1300/1800 MHz", "aicore_freq_mhz")
    rows = [r["attrs"]["data-metric"] for r in found.by_class("npuwatch-metric")]
    assert rows == ["util", "memory", "power", "temperature", "vector_percent", "hbm_bandwidth_percent"]
    values = {v["attrs"]["data-metric"]: v["text"] for v in found.by_class("npuwatch-value")}
    assert (values["vector_percent"], values["hbm_bandwidth_percent"]) == ("45%", "60%")
    details = [d["text"] for d in found.by_class("npuwatch-detail")]
    assert details == ["AI CPU 3%", "HBM temp 41 °C", "Voltage 0.85 V", "ECC 2-bit 0 errors"]
    assert [e["text"] for e in found.by_class("npuwatch-error-code")] == ["80E01801 HBM multi-bit ECC error"]
    # The bars' plots are drawn from the history, like the four cells'.
    assert "Vector over the last 15 min" in card and "HBM BW over the last 15 min" in card
    # The other chips of the same view report none of them.
    others = Elements("".join(live_html.chip_html(row, view.window, 60) for row in view.chips[1:]))
    assert not others.by_class("npuwatch-beside") and not others.by_class("npuwatch-details")


def test_the_compact_table_puts_the_frequency_beside_ai_core_and_the_rest_in_the_row_tooltip():
    found = Elements(live_html.chips_html(_dcmi_view(), 60, layout="table"))
    assert [b["text"] for b in found.by_class("npuwatch-beside")] == ["1300/1800 MHz"]
    row = found.by_class("npuwatch-chip")[0]
    assert row["attrs"]["title"].endswith(
        " · Vector 45% · HBM BW 60% · AI CPU 3% · HBM temp 41 °C · Voltage 0.85 V · ECC 2-bit 0 errors"
        " · 80E01801 HBM multi-bit ECC error"
    )
    assert all("·" not in r["attrs"]["title"].split("0000:")[-1] for r in found.by_class("npuwatch-chip")[1:])


def test_an_npu_smi_card_has_nothing_extra():
    view = _view(capture_snapshot("001"))
    for layout in ("cards", "table"):
        found = Elements(live_html.chips_html(view, 60, layout=layout))
        for name in ("npuwatch-beside", "npuwatch-details", "npuwatch-detail", "npuwatch-error-code"):
            assert found.by_class(name) == [], (layout, name)
        assert len(found.by_class("npuwatch-metric")) == 4 * len(view.chips)
