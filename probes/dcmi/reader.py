"""Provides Reader: enumerate the chips and read one tick through a loaded DCMI library, as records.

The reader runs in the worker process (``worker`` gives each call its deadline); it only calls
and converts, in npuwatch's units: power 0.1 W → W, voltage 0.01 V → V (MindCluster
``DcGetDeviceVoltage``: "the accuracy is 0.01v", ``ReduceOnePercent``,
``Ascend/mind-cluster`` ``component/ascend-common/devmanager/dcmi/dcmi.go``), memory MB → MiB as
npu-smi prints them, process memory kept in bytes.  Values are checked as MindCluster checks
them; an impossible one is recorded with ``records.INVALID_VALUE``.

Return codes are gated per chip and function (``call_gate``: sticky "not supported", back-off
for transient codes); the enumeration is ``enumeration.Enumerator``'s, this class's base.

Calls are made the same way for a real library and for the pure-Python stand-in: ``int``
arguments as Python ints, each scalar output as ``ctypes.pointer(c_int()/c_uint())``, each
structure output as a zeroed ``ctypes`` char buffer of at least ``abi.OUTPUT_BYTES``, lists as
``ctypes`` arrays.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Callable, Dict, Optional, Sequence, Tuple, Type, Union

from npuwatch.probes.dcmi import abi
from npuwatch.probes.dcmi.call_gate import SPARE_BYTES as _SPARE
from npuwatch.probes.dcmi.call_gate import UNSUPPORTED, CallSurface, Gate, Out
from npuwatch.probes.dcmi.enumeration import Enumerator
from npuwatch.probes.dcmi.records import (
    INVALID_VALUE,
    SYMBOL_MISSING,
    ChipFacts,
    ChipRef,
    ChipTick,
    ErrorCodeRecord,
    ProcessRecord,
)

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

_INT32_LIMIT = 2**31  # MindCluster: a voltage at or above MaxInt32 is a failed read


class Reader(Enumerator):
    """Reads the library's chips: ``init()`` once, ``inventory()``, then ``tick(refs)`` per tick."""

    def __init__(self, library: CallSurface) -> None:
        super().__init__(library)
        self._gate = Gate()
        self._first_chip: Dict[int, int] = {}  # card → its lowest NPU device ID (inventory)
        self._error_texts: Dict[int, str] = {}  # error code → the library's text (it never changes)
        self._functions: Dict[str, Callable[..., object]] = {}  # name → callable (_function)
        self._uint = ctypes.c_uint(0)  # the scalar outputs, reused: one call at a time
        self._uint_pointer = ctypes.pointer(self._uint)
        self._int = ctypes.c_int(0)
        self._int_pointer = ctypes.pointer(self._int)

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
        out = Out()
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

    def _power(self, ref: ChipRef, first_of_card: bool, out: Out) -> bool:
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

    def _hbm(self, card: int, device: int, out: Out) -> None:
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

    def _memory(self, card: int, device: int, out: Out) -> None:
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

    def _frequency_and_voltage(self, card: int, device: int, out: Out) -> None:
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

    def _ecc(self, card: int, device: int, out: Out) -> None:
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

    def _processes(self, card: int, device: int, out: Out) -> Optional[Tuple[ProcessRecord, ...]]:
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

    def _error_codes(self, card: int, device: int, out: Out) -> Tuple[ErrorCodeRecord, ...]:
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


def _watts(out: Out, tenths: int) -> bool:
    if 0 <= tenths < _INT32_LIMIT:
        out.values["power_w"] = tenths / 10
        return True
    out.codes["power_w"] = INVALID_VALUE
    return False
