"""Golden tests for ``npuwatch.probes.npu_smi.kv`` (``npu-smi info -t <type>``).

Expected values were read by hand from the captures in ``tests/data/npu_smi/``.  ``-t memory``
and ``-t ecc`` have no capture: their samples are built from the printf formats of the npu-smi
source (see the module docstring) and the hiascend reference examples.
"""

from __future__ import annotations

from npuwatch.model import Health
from npuwatch.probes.npu_smi import kv as kv
from npuwatch.probes.npu_smi import memory_reports as memory_reports
from npuwatch.probes.npu_smi.kv import parse_key_values
from npuwatch.probes.npu_smi.memory_reports import (
    parse_ecc,
    parse_memory,
    parse_proc_mem,
)
from npuwatch.probes.npu_smi.reports import (
    parse_board,
    parse_common,
    parse_health,
    parse_power,
    parse_temp,
    parse_usages,
)
from npuwatch.probes.values import to_float, to_int
from tests.conftest import capture_text as capture


def tab(text: str) -> str:
    """The sample as npu-smi really prints it: each line indented by one TAB."""
    return "".join(f"\t{line}\n" if line else "\n" for line in text.splitlines())


# ---------------------------------------------------------------- helpers


def test_value_helpers():
    assert to_int("0") == 0
    assert to_int(" 42 ") == 42
    assert to_int("0x19E5") == 0x19E5
    assert to_int("NA") is None
    assert to_int("-") is None
    assert to_int("12abc") is None
    assert to_int(None) is None
    assert to_float("93.4") == 93.4
    assert to_float("0.0") == 0.0
    assert to_float("NA") is None
    assert to_float("nan") is None
    assert kv.split_key_value("   PCIe Bus Info   : 0000:61:00.0") == (
        "PCIe Bus Info",
        "0000:61:00.0",
    )
    assert kv.split_key_value("No process in device.") is None


# ---------------------------------------------------------------- generic goldens


def test_010_board_card_level_no_chip_block_id():
    report = parse_key_values(capture("010_910-board-card-v23.0.5-doc.txt"))
    assert report.npu_id == 0
    assert report.chip_count == 1
    assert report.warnings == ()
    (block,) = report.blocks
    assert block.chip_id is None
    assert not block.is_mcu
    assert list(block.fields)[:3] == ["Software Version", "Firmware Version", "Compatibility"]
    assert block.fields["Class ID"] == "NA"
    assert "NPU ID" not in block.fields


def test_012_chip_id_after_values_and_blank_after_chip_count():
    report = parse_key_values(capture("012_910-usages-v23.0.5-doc.txt"))
    assert (report.npu_id, report.chip_count) == (0, 1)
    (block,) = report.blocks
    assert block.chip_id == 0
    assert block.fields["DDR Capacity(MB)"] == "13553"
    assert len(block.fields) == 11


def test_013_one_space_indent_no_header():
    report = parse_key_values(capture("013_910-health-chip-leadingspace-doc.txt"))
    assert report.npu_id is None
    (block,) = report.blocks
    assert block.chip_id is None
    assert dict(block.fields) == {
        "Health Status": "OK",
        "Error Code": "NA",
        "Error Information": "NA",
    }


def test_017_chip_id_before_values_no_blank_line():
    report = parse_key_values(capture("017_910-common-doc.txt"))
    assert (report.npu_id, report.chip_count) == (0, 1)
    (block,) = report.blocks
    assert block.chip_id == 0
    assert block.fields["Aicore Count"] == "30"


def test_031_mcu_block_without_chip_id():
    report = parse_key_values(capture("031_910b1-common-i1-with-mcu.txt"))
    assert (report.npu_id, report.chip_count) == (1, 1)
    chip, mcu = report.blocks
    assert (chip.chip_id, chip.is_mcu) == (0, False)
    assert chip.fields["Temperature(C)"] == "46"
    assert (mcu.chip_id, mcu.chip_name, mcu.is_mcu) == (None, "mcu", True)
    assert mcu.fields["Temperature(C)"] == "38"
    assert report.chips == (chip,)
    assert report.mcus == (mcu,)


def test_080_mcu_chip_name_after_values():
    report = parse_key_values(capture("080_910b-temp-i0-with-mcu-lm75.txt"))
    chip, mcu = report.blocks
    assert chip.chip_id == 0
    assert dict(chip.fields) == {"NPU Temperature (C)": "39"}
    assert mcu.is_mcu and mcu.chip_name == "MCU"
    assert list(mcu.fields) == ["LM75A_TE (C)", "LM75B_TE (C)", "Chip Name"]


def test_tab_indent_is_read_like_spaces():
    spaces = parse_key_values(capture("031"))
    tabbed = parse_key_values(tab("\n".join(line.strip() for line in capture("031").splitlines())))
    assert tabbed.blocks == spaces.blocks
    assert tabbed.npu_id == spaces.npu_id


def test_two_chips_chip_id_before_values():
    text = tab(
        "NPU ID : 3\nChip Count : 2\n\nChip ID : 0\nAicore Count : 24\nTemperature(C) : 40\n"
        "\nChip ID : 1\nAicore Count : 24\nTemperature(C) : 41\n"
    )
    report = parse_key_values(text)
    assert [(b.chip_id, b.fields["Temperature(C)"]) for b in report.blocks] == [
        (0, "40"),
        (1, "41"),
    ]


def test_chip_id_in_its_own_group_names_the_next_block():
    text = tab("NPU ID : 0\nChip ID : 1\n\nNPU Real-time Power(W) : 88.0\n")
    (block,) = parse_key_values(text).blocks
    assert (block.chip_id, dict(block.fields)) == (1, {"NPU Real-time Power(W)": "88.0"})


def test_repeated_key_without_chip_id_starts_a_block_and_warns():
    report = parse_key_values("Temperature(C) : 40\nTemperature(C) : 41\n")
    assert [b.fields["Temperature(C)"] for b in report.blocks] == ["40", "41"]
    assert report.warnings


def test_garbage_gives_warning_not_exception():
    report = parse_key_values("")
    assert report.blocks == () and report.warnings
    report = parse_key_values("NPU ID : x\n")
    assert report.npu_id is None
    assert any("NPU ID" in warning for warning in report.warnings)


# ---------------------------------------------------------------- board


def test_010_board_card():
    board = parse_board(capture("010"))
    assert board.npu_id == 0
    assert board.chip_id is None
    assert board.software_version == "23.0.5"
    assert board.firmware_version == "7.1.0.7.220"
    assert board.compatibility == "OK"
    assert (board.board_id, board.pcb_id, board.bom_id) == (0x02, "A", 1)
    assert board.pcie_bus_info == "0000:61:00.0"
    assert board.slot_id == 0
    assert board.pci_vendor_id == 0x19E5
    assert board.pci_device_id == 0xD801
    assert board.subsystem_vendor_id == 0x0200
    assert board.subsystem_device_id == 0x0100
    assert board.chip_count == 1
    assert board.product_name is None  # the old format has no Product Name line
    assert board.fields["Class ID"] == "NA"


def test_011_board_chip_dual_die():
    board = parse_board(capture("011"))
    assert (board.npu_id, board.chip_id) == (0, 0)
    assert (board.chip_type, board.chip_name, board.chip_version) == ("Ascend", "xxx", "V1")
    assert board.board_id == 2
    assert board.pcb_id is None  # NA
    assert board.bom_id == 1
    assert board.vdie_id == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert board.ndie_id == "27216594 20401010 4E10C8D4 14CC040A A4102003"
    assert board.die_id is None
    assert board.chip_position_id == 0
    assert board.pcie_bus_info == "0000:61:00.0"
    assert board.firmware_version == "7.1.0.7.220"


def test_065_board_chip_single_die():
    board = parse_board(capture("065"))
    assert (board.npu_id, board.chip_id, board.chip_name) == (1, 0, "xxx")
    assert board.board_id == 0x64
    assert board.die_id == "409921D4 2140A100 E54BDDD4 07CC040A 9B00301F"
    assert board.pcie_bus_info == "0000:81:00.0"
    assert board.firmware_version == "7.1.0.4"


def test_079_board_card_new_format():
    board = parse_board(capture("079"))
    assert board.npu_id == 0
    assert board.product_name == "IT21HMDC_Bin5"
    assert board.model is None  # NA
    assert board.manufacturer == "Huawei"
    assert board.serial_number == "1025C9048791"
    assert board.software_version == "25.5.1"
    assert board.firmware_version == "7.8.0.6.201"
    assert board.board_id == 0x60
    assert board.pcie_bus_info == "0000:C1:00.0"
    assert (board.pci_vendor_id, board.pci_device_id) == (0x19E5, 0xD802)
    assert (board.subsystem_vendor_id, board.subsystem_device_id) == (0x19E5, 0x3003)
    assert board.chip_count == 1


# ---------------------------------------------------------------- usages


def test_012_usages_ddr_and_hbm():
    report = parse_usages(capture("012"))
    assert (report.npu_id, report.chip_count) == (0, 1)
    (chip,) = report.chips
    assert chip.chip_id == 0
    assert chip.ddr_capacity_mib == 13553
    assert chip.ddr_usage_percent == 6
    assert chip.ddr_hugepages_total == 0
    assert chip.ddr_hugepages_usage_percent == 0
    assert chip.hbm_capacity_mib == 32768
    assert chip.hbm_usage_percent == 0
    assert chip.aicore_percent == 0
    assert chip.aivector_percent is None  # no Aivector line on the 910
    assert chip.aicpu_percent == 0
    assert chip.ctrlcpu_percent == 0
    assert chip.ddr_bandwidth_percent == 0
    assert chip.hbm_bandwidth_percent == 0


def test_030_usages_910b_aivector():
    (chip,) = parse_usages(capture("030")).chips
    assert chip.chip_id == 0
    assert chip.ddr_capacity_mib == 0  # a real 0 on the 910B, not "absent"
    assert chip.hbm_capacity_mib == 65536
    assert chip.hbm_usage_percent == 4
    assert chip.aivector_percent == 0
    assert chip.dvpp_vdec_percent is None


def test_063_usages_310p_dvpp():
    report = parse_usages(capture("063"))
    assert report.npu_id == 1
    (chip,) = report.chips
    assert chip.ddr_capacity_mib == 21534
    assert chip.ddr_usage_percent == 4
    assert chip.ctrlcpu_percent == 13
    assert chip.vectorcore_percent == 0
    assert chip.ddr_bandwidth_percent == 51
    assert chip.hbm_capacity_mib is None
    assert (
        chip.dvpp_vdec_percent,
        chip.dvpp_vpc_percent,
        chip.dvpp_venc_percent,
        chip.dvpp_jpege_percent,
        chip.dvpp_jpegd_percent,
    ) == (0, 0, 0, 0, 0)


# ---------------------------------------------------------------- common


def test_017_common():
    report = parse_common(capture("017"))
    (chip,) = report.chips
    assert (chip.npu_id, chip.chip_id) == (0, 0)
    assert chip.memory_usage_percent == 6
    assert chip.hbm_usage_percent == 0
    assert chip.aicore_percent == 0
    assert (chip.aicore_freq_mhz, chip.aicore_current_freq_mhz) == (900, 900)
    assert chip.aicore_count == 30
    assert chip.temperature_c == 41
    assert chip.power_w == 71.7
    assert report.mcu_temperature_c is None


def test_031_common_with_mcu():
    report = parse_common(capture("031"))
    assert (report.npu_id, report.chip_count) == (1, 1)
    (chip,) = report.chips
    assert chip.chip_id == 0
    assert chip.memory_usage_percent == 0
    assert chip.hbm_usage_percent == 4
    assert (chip.aicore_freq_mhz, chip.aicore_current_freq_mhz) == (1800, 800)
    assert chip.aicore_count == 24
    assert chip.temperature_c == 46
    assert chip.power_w == 93.4
    assert report.mcu_temperature_c == 38
    assert report.board_power_w is None
    assert report.warnings == ()


def test_061_common_310p_mcu_carries_board_power():
    report = parse_common(capture("061"))
    (chip,) = report.chips
    assert (chip.npu_id, chip.chip_id) == (1, 0)
    assert chip.memory_usage_percent == 4
    assert chip.hbm_usage_percent is None
    assert (chip.aicore_freq_mhz, chip.aicore_current_freq_mhz) == (1080, 960)
    assert chip.aicore_count is None
    assert chip.temperature_c == 43
    assert chip.power_w is None
    assert report.mcu_temperature_c == 41
    assert report.board_power_w == 13.4


# ---------------------------------------------------------------- health


def test_013_health_ok():
    report = parse_health(capture("013"))
    (chip,) = report.chips
    assert chip.health is Health.OK
    assert chip.error_codes == ()
    assert chip.error_information == ()


def test_health_with_codes_and_continued_information():
    # print_diagnosis_info: codes " %04X" on one line; each further text on a blank-key line.
    text = (
        "\tHealth Status                  : Alarm\n"
        "\tError Code                     : 80E01801 80CB8002\n"
        "\tError Information              : node type=HBM, sensor type=Memory\n"
        "\t                               : node type=PCIE, sensor type=Link\n"
    )
    (chip,) = parse_health(text).chips
    assert chip.health is Health.ALARM
    assert chip.error_codes == ("80E01801", "80CB8002")
    assert chip.error_information == (
        "node type=HBM, sensor type=Memory",
        "node type=PCIE, sensor type=Link",
    )


# ---------------------------------------------------------------- temp, power


def test_080_temp_with_mcu_sensors():
    report = parse_temp(capture("080"))
    assert report.npu_id == 0
    (chip,) = report.chips
    assert (chip.chip_id, chip.temperature_c) == (0, 39)
    assert dict(report.mcu_sensors_c) == {"LM75A_TE": 36, "LM75B_TE": 36}


def test_081_power():
    report = parse_power(capture("081"))
    assert report.npu_id == 0
    (chip,) = report.chips
    assert (chip.chip_id, chip.power_w) == (0, 103.5)
    assert report.mcu_power_w is None


def test_temp_card_spelling_and_na():
    (chip,) = parse_temp("\tTemperature (C)                : NA\n").chips
    assert chip.temperature_c is None


# ---------------------------------------------------------------- memory, ecc


MEMORY_910B = tab(
    "NPU ID                         : 0\n"
    "Chip Count                     : 1\n"
    "Chip ID                        : 0\n"
    "DDR Capacity(MB)               : 0\n"
    "DDR Clock Speed(MHz)           : 0\n"
    "HBM Capacity(MB)               : 65536\n"
    "HBM Clock Speed(MHz)           : 1600\n"
    "HBM Temperature(C)             : 38\n"
    "HBM Manufacturer ID            : 0x57\n"
    "HBM Future Field(x)            : 7\n"
)

MEMORY_310B = (  # hiascend Atlas 200I A2 "查询指定芯片内存信息" example, 8-space indent
    "        Total Capacity(MB)             : 12288\n"
    "        Capacity(MB)                   : 10810\n"
    "        Clock Speed(MHz)               : 2131\n"
)


def test_memory_910b_format():
    report = parse_memory(MEMORY_910B)
    assert report.npu_id == 0
    (chip,) = report.chips
    assert chip.chip_id == 0
    assert (chip.ddr_capacity_mib, chip.ddr_clock_mhz) == (0, 0)
    assert chip.hbm_capacity_mib == 65536
    assert chip.hbm_clock_mhz == 1600
    assert chip.hbm_temperature_c == 38
    assert chip.hbm_manufacturer_id == 0x57
    assert chip.fields["HBM Future Field(x)"] == "7"  # unknown keys are kept


def test_memory_310b_format():
    (chip,) = parse_memory(MEMORY_310B).chips
    assert chip.ddr_total_capacity_mib == 12288
    assert chip.ddr_capacity_mib == 10810
    assert chip.ddr_clock_mhz == 2131
    assert chip.hbm_capacity_mib is None


ECC_910B = tab(
    "HBM Single Bit Error Count               : 3\n"
    "HBM Double Bit Error Count               : 0\n"
    "HBM Single Bit Aggregate Total Err Cnt   : 12\n"
    "HBM Double Bit Aggregate Total Err Cnt   : 0\n"
    "HBM Single Bit Isolated Pages Count      : 1\n"
    "HBM Double Bit Isolated Pages Count      : 0\n"
    "HBM Single Bit Next-Isolated Pages Count : 0\n"
    "HBM Double Bit Next-Isolated Pages Count : 2\n"
)


def test_ecc_910b_hbm():
    (chip,) = parse_ecc(ECC_910B).chips
    assert chip.ddr is None
    assert chip.hbm == memory_reports.EccCounts(3, 0, 12, 0, 1, 0, 0, 2)


def test_ecc_310_ddr_without_prefix():
    text = (
        "        Single-bit Error Count                   : 0\n"
        "        Double-bit Error Count                   : 5\n"
    )
    (chip,) = parse_ecc(text).chips
    assert chip.hbm is None
    assert chip.ddr is not None
    assert (chip.ddr.single_bit_errors, chip.ddr.double_bit_errors) == (0, 5)
    assert chip.ddr.single_bit_isolated_pages is None


# ---------------------------------------------------------------- proc-mem


def test_046_proc_mem():
    report = parse_proc_mem(capture("046"))
    assert report.warnings == ()
    chip0, chip1 = report.chips
    assert (chip0.chip_id, chip0.processes) == (0, ())
    assert chip1.chip_id == 1
    (process,) = chip1.processes
    assert (process.pid, process.name, process.memory_mib) == (3229095, None, 48208)


def test_proc_mem_named_processes():
    text = tab(
        "NPU ID                         : 2\nChip Count                     : 1\n\n"
        "Process id:11 Process name:python3 Process memory(MB):3120\n"
        "Process id:12 Process name:my worker Process memory(MB):NA\n"
        "Chip ID                        : 0\n"
    )
    report = parse_proc_mem(text)
    (chip,) = report.chips
    assert chip.npu_id == 2
    assert [(p.pid, p.name, p.memory_mib) for p in chip.processes] == [
        (11, "python3", 3120),
        (12, "my worker", None),
    ]
