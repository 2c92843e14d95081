"""The notebook says what each chip is limited by: a tag on each card (amber when the class holds
the job back, with the throttling mark), the summary, and for those classes the evidence with
units, the next step and the likely owner of held memory; a Workload column in the chip table
and in ``%npuwatch snapshot``'s table, explained on hover.  Chips not judged look as before."""

from __future__ import annotations

from npuwatch.history import History
from npuwatch.model import Level, Throttling, WorkloadClass
from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.notebook.chip_table import chip_table_html
from npuwatch.widgets.notebook.html_parts import LEVEL_COLOURS
from npuwatch.widgets.notebook.reports import snapshot_html
from npuwatch.widgets.view_model import build_view
from tests.notebook.helpers import Elements
from tests.widgets.fakes import capture_snapshot
from tests.widgets.test_workload_views import judged, workload

B910 = capture_snapshot("001")
AMBER = LEVEL_COLOURS[Level.WARNING]


def _view(snapshot):
    history = History(60)
    history.add(snapshot)
    return build_view(snapshot, history, window="1 min")


def _card(snapshot, npu: int) -> Elements:
    row = next(row for row in _view(snapshot).chips if row.key == (npu, 0))
    return Elements(live_html.chip_html(row, "1 min", 60))


def test_each_card_shows_its_tag_and_summary_compute_quietly() -> None:
    found = _card(judged(B910), 0)
    (tag,) = found.by_class("npuwatch-workload")
    assert tag["text"] == "compute" and tag["attrs"]["data-class"] == "compute-bound"
    assert tag["style"]["color"] != AMBER
    (line,) = found.by_class("npuwatch-workload-line")
    assert "AI Core 93 %" in line["text"]
    hover = line["attrs"]["title"]
    assert "compute-bound (over 9 s (10 samples)): AI Core 93 %" in hover and "next step:" in hover, hover
    assert not found.by_class("npuwatch-next-step")  # nothing to do: the next step is on hover only


def test_a_chip_held_back_shows_evidence_next_step_and_owner_in_amber() -> None:
    snapshot = judged(B910, npu2c0=workload(WorkloadClass.IDLE_HOLDING_HBM, needs_dcmi=("aicpu-bound",)))
    found = _card(snapshot, 2)
    (tag,) = found.by_class("npuwatch-workload")
    assert tag["text"] == "HBM held" and tag["style"]["color"] == AMBER
    assert "npuwatch-level-warning" in tag["classes"]
    evidence = {e["attrs"]["data-key"]: e["text"] for e in found.by_class("npuwatch-evidence")}
    assert evidence["hbm_used_mib"] == "HBM used 49.2 GiB" and evidence["aicore_percent"] == "AI Core 3%"
    assert "hbm_bandwidth_percent" not in evidence  # not read: no evidence
    (step,) = found.by_class("npuwatch-next-step")
    assert step["text"] == "→ Do the next thing about idle-holding-hbm."
    (owner,) = found.by_class("npuwatch-owner")
    assert "PID 48211 · alice · python3 train.py --config llama.yaml · 50337 MiB" in owner["text"]
    (dcmi,) = found.by_class("npuwatch-needs-dcmi")
    assert dcmi["text"] == "needs a source that reads AI CPU to tell aicpu-bound"


def test_throttling_is_an_amber_mark_beside_the_tag() -> None:
    found = _card(judged(B910, npu1c0=workload(WorkloadClass.COMPUTE_BOUND, Throttling.THERMAL)), 1)
    (mark,) = found.by_class("npuwatch-throttling")
    assert mark["text"] == "▼ throttled: thermal" and mark["style"]["color"] == AMBER
    assert mark["attrs"]["data-reason"] == "thermal"
    assert found.by_class("npuwatch-next-step")  # throttled: the next step is shown


def test_the_chip_table_has_a_workload_column_explained_on_hover() -> None:
    snapshot = judged(B910, npu5c0=workload(WorkloadClass.INPUT_BOUND))
    found = Elements(chip_table_html(_view(snapshot), 60))
    headers = [th["text"] for th in found.by_tag("th")]
    assert headers[:5] == ["NPU", "Chip", "Model", "Health", "Workload"], headers
    cells = found.by_class("npuwatch-workload-cell")
    assert [cell["text"] for cell in cells] == ["compute"] * 5 + ["input"] + ["compute"] * 2
    (tag,) = [t for t in found.by_class("npuwatch-workload") if t["text"] == "input"]
    assert (
        "input-bound (over 9 s (10 samples)): AI Core 3 %, PID 48211 at 240 % host CPU"
        in tag["attrs"]["title"]
    )


def test_the_snapshot_report_has_a_workload_column() -> None:
    found = Elements(snapshot_html(judged(B910, WorkloadClass.WAITING)))
    headers = [th["text"] for th in found.by_tag("th")]
    assert headers[5] == "Workload", headers
    assert [tag["text"] for tag in found.by_class("npuwatch-workload")] == ["waiting"] * 8


def test_chips_not_judged_look_as_before() -> None:
    view = _view(B910)
    assert "npuwatch-workload" not in live_html.chips_html(view, 60)
    assert "Workload" not in chip_table_html(view, 60) and "Workload" not in snapshot_html(B910)


def test_an_unknown_class_adds_no_line_to_a_card_and_a_question_mark_to_the_table() -> None:
    snapshot = judged(B910, WorkloadClass.UNKNOWN)
    assert not _card(snapshot, 0).by_class("npuwatch-workload")
    cells = Elements(chip_table_html(_view(snapshot), 60)).by_class("npuwatch-workload")
    assert [cell["text"] for cell in cells] == ["?"] * 8
    assert "unknown (over 9 s (10 samples)): no current AI Core reading" in cells[0]["attrs"]["title"]
