"""Provides ``Enumerator``: the reader's first calls, ``dcmi_init`` and the enumeration of every NPU
chip with its slow facts (versions, chip info, PCIe and board, die ID, product type, rated
frequency); MCUs and other units are skipped, a card that counts garbage is not believed.
"""

from __future__ import annotations

import ctypes
from typing import Dict, List, Optional, Tuple, Type, Union

from npuwatch.probes.dcmi import abi
from npuwatch.probes.dcmi.call_gate import SPARE_BYTES as _SPARE
from npuwatch.probes.dcmi.call_gate import UNSUPPORTED, CallSurface
from npuwatch.probes.dcmi.records import INVALID_VALUE, SYMBOL_MISSING, ChipFacts, ChipRef, Inventory

#: Most device IDs per card believed: an Ascend card has at most 4 chips (a 310 card and a 4P 950
#: card), plus an MCU and a CPU unit; twice that is room for a board not seen yet
#: (docs/plausible-ranges.md).  A card that counts more (or fewer than 0) lists garbage: none of
#: its chips is believed, and the card's code is ``INVALID_VALUE``.
MAX_DEVICES_PER_CARD = 12

AnyChipInfo = Union[abi.ChipInfo, abi.ChipInfoV2]


class Enumerator:
    """``init()`` once, then ``inventory()``: the chips a ``Reader`` reads every tick."""

    def __init__(self, library: CallSurface) -> None:
        self.library = library
        self._init_code: Optional[int] = None
        self._first_chip: Dict[int, int] = {}  # card → its lowest NPU device ID (inventory)

    # --- initialisation and enumeration -------------------------------------------------------

    def init(self) -> int:
        """``dcmi_init``'s code (called once; later calls return the first answer)."""
        if self._init_code is None:
            self._init_code = self.library.call("dcmi_init")
        return self._init_code

    def inventory(self) -> Inventory:
        """Versions and every NPU chip with its slow facts (MCUs and other units skipped)."""
        codes: Dict[str, int] = {}
        dcmi_version = self._version("dcmi_get_dcmi_version", "dcmi_version", codes)
        driver_version = self._version("dcmi_get_driver_version", "driver_version", codes)
        cards = self._card_list(codes)
        chips: List[ChipFacts] = []
        card_codes: Dict[int, int] = {}
        skipped = 0
        for card in cards:
            devices, unit_skips, code = self._devices(card)
            skipped += unit_skips
            if code != 0:
                card_codes[card] = code
            chips.extend(self._facts(card, device) for device in devices)
            if devices:
                self._first_chip[card] = min(devices)
        return Inventory(dcmi_version, driver_version, tuple(chips), card_codes, skipped, codes)

    def _version(self, function: str, name: str, codes: Dict[str, int]) -> Optional[str]:
        buffer = ctypes.create_string_buffer(abi.VERSION_BYTES + _SPARE)
        code = self.library.call(function, buffer, abi.VERSION_BYTES)
        if code != 0:
            codes[name] = code
            return None
        return abi.text_field(buffer.raw[: abi.VERSION_BYTES]) or None

    def _card_list(self, codes: Dict[str, int]) -> List[int]:
        count = ctypes.c_int(0)
        cards = (ctypes.c_int * (abi.MAX_CARDS + _SPARE))()
        code = self.library.call("dcmi_get_card_list", ctypes.pointer(count), cards, abi.MAX_CARDS)
        if code == SYMBOL_MISSING or code in UNSUPPORTED:  # the V1 name, deprecated but older
            count.value = 0
            older = self.library.call("dcmi_get_card_num_list", ctypes.pointer(count), cards, abi.MAX_CARDS)
            code = code if older == SYMBOL_MISSING else older
        if code == 0 and not 0 <= count.value <= abi.MAX_CARDS:  # -1, 0xFF…: not a count of cards
            code = INVALID_VALUE
        if code != 0:
            codes["card_list"] = code
            return []
        listed = cards[: count.value]
        if any(card < 0 for card in listed):  # a card ID is never negative: a 0xFF-filled list
            codes["card_list"] = INVALID_VALUE
        # The real card IDs: not necessarily 0..N-1.
        return list(dict.fromkeys(card for card in listed if card >= 0))

    def _devices(self, card: int) -> Tuple[List[int], int, int]:
        """The card's NPU device IDs, how many units were skipped, and the listing's code."""
        most, mcu, cpu = ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(-1)
        code = self.library.call(
            "dcmi_get_device_id_in_card", card, ctypes.pointer(most), ctypes.pointer(mcu), ctypes.pointer(cpu)
        )
        if code != 0:
            mcu.value = -1
            most.value = 0
            fallback = self.library.call("dcmi_get_device_num_in_card", card, ctypes.pointer(most))
            code = code if fallback == SYMBOL_MISSING else fallback
        if code == 0 and not 0 <= most.value <= MAX_DEVICES_PER_CARD:
            code = INVALID_VALUE  # a negative or 0xFF… count: no chip of it is believed
        if code != 0:
            return [], 0, code
        devices: List[int] = []
        skipped = 1 if mcu.value >= max(0, most.value) else 0  # an MCU outside the chip range
        for device in range(most.value):
            if device == mcu.value or not self._is_npu(card, device):
                skipped += 1
            else:
                devices.append(device)
        return devices, skipped, 0

    def _is_npu(self, card: int, device: int) -> bool:
        unit = ctypes.c_int(abi.UNIT_NPU)
        code = self.library.call("dcmi_get_device_type", card, device, ctypes.pointer(unit))
        return code != 0 or unit.value == abi.UNIT_NPU  # unknown type: keep the chip

    def _ref(self, card: int, device: int, codes: Dict[str, int]) -> ChipRef:
        logic = ctypes.c_int(-1)
        code = self.library.call("dcmi_get_device_logic_id", ctypes.pointer(logic), card, device)
        if code == 0 and logic.value < 0:
            code = INVALID_VALUE
        if code != 0:
            codes["logic_id"] = codes["phy_id"] = code
            return ChipRef(card, device)
        phy = ctypes.c_uint(0)
        code = self.library.call("dcmi_get_device_phyid_from_logicid", logic.value, ctypes.pointer(phy))
        if code != 0:
            codes["phy_id"] = code
        return ChipRef(card, device, logic.value, phy.value if code == 0 else None)

    def _facts(self, card: int, device: int) -> ChipFacts:
        codes: Dict[str, int] = {}
        ref = self._ref(card, device, codes)
        info = self._chip_info(card, device, codes)
        pcie = self._struct("dcmi_get_device_pcie_info_v2", abi.PcieInfoAll, codes, "pcie_info", card, device)
        board = self._struct("dcmi_get_device_board_info", abi.BoardInfo, codes, "board_info", card, device)
        return ChipFacts(
            ref=ref,
            chip_name=_text(info, "chip_name"),
            chip_type=_text(info, "chip_type"),
            chip_version=_text(info, "chip_ver"),
            npu_name=_text(info, "npu_name"),
            aicore_count=info.aicore_cnt if info else None,
            vdie_id=self._vdie(card, device, codes),
            bus_id=_bus_id(pcie) if pcie else None,
            pci_device_id=pcie.deviceid if pcie else None,
            board_id=board.board_id if board else None,
            product_type=self._product_type(card, device, codes),
            aicore_rated_freq_mhz=self._rated_freq(card, device, codes),
            codes=codes,
        )

    def _chip_info(self, card: int, device: int, codes: Dict[str, int]) -> Optional[AnyChipInfo]:
        info = self._struct("dcmi_get_device_chip_info_v2", abi.ChipInfoV2, codes, "chip_info", card, device)
        if info is not None:
            return info
        first = codes.pop("chip_info")
        older = self._struct("dcmi_get_device_chip_info", abi.ChipInfo, codes, "chip_info", card, device)
        if older is None and codes["chip_info"] == SYMBOL_MISSING:
            codes["chip_info"] = first
        return older

    def _struct(
        self, function: str, kind: Type[abi.S], codes: Dict[str, int], name: str, *args: int
    ) -> Optional[abi.S]:
        buffer = abi.output_buffer()
        code = self.library.call(function, *args, buffer)
        if code != 0:
            codes[name] = code
            return None
        return abi.read_struct(buffer, kind)

    def _vdie(self, card: int, device: int, codes: Dict[str, int]) -> Optional[str]:
        buffer = abi.output_buffer()
        code = self.library.call("dcmi_get_device_die_v2", card, device, abi.DIE_VDIE, buffer)
        words = list(abi.read_struct(buffer, abi.DieId).soc_die) if code == 0 else []
        if code == 0 and not any(words):
            code = INVALID_VALUE  # all zeros: no key at all
        if code != 0:
            codes["vdie_id"] = code
            return None
        return "-".join(f"{word:08X}" for word in words)

    def _product_type(self, card: int, device: int, codes: Dict[str, int]) -> Optional[str]:
        buffer = ctypes.create_string_buffer(abi.PRODUCT_TYPE_BYTES + _SPARE)
        code = self.library.call("dcmi_get_product_type", card, device, buffer, abi.PRODUCT_TYPE_BYTES)
        if code != 0:
            codes["product_type"] = code
            return None
        return abi.text_field(buffer.raw[: abi.PRODUCT_TYPE_BYTES]) or None

    def _rated_freq(self, card: int, device: int, codes: Dict[str, int]) -> Optional[int]:
        rated = ctypes.c_uint(0)
        code = self.library.call(
            "dcmi_get_device_frequency", card, device, abi.FREQ_AICORE_MAX, ctypes.pointer(rated)
        )
        if code != 0:
            codes["aicore_rated_freq_mhz"] = code
            return None
        return rated.value


def _text(info: Optional[AnyChipInfo], name: str) -> Optional[str]:
    """A text field of chip info, ``None`` when absent or empty (``npu_name`` is v2 only)."""
    raw = getattr(info, name, None) if info is not None else None
    return (abi.text_field(raw) or None) if raw is not None else None


def _bus_id(pcie: abi.PcieInfoAll) -> str:
    """``0000:c1:00.0``: sysfs' lower-case spelling (npu-smi prints upper case)."""
    return f"{max(0, pcie.domain):04x}:{pcie.bdf_busid:02x}:{pcie.bdf_deviceid:02x}.{pcie.bdf_funcid:x}"
