"""Huge and impossible npu-smi tables (issue 14, defects 16 and 18).

A table of thousands of broken rows gives a bounded list of distinct warnings, not one per
row; physically impossible values (−273 000 °C, −363 W, AI Core 999 %, HBM used above its
total) are never shown or graphed as real: the metric is unavailable with the raw value in
its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from npuwatch.cli import main
from npuwatch.sampler import MAX_WARNINGS
from tests.conftest import CAPTURES

HEAD = "".join(CAPTURES.joinpath("001_910b2-x8-v25.2.0-multiproc.txt").read_text().splitlines(True)[:6])
RULE = "+===========================+===============+====================================================+\n"


def _chip(npu: int, power: str, temp: str, aicore: str, hbm: str) -> str:
    return (
        f"| {npu:<5} 910B2               | OK            | {power:<11} {temp:<17} 0    / 0             |\n"
        f"| 0                         | 0000:C{npu % 10}:00.0  | {aicore:<11} 0    / 0          {hbm:<20}|\n"
        + RULE
    )


def _snapshot_json(path: Path, capsys) -> dict:  # type: ignore[no-untyped-def]
    main(["snapshot", "--json", "--replay", str(path)])
    return json.loads(capsys.readouterr().out)


def test_thousands_of_broken_rows_give_a_bounded_list_of_warnings(tmp_path, capsys):
    first_rows_only = "".join(
        f"| {i:<5} 910B2               | OK            | 90.0        40{' ' * 16}0    / 0             |\n"
        + RULE
        for i in range(3000)
    )
    repeated = "| this row is not a table row at all |\n" * 3000
    path = tmp_path / "huge.txt"
    path.write_text(HEAD + _chip(0, "90.0", "40", "3", "100 / 65536") + first_rows_only + repeated)
    warnings = _snapshot_json(path, capsys)["warnings"]
    assert 1 < len(warnings) <= MAX_WARNINGS
    assert len(set(warnings)) == len(warnings)
    assert warnings[-1].startswith("… and ") and warnings[-1].endswith(" more warnings")
    hidden = int(warnings[-1].split()[2])
    assert hidden + len(warnings) - 1 >= 3000


def test_physically_impossible_values_are_unavailable_with_the_raw_value(tmp_path, capsys):
    path = tmp_path / "impossible.txt"
    path.write_text(
        HEAD
        + _chip(0, "-363.0", "-273000", "999", "99999/ 65536")
        + _chip(1, "103.8", "37", "12", "32639/ 65536")
    )
    doc = _snapshot_json(path, capsys)
    bad, good = doc["chips"]
    for metric, raw in [
        ("power_w", "-363"),
        ("temperature_c", "-273000"),
        ("aicore_percent", "999"),
        ("hbm_used_mib", "99999"),
    ]:
        assert bad[metric] is None, metric
        assert bad["metric_status"][metric] == "implausible"
        assert "implausible" in bad["unavailable"][metric] and raw in bad["unavailable"][metric]
    assert bad["hbm_total_mib"] == 65536
    assert (good["power_w"], good["temperature_c"], good["aicore_percent"], good["hbm_used_mib"]) == (
        103.8,
        37,
        12,
        32639,
    )
    assert any("implausible" in w and "NPU 0" in w for w in doc["warnings"])
    main(["snapshot", "--replay", str(path)])
    text = capsys.readouterr().out
    assert "-273000 °C" not in text.split("Not reported")[0]  # not in the table as a reading
    assert "999%" not in text.split("Not reported")[0]


HUGE = 14_000


def _huge_snapshot():  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from tests.widgets.fakes import capture_snapshot

    base = capture_snapshot("001")
    model = base.chips[0]
    chips = tuple(
        replace(model, identity=replace(model.identity, npu_id=i, bus_id=f"0000:{i % 256:02x}:00.0"))
        for i in range(HUGE)
    )
    return replace(base, chips=chips, processes=())


def test_a_huge_table_paints_and_quits_with_a_bounded_number_of_widgets():
    import asyncio

    from textual.widget import Widget

    from npuwatch.widgets.tui.app import NpuwatchApp
    from npuwatch.widgets.tui.chip_grid import ChipGrid
    from npuwatch.widgets.tui.chip_list import ChipList
    from npuwatch.widgets.tui.detail_screen import DetailScreen
    from tests.widgets.fakes import FakeSampler, wait_for

    app = NpuwatchApp(FakeSampler([_huge_snapshot()], interval_s=3600.0))
    seen = {}

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None, timeout_s=60), "no first sample"
            await pilot.pause()
            seen["cards"] = len(app.query_one(ChipGrid).cards)
            seen["widgets"] = len(list(app.query(Widget)))
            chip_list = app.query_one(ChipList)
            seen["first"] = "".join(segment.text for segment in chip_list.render_line(0))
            await pilot.press("down", "down")
            seen["moved"] = chip_list.cursor
            await pilot.press("end")
            await pilot.pause()
            seen["last"] = chip_list.cursor
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
            seen["detail"] = app.screen.key
            await pilot.press("escape")
            await pilot.press("q")

    asyncio.run(asyncio.wait_for(main(), timeout=120))
    assert app.return_code in (0, None)
    assert seen["cards"] <= 256 and seen["widgets"] < 500, seen
    assert seen["first"].split()[:2] == ["0", "910B2"]
    assert (seen["moved"], seen["last"], seen["detail"]) == (2, HUGE - 1, (HUGE - 1, 0))
