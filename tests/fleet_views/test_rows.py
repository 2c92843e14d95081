"""The fleet's presentation model: a row per node, worst first, stale nodes kept and marked."""

from __future__ import annotations

from dataclasses import replace

import pytest

from npuwatch.fleet.model import FleetSnapshot
from npuwatch.model import Level
from npuwatch.widgets.fleet.histories import NodeHistories
from npuwatch.widgets.fleet.rows import (
    COLUMNS,
    SORT_KEYS,
    age_text,
    fleet_header,
    fleet_rows,
    next_sort,
    workload_text,
)
from tests.fleet_views.fakes import AT, crafted_fleet


def names(rows):
    return [row.node for row in rows]


def test_rows_are_worst_first_with_the_judges_level_and_reason():
    rows = fleet_rows(crafted_fleet())
    assert names(rows) == ["node-alarm", "node-gone", "node-a3", "node-ok"]
    alarm = rows[0]
    assert alarm.level is Level.CRITICAL
    assert alarm.level_text == "✖ critical"
    assert alarm.chips == "7/8"
    assert alarm.reason == "NPU 3: Alarm"
    assert len(alarm.cells()) == len(COLUMNS)


def test_a_stale_node_keeps_its_row_marked_stale_with_the_reason():
    gone = next(row for row in fleet_rows(crafted_fleet()) if row.node == "node-gone")
    assert gone.stale
    assert gone.level_text == "◌ stale"
    assert gone.reason == "stale: no scrape for 95 s (up == 0)"
    assert gone.chips == "8/8"  # its last chips are kept
    assert gone.age == "1:35"


def test_row_figures_of_a_busy_node():
    ok = next(row for row in fleet_rows(crafted_fleet()) if row.node == "node-ok")
    assert ok.level_text == "✔ ok"
    assert ok.aicore == "72% / 12%"  # mean of 95 91 88 12, twice; the lowest
    assert ok.hbm.endswith("/512.0 GiB")
    assert ok.power.endswith(" W")
    assert ok.hottest.startswith("44 °C NPU ")
    assert ok.workload == "6 compute · 2 input"
    assert ok.age == "2 s"


def test_the_source_failing_marks_every_row_stale_and_the_header_says_why():
    fleet = crafted_fleet(error="Prometheus unreachable: connection refused")
    rows = fleet_rows(fleet)
    assert len(rows) == 4
    assert all(row.stale for row in rows)
    assert [row.level_text for row in rows] == ["✖ critical · stale", "◌ stale", "◌ stale", "◌ stale"]
    head = fleet_header(fleet)
    assert head.error == "Prometheus unreachable: connection refused"
    assert head.source == "prometheus:http://prometheus.example:9090"


def test_header_summary_counts_nodes_stale_nodes_and_chips():
    head = fleet_header(crafted_fleet())
    assert head.summary == "4 nodes · 1 stale · 27/28 chips OK"
    assert head.level is Level.CRITICAL


def test_filter_by_node_name_or_instance_any_case():
    fleet = crafted_fleet()
    assert names(fleet_rows(fleet, filter_text="A3")) == ["node-a3"]
    assert names(fleet_rows(fleet, filter_text="gone:9109")) == ["node-gone"]
    assert fleet_rows(fleet, filter_text="nothing") == ()


def test_each_sort_order():
    fleet = crafted_fleet()
    assert names(fleet_rows(fleet, "node")) == ["node-a3", "node-alarm", "node-gone", "node-ok"]
    assert names(fleet_rows(fleet, "aicore"))[-1] == "node-ok"  # the busiest last
    assert names(fleet_rows(fleet, "age"))[0] == "node-gone"  # the oldest data first
    assert names(fleet_rows(fleet, "hottest"))[0] == "node-gone"  # 52 °C
    assert names(fleet_rows(fleet, "power"))[-1] == "node-a3"
    with pytest.raises(ValueError, match="sort must be one of"):
        fleet_rows(fleet, "bogus")


def test_s_steps_through_every_order_and_back():
    seen = ["worst"]
    while len(seen) <= len(SORT_KEYS):
        seen.append(next_sort(seen[-1]))
    assert seen[: len(SORT_KEYS)] == list(SORT_KEYS)
    assert seen[-1] == "worst"


def test_a_node_without_chips_or_figures_reads_n_a():
    empty = replace(crafted_fleet().nodes[0], chips=(), reasons=(), age_s=None)
    row = fleet_rows(FleetSnapshot(AT, "hosts:1", (empty,)))[0]
    assert (row.chips, row.aicore, row.hbm, row.power, row.hottest, row.workload, row.age) == (
        "0/0",
        "n/a",
        "n/a",
        "n/a",
        "n/a",
        "",
        "n/a",
    )


def test_small_texts():
    assert workload_text({"input-bound": 2, "compute-bound": 6, "something-new": 1}) == (
        "6 compute · 2 input · 1 something-new"
    )
    assert age_text(0.4) == "0 s"
    assert age_text(3725) == "1:02:05"


def test_node_histories_add_each_snapshot_once_and_keep_only_the_opened_node_of_a_big_fleet():
    histories = NodeHistories(capacity=10)
    first, later = crafted_fleet(shift_s=1), crafted_fleet(shift_s=2)
    histories.add(first)
    histories.add(first)  # the same snapshots again: no new point
    histories.add(later)
    assert len(histories.of("node-ok").series((0, 0), "power_w")) == 2
    assert len(histories.of("node-gone").series((0, 0), "power_w")) == 1  # stale: one snapshot
    big = NodeHistories(capacity=10, keep_all_up_to_chips=4)
    big.add(first, opened="node-a3")
    assert big.nodes() == ("node-a3",)


def test_a_source_that_fails_before_any_data_says_so_without_claiming_last_data():
    from npuwatch.widgets.notebook import fleet_html

    fleet = FleetSnapshot(AT, "prometheus:http://127.0.0.1:9", error="cannot reach Prometheus: refused")
    head = fleet_header(fleet)
    assert fleet_rows(fleet) == ()
    assert head.error_line == "✖ cannot reach Prometheus: refused (no data yet)"
    html = fleet_html.header_html(head, "source failing")
    assert "(no data yet)" in html and "showing the last data" not in html
    with_nodes = fleet_header(crafted_fleet(error="cannot reach Prometheus: refused"))
    assert with_nodes.error_line == "✖ cannot reach Prometheus: refused — showing the last data, marked stale"
