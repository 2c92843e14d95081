"""What each chip is limited by, on the dashboard and in the text view: a tag on each card and
one-line row (a class that holds the job back and throttling in amber), the detail screen's
explanation (evidence with units, next step, likely owner of held memory, what needs the DCMI
backend), the ``snapshot`` table's column.  The views only read ``ChipSample.workload``: these
tests set it as the feed's ``WorkloadJudge`` would."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Dict, List, Optional, Tuple

import pytest
from rich.console import Console
from rich.text import Text
from textual.pilot import Pilot

from npuwatch.history import History
from npuwatch.model import LastOwner, Snapshot, Throttling, Workload, WorkloadClass
from npuwatch.widgets.text import render_snapshot
from npuwatch.widgets.tui.app import NpuwatchApp
from npuwatch.widgets.tui.card_paint import CardPainter
from npuwatch.widgets.tui.chips import card_head, card_lines, compact_line
from npuwatch.widgets.tui.detail_screen import chip_summary
from npuwatch.widgets.view_model import chip_row, evidence_text, explain
from tests.widgets.fakes import (
    FIXED_AT,
    capture_snapshot,
    card_text,
    chip_cards,
    with_dcmi_values,
)
from tests.widgets.test_tui_new_metrics import drive

A3 = capture_snapshot("100")  # 8 NPUs × 2 chips
B910 = capture_snapshot("001")  # 8 × 910B2
AMBER = "dark_orange"

OWNER = LastOwner(
    pid=48211,
    name="python3",
    user="alice",
    command="python3 train.py --config llama.yaml",
    npu_memory_mib=50337,
    last_seen=FIXED_AT - timedelta(seconds=125),
)
SUMMARIES = {
    WorkloadClass.COMPUTE_BOUND: "AI Core 93 %",
    WorkloadClass.MEMORY_BOUND: "HBM bandwidth 88 %, AI Core 31 %",
    WorkloadClass.AICPU_BOUND: "AI CPU 75 %, AI Core 4 %",
    WorkloadClass.INPUT_BOUND: "AI Core 3 %, PID 48211 at 240 % host CPU",
    WorkloadClass.WAITING: "AI Core 8 %, host 12 %",
    WorkloadClass.IDLE: "no process",
    WorkloadClass.IDLE_HOLDING_HBM: "49.2 GiB held, no process; last held by PID 48211",
    WorkloadClass.UNKNOWN: "no current AI Core reading",
}


def workload(
    kind: WorkloadClass, throttling: Optional[Throttling] = None, needs_dcmi: Tuple[str, ...] = ()
) -> Workload:
    """A workload as the judge gives one after a 10 s window."""
    evidence: Dict[str, object] = {
        "aicore_percent": 3.4,
        "hbm_bandwidth_percent": None,
        "host_cpu_percent": 240.0,
        "hbm_used_mib": 50337.0,
        "aicore_freq_mhz": 1342.5,
        "temperature_c": 84.2,
        "power_w": 372.44,
    }
    if kind is WorkloadClass.INPUT_BOUND:
        evidence.update(pid=48211, process="python3")
    return Workload(
        kind=kind,
        summary=SUMMARIES[kind],
        next_step=f"Do the next thing about {kind.value}.",
        throttling=throttling,
        evidence=evidence,  # type: ignore[arg-type]
        needs_dcmi=needs_dcmi,
        owner=OWNER if kind is WorkloadClass.IDLE_HOLDING_HBM else None,
        samples=10,
        window_s=9.0,
    )


def judged(
    snapshot: Snapshot, kind: WorkloadClass = WorkloadClass.COMPUTE_BOUND, **overrides: Workload
) -> Snapshot:
    """``snapshot`` with every chip judged ``kind`` (``overrides`` by chip label, ``npu3``)."""
    chips = tuple(
        replace(
            chip, workload=overrides.get(f"npu{chip.identity.npu_id}c{chip.identity.chip_id}", workload(kind))
        )
        for chip in snapshot.chips
    )
    return replace(snapshot, chips=chips)


def head(snapshot: Snapshot, index: int, width: Optional[int], in_group: bool = True) -> Text:
    chip = snapshot.chips[index]
    return card_head(chip, chip_row(chip), in_group, width)


def styles_of(text: Text, word: str) -> List[str]:
    """The styles of the spans covering ``word`` in ``text``."""
    start = text.plain.index(word)
    return [str(span.style) for span in text.spans if span.start <= start < span.end]


TAGS = {
    WorkloadClass.COMPUTE_BOUND: "compute",
    WorkloadClass.MEMORY_BOUND: "memory",
    WorkloadClass.AICPU_BOUND: "AI CPU",
    WorkloadClass.INPUT_BOUND: "input",
    WorkloadClass.WAITING: "waiting",
    WorkloadClass.IDLE: "idle",
    WorkloadClass.IDLE_HOLDING_HBM: "HBM held",
}


# --- the card ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(TAGS))
def test_each_card_title_carries_the_chips_workload_tag_after_its_health(kind: WorkloadClass) -> None:
    title = head(judged(B910, kind), 0, 36, in_group=False).plain
    assert re.fullmatch(rf"0000:\S+ +✔ OK +{re.escape(TAGS[kind])}", title.strip()), title


def test_a_class_that_holds_the_job_back_is_amber_compute_is_not() -> None:
    for kind in (
        WorkloadClass.INPUT_BOUND,
        WorkloadClass.AICPU_BOUND,
        WorkloadClass.IDLE_HOLDING_HBM,
        WorkloadClass.MEMORY_BOUND,
        WorkloadClass.WAITING,
    ):
        title = head(judged(B910, kind), 0, 40, in_group=False)
        assert any(AMBER in style for style in styles_of(title, TAGS[kind])), (kind, title.spans)
    for kind in (WorkloadClass.COMPUTE_BOUND, WorkloadClass.IDLE):
        title = head(judged(B910, kind), 0, 40, in_group=False)
        assert not any(AMBER in style for style in styles_of(title, TAGS[kind])), (kind, title.spans)


def test_throttling_is_an_amber_mark_beside_the_class() -> None:
    thermal = judged(B910, npu0c0=workload(WorkloadClass.COMPUTE_BOUND, Throttling.THERMAL))
    title = head(thermal, 0, 60, in_group=False)
    assert title.plain.rstrip().endswith("compute ▼ throttled: thermal"), title.plain
    assert any(AMBER in style for style in styles_of(title, "▼")), title.spans
    power = judged(B910, npu0c0=workload(WorkloadClass.INPUT_BOUND, Throttling.POWER))
    assert head(power, 0, 60, in_group=False).plain.rstrip().endswith("input ▼ throttled: power")


@pytest.mark.parametrize("width", [26, 30, 33, 36, 37])
@pytest.mark.parametrize("kind", list(TAGS))
def test_a_narrow_card_keeps_its_health_and_tag_dropping_the_bus_id_then_the_marks_words(
    kind: WorkloadClass, width: int
) -> None:
    snapshot = judged(A3, npu5c1=workload(kind, Throttling.THERMAL))
    title = head(snapshot, 11, width).plain  # NPU 5 chip 1: "chip 1 phy 11"
    assert len(title) <= width, title
    assert "✔ OK" in title and TAGS[kind] in title and "▼" in title, title
    if len(title) < width - 12:  # there was room: the Bus-Id stays
        assert "0000:" in title, title


def test_the_card_keeps_its_height_the_tag_adds_no_line() -> None:
    history = History()
    history.add(A3)
    for snapshot in (A3, judged(A3, WorkloadClass.INPUT_BOUND)):
        chip = snapshot.chips[0]
        assert len(card_lines(chip, history, 36, True, chip_row(chip))) == 5


def test_an_unknown_class_shows_no_tag_on_the_card_or_line() -> None:
    unknown = judged(B910, WorkloadClass.UNKNOWN)
    assert head(unknown, 0, 40, in_group=False).plain == head(B910, 0, 40, in_group=False).plain
    history = History()
    chip = unknown.chips[0]
    for width in (80, 160):
        line = compact_line(chip, history, width, False, chip_row(chip)).plain
        assert "910B2" in line and "?" not in line.split("OK")[1], line


def test_a_kept_card_redraws_its_title_when_the_class_changes() -> None:
    console = Console(width=200, color_system="truecolor")
    painter = CardPainter()
    history = History()
    from rich.style import Style

    texts = []
    for kind in (WorkloadClass.COMPUTE_BOUND, WorkloadClass.INPUT_BOUND, WorkloadClass.INPUT_BOUND):
        chip = judged(B910, kind).chips[0]
        lines = painter.card(chip, history, 36, False, chip_row(chip), console, 36, Style())
        texts.append((lines[0], "".join(segment.text for segment in lines[0])))
    assert "compute" in texts[0][1] and "input" in texts[1][1], texts
    assert texts[2][0] is texts[1][0]  # the same tag: the title line is kept as drawn


# --- the one-line row ---------------------------------------------------------------------------


@pytest.mark.parametrize("width", [77, 78, 80, 84, 85, 86, 90, 120, 160, 200])
def test_every_one_line_row_fits_and_keeps_its_columns_whatever_its_tag(width: int) -> None:
    kinds = [*TAGS, WorkloadClass.UNKNOWN]
    snapshot = judged(
        A3,
        **{
            f"npu{i}c0": workload(kind, Throttling.THERMAL if i % 2 else None) for i, kind in enumerate(kinds)
        },
    )
    history = History()
    lines = [compact_line(chip, history, width, True, chip_row(chip)).plain for chip in snapshot.chips]
    assert all(len(line) <= width for line in lines), [(len(line), line) for line in lines]
    for label in ("AIC", "HBM"):  # the bars line up
        assert len({re.search(rf" {label} [█▏▎▍▌▋▊▉·]", line).start() for line in lines}) == 1, lines  # type: ignore[union-attr]
    for line, chip in zip(lines, snapshot.chips):
        kind = chip.workload.kind if chip.workload is not None else None
        if kind in TAGS:
            assert TAGS[kind] in line, (width, line)


def test_a_narrow_row_shows_the_short_model_then_the_tag_a_wide_one_the_tag_after_the_temperature() -> None:
    history = History()
    for snapshot, model, short in ((B910, "910B2", "910B2"), (A3, "Ascend910", "910")):
        chip = judged(snapshot, WorkloadClass.INPUT_BOUND).chips[0]
        narrow = compact_line(chip, history, 80, True, chip_row(chip)).plain
        assert re.match(rf"  0  {short} +input +✔ OK ", narrow), narrow
        wide = compact_line(chip, history, 120, True, chip_row(chip)).plain
        assert re.match(rf"  0  {model} +✔ OK ", wide) and re.search(r"°C  input$", wide), wide


def test_a_row_without_a_judged_workload_is_as_it_always_was() -> None:
    chip = B910.chips[0]
    history = History()
    assert compact_line(chip, history, 80, False, chip_row(chip)).plain.startswith("  0  910B2 ")
    assert "compute" not in compact_line(chip, history, 160, False, chip_row(chip)).plain


# --- the detail screen -------------------------------------------------------------------------


def detail_text(snapshot: Snapshot, index: int = 0) -> str:
    console = Console(width=160, record=True, color_system=None)
    console.print(chip_summary(snapshot.chips[index], snapshot))
    return console.export_text()


def test_the_detail_screen_explains_the_class_with_its_evidence_and_next_step() -> None:
    text = detail_text(judged(B910, WorkloadClass.INPUT_BOUND, needs_dcmi=()), 0)
    assert re.search(r"Limited by  input-bound  over 9 s \(10 samples\)", text), text
    assert "AI Core 3 %, PID 48211 at 240 % host CPU" in text
    assert re.search(r"AI Core +3%", text) and re.search(r"Job's host CPU +240%", text), text
    assert re.search(r"Job's PID +48211", text), text
    assert re.search(r"AI Core frequency +1342 MHz", text) and re.search(r"Power +372\.4 W", text), text
    assert re.search(r"HBM used +49\.2 GiB", text) and re.search(r"Temperature +84 °C", text), text
    assert "HBM bandwidth" not in text.split("Limited by")[1]  # not read: not evidence
    assert "Next step: Do the next thing about input-bound." in text


def test_the_detail_screen_names_the_likely_owner_of_held_memory() -> None:
    text = detail_text(judged(B910, WorkloadClass.IDLE_HOLDING_HBM))
    owner = re.search(r"Likely owner: (.*)", text)
    assert owner is not None, text
    assert owner.group(1).startswith("PID 48211 · alice · python3 train.py --config llama.yaml · 50337 MiB")
    assert "last seen" in owner.group(1) and "2:05 before this sample" in owner.group(1), owner.group(1)


def test_the_detail_screen_says_throttling_and_what_needs_the_dcmi_backend() -> None:
    npu_smi = judged(
        B910,
        npu0c0=workload(WorkloadClass.WAITING, Throttling.POWER, needs_dcmi=("memory-bound", "aicpu-bound")),
    )
    text = detail_text(npu_smi)
    assert re.search(r"Limited by  waiting  ▼ throttled: power", text), text
    assert "Needs a source that reads HBM bandwidth, AI CPU to tell memory-bound, aicpu-bound." in text


def test_a_chip_not_judged_has_no_workload_section() -> None:
    assert "Limited by" not in detail_text(B910)


def test_evidence_is_shown_in_its_unit() -> None:
    assert evidence_text("aicore_percent", 31.4) == "31%"
    assert evidence_text("hbm_used_mib", 53760.0) == "52.5 GiB"
    assert evidence_text("aicore_freq_mhz", 1342.5) == "1342 MHz"
    assert evidence_text("temperature_c", 84.2) == "84 °C"
    assert evidence_text("power_w", 372.44) == "372.4 W"
    assert evidence_text("rated_power_w", 400.0) == "400 W"
    assert evidence_text("host_cpu_percent", 240.0) == "240%"
    assert evidence_text("pid", 48211) == "48211"
    assert evidence_text("process", "python3") == "python3"
    assert evidence_text("something_new", 2.5) == "2.5"  # a name the views do not know: no unit guessed
    assert evidence_text("aicpu_percent", None) == "n/a"


def test_the_owner_is_said_against_the_snapshots_time() -> None:
    shown = explain(workload(WorkloadClass.IDLE_HOLDING_HBM), FIXED_AT)
    assert shown.owner is not None and shown.owner.endswith("2:05 before this sample"), shown.owner
    assert shown.heading == "idle-holding-hbm"
    assert explain(workload(WorkloadClass.COMPUTE_BOUND), FIXED_AT).owner is None


# --- the text view ------------------------------------------------------------------------------


def test_the_snapshot_table_has_a_workload_column_once_the_chips_are_judged() -> None:
    snapshot = judged(
        B910,
        npu1c0=workload(WorkloadClass.INPUT_BOUND),
        npu2c0=workload(WorkloadClass.COMPUTE_BOUND, Throttling.THERMAL),
    )
    lines = render_snapshot(snapshot).splitlines()
    header = next(line for line in lines if line.startswith("NPU  Chip"))
    assert header.endswith("Temp   Workload"), header
    rows = [line for line in lines if re.match(r"\d +0 ", line)]
    assert rows[0].endswith("compute-bound") and rows[1].endswith("input-bound"), rows
    assert rows[2].endswith("compute-bound · throttled: thermal"), rows


def test_the_snapshot_text_explains_a_chip_held_back_and_not_a_compute_bound_one() -> None:
    snapshot = judged(B910, npu3c0=workload(WorkloadClass.IDLE_HOLDING_HBM, needs_dcmi=("aicpu-bound",)))
    text = render_snapshot(snapshot)
    assert "▲ NPU 3: idle-holding-hbm (over 9 s (10 samples)): 49.2 GiB held, no process" in text, text
    assert "    next step: Do the next thing about idle-holding-hbm." in text
    assert "    likely owner: PID 48211 · alice · python3 train.py --config llama.yaml" in text
    assert "    (needs a source that reads AI CPU to tell aicpu-bound)" in text
    assert "compute-bound (" not in text and "NPU 0:" not in text  # nothing to do about those


def test_a_snapshot_not_judged_prints_the_table_it_always_printed() -> None:
    text = render_snapshot(B910)
    assert "Workload" not in text and "next step" not in text


# --- the dashboard ------------------------------------------------------------------------------


def test_16_dcmi_chips_keep_their_cards_at_160x48_each_with_its_tag() -> None:
    snapshot = judged(with_dcmi_values(A3), npu2c1=workload(WorkloadClass.AICPU_BOUND, Throttling.THERMAL))

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert not app.compact  # the tag takes no line: the cards still fit
        cards = chip_cards(app)
        titles = [card_text(app, card)[0] for card in cards]
        assert all("compute" in title for i, title in enumerate(titles) if i != 5), titles
        assert "AI CPU ▼" in titles[5], titles[5]
        assert all(card.place.height == len(card_text(app, card)) for card in cards)

    drive(snapshot, scenario, (160, 48))


def test_the_one_line_form_at_80x24_shows_every_chips_tag() -> None:
    snapshot = judged(B910, npu4c0=workload(WorkloadClass.INPUT_BOUND))

    async def scenario(app: NpuwatchApp, pilot: Pilot) -> None:
        assert app.compact
        lines = [card_text(app, card)[0] for card in chip_cards(app)]
        assert all(len(line) <= 80 for line in lines)
        assert [line.split()[1:3] for line in lines] == [["910B2", "compute"]] * 4 + [["910B2", "input"]] + [
            ["910B2", "compute"]
        ] * 3, lines

    drive(snapshot, scenario, (80, 24))


# --- the dashboard's cheaper rows ---------------------------------------------------------------


def test_a_card_row_leaves_out_the_detail_metrics_and_draws_the_same_card_and_line() -> None:
    """The dashboard builds a row per chip every second: its cards show the AI Core frequency and
    the extra bars, never the detail metrics (Cube, AI CPU, ECC …), so its rows leave those out."""
    snapshot = judged(with_dcmi_values(A3), npu1c1=workload(WorkloadClass.AICPU_BOUND, Throttling.POWER))
    history = History()
    history.add(snapshot)
    for chip in snapshot.chips:
        full, card = chip_row(chip), chip_row(chip, details=False)
        assert full.details and not card.details
        assert card.extras == tuple(extra for extra in full.extras if extra.kind != "detail")
        for width in (26, 36, 60):
            assert [t.plain for t in card_lines(chip, history, width, True, card)] == [
                t.plain for t in card_lines(chip, history, width, True, full)
            ]
        for width in (80, 160, 200):
            assert compact_line(chip, history, width, True, card) == compact_line(
                chip, history, width, True, full
            )


def test_rows_built_again_show_each_samples_own_extra_values() -> None:
    """The extras of a row without history series are kept per value: a new value is never
    shown with an older one's text, and a kept cell equals one built afresh."""
    from npuwatch.widgets.view_model import cells

    texts = []
    for vector, freq in ((45, 1300), (46, 1300), (45, 1800), (None, 1800)):
        chip = with_dcmi_values(A3, vector_percent=vector, aicore_freq_mhz=freq).chips[0]
        row = chip_row(chip, details=False)
        texts.append({cell.metric: cell.text for cell in row.extras})
        cells._EXTRA_CELLS.clear()
        assert chip_row(chip, details=False).extras == row.extras  # built afresh: the same cells
    assert [t.get("vector_percent") for t in texts] == ["45%", "46%", "45%", None]
    freqs = [t["aicore_freq_mhz"] for t in texts]
    assert freqs == ["1300/1800 MHz", "1300/1800 MHz", "1800/1800 MHz", "1800/1800 MHz"]


def test_every_evidence_name_the_judge_gives_has_a_label_and_unit() -> None:
    from npuwatch.judge.workload import WorkloadJudge
    from npuwatch.model import ChipIdentity, ChipSample, Health, NpuProcess, ProcessHostInfo, Snapshot
    from npuwatch.widgets.view_model import evidence_label

    hot = ChipSample(
        ChipIdentity(0, 0, "910B3"), health=Health.OK, temperature_c=84, power_w=300.0, aicore_percent=3,
        hbm_used_mib=40000, hbm_total_mib=65536, aicore_freq_mhz=1300, aicore_rated_freq_mhz=1800,
    )  # fmt: skip
    busy = NpuProcess(0, 0, 7, "python3", 30000, host=ProcessHostInfo(cpu_percent=380.0))
    names = set()
    # throttled while busy; input-bound; memory held with no process
    for aicore, processes in ((90, (busy,)), (3, (busy,)), (0, ())):
        chip = replace(hot, aicore_percent=aicore)
        snapshot = Snapshot(FIXED_AT, "test", chips=(chip,), processes=processes, chip_source="dcmi")
        workload = WorkloadJudge().judge(snapshot).chips[0].workload
        assert workload is not None
        names |= set(workload.evidence)
    assert {"pid", "process", "idle_hbm_mib", "temperature_limit_c", "rated_power_w"} <= names
    for name in names:
        assert evidence_label(name) != name.replace("_", " ").capitalize(), name
