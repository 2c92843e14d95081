"""Provides Reader: enumerate the chips and read one tick through a loaded DCMI library, as records.

The reader runs in the worker process (``worker.py`` gives each call its deadline); it only calls
and converts, in npuwatch's units: power 0.1 W → W, voltage 0.01 V → V (MindCluster
``DcGetDeviceVoltage``: "the accuracy is 0.01v", ``ReduceOnePercent``,
``Ascend/mind-cluster`` ``component/ascend-common/devmanager/dcmi/dcmi.go``), memory MB → MiB as
npu-smi prints them, process memory kept in bytes.  Values are checked as MindCluster checks
them; an impossible one is recorded with ``records.INVALID_VALUE``.

Return codes (driver-interfaces.md §9.1 rule 3), per chip and function:

* ``-8255``/``-8013`` (not supported): sticky — the function is never called for that chip again
  and every later tick reports the same code.
* ``-8006``/``-8012``/``-8017`` (transient): after ``n`` failures in a row the call is skipped for
  ``min(2**(n-1) - 1, 30)`` of the chip's ticks (the next tick retries after one failure), each
  skipped tick reporting the last code; a success resets the count.
* anything else: reported, and asked again next tick.

Calls are made the same way for a real library and for the pure-Python stand-in: ``int``
arguments as Python ints, each scalar output as ``ctypes.pointer(c_int()/c_uint())``, each
structure output as a zeroed ``ctypes`` char buffer of at least ``abi.OUTPUT_BYTES``, lists as
``ctypes`` arrays.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Type, Union

from npuwatch.probes.dcmi import abi
from npuwatch.probes.dcmi.records import (
    INVALID_VALUE,
    SYMBOL_MISSING,
    ChipFacts,
    ChipRef,
    ChipTick,
    ErrorCodeRecord,
    Inventory,
    ProcessRecord,
)

#: Codes after which a function is never asked again for that chip.
UNSUPPORTED = frozenset({abi.NOT_SUPPORT, abi.NOT_SUPPORT_IN_CONTAINER})
#: Codes worth asking again later, with back-off.
TRANSIENT = frozenset({abi.TIME_OUT, abi.NOT_READY, abi.IS_UPGRADING})
#: Most ticks a transient failure can make the reader skip a call.
MAX_SKIPPED_TICKS = 30
#: Most device IDs per card believed: an Ascend card has at most 4 chips (a 310 card and a 4P 950
#: card), plus an MCU and a CPU unit; twice that is room for a board not seen yet
#: (docs/plausible-ranges.md).  A card that counts more (or fewer than 0) lists garbage: none of
#: its chips is believed, and the card's code is ``INVALID_VALUE``.
MAX_DEVICES_PER_CARD = 12
#: Spare room after lists the library fills (it is told the list's length, but may be wrong).
_SPARE = abi.OUTPUT_BYTES

#: ChipTick value name → ``dcmi_get_device_utilization_rate`` input type.
UTILIZATIONS: Tuple[Tuple[str, int], ...] = (
    ("aicore_percent", abi.UTIL_AICORE),
    ("npu_util_percent", abi.UTIL_NPU),
    ("vector_percent", abi.UTIL_VECTORCORE),
    ("cube_percent", abi.UTIL_AICUBE),
    ("aicpu_percent", abi.UTIL_AICPU),
    ("ctrlcpu_percent", abi.UTIL_CTRLCPU),
)
HBM_FIELDS = ("hbm_used_mib", "hbm_total_mib", "hbm_temperature_c")
MEMORY_FIELDS = ("memory_used_mib", "memory_total_mib")
HUGEPAGE_FIELDS = ("hugepages_used", "hugepages_total")
ECC_FIELDS = ("ecc_single_bit_errors", "ecc_double_bit_errors", "ecc_isolated_pages")

_UTILIZATION = "dcmi_get_device_utilization_rate"
#: (value name, input type, the gate's key) of each utilisation read every tick.
_UTILIZATION_CALLS = tuple((name, selector, f"util:{selector}") for name, selector in UTILIZATIONS)
_HBM_BANDWIDTH = f"util:{abi.UTIL_HBM_BANDWIDTH}"
#: Ready-made output types (a zeroed instance per call): a structure, the process list, the codes.
_OutputBuffer = ctypes.c_char * abi.OUTPUT_BYTES
_PROCESS_BYTES = ctypes.sizeof(abi.ProcMemInfo)
_ProcessBuffer = ctypes.c_char * (abi.MAX_PROCESSES * _PROCESS_BYTES + _SPARE)
_ErrorCodeList = ctypes.c_uint * (abi.MAX_ERROR_CODES + _SPARE)

_MIN_TEMPERATURE_C = -275  # MindCluster: below this a temperature read failed
_INT32_LIMIT = 2**31  # MindCluster: a voltage at or above MaxInt32 is a failed read

_Key = Tuple[int, int, str]
_AnyChipInfo = Union[abi.ChipInfo, abi.ChipInfoV2]


class CallSurface(Protocol):
    """What the reader needs of a library: ``library.DcmiLibrary`` is one."""

    def has(self, name: str) -> bool: ...

    def call(self, name: str, *args: object) -> int: ...


class _Gate:
    """Sticky "not supported" and transient back-off per (card, device, function).

    One dict holds every call that is not simply made: ``key → (ask again at tick, failures in a
    row, code)``, the tick ``-1`` for a sticky one; a call not in it goes straight through.
    """

    def __init__(self) -> None:
        self.tick_no = 0
        self._held: Dict[_Key, Tuple[int, int, int]] = {}

    def call(self, function: Callable[..., object], key: _Key, *args: object) -> int:
        held = self._held.get(key)
        if held is not None and (held[0] < 0 or self.tick_no < held[0]):
            return held[2]
        code = int(function(*args))  # type: ignore[call-overload]
        if code == 0 and held is None:
            return 0
        if code in UNSUPPORTED:
            self._held[key] = (-1, 0, code)
        elif code in TRANSIENT:
            failures = (held[1] if held is not None else 0) + 1
            skipped = min(2 ** (failures - 1) - 1, MAX_SKIPPED_TICKS)
            self._held[key] = (self.tick_no + skipped + 1, failures, code)
        elif held is not None:
            del self._held[key]
        return code


class _Out:
    """One chip's values and codes while a tick is read."""

    def __init__(self) -> None:
        self.values: Dict[str, float] = {}
        self.codes: Dict[str, int] = {}

    def fail(self, names: Sequence[str], code: int) -> None:
        for name in names:
            self.codes[name] = code

    def percent(self, name: str, code: int, value: int) -> None:
        if code != 0:
            self.codes[name] = code
        elif 0 <= value <= 100:
            self.values[name] = value
        else:
            self.codes[name] = INVALID_VALUE

    def temperature(self, name: str, code: int, value: int) -> None:
        if code != 0:
            self.codes[name] = code
        elif value >= _MIN_TEMPERATURE_C:
            self.values[name] = value
        else:
            self.codes[name] = INVALID_VALUE


class Reader:
    """Reads the library's chips: ``init()`` once, ``inventory()``, then ``tick(refs)`` per tick."""

    def __init__(self, library: CallSurface) -> None:
        self.library = library
        self._init_code: Optional[int] = None
        self._gate = _Gate()
        self._first_chip: Dict[int, int] = {}  # card → its lowest NPU device ID (inventory)
        self._error_texts: Dict[int, str] = {}  # error code → the library's text (it never changes)
        self._functions: Dict[str, Callable[..., object]] = {}  # name → callable (_function)
        self._uint = ctypes.c_uint(0)  # the scalar outputs, reused: one call at a time
        self._uint_pointer = ctypes.pointer(self._uint)
        self._int = ctypes.c_int(0)
        self._int_pointer = ctypes.pointer(self._int)

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

    def _chip_info(self, card: int, device: int, codes: Dict[str, int]) -> Optional[_AnyChipInfo]:
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

    # --- one tick ------------------------------------------------------------------------------
    #
    # About 15 calls per chip every tick: each is made with as little Python around it as it
    # needs (the function resolved once, one reused output integer per type, zeroed before each
    # call; ready-made buffer types), since that Python, not the library, is most of a tick.

    def tick(self, chips: Sequence[Union[ChipRef, ChipFacts]]) -> Tuple[ChipTick, ...]:
        """Every chip's live values now, in the order given (refs, or the inventory's facts)."""
        self._gate.tick_no += 1
        refs = [chip.ref if isinstance(chip, ChipFacts) else chip for chip in chips]
        first: Dict[int, int] = {}
        for ref in refs:  # a card the inventory did not list: its lowest chip given
            first[ref.card_id] = min(first.get(ref.card_id, ref.device_id), ref.device_id)
        first.update(self._first_chip)
        return tuple(self._tick_chip(ref, first[ref.card_id] == ref.device_id) for ref in refs)

    def _function(self, name: str) -> Callable[..., object]:
        """``name`` as a callable (``SYMBOL_MISSING`` when the library lacks it), resolved once."""
        found = self._functions.get(name)
        if found is None:
            direct = getattr(self.library, "function", None)
            if callable(direct):
                found = direct(name) or _missing
            else:  # any other CallSurface: through its call()
                found = functools.partial(self.library.call, name)
            self._functions[name] = found
        return found

    def _scalar(self, card: int, device: int, what: str, function: str, *args: int) -> Tuple[int, int]:
        """An unsigned output: ``function(card, device, *args, pointer)``'s code and value."""
        out = self._uint
        out.value = 0
        key = (card, device, what)
        code = self._gate.call(self._function(function), key, card, device, *args, self._uint_pointer)
        return code, out.value

    def _signed(self, card: int, device: int, what: str, function: str) -> Tuple[int, int]:
        """A signed output (temperature, power): ``function(card, device, pointer)``."""
        out = self._int
        out.value = 0
        code = self._gate.call(
            self._function(function), (card, device, what), card, device, self._int_pointer
        )
        return code, out.value

    def _read(
        self, card: int, device: int, what: str, function: str, kind: Type[abi.S], *args: int
    ) -> Tuple[int, abi.S]:
        buffer = _OutputBuffer()  # zeroed, with room for a newer library's grown structure
        code = self._gate.call(self._function(function), (card, device, what), card, device, *args, buffer)
        return code, kind.from_buffer_copy(buffer)

    def _tick_chip(self, ref: ChipRef, first_of_card: bool) -> ChipTick:
        card, device = ref.card_id, ref.device_id
        out = _Out()
        code, health = self._scalar(card, device, "health", "dcmi_get_device_health")
        if code != 0:
            out.codes["health"] = code
        elif health == abi.HEALTH_ABSENT:  # the chip is gone: asking the rest would only fail
            return ChipTick(ref, health=health)
        out.temperature(
            "temperature_c", *self._signed(card, device, "temperature", "dcmi_get_device_temperature")
        )
        board_power = self._power(ref, first_of_card, out)
        for name, selector, what in _UTILIZATION_CALLS:
            out.percent(name, *self._scalar(card, device, what, _UTILIZATION, selector))
        self._hbm(card, device, out)
        self._memory(card, device, out)
        self._frequency_and_voltage(card, device, out)
        self._ecc(card, device, out)
        processes = self._processes(card, device, out)
        errors = self._error_codes(card, device, out)
        return ChipTick(
            ref,
            health=health if code == 0 else None,
            values=out.values,
            codes=out.codes,
            processes=processes,
            error_codes=errors,
            board_power=board_power,
        )

    def _power(self, ref: ChipRef, first_of_card: bool, out: _Out) -> bool:
        """Chip power; a 310P's board power (MCU) on the card's first chip when the chip has none."""
        code, tenths = self._signed(ref.card_id, ref.device_id, "power", "dcmi_get_device_power_info")
        if code == 0:
            _watts(out, tenths)
            return False
        if code not in UNSUPPORTED or not first_of_card:  # A3 chip 1: its power stays absent
            out.codes["power_w"] = code
            return False
        board = ctypes.c_int(0)
        key = (ref.card_id, -1, "mcu_power")  # a card's call: sticky per card
        function = self._function("dcmi_mcu_get_power_info")
        mcu = self._gate.call(function, key, ref.card_id, ctypes.pointer(board))
        if mcu != 0:
            telling = mcu not in UNSUPPORTED and mcu != SYMBOL_MISSING
            out.codes["power_w"] = mcu if telling else code
            return False
        return _watts(out, board.value)

    def _hbm(self, card: int, device: int, out: _Out) -> None:
        code, hbm = self._read(card, device, "hbm_info", "dcmi_get_device_hbm_info", abi.HbmInfo)
        if code != 0:
            out.fail(HBM_FIELDS, code)
            bandwidth = self._scalar(card, device, _HBM_BANDWIDTH, _UTILIZATION, abi.UTIL_HBM_BANDWIDTH)
            out.percent("hbm_bandwidth_percent", *bandwidth)
            return
        out.values["hbm_used_mib"] = hbm.memory_usage
        out.values["hbm_total_mib"] = hbm.memory_size
        out.temperature("hbm_temperature_c", 0, hbm.temp)
        out.percent("hbm_bandwidth_percent", 0, hbm.bandwith_util_rate)

    def _memory(self, card: int, device: int, out: _Out) -> None:
        """DDR through ``memory_info_v3`` (with huge pages), else ``_v2`` (GPUStack's order)."""
        function = "dcmi_get_device_memory_info_v3"
        code, memory = self._read(card, device, "memory_v3", function, abi.MemoryInfoV3)
        if code == 0:
            out.values["memory_total_mib"] = memory.memory_size
            out.values["memory_used_mib"] = max(0, memory.memory_size - memory.memory_available)
            out.values["hugepages_total"] = memory.hugepages_total
            out.values["hugepages_used"] = max(0, memory.hugepages_total - memory.hugepages_free)
            return
        out.fail(HUGEPAGE_FIELDS, code)
        if code not in UNSUPPORTED and code != SYMBOL_MISSING:
            out.fail(MEMORY_FIELDS, code)
            return
        function = "dcmi_get_device_memory_info_v2"
        older, memory2 = self._read(card, device, "memory_v2", function, abi.MemoryInfoV2)
        if older != 0 or memory2.utiliza > 100:
            out.fail(MEMORY_FIELDS, code if older == SYMBOL_MISSING else older or INVALID_VALUE)
            return
        out.values["memory_total_mib"] = memory2.memory_size
        out.values["memory_used_mib"] = memory2.memory_size * memory2.utiliza // 100

    def _frequency_and_voltage(self, card: int, device: int, out: _Out) -> None:
        function = "dcmi_get_device_frequency"
        code, mhz = self._scalar(card, device, "freq:current", function, abi.FREQ_AICORE_CURRENT)
        if code != 0:
            out.codes["aicore_freq_mhz"] = code
        else:
            out.values["aicore_freq_mhz"] = mhz
        code, hundredths = self._scalar(card, device, "voltage", "dcmi_get_device_voltage")
        if code != 0:
            out.codes["voltage_v"] = code
        elif hundredths >= _INT32_LIMIT:
            out.codes["voltage_v"] = INVALID_VALUE
        else:
            out.values["voltage_v"] = hundredths / 100

    def _ecc(self, card: int, device: int, out: _Out) -> None:
        # dcmi_ecc_info grew from 28 to 36 bytes in newer headers: _read's buffer has room.
        function = "dcmi_get_device_ecc_info"
        code, ecc = self._read(card, device, "ecc:hbm", function, abi.EccInfo, abi.ECC_HBM)
        if code != 0:
            out.fail(ECC_FIELDS, code)
            return
        out.values["ecc_single_bit_errors"] = ecc.single_bit_error_cnt
        out.values["ecc_double_bit_errors"] = ecc.double_bit_error_cnt
        isolated = ecc.single_bit_isolated_pages_cnt + ecc.double_bit_isolated_pages_cnt
        out.values["ecc_isolated_pages"] = isolated

    def _processes(self, card: int, device: int, out: _Out) -> Optional[Tuple[ProcessRecord, ...]]:
        buffer = _ProcessBuffer()
        count = self._int
        count.value = 0
        function = self._function("dcmi_get_device_resource_info")
        code = self._gate.call(function, (card, device, "processes"), card, device, buffer, self._int_pointer)
        if code != 0:
            out.codes["processes"] = code
            return None
        listed = max(0, min(count.value, abi.MAX_PROCESSES))
        if not listed:
            return ()
        rows = (abi.ProcMemInfo * listed).from_buffer_copy(buffer.raw[: listed * _PROCESS_BYTES])
        return tuple(ProcessRecord(row.proc_id, row.proc_mem_usage) for row in rows)

    def _error_codes(self, card: int, device: int, out: _Out) -> Tuple[ErrorCodeRecord, ...]:
        count = self._int
        count.value = 0
        listed = _ErrorCodeList()
        function = self._function("dcmi_get_device_errorcode_v2")
        key = (card, device, "error_codes")
        code = self._gate.call(function, key, card, device, self._int_pointer, listed, abi.MAX_ERROR_CODES)
        if code != 0:
            out.codes["error_codes"] = code
            return ()
        found = max(0, min(count.value, abi.MAX_ERROR_CODES))
        if not found:
            return ()
        return tuple(
            ErrorCodeRecord(value, self._error_text(card, device, value)) for value in listed[:found]
        )

    def _error_text(self, card: int, device: int, value: int) -> str:
        """The library's text for an error code (kept once given: a code's text does not change)."""
        known = self._error_texts.get(value)
        if known is not None:
            return known
        buffer = ctypes.create_string_buffer(abi.ERROR_TEXT_BYTES + _SPARE)
        function = self._function("dcmi_get_device_errorcode_string")
        key = (card, device, "error_text")
        if self._gate.call(function, key, card, device, value, buffer, abi.ERROR_TEXT_BYTES) != 0:
            return ""
        text = self._error_texts[value] = abi.text_field(buffer.raw[: abi.ERROR_TEXT_BYTES])
        return text


def _missing(*args: object) -> int:
    """A function the library lacks: its capability is off."""
    return SYMBOL_MISSING


def _text(info: Optional[_AnyChipInfo], name: str) -> Optional[str]:
    """A text field of chip info, ``None`` when absent or empty (``npu_name`` is v2 only)."""
    raw = getattr(info, name, None) if info is not None else None
    return (abi.text_field(raw) or None) if raw is not None else None


def _watts(out: _Out, tenths: int) -> bool:
    if 0 <= tenths < _INT32_LIMIT:
        out.values["power_w"] = tenths / 10
        return True
    out.codes["power_w"] = INVALID_VALUE
    return False


def _bus_id(pcie: abi.PcieInfoAll) -> str:
    """``0000:c1:00.0``: sysfs' lower-case spelling (npu-smi prints upper case)."""
    return f"{max(0, pcie.domain):04x}:{pcie.bdf_busid:02x}:{pcie.bdf_deviceid:02x}.{pcie.bdf_funcid:x}"
