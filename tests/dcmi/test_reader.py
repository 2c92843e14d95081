"""The DCMI reader against a small fake made in Python (a CDLL's call surface writing through ctypes)."""

from __future__ import annotations

import collections
import ctypes
import pickle
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from npuwatch.probes.dcmi import abi
from npuwatch.probes.dcmi.library import KIND_PYTHON, DcmiLibrary
from npuwatch.probes.dcmi.reader import Reader
from npuwatch.probes.dcmi.records import (
    INVALID_VALUE,
    SYMBOL_MISSING,
    ChipRef,
    ChipTick,
    ErrorCodeRecord,
    ProcessRecord,
)

NOT_SUPPORT = abi.NOT_SUPPORT
ERROR_TEXTS = {0x80E01801: "HBM multi-bit ECC error", 0x80CB8009: "link down"}


class EccInfo36(ctypes.Structure):
    """A newer library's ``dcmi_ecc_info``: the 28-byte structure plus two counters (36 bytes)."""

    _fields_ = [*abi.EccInfo._fields_, ("extra_a", ctypes.c_uint), ("extra_b", ctypes.c_uint)]


@dataclass
class FakeChip:
    """One chip of the fake; ``fail`` forces a code per function (``"util:2"``, ``"power"`` …)."""

    device: int
    logic: int
    phy: int
    name: str = "910B3"
    bdf: Tuple[int, int, int, int] = (0, 0xC1, 0, 0)
    health: int = 0
    temperature: int = 45
    power_tenths: int = 1624
    utils: Dict[int, int] = field(default_factory=lambda: {2: 30, 3: 4, 4: 7, 10: 12, 12: 25})
    hbm: Optional[Tuple[int, int, int, int]] = (65536, 3432, 41, 12)  # size, usage MB, temp, bandwidth %
    memory_v3: Optional[Tuple[int, int, int, int]] = (0, 0, 0, 0)  # size, available MB, hp total, hp free
    memory_v2: Optional[Tuple[int, int]] = None  # size MB, utilisation %
    freq_current: int = 1650
    freq_max: int = 1800
    voltage: int = 87  # 0.01 V
    ecc: Tuple[int, ...] = (1, 2, 0, 5, 0, 1, 1)
    ecc_bytes: int = 28
    processes: Sequence[Tuple[int, int]] = ((4242, 2 * 1024**3),)
    errors: Sequence[int] = ()
    die: Tuple[int, ...] = (0x1A2B, 0x3C4D, 0, 7, 0xFFFFFFFF)
    unit: int = abi.UNIT_NPU
    fail: Dict[str, int] = field(default_factory=dict)


class PyFake:
    """Just enough of ``libdcmi.so``: functions with the C names, counting calls, checking buffers."""

    def __init__(self, cards: Dict[int, List[FakeChip]], mcu: Optional[Dict[int, int]] = None) -> None:
        self.cards = cards
        self.mcu = mcu or {}  # card → MCU device ID (listed in the card's range when below the count)
        self.mcu_power: Dict[int, int] = {}
        self.calls: collections.Counter[str] = collections.Counter()
        self.args: List[Tuple[str, Tuple[object, ...]]] = []
        self.overflows: List[str] = []
        self.init_code = 0

    # --- plumbing ---
    def _enter(self, name: str, *args: object) -> None:
        self.calls[name] += 1
        self.args.append((name, args))

    def _chip(self, card: int, device: int) -> Optional[FakeChip]:
        return next((c for c in self.cards.get(card, []) if c.device == device), None)

    def _put(self, name: str, buffer: object, struct: ctypes.Structure) -> None:
        size = ctypes.sizeof(struct)
        if ctypes.sizeof(buffer) < size:  # type: ignore[arg-type]
            self.overflows.append(name)
            return
        ctypes.memmove(buffer, ctypes.addressof(struct), size)

    def _forced(self, chip: FakeChip, what: str) -> int:
        return chip.fail.get(what, 0)

    # --- enumeration ---
    def dcmi_init(self) -> int:
        self._enter("dcmi_init")
        return self.init_code

    def dcmi_get_dcmi_version(self, buffer, length) -> int:
        self._enter("dcmi_get_dcmi_version")
        ctypes.memmove(buffer, b"6.0.0\0", 6)
        return 0

    def dcmi_get_driver_version(self, buffer, length) -> int:
        self._enter("dcmi_get_driver_version")
        ctypes.memmove(buffer, b"24.1.rc2\0", 9)
        return 0

    def dcmi_get_card_list(self, count, cards, length) -> int:
        self._enter("dcmi_get_card_list")
        count[0] = len(self.cards)
        for index, card in enumerate(self.cards):
            cards[index] = card
        return 0

    def dcmi_get_card_num_list(self, count, cards, length) -> int:
        self._enter("dcmi_get_card_num_list")
        count[0] = len(self.cards)
        for index, card in enumerate(self.cards):
            cards[index] = card
        return 0

    def _count(self, card: int) -> int:
        listed = len(self.cards[card])
        mcu = self.mcu.get(card, -1)
        return listed + 1 if 0 <= mcu <= listed else listed

    def dcmi_get_device_id_in_card(self, card, most, mcu, cpu) -> int:
        self._enter("dcmi_get_device_id_in_card", card)
        most[0] = self._count(card)
        mcu[0] = self.mcu.get(card, -1)
        cpu[0] = -1
        return 0

    def dcmi_get_device_num_in_card(self, card, count) -> int:
        self._enter("dcmi_get_device_num_in_card", card)
        count[0] = self._count(card)
        return 0

    def dcmi_get_device_type(self, card, device, unit) -> int:
        self._enter("dcmi_get_device_type", card, device)
        chip = self._chip(card, device)
        unit[0] = chip.unit if chip else abi.UNIT_MCU
        return 0

    def dcmi_get_device_logic_id(self, logic, card, device) -> int:
        self._enter("dcmi_get_device_logic_id", card, device)
        chip = self._chip(card, device)
        if chip is None:
            return abi.INVALID_PARAMETER - 6  # -8007
        logic[0] = chip.logic
        return 0

    def dcmi_get_device_phyid_from_logicid(self, logic, phy) -> int:
        self._enter("dcmi_get_device_phyid_from_logicid", logic)
        for chips in self.cards.values():
            for chip in chips:
                if chip.logic == logic:
                    phy[0] = chip.phy
                    return 0
        return abi.INVALID_PARAMETER

    def dcmi_get_device_chip_info_v2(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_chip_info_v2", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        info = abi.ChipInfoV2()
        ctypes.memmove(info.chip_type, b"Ascend", 6)
        ctypes.memmove(info.chip_name, chip.name.encode(), len(chip.name))
        ctypes.memmove(info.chip_ver, b"V1", 2)
        ctypes.memmove(info.npu_name, b"npu-" + chip.name.encode(), 4 + len(chip.name))
        info.aicore_cnt = 20
        self._put("chip_info_v2", buffer, info)
        return 0

    def dcmi_get_device_chip_info(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_chip_info", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        info = abi.ChipInfo()
        ctypes.memmove(info.chip_name, chip.name.encode(), len(chip.name))
        info.aicore_cnt = 8
        self._put("chip_info", buffer, info)
        return 0

    def dcmi_get_device_pcie_info_v2(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_pcie_info_v2", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        info = abi.PcieInfoAll(venderid=0x19E5, deviceid=0xD802)
        info.domain, info.bdf_busid, info.bdf_deviceid, info.bdf_funcid = chip.bdf
        self._put("pcie_info_v2", buffer, info)
        return 0

    def dcmi_get_device_board_info(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_board_info", card, device)
        self._put("board_info", buffer, abi.BoardInfo(board_id=0x64, pcb_id=1, bom_id=2, slot_id=card))
        return 0

    def dcmi_get_device_die_v2(self, card, device, kind, buffer) -> int:
        self._enter("dcmi_get_device_die_v2", card, device, kind)
        chip = self._chip(card, device)
        assert chip is not None and kind == abi.DIE_VDIE
        die = abi.DieId()
        for index, word in enumerate(chip.die):
            die.soc_die[index] = word
        self._put("die_v2", buffer, die)
        return 0

    def dcmi_get_product_type(self, card, device, buffer, length) -> int:
        self._enter("dcmi_get_product_type", card, device)
        ctypes.memmove(buffer, b"Atlas 800T A2\0", 14)
        return 0

    # --- live values ---
    def dcmi_get_device_health(self, card, device, health) -> int:
        self._enter("dcmi_get_device_health", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        health[0] = chip.health
        return self._forced(chip, "health")

    def dcmi_get_device_temperature(self, card, device, temperature) -> int:
        self._enter("dcmi_get_device_temperature", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        temperature[0] = chip.temperature
        return self._forced(chip, "temperature")

    def dcmi_get_device_power_info(self, card, device, power) -> int:
        self._enter("dcmi_get_device_power_info", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        power[0] = chip.power_tenths
        return self._forced(chip, "power")

    def dcmi_mcu_get_power_info(self, card, power) -> int:
        self._enter("dcmi_mcu_get_power_info", card)
        if card not in self.mcu_power:
            return NOT_SUPPORT
        power[0] = self.mcu_power[card]
        return 0

    def dcmi_get_device_voltage(self, card, device, voltage) -> int:
        self._enter("dcmi_get_device_voltage", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        voltage[0] = chip.voltage
        return self._forced(chip, "voltage")

    def dcmi_get_device_frequency(self, card, device, kind, frequency) -> int:
        self._enter(f"dcmi_get_device_frequency:{kind}", card, device)
        self.calls["dcmi_get_device_frequency"] += 1
        chip = self._chip(card, device)
        assert chip is not None
        frequency[0] = chip.freq_current if kind == abi.FREQ_AICORE_CURRENT else chip.freq_max
        return self._forced(chip, f"freq:{kind}")

    def dcmi_get_device_utilization_rate(self, card, device, kind, rate) -> int:
        self._enter(f"dcmi_get_device_utilization_rate:{kind}", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        if kind not in chip.utils:
            return NOT_SUPPORT
        rate[0] = chip.utils[kind]
        return self._forced(chip, f"util:{kind}")

    def dcmi_get_device_hbm_info(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_hbm_info", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        if chip.hbm is None:
            return NOT_SUPPORT
        size, usage, temp, bandwidth = chip.hbm
        info = abi.HbmInfo(memory_size=size, freq=1600, memory_usage=usage, temp=temp)
        info.bandwith_util_rate = bandwidth
        self._put("hbm_info", buffer, info)
        return self._forced(chip, "hbm_info")

    def dcmi_get_device_memory_info_v3(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_memory_info_v3", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        if chip.memory_v3 is None:
            return NOT_SUPPORT
        size, available, total, free = chip.memory_v3
        info = abi.MemoryInfoV3(memory_size=size, memory_available=available, freq=0, hugepagesize=2048)
        info.hugepages_total, info.hugepages_free, info.utiliza = total, free, 0
        self._put("memory_info_v3", buffer, info)
        return 0

    def dcmi_get_device_memory_info_v2(self, card, device, buffer) -> int:
        self._enter("dcmi_get_device_memory_info_v2", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        if chip.memory_v2 is None:
            return NOT_SUPPORT
        size, utilisation = chip.memory_v2
        self._put("memory_info_v2", buffer, abi.MemoryInfoV2(memory_size=size, freq=0, utiliza=utilisation))
        return 0

    def dcmi_get_device_ecc_info(self, card, device, kind, buffer) -> int:
        self._enter("dcmi_get_device_ecc_info", card, device, kind)
        chip = self._chip(card, device)
        assert chip is not None and kind == abi.ECC_HBM
        info = EccInfo36(*chip.ecc, 0xDEAD, 0xBEEF) if chip.ecc_bytes == 36 else abi.EccInfo(*chip.ecc)
        self._put("ecc_info", buffer, info)
        return self._forced(chip, "ecc")

    def dcmi_get_device_resource_info(self, card, device, buffer, count) -> int:
        self._enter("dcmi_get_device_resource_info", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        rows = (abi.ProcMemInfo * max(1, len(chip.processes)))()
        for index, (pid, memory) in enumerate(chip.processes):
            rows[index].proc_id, rows[index].proc_mem_usage = pid, memory
        if chip.processes:
            self._put("resource_info", buffer, rows)
        count[0] = len(chip.processes)
        return self._forced(chip, "processes")

    def dcmi_get_device_errorcode_v2(self, card, device, count, codes, length) -> int:
        self._enter("dcmi_get_device_errorcode_v2", card, device)
        chip = self._chip(card, device)
        assert chip is not None
        count[0] = len(chip.errors)
        for index, code in enumerate(chip.errors[:length]):
            codes[index] = code
        return self._forced(chip, "errors")

    def dcmi_get_device_errorcode_string(self, card, device, code, buffer, length) -> int:
        self._enter("dcmi_get_device_errorcode_string", card, device, code)
        text = ERROR_TEXTS.get(code)
        if text is None:
            return abi.INVALID_PARAMETER
        data = text.encode() + b"\0"
        ctypes.memmove(buffer, data, min(len(data), length))
        return 0


class Without:
    """The fake without some functions (a library built without them: ``getattr`` fails)."""

    def __init__(self, fake: PyFake, *names: str) -> None:
        self._fake, self._names = fake, set(names)

    def __getattr__(self, name: str) -> object:
        if name in self._names:
            raise AttributeError(name)
        return getattr(self._fake, name)


def reader_for(fake: object) -> Reader:
    return Reader(DcmiLibrary(fake, "python:test-fake", KIND_PYTHON))


def one_910b(**overrides: object) -> PyFake:
    return PyFake({0: [FakeChip(0, 0, 0, **overrides)]})  # type: ignore[arg-type]


def ticked(fake: object, times: int = 1) -> Tuple[ChipTick, ...]:
    reader = reader_for(fake)
    chips = reader.inventory().chips
    result: Tuple[ChipTick, ...] = ()
    for _ in range(times):
        result = reader.tick(chips)
    return result


# --- enumeration ---------------------------------------------------------------------------------


def test_init_is_called_once_and_its_code_kept():
    fake = one_910b()
    fake.init_code = abi.OPER_NOT_PERMITTED
    reader = reader_for(fake)
    assert reader.init() == abi.OPER_NOT_PERMITTED
    assert reader.init() == abi.OPER_NOT_PERMITTED
    assert fake.calls["dcmi_init"] == 1


def test_inventory_of_a_910b_reads_versions_ids_and_slow_facts():
    fake = PyFake({0: [FakeChip(0, 0, 0, bdf=(0, 0xC1, 0, 0))], 1: [FakeChip(0, 1, 1, bdf=(0, 0x01, 0, 0))]})
    inventory = reader_for(fake).inventory()
    assert (inventory.dcmi_version, inventory.driver_version) == ("6.0.0", "24.1.rc2")
    assert [facts.ref for facts in inventory.chips] == [ChipRef(0, 0, 0, 0), ChipRef(1, 0, 1, 1)]
    first = inventory.chips[0]
    assert first.chip_name == "910B3"
    assert first.chip_type == "Ascend"
    assert first.chip_version == "V1"
    assert first.npu_name == "npu-910B3"
    assert first.aicore_count == 20
    assert first.bus_id == "0000:c1:00.0"  # sysfs spelling, lower case
    assert first.pci_device_id == 0xD802
    assert first.board_id == 0x64
    assert first.vdie_id == "00001A2B-00003C4D-00000000-00000007-FFFFFFFF"
    assert first.product_type == "Atlas 800T A2"
    assert first.aicore_rated_freq_mhz == 1800
    assert first.codes == {}
    assert inventory.codes == {}
    assert inventory.skipped_units == 0
    assert fake.overflows == []


def test_non_contiguous_card_ids_are_used_as_the_library_lists_them():
    fake = PyFake({2: [FakeChip(0, 0, 0)], 5: [FakeChip(0, 1, 1)]})
    reader = reader_for(fake)
    chips = reader.inventory().chips
    assert [facts.ref.card_id for facts in chips] == [2, 5]
    reader.tick(chips)
    asked = {args[0] for name, args in fake.args if name == "dcmi_get_device_temperature"}
    assert asked == {2, 5}  # never the loop index 0, 1 (nvtop's bug)


def test_the_mcu_and_other_non_npu_units_are_skipped():
    fake = PyFake(
        {2: [FakeChip(0, 0, 0, name="310P3"), FakeChip(1, 1, 1, name="310P3")]},
        mcu={2: 2},  # the card lists 3 devices: chips 0, 1 and the MCU at 2
    )
    inventory = reader_for(fake).inventory()
    assert [facts.ref.device_id for facts in inventory.chips] == [0, 1]
    assert inventory.skipped_units == 1
    assert ("dcmi_get_device_logic_id", (2, 2)) not in fake.args


def test_a_unit_whose_type_is_not_npu_is_skipped_even_without_an_mcu_id():
    fake = PyFake({0: [FakeChip(0, 0, 0), FakeChip(1, 9, 9, unit=abi.UNIT_CPU)]})
    inventory = reader_for(fake).inventory()
    assert [facts.ref.device_id for facts in inventory.chips] == [0]
    assert inventory.skipped_units == 1


def test_older_enumeration_functions_are_used_when_the_newer_are_missing():
    fake = PyFake({3: [FakeChip(0, 0, 0), FakeChip(1, 1, 1)]})
    lacking = Without(
        fake, "dcmi_get_card_list", "dcmi_get_device_id_in_card", "dcmi_get_device_chip_info_v2"
    )
    inventory = reader_for(lacking).inventory()
    assert [facts.ref for facts in inventory.chips] == [ChipRef(3, 0, 0, 0), ChipRef(3, 1, 1, 1)]
    assert fake.calls["dcmi_get_card_num_list"] == 1
    assert fake.calls["dcmi_get_device_num_in_card"] == 1
    assert inventory.chips[0].chip_name == "910B3"
    assert inventory.chips[0].npu_name is None  # chip_info (v1) has no npu_name
    assert inventory.chips[0].aicore_count == 8
    assert inventory.chips[0].codes == {}


def test_a_library_without_enumeration_says_why_and_lists_nothing():
    fake = one_910b()
    inventory = reader_for(Without(fake, "dcmi_get_card_list", "dcmi_get_card_num_list")).inventory()
    assert inventory.chips == ()
    assert inventory.codes == {"card_list": SYMBOL_MISSING}


class _GarbledCards(PyFake):
    """A fake whose card list holds a negative ID among real ones, and whose card 5 counts 255
    devices (docs/plausible-ranges.md: at most 4 chips a card, plus its MCU and CPU)."""

    def dcmi_get_card_list(self, count, cards, length) -> int:
        count[0] = 3
        cards[0], cards[1], cards[2] = 0, -1, 5
        return 0

    def dcmi_get_device_id_in_card(self, card, most, mcu, cpu) -> int:
        most[0] = 255 if card == 5 else self._count(card)
        mcu[0] = cpu[0] = -1
        return 0


def test_impossible_card_ids_and_device_counts_list_no_chip_and_say_so():
    fake = _GarbledCards({0: [FakeChip(0, 0, 0)], 5: [FakeChip(5, 0, 1)]})  # type: ignore[arg-type]
    inventory = reader_for(fake).inventory()
    assert [facts.ref.card_id for facts in inventory.chips] == [0]  # the real card keeps its chip
    assert inventory.codes == {"card_list": INVALID_VALUE}  # the negative ID
    assert inventory.card_codes == {5: INVALID_VALUE}  # 255 devices: none believed


@pytest.mark.parametrize("count", [-1, abi.MAX_CARDS + 1, 0x7FFFFFFF])
def test_a_card_count_outside_the_list_is_no_count_at_all(count):
    class Counted(PyFake):
        def dcmi_get_card_list(self, found, cards, length) -> int:
            found[0] = count
            cards[0] = 0
            return 0

    inventory = reader_for(Counted({0: [FakeChip(0, 0, 0)]})).inventory()  # type: ignore[arg-type]
    assert inventory.chips == ()
    assert inventory.codes == {"card_list": INVALID_VALUE}


# --- one tick ------------------------------------------------------------------------------------


def test_a_910b_tick_has_every_value_in_npuwatch_units():
    fake = one_910b(errors=(0x80E01801,), processes=((4242, 2 * 1024**3), (77, 512)))
    (tick,) = ticked(fake)
    assert tick.health == 0
    assert dict(tick.values) == {
        "temperature_c": 45,
        "power_w": 162.4,
        "aicore_percent": 30,
        "vector_percent": 25,
        "aicpu_percent": 4,
        "ctrlcpu_percent": 7,
        "hbm_used_mib": 3432,
        "hbm_total_mib": 65536,
        "hbm_temperature_c": 41,
        "hbm_bandwidth_percent": 12,
        "memory_used_mib": 0,
        "memory_total_mib": 0,
        "hugepages_used": 0,
        "hugepages_total": 0,
        "aicore_freq_mhz": 1650,
        "voltage_v": 0.87,
        "ecc_single_bit_errors": 2,
        "ecc_double_bit_errors": 0,
        "ecc_isolated_pages": 2,
    }
    assert dict(tick.codes) == {"npu_util_percent": NOT_SUPPORT, "cube_percent": NOT_SUPPORT}
    assert tick.processes == (ProcessRecord(4242, 2 * 1024**3), ProcessRecord(77, 512))
    assert tick.error_codes == (ErrorCodeRecord(0x80E01801, "HBM multi-bit ECC error"),)
    assert tick.board_power is False
    assert fake.overflows == []


def test_hbm_bandwidth_comes_from_hbm_info_without_asking_utilisation_10():
    fake = one_910b()
    ticked(fake, times=3)
    assert fake.calls["dcmi_get_device_hbm_info"] == 3
    assert fake.calls["dcmi_get_device_utilization_rate:10"] == 0


def test_a_950_reads_npu_and_cube_utilisation():
    fake = one_910b(name="Ascend950DT", utils={2: 60, 3: 1, 4: 2, 12: 40, 13: 55, 14: 70})
    (tick,) = ticked(fake)
    assert tick.values["npu_util_percent"] == 55
    assert tick.values["cube_percent"] == 70
    assert tick.values["vector_percent"] == 40
    assert "npu_util_percent" not in tick.codes
    assert "cube_percent" not in tick.codes


def test_a3_chip_1_power_unsupported_stays_absent_and_the_mcu_is_not_asked():
    fake = PyFake(
        {
            0: [
                FakeChip(0, 0, 0, name="Ascend910"),
                FakeChip(1, 1, 1, name="Ascend910", fail={"power": NOT_SUPPORT}),
            ],
        }
    )
    fake.mcu_power[0] = 999  # there, but an A3 has its card power on chip 0 already
    first, second = ticked(fake)
    assert first.values["power_w"] == 162.4
    assert first.board_power is False
    assert "power_w" not in second.values
    assert second.codes["power_w"] == NOT_SUPPORT
    assert second.board_power is False
    assert fake.calls["dcmi_mcu_get_power_info"] == 0


def test_310p_duo_board_power_through_the_mcu_on_chip_0_and_ddr_memory():
    duo = {"power": NOT_SUPPORT}
    chips = [
        FakeChip(
            0, 0, 0, name="310P3", hbm=None, memory_v3=(21527, 19000, 10, 4), fail=dict(duo), utils={2: 33}
        ),
        FakeChip(
            1, 1, 1, name="310P3", hbm=None, memory_v3=(21527, 21000, 0, 0), fail=dict(duo), utils={2: 0}
        ),
    ]
    fake = PyFake({2: chips}, mcu={2: 2})
    fake.mcu_power[2] = 723
    first, second = ticked(fake)
    assert first.values["power_w"] == 72.3
    assert first.board_power is True
    assert "power_w" not in second.values
    assert second.codes["power_w"] == NOT_SUPPORT
    assert (first.values["memory_used_mib"], first.values["memory_total_mib"]) == (2527, 21527)
    assert (first.values["hugepages_used"], first.values["hugepages_total"]) == (6, 10)
    assert (second.values["memory_used_mib"], second.values["memory_total_mib"]) == (527, 21527)
    for name in ("hbm_used_mib", "hbm_total_mib", "hbm_temperature_c", "hbm_bandwidth_percent"):
        assert first.codes[name] == NOT_SUPPORT
        assert name not in first.values
    assert fake.calls["dcmi_mcu_get_power_info"] == 1


def test_memory_falls_back_to_v2_when_v3_is_missing_or_unsupported():
    fake = one_910b(hbm=None, memory_v3=None, memory_v2=(8192, 25))
    (tick,) = ticked(fake)
    assert (tick.values["memory_used_mib"], tick.values["memory_total_mib"]) == (2048, 8192)
    assert tick.codes["hugepages_used"] == tick.codes["hugepages_total"] == NOT_SUPPORT
    missing = one_910b(hbm=None, memory_v3=(1, 1, 1, 1), memory_v2=(4000, 50))
    (tick,) = ticked(Without(missing, "dcmi_get_device_memory_info_v3"))
    assert (tick.values["memory_used_mib"], tick.values["memory_total_mib"]) == (2000, 4000)
    assert tick.codes["hugepages_total"] == SYMBOL_MISSING


def test_a_missing_symbol_turns_one_capability_off():
    fake = one_910b()
    lacking = Without(fake, "dcmi_get_device_voltage")
    library = DcmiLibrary(lacking, "python:test-fake", KIND_PYTHON)
    assert not library.has("dcmi_get_device_voltage")
    assert library.has("dcmi_get_device_temperature")
    assert library.missing == ("dcmi_get_device_voltage",)
    (tick,) = ticked(lacking)
    assert tick.codes["voltage_v"] == SYMBOL_MISSING
    assert "voltage_v" not in tick.values
    assert tick.values["temperature_c"] == 45
    assert fake.calls["dcmi_get_device_voltage"] == 0


def test_not_supported_is_sticky_per_chip_and_function():
    fake = PyFake(
        {0: [FakeChip(0, 0, 0, fail={"voltage": NOT_SUPPORT}), FakeChip(1, 1, 1, fail={"ecc": -8013})]}
    )
    ticks = ticked(fake, times=4)
    asked = [args[:2] for name, args in fake.args if name == "dcmi_get_device_voltage"]
    assert asked.count((0, 0)) == 1  # asked once, never again for chip 0 …
    assert asked.count((0, 1)) == 4  # … while chip 1 is asked every tick
    ecc_asked = [args[:2] for name, args in fake.args if name == "dcmi_get_device_ecc_info"]
    assert ecc_asked.count((0, 1)) == 1
    assert ticks[0].codes["voltage_v"] == NOT_SUPPORT  # and the code is still reported
    assert ticks[1].codes["ecc_single_bit_errors"] == -8013
    assert fake.calls["dcmi_get_device_utilization_rate:13"] == 2  # unsupported on both: once each


def test_transient_codes_back_off_and_recover():
    chip = FakeChip(0, 0, 0, fail={"temperature": abi.NOT_READY})
    fake = PyFake({0: [chip]})
    reader = reader_for(fake)
    chips = reader.inventory().chips
    called_at: List[int] = []
    for tick_no in range(1, 10):
        before = fake.calls["dcmi_get_device_temperature"]
        (tick,) = reader.tick(chips)
        assert tick.codes["temperature_c"] == abi.NOT_READY  # skipped ticks still say why
        if fake.calls["dcmi_get_device_temperature"] > before:
            called_at.append(tick_no)
    assert called_at == [1, 2, 4, 8]  # skips 0, 1, 3 ticks after 1, 2, 3 failures
    chip.fail.clear()
    while fake.calls["dcmi_get_device_temperature"] == 4:
        (tick,) = reader.tick(chips)
    assert tick.values["temperature_c"] == 45
    (tick,) = reader.tick(chips)
    assert tick.values["temperature_c"] == 45
    assert fake.calls["dcmi_get_device_temperature"] == 6  # a success ends the back-off


def test_device_errors_are_reported_and_asked_again_every_tick():
    fake = one_910b(fail={"power": abi.INNER_ERR})
    ticks = ticked(fake, times=3)
    assert ticks[0].codes["power_w"] == abi.INNER_ERR
    assert fake.calls["dcmi_get_device_power_info"] == 3
    assert fake.calls["dcmi_mcu_get_power_info"] == 0


def test_impossible_values_are_failures_with_their_own_code():
    fake = one_910b(temperature=-300, utils={2: 150, 3: 4, 4: 7, 12: 25}, voltage=2**31)
    (tick,) = ticked(fake)
    assert tick.codes["temperature_c"] == INVALID_VALUE
    assert tick.codes["aicore_percent"] == INVALID_VALUE
    assert tick.codes["voltage_v"] == INVALID_VALUE
    for name in ("temperature_c", "aicore_percent", "voltage_v"):
        assert name not in tick.values


def test_an_absent_chip_is_asked_nothing_more():
    fake = one_910b(health=abi.HEALTH_ABSENT)
    (tick,) = ticked(fake)
    assert tick.health == abi.HEALTH_ABSENT
    assert tick.values == {}
    assert fake.calls["dcmi_get_device_temperature"] == 0


def test_a_struct_that_grew_is_read_without_overwriting_anything():
    fake = one_910b(ecc_bytes=36, ecc=(1, 3, 1, 9, 4, 2, 1))
    (tick,) = ticked(fake, times=2)
    assert fake.overflows == []  # every buffer had room for 36 bytes
    assert (tick.values["ecc_single_bit_errors"], tick.values["ecc_double_bit_errors"]) == (3, 1)
    assert tick.values["ecc_isolated_pages"] == 3
    assert tick.values["temperature_c"] == 45


def test_error_texts_are_asked_once_per_code_and_unknown_ones_stay_empty():
    fake = one_910b(errors=(0x80E01801, 0x80CB8009, 0x1234))
    (tick,) = ticked(fake, times=3)
    assert tick.error_codes == (
        ErrorCodeRecord(0x80E01801, "HBM multi-bit ECC error"),
        ErrorCodeRecord(0x80CB8009, "link down"),
        ErrorCodeRecord(0x1234, ""),
    )
    strings = [args[2] for name, args in fake.args if name == "dcmi_get_device_errorcode_string"]
    assert strings.count(0x80E01801) == 1
    assert strings.count(0x1234) == 3  # a failed text is asked again


def test_failed_lists_say_so_with_their_code():
    fake = one_910b(fail={"processes": abi.OPER_NOT_PERMITTED, "errors": abi.INNER_ERR})
    (tick,) = ticked(fake)
    assert tick.processes is None
    assert tick.codes["processes"] == abi.OPER_NOT_PERMITTED
    assert tick.error_codes == ()
    assert tick.codes["error_codes"] == abi.INNER_ERR


def test_records_cross_a_process_boundary():
    fake = one_910b(errors=(0x80E01801,))
    reader = reader_for(fake)
    inventory = reader.inventory()
    ticks = reader.tick(inventory.chips)
    assert pickle.loads(pickle.dumps((inventory, ticks))) == (inventory, ticks)


@pytest.mark.parametrize("given", ["facts", "refs"])
def test_tick_takes_the_inventory_facts_or_plain_refs(given):
    fake = one_910b()
    reader = reader_for(fake)
    facts = reader.inventory().chips
    chips = facts if given == "facts" else tuple(chip.ref for chip in facts)
    (tick,) = reader.tick(chips)
    assert tick.ref == ChipRef(0, 0, 0, 0)
    assert tick.values["temperature_c"] == 45


def test_a_chip_without_logic_id_is_still_listed_with_the_code():
    fake = one_910b()
    inventory = reader_for(Without(fake, "dcmi_get_device_phyid_from_logicid")).inventory()
    (facts,) = inventory.chips
    assert facts.ref == ChipRef(0, 0, 0, None)
    assert facts.codes == {"phy_id": SYMBOL_MISSING}
    inventory = reader_for(Without(fake, "dcmi_get_device_logic_id")).inventory()
    (facts,) = inventory.chips
    assert facts.ref == ChipRef(0, 0)
    assert facts.codes == {"logic_id": SYMBOL_MISSING, "phy_id": SYMBOL_MISSING}


def test_an_impossible_v2_utilisation_is_a_failure():
    (tick,) = ticked(one_910b(hbm=None, memory_v3=None, memory_v2=(8192, 150)))
    assert tick.codes["memory_used_mib"] == tick.codes["memory_total_mib"] == INVALID_VALUE
    assert "memory_used_mib" not in tick.values


# --- against the fake library of the demos: the C build (real ctypes path) and its Python twin -----

STANDIN = "python:npuwatch.probes.simulator.dcmi_fake.standin"


def _chip_state(card: int, dev: int, logic: int, phy: int, name: str, ints: Dict[str, int]) -> List[str]:
    lines = [f"chip {card} {dev} {logic} {phy}"]
    lines += [f"i {card} {dev} {key} {value}" for key, value in ints.items()]
    texts = {"chip_type": "Ascend", "chip_name": name, "chip_ver": "V1", "npu_name": f"Ascend {name}"}
    texts["product_type"] = "Atlas 800T A2"
    lines += [f"s {card} {dev} {key} {text}" for key, text in texts.items()]
    return lines


def _910b(bus: int, **changes: Optional[int]) -> Dict[str, int]:
    ints = {
        "health": 0,
        "temp": 45,
        "power": 1624,
        "voltage": 87,
        "util.2": 30,
        "util.3": 4,
        "util.4": 7,
        "util.6": 5,
        "util.10": 99,  # never asked: hbm_info gives the bandwidth
        "util.12": 25,
        "util.13": 31,
        "freq.7": 1650,
        "freq.9": 1800,
        "aicore_cnt": 20,
        "hbm.total": 65536,
        "hbm.used": 3432,
        "hbm.freq": 1600,
        "hbm.temp": 41,
        "hbm.bw": 12,
        "mem.total": 0,
        "mem.avail": 0,
        "mem.hpsize": 2048,
        "mem.hptotal": 0,
        "mem.hpfree": 0,
        "mem.util": 0,
        "board.board_id": 0x64,
        "pci.vendor": 0x19E5,
        "pci.device": 0xD802,
        "pci.domain": 0,
        "pci.bus": bus,
        "pci.dev": 0,
        "pci.func": 0,
        "ecc.type": abi.ECC_HBM,
        "ecc.enable": 1,
        "ecc.single": 2,
        "ecc.double": 0,
        "ecc.iso_single": 1,
        "ecc.iso_double": 1,
    }
    ints.update(
        {f"die.1.{index}": word for index, word in enumerate((0x409921D4 + bus, 0x2140A100, 0, 7, 9))}
    )
    for key, value in changes.items():
        key = key.replace("__", ".")
        if value is None:
            ints.pop(key, None)
        else:
            ints[key] = value
    return ints


def _310p(used_mib: int, **changes: Optional[int]) -> Dict[str, int]:
    ints = _910b(0x3B, power=None, **{"util__10": None, "util__13": None, "util__6": None}, **changes)
    for key in [key for key in ints if key.startswith("hbm.")]:
        del ints[key]
    ints.update({"mem.total": 21527, "mem.avail": 21527 - used_mib, "mem.hptotal": 10, "mem.hpfree": 4})
    ints.update({"ecc.type": abi.ECC_DDR})
    return ints


@dataclass
class FakeLibrary:
    """The fake library as the loader is told to find it, with its call counters."""

    spec: str
    counters: object
    state: object

    def calls_on(self, function: str, card: int, device: int) -> int:
        return int(self.counters.npuwatch_fake_calls_on(function.encode(), card, device))  # type: ignore[attr-defined]

    def write(self, lines: Sequence[str]) -> None:
        text = "\n".join(["s -1 -1 dcmi_version 24.1.rc2", "s -1 -1 driver_version 24.1.rc2", *lines]) + "\n"
        self.state.write_text(text)  # type: ignore[attr-defined]
        self.counters.npuwatch_fake_reset()  # type: ignore[attr-defined]

    def reader(self) -> Reader:
        from npuwatch.probes.dcmi.library import load_library

        reader = Reader(load_library(self.spec))
        assert reader.init() == 0
        return reader


@pytest.fixture(scope="module")
def built_fakes(tmp_path_factory):
    from npuwatch.probes.simulator.dcmi_fake import build

    cache = tmp_path_factory.mktemp("fake-dcmi-cache")
    full = build.build(cache_dir=cache)
    if full.path is None:
        from tests.conftest import need

        need(False, f"the fake libdcmi.so cannot be built: {full.reason}")
    lacking = build.build(omit=("dcmi_get_device_voltage",), cache_dir=cache)
    assert lacking.path is not None, lacking.reason
    return {"full": full.path, "no-voltage": lacking.path}


@pytest.fixture(params=["c", "python"])
def fake_library(request, tmp_path, monkeypatch):
    state = tmp_path / "fake-dcmi.state"
    monkeypatch.setenv("NPUWATCH_FAKE_DCMI_STATE", str(state))

    def make(variant: str = "full") -> FakeLibrary:
        if request.param == "python":
            from npuwatch.probes.simulator.dcmi_fake import standin

            return FakeLibrary(STANDIN, standin.load(), state)
        path = request.getfixturevalue("built_fakes")[variant]
        handle = ctypes.CDLL(str(path))
        handle.npuwatch_fake_calls_on.restype = ctypes.c_longlong
        handle.npuwatch_fake_calls_on.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        return FakeLibrary(str(path), handle, state)

    return make


def test_fake_910b_reads_every_value_and_fact(fake_library):
    fake = fake_library()
    fake.write(
        [
            "card 0 1 1 -1 -1",
            *_chip_state(0, 0, 0, 0, "910B3", _910b(0xC1)),
            "proc 0 0 4242 2147483648",
            "err 0 0 0x80E01801 HBM multi-bit ECC error",
        ]
    )
    reader = fake.reader()
    inventory = reader.inventory()
    assert (inventory.dcmi_version, inventory.driver_version) == ("24.1.rc2", "24.1.rc2")
    (facts,) = inventory.chips
    assert facts.ref == ChipRef(0, 0, 0, 0)
    assert (facts.chip_name, facts.chip_type, facts.chip_version, facts.npu_name) == (
        "910B3",
        "Ascend",
        "V1",
        "Ascend 910B3",
    )
    assert (facts.aicore_count, facts.aicore_rated_freq_mhz, facts.board_id) == (20, 1800, 0x64)
    assert (facts.bus_id, facts.pci_device_id) == ("0000:c1:00.0", 0xD802)
    assert facts.vdie_id == "40992295-2140A100-00000000-00000007-00000009"
    assert facts.product_type == "Atlas 800T A2"
    assert facts.codes == {}
    (tick,) = reader.tick(inventory.chips)
    assert tick.health == 0
    assert dict(tick.values) == {
        "temperature_c": 45,
        "power_w": 162.4,
        "aicore_percent": 30,
        "npu_util_percent": 31,
        "vector_percent": 25,
        "aicpu_percent": 4,
        "ctrlcpu_percent": 7,
        "hbm_used_mib": 3432,
        "hbm_total_mib": 65536,
        "hbm_temperature_c": 41,
        "hbm_bandwidth_percent": 12,
        "memory_used_mib": 0,
        "memory_total_mib": 0,
        "hugepages_used": 0,
        "hugepages_total": 0,
        "aicore_freq_mhz": 1650,
        "voltage_v": 0.87,
        "ecc_single_bit_errors": 2,
        "ecc_double_bit_errors": 0,
        "ecc_isolated_pages": 2,
    }
    assert dict(tick.codes) == {"cube_percent": NOT_SUPPORT}
    assert tick.processes == (ProcessRecord(4242, 2147483648),)
    assert tick.error_codes == (ErrorCodeRecord(0x80E01801, "HBM multi-bit ECC error"),)
    assert fake.calls_on("dcmi_get_device_utilization_rate", 0, 0) == 6  # 2, 13, 12, 14, 3, 4: never 10


def test_fake_a3_chip_1_power_unsupported_and_no_mcu_call(fake_library):
    fake = fake_library()
    fake.write(
        [
            "card 0 2 2 -1 -1",
            *_chip_state(0, 0, 0, 0, "Ascend910", _910b(0x9D)),
            *_chip_state(0, 1, 1, 1, "Ascend910", _910b(0x9E, power=None, temp=47)),
            "i 0 -1 mcu_power 999",
        ]
    )
    reader = fake.reader()
    chips = reader.inventory().chips
    assert [facts.ref for facts in chips] == [ChipRef(0, 0, 0, 0), ChipRef(0, 1, 1, 1)]
    for _ in range(3):
        first, second = reader.tick(chips)
    assert (first.values["power_w"], first.board_power) == (162.4, False)
    assert second.codes["power_w"] == NOT_SUPPORT
    assert "power_w" not in second.values
    assert second.values["temperature_c"] == 47
    assert fake.calls_on("dcmi_get_device_power_info", 0, 1) == 1  # sticky: asked once in 3 ticks
    assert fake.calls_on("dcmi_mcu_get_power_info", 0, -1) == 0


def test_fake_310p_duo_cards_2_and_5_board_power_ddr_and_the_mcu_skipped(fake_library):
    fake = fake_library()
    fake.write(
        [
            "card 2 2 2 2 -1",  # the MCU's ID (2) is outside the chips' 0..1
            "card 5 3 3 1 -1",  # the MCU listed among the devices, at 1
            *_chip_state(2, 0, 0, 0, "310P3", _310p(2000)),
            *_chip_state(2, 1, 1, 1, "310P3", _310p(1500)),
            *_chip_state(5, 0, 2, 2, "310P3", _310p(1000)),
            *_chip_state(5, 2, 3, 3, "310P3", _310p(500)),
            "i 2 -1 mcu_power 723",
            "i 5 -1 mcu_power 650",
        ]
    )
    reader = fake.reader()
    inventory = reader.inventory()
    assert [(f.ref.card_id, f.ref.device_id, f.ref.logic_id) for f in inventory.chips] == [
        (2, 0, 0),
        (2, 1, 1),
        (5, 0, 2),
        (5, 2, 3),
    ]
    assert inventory.skipped_units == 2
    ticks = reader.tick(inventory.chips)
    assert [(t.values.get("power_w"), t.board_power) for t in ticks] == [
        (72.3, True),
        (None, False),
        (65.0, True),
        (None, False),
    ]
    assert ticks[1].codes["power_w"] == NOT_SUPPORT
    assert [t.values["memory_used_mib"] for t in ticks] == [2000, 1500, 1000, 500]
    assert {t.values["memory_total_mib"] for t in ticks} == {21527}
    assert (ticks[0].values["hugepages_used"], ticks[0].values["hugepages_total"]) == (6, 10)
    for name in ("hbm_used_mib", "hbm_total_mib", "hbm_temperature_c", "hbm_bandwidth_percent"):
        assert ticks[0].codes[name] == NOT_SUPPORT
    assert ticks[0].codes["ecc_single_bit_errors"] == NOT_SUPPORT  # a DDR-ECC chip has no HBM ECC
    assert fake.calls_on("dcmi_get_device_temperature", 5, 1) == 0  # the MCU is never read


def test_fake_950_npu_and_cube_utilisation(fake_library):
    fake = fake_library()
    fake.write(
        ["card 0 1 1 -1 -1", *_chip_state(0, 0, 0, 0, "Ascend950DT", _910b(0x01, util__13=55, util__14=70))]
    )
    reader = fake.reader()
    (tick,) = reader.tick(reader.inventory().chips)
    assert (tick.values["npu_util_percent"], tick.values["cube_percent"]) == (55, 70)
    assert tick.codes == {}


def test_fake_without_a_symbol_turns_that_capability_off(fake_library):
    fake = fake_library("no-voltage")
    fake.write(
        ["omit dcmi_get_device_voltage", "card 0 1 1 -1 -1", *_chip_state(0, 0, 0, 0, "910B3", _910b(1))]
    )
    reader = fake.reader()
    assert not reader.library.has("dcmi_get_device_voltage")  # type: ignore[attr-defined]
    (tick,) = reader.tick(reader.inventory().chips)
    assert tick.codes == {"voltage_v": SYMBOL_MISSING, "cube_percent": NOT_SUPPORT}
    assert tick.values["temperature_c"] == 45


def test_fake_sticky_and_transient_codes_by_call_count(fake_library):
    fake = fake_library()
    fake.write(
        [
            "card 0 1 1 -1 -1",
            *_chip_state(0, 0, 0, 0, "910B3", _910b(1)),
            "rc dcmi_get_device_ecc_info 0 0 -8255",
            "rc dcmi_get_device_temperature 0 0 -8012",
            "rc dcmi_get_device_power_info 0 0 -8005",
        ]
    )
    reader = fake.reader()
    chips = reader.inventory().chips
    for _ in range(8):
        (tick,) = reader.tick(chips)
    assert tick.codes["ecc_single_bit_errors"] == NOT_SUPPORT
    assert tick.codes["temperature_c"] == abi.NOT_READY
    assert tick.codes["power_w"] == abi.INNER_ERR
    assert fake.calls_on("dcmi_get_device_ecc_info", 0, 0) == 1
    assert fake.calls_on("dcmi_get_device_temperature", 0, 0) == 4  # ticks 1, 2, 4, 8
    assert fake.calls_on("dcmi_get_device_power_info", 0, 0) == 8


def test_fake_non_contiguous_cards_are_asked_by_their_own_ids(fake_library):
    fake = fake_library()
    fake.write(
        [
            "card 4 1 1 -1 -1",
            "card 9 1 1 -1 -1",
            *_chip_state(4, 0, 0, 0, "910B3", _910b(1)),
            *_chip_state(9, 0, 1, 1, "910B3", _910b(2, temp=50)),
        ]
    )
    reader = fake.reader()
    ticks = reader.tick(reader.inventory().chips)
    assert [(t.ref.card_id, t.values["temperature_c"]) for t in ticks] == [(4, 45), (9, 50)]
    assert fake.calls_on("dcmi_get_device_temperature", 0, 0) == 0
