"""Golden tests for ``npuwatch.probes.npu_smi.lists`` (``info -l``, ``-m``, ``watch``).

Expected values were read by hand from the captures in ``tests/data/npu_smi/``; the 950
``-m`` and newer ``-l`` samples follow the printf formats of the npu-smi source
(``print_mapping_info_950``, ``print_all_info``).
"""

from __future__ import annotations

from npuwatch.probes.npu_smi.lists import parse_list, parse_mapping, parse_watch
from tests.conftest import capture_text as capture

# ---------------------------------------------------------------- info -l


def test_024_list():
    cards = parse_list(capture("024_910b4-x8-list-l.txt"))
    assert cards.total_count == 8
    assert cards.warnings == ()
    assert [card.npu_id for card in cards.cards] == list(range(8))
    assert all(card.chip_count == 1 for card in cards.cards)
    assert all(card.product_name is None for card in cards.cards)


def test_list_newer_driver_lines_are_kept():
    text = (
        "\tTotal Count                    : 2\n\n"
        "\tNPU ID                         : 4\n"
        "\tProduct Name                   : Atlas 300I Duo\n"
        "\tSerial Number                  : 102XYZ\n"
        "\tChip Logic ID                  : 0\n"
        "\tChip Logic ID                  : 1\n"
        "\tChip Count                     : 2\n\n"
        "\tNPU ID                         : 5\n"
        "\tProduct Name                   : \n"
        "\tChip Count                     : 2\n\n"
    )
    cards = parse_list(text)
    first, second = cards.cards
    assert (first.npu_id, first.chip_count) == (4, 2)
    assert first.product_name == "Atlas 300I Duo"
    assert first.serial_number == "102XYZ"
    assert first.chip_logic_ids == (0, 1)
    assert second.product_name is None  # printed blank
    assert cards.warnings == ()


def test_list_count_mismatch_warns():
    cards = parse_list("Total Count : 3\nNPU ID : 0\nChip Count : 1\n")
    assert len(cards.cards) == 1
    assert cards.warnings


# ---------------------------------------------------------------- info -m


def test_023_mapping_names_with_spaces_and_mcu_rows():
    table = parse_mapping(capture("023"))
    assert table.columns == ("NPU ID", "Chip ID", "Chip Logic ID", "Chip Name")
    assert table.warnings == ()
    assert len(table.rows) == 16
    assert [(r.npu_id, r.chip_id, r.chip_logic_id, r.chip_name) for r in table.chips] == [
        (n, 0, n, "Ascend 910B4") for n in range(8)
    ]
    mcu = table.rows[1]
    assert (mcu.npu_id, mcu.chip_id, mcu.chip_logic_id, mcu.chip_name) == (0, 1, None, "Mcu")
    assert mcu.is_mcu
    assert len(table.chips) == 8


def test_045_mapping_a3_phy_id_four_space_indent():
    table = parse_mapping(capture("045"))
    assert "Chip Phy-ID" in table.columns
    got = [(r.npu_id, r.chip_id, r.chip_logic_id, r.chip_phy_id, r.chip_name) for r in table.rows]
    assert got == [
        (0, 0, 0, 0, "Ascend910"),
        (0, 1, 1, 1, "Ascend910"),
        (0, 2, None, None, "Mcu"),
        (1, 0, 2, 2, "Ascend910"),
    ]


def test_059_mapping_310p_redacted():
    table = parse_mapping(capture("059"))
    got = [(r.npu_id, r.chip_id, r.chip_logic_id, r.chip_name, r.is_mcu) for r in table.rows]
    assert got == [(4, 0, 0, "Ascend xxx", False), (4, 1, None, "Mcu", True)]


def test_mapping_950_slot_id():
    pad = "{:<30} " * 4
    text = "\t" + pad.format("NPU ID", "Slot ID", "Chip ID", "Chip Phy-ID") + "Chip Name\n"
    text += "\t" + pad.format(0, 1, 0, 0) + "Ascend950DT\n"
    text += "\t" + pad.format(1, 2, 0, 1) + "Ascend950DT\n"
    table = parse_mapping(text)
    got = [(r.npu_id, r.slot_id, r.chip_id, r.chip_phy_id, r.chip_logic_id) for r in table.rows]
    assert got == [(0, 1, 0, 0, None), (1, 2, 0, 1, None)]
    assert table.rows[0].chip_name == "Ascend950DT"


def test_mapping_without_header_warns_and_reads():
    table = parse_mapping("0   0   0   Ascend 910B4\n")
    (row,) = table.rows
    assert (row.npu_id, row.chip_logic_id, row.chip_name) == (0, 0, "Ascend 910B4")
    assert table.warnings


# ---------------------------------------------------------------- watch


def test_054_watch_stream():
    stream = parse_watch(capture("054"))
    assert stream.columns == (
        "NpuID(Idx)",
        "ChipId(Idx)",
        "Pwr(W)",
        "Temp(C)",
        "AI Core(%)",
        "AI Cpu(%)",
        "Ctrl Cpu(%)",
        "Memory(%)",
        "Memory BW(%)",
    )
    assert stream.warnings == ()
    assert len(stream.rows) == 31
    first = stream.rows[0]
    assert (first.npu_id, first.chip_id, first.power_w, first.temperature_c) == (2, 0, 90.1, 34)
    assert (first.aicore_percent, first.aicpu_percent, first.ctrlcpu_percent) == (0, 0, 2)
    assert (first.memory_percent, first.memory_bandwidth_percent) == (5, 0)
    assert first.npu_util_percent is None and first.aicube_percent is None
    assert stream.rows[10].ctrlcpu_percent == 16
    assert stream.rows[20].power_w == 100.1  # fills its 12-wide column minus the padding
    assert stream.rows[21].temperature_c == 35
    assert not any(row.truncated for row in stream.rows)


def test_055_watch_950_no_chip_column():
    stream = parse_watch(capture("055"))
    assert stream.columns[-2:] == ("NPU Util(%)", "AI Cube(%)")
    assert "ChipId(Idx)" not in stream.columns
    assert [row.npu_id for row in stream.rows] == list(range(8))
    first, last = stream.rows[0], stream.rows[-1]
    assert first.chip_id is None
    assert (first.power_w, first.temperature_c, first.ctrlcpu_percent) == (290.4, 51, 16)
    assert (first.memory_percent, first.npu_util_percent, first.aicube_percent) == (3, 0, 0)
    assert (last.npu_id, last.power_w, last.temperature_c, last.ctrlcpu_percent) == (
        7,
        289.3,
        51,
        14,
    )
    assert last.aicube_percent == 0


def test_watch_repeated_header_and_cut_row():
    text = capture("054")
    header = text.splitlines(keepends=True)[0]
    body = text.splitlines(keepends=True)[1:4]
    stream_text = header + "".join(body) + header + body[0][:40]
    stream = parse_watch(stream_text)
    assert len(stream.rows) == 4
    cut = stream.rows[-1]
    assert cut.truncated
    assert (cut.npu_id, cut.chip_id, cut.power_w) == (2, 0, 90.1)
    assert cut.temperature_c is None  # "34" may have been cut, so it is dropped
    assert stream.warnings


def test_watch_na_and_dash_values():
    text = (
        "NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)  \n"
        "4           1           -           NA          0           \n"
    )
    (row,) = parse_watch(text).rows
    assert (row.npu_id, row.chip_id, row.power_w, row.temperature_c) == (4, 1, None, None)
    assert row.aicore_percent == 0
