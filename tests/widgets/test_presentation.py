"""One metric table and one presentation model: the dashboard, the text view and the notebook show
the same chip with the same labels, scales and levels (issue 15, deliverables 3 and 5)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Optional

import pytest
from rich.text import Text

from npuwatch.exporter.metrics import snapshot_families
from npuwatch.history import HISTORY_METRICS, History
from npuwatch.judge import judge_snapshot, temperature_level
from npuwatch.metrics_table import CELLS, METRICS
from npuwatch.model import (
    CHIP_METRICS,
    ChipIdentity,
    ChipSample,
    Health,
    HostInfo,
    Level,
    MetricNote,
    MetricStatus,
    NpuProcess,
    ProcessHostInfo,
    Snapshot,
)
from npuwatch.widgets import view_model
from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.text import render_snapshot
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.chips import card_lines, compact_line
from npuwatch.widgets.tui.processes import visible_rows

WHEN = datetime(2026, 1, 1, 9, 30, tzinfo=timezone.utc)


#: What the DCMI backend reads beyond npu-smi's table, for one busy 910B3 chip.
DCMI_VALUES = {
    "aicore_freq_mhz": 1300,
    "aicore_rated_freq_mhz": 1800,
    "vector_percent": 45,
    "cube_percent": 12,
    "aicpu_percent": 3,
    "ctrlcpu_percent": 7,
    "hbm_bandwidth_percent": 60,
    "hbm_temperature_c": 41,
    "voltage_v": 0.85,
    "ecc_single_bit_errors": 2,
    "ecc_double_bit_errors": 0,
    "ecc_isolated_pages": 1,
}


def chip(name: str, temperature: Optional[int] = 40, **values: object) -> ChipSample:
    fields = {
        "power_w": 90.0,
        "aicore_percent": 10,
        "hbm_used_mib": 3000,
        "hbm_total_mib": 65536,
        "memory_used_mib": 0,
        "memory_total_mib": 0,
    }
    if name.startswith("310P"):
        fields.update(hbm_used_mib=None, hbm_total_mib=None, memory_used_mib=3000, memory_total_mib=44280)
    fields.update(values)
    identity = ChipIdentity(0, 0, name=name, bus_id="0000:C1:00.0")
    return ChipSample(identity=identity, health=Health.OK, temperature_c=temperature, **fields)  # type: ignore[arg-type]


def snap(*chips: ChipSample, processes: tuple = ()) -> Snapshot:
    return Snapshot(taken_at=WHEN, source="test", chips=chips, processes=processes)


def span_style(line: Text, text: str) -> str:
    """The style of the span of ``line`` that starts where ``text`` does."""
    start = line.plain.index(text)
    return " ".join(str(s.style) for s in line.spans if s.start <= start < s.end)


# --- one metric table -------------------------------------------------------------------------


def test_the_model_history_exporter_and_text_read_the_one_metric_table():
    assert tuple(m.name for m in METRICS) == CHIP_METRICS
    assert set(HISTORY_METRICS) == {m.name for m in METRICS if m.graphed}
    # A family no chip has a value for is left out: a chip that reports every metric shows them all.
    everything = chip("910B3", npu_util_percent=5, memory_used_mib=1, memory_total_mib=1024, **DCMI_VALUES)
    exported = {family.name for family in snapshot_families(snap(everything))}
    assert {m.exporter_name for m in METRICS if m.exporter_name} <= exported
    header = render_snapshot(snap(chip("910B3"))).splitlines()[3].split()
    assert header[-4:] == ["Util", "Memory", "Power", "Temp"]
    assert set(CELLS) >= {m.cell for m in METRICS if m.cell}


# --- levels from the judge ----------------------------------------------------------------------

CASES = [
    ("910B3", 80, Level.OK),
    ("910B3", 88, Level.WARNING),
    ("910B3", 97, Level.CRITICAL),
    ("310P3", 78, Level.OK),
    ("310P3", 82, Level.WARNING),
    ("310P3", 92, Level.CRITICAL),
]


@pytest.mark.parametrize(("model", "celsius", "level"), CASES)
def test_a_temperature_has_the_judges_level_on_the_dashboard_and_in_the_notebook(model, celsius, level):
    """A 310P at 82 °C was orange on the dashboard (fixed 75/85) and critical in the notebook
    (limit minus 10): both now show the judge's per-model level."""
    sample = chip(model, celsius)
    assert temperature_level(sample) is level
    row = view_model.chip_row(sample)
    cell = row.cell("temperature")
    assert cell.level is level
    assert f"npuwatch-level-{level.value}" in live_html.metric_html(cell, "", 10)
    temp_line = next(
        line for line in card_lines(sample, History(2), 40, False) if line.plain.startswith("TEMP")
    )
    bar = span_style(temp_line, "█")
    assert bar == render.LEVEL_BAR_STYLES.get(level, render.CELL_BAR_STYLES["temperature"])
    compact = compact_line(sample, History(2), 80, False)
    assert span_style(compact, f"{celsius} °C") == render.LEVEL_TEXT_STYLES.get(level, "")


def test_a_chip_is_coloured_by_its_judgement_in_every_view():
    alarm = replace(chip("910B3"), health=Health.ALARM)
    snapshot = snap(alarm)
    judged = judge_snapshot(snapshot)[(0, 0)]
    assert judged.level is Level.CRITICAL
    row = view_model.build_view(snapshot, History(2)).chips[0]
    assert (row.level, row.reasons) == (judged.level, judged.texts)
    assert "npuwatch-chip-level-critical" in live_html.chip_html(row, "", 2)


def test_the_group_badge_sums_up_by_the_judges_order():
    assert view_model.worst_health([Health.OK, Health.UNKNOWN, Health.ALARM]) is Health.ALARM
    assert view_model.worst_health([Health.CRITICAL, Health.ALARM]) is Health.CRITICAL
    assert view_model.worst_health([Health.WARNING, Health.UNKNOWN]) is Health.UNKNOWN


def test_power_near_its_rating_warns_on_the_dashboard_as_in_the_notebook():
    """The notebook turned power amber at 90 % of the rating; the dashboard's bar stayed magenta."""
    hot = chip("910B3", power_w=380.0)  # 910B family rated 400 W
    cell = view_model.chip_row(hot).cell("power")
    assert cell.level is Level.WARNING
    power_line = next(line for line in card_lines(hot, History(2), 40, False) if line.plain.startswith("PWR"))
    assert span_style(power_line, "█") == render.LEVEL_BAR_STYLES[Level.WARNING]


# --- one chooser ------------------------------------------------------------------------------


def test_a_310p_npu_smi_could_not_read_says_ddr_in_every_view():
    """The notebook said HBM for a 310P with no memory figures; the dashboard and the text DDR."""
    note = MetricNote(MetricStatus.ERROR, "npu-smi failed")
    failed = ChipSample(identity=ChipIdentity(0, 0, name="310P3"), notes={m: note for m in CHIP_METRICS})
    assert view_model.chip_row(failed).cell("memory").label == "DDR"
    lines = [line.plain for line in card_lines(failed, History(2), 40, False)]
    assert any(line.startswith("DDR") for line in lines)


def test_the_950_shows_npu_util_in_every_view():
    npu = chip("950DT", aicore_percent=None, npu_util_percent=64)
    cell = view_model.chip_row(npu).cell("util")
    assert (cell.label, cell.tag, cell.text) == ("NPU Util", "NPU", "64%")
    assert "64% NPU" in render_snapshot(snap(npu))
    assert compact_line(npu, History(2), 80, False).plain.count("NPU  ") + 1


def test_one_process_row_for_the_text_the_dashboard_and_the_notebook():
    seen = NpuProcess(
        0, 0, 41, "python", 3120, host=ProcessHostInfo("alice", "python train.py", 12.0, 2**30, 0.0)
    )
    hidden = NpuProcess(0, 0, 42, "worker", 100, host_unavailable="in another container")
    snapshot = replace(snap(chip("910B3"), processes=(seen, hidden)), host=HostInfo("h"))
    now = WHEN.timestamp()
    rows = [view_model.process_row(p, now) for p in snapshot.processes]
    text = render_snapshot(snapshot)
    tui = [[c.plain for c in cells] for cells in visible_rows(snapshot.processes, 0, "", "", now)]
    html = live_html.processes_html(rows)
    for row, cells in zip(rows, tui):
        assert cells[2] == row.pid and cells[4] == row.npu_memory
        assert row.command in text and row.command in html and row.command in cells[-1]
    assert rows[1].no_host == "in another container"
    assert "(in another container)" in tui[1][-1] and "(in another container)" in html
    assert tui[0][3] == rows[0].user == "alice" and rows[0].cpu == "12%" and "12%" in html


def test_every_cell_takes_its_label_tag_and_scale_from_the_metric_table():
    from npuwatch.metrics_table import metric

    for sample in (chip("910B3"), chip("310P3"), chip("950DT", aicore_percent=None, npu_util_percent=5)):
        row = view_model.chip_row(sample)
        assert tuple(cell.key for cell in row.metrics) == CELLS
        for cell in row.metrics:
            spec = metric(cell.metric)
            assert (cell.label, cell.tag, spec.cell) == (spec.label, spec.tag, cell.key)


def test_a_cards_height_is_counted_as_its_lines_are_drawn():
    from npuwatch.model import ChipError, PcieLink
    from npuwatch.widgets.tui.chips import problem_count, problem_lines

    link = PcieLink(current_speed_gt_s=16.0, max_speed_gt_s=32.0, current_width=8, max_width=16)
    for errors in ((), (ChipError("80E01801"),), tuple(ChipError(f"80E0180{i}") for i in range(4))):
        for pcie in (None, link):
            sample = replace(chip("910B3"), errors=errors, pcie=pcie)
            assert problem_count(sample) == len(problem_lines(sample, 40))


# --- the driver-only metrics: one presentation, shown only where reported (issue 16) -------------


def test_a_dcmi_chip_shows_its_frequency_against_rated_bars_and_detail_lines():
    from npuwatch.model import ChipError

    sample = replace(
        chip("910B3", **DCMI_VALUES),
        health=Health.ALARM,
        errors=(ChipError("80E01801", "HBM multi-bit ECC error"),),
    )
    row = view_model.chip_row(sample)
    assert [(e.kind, e.metric, e.label, e.text) for e in row.extras] == [
        ("beside", "aicore_freq_mhz", "Freq", "1300/1800 MHz"),
        ("bar", "vector_percent", "Vector", "45%"),
        ("bar", "hbm_bandwidth_percent", "HBM BW", "60%"),
        ("detail", "cube_percent", "Cube", "12%"),
        ("detail", "aicpu_percent", "AI CPU", "3%"),
        ("detail", "ctrlcpu_percent", "Ctrl CPU", "7%"),
        ("detail", "hbm_temperature_c", "HBM temp", "41 °C"),
        ("detail", "voltage_v", "Voltage", "0.85 V"),
        ("detail", "ecc_single_bit_errors", "ECC 1-bit", "2 errors"),
        ("detail", "ecc_double_bit_errors", "ECC 2-bit", "0 errors"),
        ("detail", "ecc_isolated_pages", "ECC pages", "1 page"),
    ]
    freq = row.beside("util")
    assert freq is not None and (freq.fraction, freq.ceiling, freq.top_label) == (
        1300 / 1800,
        1800.0,
        "1800 MHz",
    )
    assert row.beside("memory") is None
    assert [(b.key, b.fraction, b.top_label) for b in row.bars] == [
        ("vector_percent", 0.45, "100%"),
        ("hbm_bandwidth_percent", 0.6, "100%"),
    ]
    assert all(e.level is Level.OK and e.reason is None for e in row.extras)  # issue 17 judges them
    assert row.errors == ("80E01801 HBM multi-bit ECC error",)
    assert tuple(cell.key for cell in row.metrics) == CELLS  # the four cells stay as they were


def test_an_npu_smi_chip_shows_nothing_extra():
    from npuwatch.probes.npu_smi.table import NOT_IN_TABLE

    row = view_model.chip_row(replace(chip("910B3"), notes=dict(NOT_IN_TABLE)))
    assert (row.extras, row.bars, row.details, row.errors) == ((), (), (), ())
    assert row.beside("util") is None and row.reason is None


def test_a_frequency_without_its_rating_and_a_stale_extra():
    stale = MetricNote(MetricStatus.STALE, "dcmi timed out; showing the value from 3 s ago")
    row = view_model.chip_row(
        chip("910B3", aicore_freq_mhz=1800, vector_percent=5, notes={"vector_percent": stale})
    )
    freq = row.beside("util")
    assert freq is not None and (freq.text, freq.fraction, freq.top_label) == ("1800 MHz", None, "max")
    assert row.bars[0].reason == "stale: dcmi timed out; showing the value from 3 s ago"


def test_extras_carry_their_history_when_graphed():
    sample = chip("910B3", **DCMI_VALUES)
    history = History(5)
    for _ in range(3):
        history.add(snap(sample))
    row = view_model.chip_row(sample, history, points=5)
    series = {e.metric: e.series for e in row.extras}
    assert series["aicore_freq_mhz"] == (1300.0,) * 3 and series["vector_percent"] == (45.0,) * 3
    assert series["hbm_temperature_c"] == (41.0,) * 3 and series["cube_percent"] == ()  # not graphed


def test_a_frequency_graph_tops_at_the_rated_frequency_unless_the_data_goes_past_it():
    sample = chip("910B3", **DCMI_VALUES)
    assert view_model.graph_top(sample, "aicore_freq_mhz", [1300.0, 1500.0]) == 1800.0
    assert view_model.graph_top(sample, "aicore_freq_mhz", [1300.0, 2000.0]) == pytest.approx(2200.0)
    assert view_model.graph_top(chip("910B3"), "aicore_freq_mhz", [1000.0]) == pytest.approx(1100.0)
    assert view_model.graph_top(sample, "vector_percent", [5.0]) == 100.0


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1234567, "errors", "1234567 errors"),
        (1, "pages", "1 page"),
        (0.85, "V", "0.85 V"),
        (41, "°C", "41 °C"),
        (45, "%", "45%"),
        (1800.0, "MHz", "1800 MHz"),
        (None, "MHz", "n/a"),
    ],
)
def test_amounts_keep_whole_numbers_whole(value, unit, text):
    assert view_model.amount(value, unit) == text
