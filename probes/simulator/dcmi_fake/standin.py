"""Provides load(): the pure-Python stand-in of the fake ``libdcmi.so``, for machines without a C compiler.

The object ``load()`` returns has the call surface of a ``ctypes.CDLL`` of ``fake_dcmi.c``: one
attribute per function of ``abi.PROTOTYPES`` (minus the state file's ``omit`` lines, a library
without those symbols), taking the arguments ctypes would pass (``byref``/``pointer`` objects,
buffers, addresses, ints), writing the results through them and returning the same ``int``
codes.  It reads the same state file (``NPUWATCH_FAKE_DCMI_STATE``) with the same rules as the C
code: the format is described at the top of ``fake_dcmi.c``, and every rule below mirrors one
there (a test proves both answer alike, byte for byte): ``standin_state`` reads the file,
``standin_args`` takes the arguments as C does, ``standin_core`` holds the C helpers, and this
module the exported functions.  Its state (initialisation, call
counters) is one per process, like a library ``dlopen`` returns once.  The loader names it
``python:npuwatch.probes.simulator.dcmi_fake.standin``.
"""

from __future__ import annotations

import ctypes
import os
from typing import Tuple, Type

from npuwatch.probes.dcmi import abi
from npuwatch.probes.simulator.dcmi_fake.standin_args import INVALID_DEVICE_ID as _INVALID_DEVICE_ID
from npuwatch.probes.simulator.dcmi_fake.standin_args import INVALID_PARAMETER as _INVALID_PARAMETER
from npuwatch.probes.simulator.dcmi_fake.standin_args import NOT_SUPPORT as _NOT_SUPPORT
from npuwatch.probes.simulator.dcmi_fake.standin_args import OK as _OK
from npuwatch.probes.simulator.dcmi_fake.standin_args import address as _address
from npuwatch.probes.simulator.dcmi_fake.standin_args import name as _name
from npuwatch.probes.simulator.dcmi_fake.standin_args import number as _number
from npuwatch.probes.simulator.dcmi_fake.standin_args import put as _put
from npuwatch.probes.simulator.dcmi_fake.standin_args import put_text as _put_text
from npuwatch.probes.simulator.dcmi_fake.standin_args import zeroed as _zeroed
from npuwatch.probes.simulator.dcmi_fake.standin_core import FakeCore
from npuwatch.probes.simulator.dcmi_fake.standin_state import (
    MAX_PROCS_PER_CHIP,
    STATE_VARIABLE,
    read_omitted,
)


class _Fake(FakeCore):
    """One process's fake library: ``FakeCore``'s state and helpers, and one method per export."""

    # -- the exported functions, one method each, named as in C

    def dcmi_init(self) -> int:
        code = self.enter("dcmi_init")
        if code == _OK:
            self.initialised = True
        return code

    def dcmi_get_dcmi_version(self, dcmi_ver: object, length: object) -> int:
        return self.global_text(
            "dcmi_get_dcmi_version", "dcmi_version", dcmi_ver, _number(length, signed=False)
        )

    def dcmi_get_driver_version(self, driver_ver: object, length: object) -> int:
        return self.global_text(
            "dcmi_get_driver_version", "driver_version", driver_ver, _number(length, signed=False)
        )

    def dcmi_get_card_list(self, card_num: object, card_list: object, list_len: object) -> int:
        return self.list_cards("dcmi_get_card_list", card_num, card_list, list_len)

    def dcmi_get_card_num_list(self, card_num: object, card_list: object, list_len: object) -> int:
        return self.list_cards("dcmi_get_card_num_list", card_num, card_list, list_len)

    def dcmi_get_device_num_in_card(self, card_id: object, device_num: object) -> int:
        card = _number(card_id)
        code = self.enter("dcmi_get_device_num_in_card", card)
        if code != _OK:
            return code
        address = _address(device_num)
        if not address:
            return _INVALID_PARAMETER
        found = self.card(card)
        if found is None:
            return _INVALID_DEVICE_ID
        _put(ctypes.c_int, address, found[1])
        return _OK

    def dcmi_get_device_id_in_card(
        self, card_id: object, id_max: object, mcu_id: object, cpu_id: object
    ) -> int:
        card = _number(card_id)
        code = self.enter("dcmi_get_device_id_in_card", card)
        if code != _OK:
            return code
        addresses = [_address(id_max), _address(mcu_id), _address(cpu_id)]
        if not all(addresses):
            return _INVALID_PARAMETER
        found = self.card(card)
        if found is None:
            return _INVALID_DEVICE_ID
        for address, value in zip(addresses, found[2:]):
            _put(ctypes.c_int, address, value)
        return _OK

    def dcmi_get_device_type(self, card_id: object, device_id: object, device_type: object) -> int:
        card, dev, address = _number(card_id), _number(device_id), _address(device_type)
        code = self.enter_device("dcmi_get_device_type", card, dev, address)
        if code != _OK:
            return code
        found = self.card(card)
        if self.chip(card, dev) is not None:
            unit = abi.UNIT_NPU
        elif found is not None and found[3] >= 0 and found[3] == dev:
            unit = abi.UNIT_MCU
        else:
            unit = abi.UNIT_CPU
        _put(ctypes.c_int, address, unit)
        return _OK

    def dcmi_get_device_logic_id(self, logic_id: object, card_id: object, device_id: object) -> int:
        card, dev, address = _number(card_id), _number(device_id), _address(logic_id)
        code = self.enter_device("dcmi_get_device_logic_id", card, dev, address)
        if code != _OK:
            return code
        chip = self.chip(card, dev)
        if chip is None:
            return _INVALID_DEVICE_ID
        _put(ctypes.c_int, address, chip[2])
        return _OK

    def dcmi_get_device_phyid_from_logicid(self, logic_id: object, phy_id: object) -> int:
        code = self.enter("dcmi_get_device_phyid_from_logicid")
        if code != _OK:
            return code
        address, logic = _address(phy_id), _number(logic_id, signed=False)
        if not address:
            return _INVALID_PARAMETER
        chip = next((c for c in self.state.chips if c[2] == logic), None)
        if chip is None:
            return _INVALID_DEVICE_ID
        _put(ctypes.c_uint, address, chip[3])
        return _OK

    def dcmi_get_device_chip_info(self, card_id: object, device_id: object, chip_info: object) -> int:
        return self._chip_info("dcmi_get_device_chip_info", card_id, device_id, chip_info, abi.ChipInfo)

    def dcmi_get_device_chip_info_v2(self, card_id: object, device_id: object, chip_info: object) -> int:
        return self._chip_info("dcmi_get_device_chip_info_v2", card_id, device_id, chip_info, abi.ChipInfoV2)

    def _chip_info(
        self, name: str, card_id: object, device_id: object, out: object, kind: Type[ctypes.Structure]
    ) -> int:
        card, dev, address = _number(card_id), _number(device_id), _address(out)
        code = self.enter_device(name, card, dev, address)
        if code != _OK:
            return code
        if self.text(card, dev, "chip_name") is None:
            return _NOT_SUPPORT
        info = _zeroed(kind, address)
        self.fill_chip_info(card, dev, info)
        if kind is abi.ChipInfoV2:
            _put_text(address + abi.ChipInfoV2.npu_name.offset, 32, self.text(card, dev, "npu_name") or b"")
        return _OK

    def dcmi_get_device_pcie_info_v2(self, card_id: object, device_id: object, pcie_info: object) -> int:
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_pcie_info_v2", card_id, device_id, pcie_info, "pci.vendor"
        )
        if code != _OK:
            return code
        info = _zeroed(abi.PcieInfoAll, address)
        for field_name, key in (
            ("venderid", "pci.vendor"),
            ("subvenderid", "pci.subvendor"),
            ("deviceid", "pci.device"),
            ("subdeviceid", "pci.subdevice"),
            ("domain", "pci.domain"),
            ("bdf_busid", "pci.bus"),
            ("bdf_deviceid", "pci.dev"),
            ("bdf_funcid", "pci.func"),
        ):
            setattr(info, field_name, self.get_or_zero(card, dev, key))
        return _OK

    def dcmi_get_device_board_info(self, card_id: object, device_id: object, board_info: object) -> int:
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_board_info", card_id, device_id, board_info, "board.board_id"
        )
        if code != _OK:
            return code
        info = _zeroed(abi.BoardInfo, address)
        for field_name in ("board_id", "pcb_id", "bom_id", "slot_id"):
            setattr(info, field_name, self.get_or_zero(card, dev, f"board.{field_name}"))
        return _OK

    def dcmi_get_device_die_v2(
        self, card_id: object, device_id: object, input_type: object, die_id: object
    ) -> int:
        kind = _number(input_type)
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_die_v2", card_id, device_id, die_id, f"die.{kind}.0"
        )
        if code != _OK:
            return code
        info = _zeroed(abi.DieId, address)
        for index in range(5):
            info.soc_die[index] = self.get_or_zero(card, dev, f"die.{kind}.{index}")
        return _OK

    def dcmi_get_product_type(self, card_id: object, device_id: object, out: object, buf_size: object) -> int:
        card, dev, address = _number(card_id), _number(device_id), _address(out)
        code = self.enter_device("dcmi_get_product_type", card, dev, address)
        if code != _OK:
            return code
        size = _number(buf_size)
        if size <= 0:
            return _INVALID_PARAMETER
        text = self.text(card, dev, "product_type")
        if text is None:
            return _NOT_SUPPORT
        _put_text(address, size, text)
        return _OK

    def dcmi_get_device_health(self, card_id: object, device_id: object, health: object) -> int:
        return self.device_value("dcmi_get_device_health", card_id, device_id, "health", health, signed=False)

    def dcmi_get_device_errorcode_v2(
        self,
        card_id: object,
        device_id: object,
        error_count: object,
        error_code_list: object,
        list_len: object,
    ) -> int:
        card, dev, count_address = _number(card_id), _number(device_id), _address(error_count)
        code = self.enter_device("dcmi_get_device_errorcode_v2", card, dev, count_address)
        if code != _OK:
            return code
        listed = _address(error_code_list)
        if not listed:
            return _INVALID_PARAMETER
        codes = [e[2] for e in self.state.errors if e[0] == card and e[1] == dev][
            : _number(list_len, signed=False)
        ]
        for index, value in enumerate(codes):
            _put(ctypes.c_uint, listed + 4 * index, value)
        _put(ctypes.c_int, count_address, len(codes))
        return _OK

    def dcmi_get_device_errorcode_string(
        self, card_id: object, device_id: object, error_code: object, error_info: object, buf_size: object
    ) -> int:
        card, dev, address = _number(card_id), _number(device_id), _address(error_info)
        code = self.enter_device("dcmi_get_device_errorcode_string", card, dev, address)
        if code != _OK:
            return code
        size, wanted = _number(buf_size), _number(error_code, signed=False)
        if size <= 0:
            return _INVALID_PARAMETER
        for e_card, e_dev, e_code, text in self.state.errors:
            if e_card == card and e_dev == dev and _number(e_code, signed=False) == wanted:
                _put_text(address, size, text)
                return _OK
        return _INVALID_PARAMETER

    def dcmi_get_device_temperature(self, card_id: object, device_id: object, temperature: object) -> int:
        return self.device_value(
            "dcmi_get_device_temperature", card_id, device_id, "temp", temperature, signed=True
        )

    def dcmi_get_device_power_info(self, card_id: object, device_id: object, power: object) -> int:
        return self.device_value(
            "dcmi_get_device_power_info", card_id, device_id, "power", power, signed=True
        )

    def dcmi_mcu_get_power_info(self, card_id: object, power: object) -> int:
        card = _number(card_id)
        code = self.enter("dcmi_mcu_get_power_info", card)
        if code != _OK:
            return code
        address = _address(power)
        if not address:
            return _INVALID_PARAMETER
        if self.card(card) is None:
            return _INVALID_DEVICE_ID
        value = self.get(card, -1, "mcu_power")
        if value is None:
            return _NOT_SUPPORT
        _put(ctypes.c_int, address, value)
        return _OK

    def dcmi_get_device_voltage(self, card_id: object, device_id: object, voltage: object) -> int:
        return self.device_value(
            "dcmi_get_device_voltage", card_id, device_id, "voltage", voltage, signed=False
        )

    def dcmi_get_device_frequency(
        self, card_id: object, device_id: object, input_type: object, frequency: object
    ) -> int:
        key = f"freq.{_number(input_type)}"
        return self.device_value(
            "dcmi_get_device_frequency", card_id, device_id, key, frequency, signed=False
        )

    def dcmi_get_device_utilization_rate(
        self, card_id: object, device_id: object, input_type: object, rate: object
    ) -> int:
        key = f"util.{_number(input_type)}"
        return self.device_value(
            "dcmi_get_device_utilization_rate", card_id, device_id, key, rate, signed=False
        )

    def dcmi_get_device_hbm_info(self, card_id: object, device_id: object, hbm_info: object) -> int:
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_hbm_info", card_id, device_id, hbm_info, "hbm.total"
        )
        if code != _OK:
            return code
        info = _zeroed(abi.HbmInfo, address)
        for field_name, key in (
            ("memory_size", "hbm.total"),
            ("freq", "hbm.freq"),
            ("memory_usage", "hbm.used"),
            ("temp", "hbm.temp"),
            ("bandwith_util_rate", "hbm.bw"),
        ):
            setattr(info, field_name, self.get_or_zero(card, dev, key))
        return _OK

    def dcmi_get_device_memory_info_v3(self, card_id: object, device_id: object, memory_info: object) -> int:
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_memory_info_v3", card_id, device_id, memory_info, "mem.total"
        )
        if code != _OK:
            return code
        info = _zeroed(abi.MemoryInfoV3, address)
        for field_name, key in (
            ("memory_size", "mem.total"),
            ("memory_available", "mem.avail"),
            ("freq", "mem.freq"),
            ("hugepagesize", "mem.hpsize"),
            ("hugepages_total", "mem.hptotal"),
            ("hugepages_free", "mem.hpfree"),
            ("utiliza", "mem.util"),
        ):
            setattr(info, field_name, self.get_or_zero(card, dev, key))
        return _OK

    def dcmi_get_device_memory_info_v2(self, card_id: object, device_id: object, memory_info: object) -> int:
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_memory_info_v2", card_id, device_id, memory_info, "mem.total"
        )
        if code != _OK:
            return code
        info = _zeroed(abi.MemoryInfoV2, address)
        for field_name, key in (("memory_size", "mem.total"), ("freq", "mem.freq"), ("utiliza", "mem.util")):
            setattr(info, field_name, self.get_or_zero(card, dev, key))
        return _OK

    def dcmi_get_device_ecc_info(
        self, card_id: object, device_id: object, input_type: object, ecc_info: object
    ) -> int:
        code, card, dev, address = self.struct_call(
            "dcmi_get_device_ecc_info", card_id, device_id, ecc_info, "ecc.type"
        )
        if code != _OK:
            return code
        if self.get(card, dev, "ecc.type") != _number(input_type):
            return _NOT_SUPPORT
        info = _zeroed(abi.EccInfo, address)
        for field_name, key in (
            ("enable_flag", "ecc.enable"),
            ("single_bit_error_cnt", "ecc.single"),
            ("double_bit_error_cnt", "ecc.double"),
            ("total_single_bit_error_cnt", "ecc.total_single"),
            ("total_double_bit_error_cnt", "ecc.total_double"),
            ("single_bit_isolated_pages_cnt", "ecc.iso_single"),
            ("double_bit_isolated_pages_cnt", "ecc.iso_double"),
        ):
            setattr(info, field_name, self.get_or_zero(card, dev, key))
        return _OK

    def dcmi_get_device_resource_info(
        self, card_id: object, device_id: object, proc_info: object, proc_num: object
    ) -> int:
        card, dev, address = _number(card_id), _number(device_id), _address(proc_info)
        code = self.enter_device("dcmi_get_device_resource_info", card, dev, address)
        if code != _OK:
            return code
        number = _address(proc_num)
        if not number:
            return _INVALID_PARAMETER
        rows = [p for p in self.state.procs if p[0] == card and p[1] == dev][:MAX_PROCS_PER_CHIP]
        size = ctypes.sizeof(abi.ProcMemInfo)
        for index, (_, _, pid, memory) in enumerate(rows):
            info = _zeroed(abi.ProcMemInfo, address + index * size)
            info.proc_id = pid
            info.proc_mem_usage = memory
        _put(ctypes.c_int, number, len(rows))
        return _OK

    # -- the self-check exports

    def npuwatch_fake_sizeof(self, name: object) -> int:
        kind = abi.STRUCTS.get(_name(name))
        return -1 if kind is None else ctypes.sizeof(kind)

    def npuwatch_fake_offsetof(self, name: object, field_name: object) -> int:
        kind = abi.STRUCTS.get(_name(name))
        found = None if kind is None else getattr(kind, _name(field_name), None)
        return (
            -1
            if found is None or kind is None or _name(field_name) not in {entry[0] for entry in kind._fields_}
            else int(found.offset)
        )

    def npuwatch_fake_calls(self, name: object) -> int:
        return self.totals.get(_name(name), -1)

    def npuwatch_fake_calls_on(self, name: object, card_id: object, device_id: object) -> int:
        text = _name(name)
        if text not in self.totals:
            return -1
        return self.counters.get((text, _number(card_id), _number(device_id)), 0)

    def npuwatch_fake_reset(self) -> None:
        self.totals = {name: 0 for name in abi.PROTOTYPES}
        self.counters = {}
        self.initialised = False


#: The exports beyond DCMI's own functions, always present (as in every build of the C file).
SELF_CHECKS = (
    "npuwatch_fake_sizeof",
    "npuwatch_fake_offsetof",
    "npuwatch_fake_calls",
    "npuwatch_fake_calls_on",
    "npuwatch_fake_reset",
)

_FAKE = _Fake()


class StandIn:
    """A library handle: the process's fake, with the omitted functions absent (``AttributeError``)."""

    def __init__(self, fake: _Fake, omitted: Tuple[str, ...]) -> None:
        self._omitted = frozenset(omitted)
        for name in (*abi.PROTOTYPES, *SELF_CHECKS):
            if name not in self._omitted:
                setattr(self, name, getattr(fake, name))

    @property
    def omitted(self) -> Tuple[str, ...]:
        """The DCMI functions this handle lacks, in ``abi.PROTOTYPES`` order."""
        return tuple(name for name in abi.PROTOTYPES if name in self._omitted)

    def __repr__(self) -> str:
        return f"<fake DCMI stand-in, state {os.environ.get(STATE_VARIABLE, '(unset)')!r}>"


def load() -> StandIn:
    """The stand-in library (``python:npuwatch.probes.simulator.dcmi_fake.standin``), minus the
    state's ``omit``."""
    return StandIn(_FAKE, read_omitted(os.environ.get(STATE_VARIABLE)))
