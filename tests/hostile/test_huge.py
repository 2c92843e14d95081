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
        assert bad["metric_status"][metric] == "error"
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
