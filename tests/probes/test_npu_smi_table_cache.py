"""``parse_info`` remembers cells, identities and process rows across calls: never a different answer.

The sampler parses a table every tick; the parser keeps what repeats (the NPU/name, health, chip
and Bus-Id cells, each chip's identity, the process rows).  Whatever was parsed before, a text
parses exactly as it does with nothing remembered — warnings (which name line numbers) included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import pytest

from npuwatch.probes.npu_smi import processes, table
from npuwatch.probes.npu_smi.table import InfoTable, parse_info

DATA = Path(__file__).resolve().parents[1] / "data" / "npu_smi"
CAPTURES = sorted(DATA.glob("*.txt"))


def _forget() -> None:
    table._ASSIGNED.clear()
    table._IDENTITIES.clear()
    processes._KNOWN.clear()


def _fresh(text: str) -> InfoTable:
    _forget()
    return parse_info(text)


@pytest.fixture(scope="module")
def texts() -> Dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8", errors="replace") for path in CAPTURES}


def test_every_capture_parses_the_same_after_all_the_others(texts: Dict[str, str]) -> None:
    expected = {name: _fresh(text) for name, text in texts.items()}
    _forget()
    names: List[str] = list(texts)
    for name in names + names[::-1]:  # every capture parsed with every other's cells remembered
        assert parse_info(texts[name]) == expected[name], name


def test_a_damaged_copy_of_a_remembered_table_still_warns(texts: Dict[str, str]) -> None:
    text = texts["001_910b2-x8-v25.2.0-multiproc.txt"]
    _forget()
    good = parse_info(text)
    assert good.warnings == ()
    lines = text.splitlines()
    process_row = next(i for i, line in enumerate(lines) if "python" in line or "Process" in line)
    damaged = "\n".join(["", "", *lines[: process_row + 3]])  # two lines earlier, and cut short
    assert parse_info(damaged) == _fresh(damaged)
    assert parse_info(damaged).warnings


def test_the_caches_stay_bounded() -> None:
    _forget()
    header = (
        "+----------------+\n| npu-smi 24.1.rc1  Version: 24.1.rc1 |\n"
        "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|\n"
        "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |\n"
        "+===+\n"
    )
    for power in range(table._ASSIGNED_MAX + 50):
        text = (
            header + f"| 0     910B3 | OK | {power}.0  40  0 / 0 |\n"
            f"| 0 | 0000:C1:00.0 | 0  0 / 0  {power} / 65536 |\n+===+\n"
        )
        assert parse_info(text).chips[0].power_w == float(power)
    assert len(table._ASSIGNED) <= table._ASSIGNED_MAX
    assert len(table._IDENTITIES) <= table._ASSIGNED_MAX
