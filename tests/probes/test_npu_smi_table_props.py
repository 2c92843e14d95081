"""Property tests for ``parse_info``: random and mutated input never raises, and every chip
it returns keeps the metric contract (a finite number, or ``None`` with a reason)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuwatch.model import CHIP_METRICS, Health
from npuwatch.probes.npu_smi.table import InfoTable, parse_info

DATA = Path(__file__).resolve().parents[1] / "data" / "npu_smi"

TABLE_CAPTURES = (
    "001", "003", "004", "007", "008", "015", "016", "022", "027", "037", "039", "041", "042",
    "043", "044", "049", "051", "052", "082", "088", "089", "091", "092", "093", "100",
)  # fmt: skip


def _load(prefix: str) -> str:
    (path,) = DATA.glob(f"{prefix}_*.txt")
    return path.read_text(encoding="utf-8")


TEXTS = {prefix: _load(prefix) for prefix in TABLE_CAPTURES}

PROPS = settings(
    deadline=None,
    max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Characters that matter to the table grammar, plus a few that should not.
TABLE_ALPHABET = "¹²|+-= \t\n0123456789./:_()%NAOKxX-BCDPUChipNameHealthPowerTempMBWcontainer\r…\x00"


def assert_contract(table: InfoTable) -> None:
    assert isinstance(table, InfoTable)
    assert isinstance(table.warnings, tuple)
    assert all(isinstance(w, str) and w for w in table.warnings)
    if not table.chips:
        assert table.warnings, "no chips must come with a warning"
    for sample in table.chips:
        ident = sample.identity
        assert type(ident.npu_id) is int
        assert type(ident.chip_id) is int
        assert ident.phy_id is None or type(ident.phy_id) is int
        assert ident.device_id is None or type(ident.device_id) is int
        assert ident.name is None or isinstance(ident.name, str)
        assert ident.bus_id is None or isinstance(ident.bus_id, str)
        assert isinstance(sample.health, Health)
        reasons = sample.unavailable()
        for metric in CHIP_METRICS:
            value = getattr(sample, metric)
            if value is None:
                assert reasons.get(metric), f"{ident.key} {metric} is None without a reason"
            else:
                assert isinstance(value, (int, float)), metric
                assert not isinstance(value, bool), metric
                assert math.isfinite(value), f"{ident.key} {metric} = {value!r}"
    for proc in table.processes:
        assert type(proc.npu_id) is int
        assert type(proc.chip_id) is int
        assert type(proc.pid) is int
        assert proc.name is None or isinstance(proc.name, str)
        assert proc.npu_memory_mib is None or type(proc.npu_memory_mib) is int
        assert proc.container_pid is None or type(proc.container_pid) is int
    assert all(type(n) is int for n in table.idle_npus)
    assert isinstance(table.process_table, bool)


# --------------------------------------------------------------------------------------
# random text
# --------------------------------------------------------------------------------------


@PROPS
@given(st.text())
def test_random_text(text: str) -> None:
    assert_contract(parse_info(text))


@PROPS
@given(st.text(alphabet=TABLE_ALPHABET, max_size=600))
def test_random_table_alphabet(text: str) -> None:
    assert_contract(parse_info(text))


@PROPS
@given(
    st.lists(
        st.lists(st.text(alphabet=TABLE_ALPHABET.replace("\n", ""), max_size=30), max_size=6),
        max_size=12,
    )
)
def test_random_rows_of_cells(rows: List[List[str]]) -> None:
    text = "\n".join("|" + "|".join(cells) + "|" for cells in rows)
    assert_contract(parse_info(text))


# --------------------------------------------------------------------------------------
# mutated captures
# --------------------------------------------------------------------------------------

captures = st.sampled_from(TABLE_CAPTURES)


@pytest.mark.parametrize("prefix", TABLE_CAPTURES)
def test_capture_itself_keeps_contract(prefix: str) -> None:
    assert_contract(parse_info(TEXTS[prefix]))


@PROPS
@given(captures, st.data())
def test_lines_dropped(prefix: str, data: st.DataObject) -> None:
    lines = TEXTS[prefix].splitlines()
    drop = data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=len(lines)))
    assert_contract(parse_info("\n".join(line for i, line in enumerate(lines) if i not in drop)))


@PROPS
@given(captures, st.data())
def test_lines_duplicated(prefix: str, data: st.DataObject) -> None:
    lines = TEXTS[prefix].splitlines()
    for _ in range(data.draw(st.integers(1, 5))):
        i = data.draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
    assert_contract(parse_info("\n".join(lines)))


@PROPS
@given(captures, st.data())
def test_lines_swapped(prefix: str, data: st.DataObject) -> None:
    lines = TEXTS[prefix].splitlines()
    for _ in range(data.draw(st.integers(1, 5))):
        i = data.draw(st.integers(0, len(lines) - 1))
        j = data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    assert_contract(parse_info("\n".join(lines)))


@PROPS
@given(captures, st.data())
def test_random_cut(prefix: str, data: st.DataObject) -> None:
    text = TEXTS[prefix]
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    assert_contract(parse_info(text[:end]))
    assert_contract(parse_info(text[start:]))
    assert_contract(parse_info(text[start:end]))


@PROPS
@given(captures, st.data())
def test_random_characters_replaced(prefix: str, data: st.DataObject) -> None:
    chars = list(TEXTS[prefix])
    for _ in range(data.draw(st.integers(1, 40))):
        i = data.draw(st.integers(0, len(chars) - 1))
        chars[i] = data.draw(st.one_of(st.sampled_from(TABLE_ALPHABET), st.characters()))
    assert_contract(parse_info("".join(chars)))


@PROPS
@given(captures, st.data())
def test_pipes_removed(prefix: str, data: st.DataObject) -> None:
    text = TEXTS[prefix]
    positions = [i for i, ch in enumerate(text) if ch == "|"]
    if data.draw(st.booleans()):
        gone = set(positions)
    else:
        gone = data.draw(st.sets(st.sampled_from(positions), min_size=1, max_size=30))
    assert_contract(parse_info("".join(ch for i, ch in enumerate(text) if i not in gone)))


@PROPS
@given(captures, st.data())
def test_spaces_inserted_inside_cells(prefix: str, data: st.DataObject) -> None:
    lines = TEXTS[prefix].splitlines()
    for _ in range(data.draw(st.integers(1, 20))):
        i = data.draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        inner = [k for k in range(1, len(line)) if line[k - 1] != "|" or line[k] == " "]
        if not inner:
            continue
        k = data.draw(st.sampled_from(inner))
        lines[i] = line[:k] + " " * data.draw(st.integers(1, 12)) + line[k:]
    assert_contract(parse_info("\n".join(lines)))


def _summary(table: InfoTable) -> tuple:
    chips = tuple((c.identity, c.health, *(getattr(c, m) for m in CHIP_METRICS)) for c in table.chips)
    procs = tuple(
        (p.npu_id, p.chip_id, p.pid, p.name, p.npu_memory_mib, p.container_pid) for p in table.processes
    )
    return chips, procs, table.idle_npus, table.process_table


@PROPS
@given(captures, st.data())
def test_widths_changed_uniformly(prefix: str, data: st.DataObject) -> None:
    """Widen one padding column on every line (another version's widths): same result."""
    lines = TEXTS[prefix].splitlines()
    shortest = min(len(line) for line in lines)
    padding = [
        col
        for col in range(1, shortest)
        if all(line[col - 1] in " -=" and line[col] in " -=" for line in lines)
    ]
    if not padding:
        return
    col = data.draw(st.sampled_from(padding))
    extra = data.draw(st.integers(1, 8))
    widened = [line[:col] + line[col] * extra + line[col:] for line in lines]
    table = parse_info("\n".join(widened))
    assert_contract(table)
    assert _summary(table) == _summary(parse_info(TEXTS[prefix]))


@PROPS
@given(captures, st.data())
def test_mutations_combined(prefix: str, data: st.DataObject) -> None:
    lines = TEXTS[prefix].splitlines()
    for _ in range(data.draw(st.integers(1, 8))):
        if not lines:
            break
        op = data.draw(st.sampled_from(["drop", "dup", "swap", "char", "pipe", "space", "cut"]))
        i = data.draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, line)
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "char" and line:
            k = data.draw(st.integers(0, len(line) - 1))
            lines[i] = line[:k] + data.draw(st.characters()) + line[k + 1 :]
        elif op == "pipe":
            lines[i] = line.replace("|", "", data.draw(st.integers(1, 3)))
        elif op == "space":
            k = data.draw(st.integers(0, len(line)))
            lines[i] = line[:k] + " " * data.draw(st.integers(1, 6)) + line[k:]
        elif op == "cut":
            k = data.draw(st.integers(0, len(line)))
            lines = [*lines[:i], line[:k]]
    assert_contract(parse_info("\n".join(lines)))
