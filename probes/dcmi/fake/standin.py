"""Provides load(): the pure-Python stand-in of the fake ``libdcmi.so``, for machines without a C compiler.

The object ``load()`` returns has the call surface of a ``ctypes.CDLL`` of ``fake_dcmi.c``: one
attribute per function of ``abi.PROTOTYPES`` (minus the state file's ``omit`` lines, a library
without those symbols), taking the arguments ctypes would pass (``byref``/``pointer`` objects,
buffers, addresses, ints), writing the results through them and returning the same ``int``
codes.  It reads the same state file (``NPUWATCH_FAKE_DCMI_STATE``) with the same rules as the C
code: the format is described at the top of ``fake_dcmi.c``, and every rule below mirrors one
there (a test proves both answer alike, byte for byte).  Its state (initialisation, call
counters) is one per process, like a library ``dlopen`` returns once.  The loader names it
``python:npuwatch.probes.dcmi.fake.standin``.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple, Type

from npuwatch.probes.dcmi import abi

STATE_VARIABLE = "NPUWATCH_FAKE_DCMI_STATE"

# The C file's limits (fake_dcmi.c): lines, texts, keys and table sizes.
_LINE_BYTES = 1024
_MAX_FILE_BYTES = 1024 * 1024
_TEXT_BYTES = 256
_KEY_BYTES = 32
_NAME_BYTES = 64
_LIMITS = {
    "cards": 64,
    "chips": 256,
    "ints": 8192,
    "texts": 1024,
    "procs": 2048,
    "errors": 1024,
    "faults": 256,
}
_MAX_PROCS_PER_CHIP = 32
_MAX_COUNTERS = 4096
_TOKEN = re.compile(rb"[ \t]*([^ \t]+)")
#: The common ``i CARD DEV KEY VALUE`` line in plain decimals: parsed in one match (the general
#: path gives the same result, slower).
_DECIMAL = rb"(-?(?:[1-9][0-9]{0,17}|0))"
_PLAIN_INT = re.compile(
    rb"i[ \t]+"
    + _DECIMAL
    + rb"[ \t]+"
    + _DECIMAL
    + rb"[ \t]+([^ \t]{1,31})[ \t]+"
    + _DECIMAL
    + rb"(?:[ \t]|\Z)"
)
_INTEGER = re.compile(rb"^[+-]?(0[xX][0-9a-fA-F]+|[1-9][0-9]*|0[0-7]*)$")
_LLONG = (-(1 << 63), (1 << 63) - 1)

_OK = abi.DCMI_OK
_INVALID_PARAMETER = abi.INVALID_PARAMETER
_INNER_ERR = abi.INNER_ERR
_INVALID_DEVICE_ID = -8007
_NOT_SUPPORT = abi.NOT_SUPPORT


@dataclass(frozen=True)
class _Fault:
    function: bytes
    card: int
    dev: int
    kind: str  # "rc", "hang", "crash"
    value: int


@dataclass
class _State:
    """The parsed state file: every table of the C ``struct state``, first record wins."""

    cards: List[Tuple[int, int, int, int, int]] = field(default_factory=list)  # id, num, max, mcu, cpu
    chips: List[Tuple[int, int, int, int]] = field(default_factory=list)  # card, dev, logic, phy
    ints: List[Tuple[int, int, bytes, int]] = field(default_factory=list)
    texts: List[Tuple[int, int, bytes, bytes]] = field(default_factory=list)
    procs: List[Tuple[int, int, int, int]] = field(default_factory=list)
    errors: List[Tuple[int, int, int, bytes]] = field(default_factory=list)
    faults: List[_Fault] = field(default_factory=list)
    omit: List[str] = field(default_factory=list)
    int_index: Dict[Tuple[int, int, bytes], int] = field(default_factory=dict)
    text_index: Dict[Tuple[int, int, bytes], bytes] = field(default_factory=dict)

    def room(self, table: str) -> bool:
        return len(getattr(self, table)) < _LIMITS[table]


# ---------------------------------------------------------------- parsing (mirrors the C code)


def _tokens(line: bytes, count: int) -> Tuple[List[bytes], Optional[bytes]]:
    """Up to ``count`` tokens split on spaces/tabs, and what follows them (``None`` if short)."""
    found: List[bytes] = []
    position = 0
    for _ in range(count):
        match = _TOKEN.match(line, position)
        if match is None:
            return found, None
        found.append(match.group(1))
        position = match.end()
    return found, line[position:]


def _integer(token: bytes) -> Optional[int]:
    """``strtoll(token, &end, 0)`` over the whole token, clamped as strtoll clamps."""
    if not _INTEGER.match(token):
        return None
    sign = -1 if token[:1] == b"-" else 1
    digits = token.lstrip(b"+-")
    if digits[:2] in (b"0x", b"0X"):
        value = int(digits[2:], 16)
    elif len(digits) > 1 and digits[:1] == b"0":
        value = int(digits[1:], 8)
    else:
        value = int(digits)
    return min(max(sign * value, _LLONG[0]), _LLONG[1])


def _integers(tokens: List[bytes]) -> Optional[List[int]]:
    values = [_integer(t) for t in tokens]
    return None if any(v is None for v in values) else [int(str(v)) for v in values]


def _text(rest: bytes) -> bytes:
    return rest.lstrip(b" \t")[: _TEXT_BYTES - 1]


def _parse_line(state: _State, line: bytes) -> None:
    plain = _PLAIN_INT.match(line)
    if plain is not None:
        if state.room("ints"):
            key = (int(plain.group(1)), int(plain.group(2)), plain.group(3))
            value = int(plain.group(4))
            state.ints.append((*key, value))
            state.int_index.setdefault(key, value)
        return
    head, rest = _tokens(line, 1)
    if rest is None or head[0][:1] == b"#":
        return
    kind = head[0][: _NAME_BYTES - 1]
    handler = _HANDLERS.get(kind)
    if handler is not None:
        handler(state, rest)


def _card(state: _State, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 5)
    values = _integers(tokens) if tail is not None else None
    if values is not None and state.room("cards"):
        state.cards.append((values[0], values[1], values[2], values[3], values[4]))


def _chip(state: _State, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 4)
    values = _integers(tokens) if tail is not None else None
    if values is not None and state.room("chips"):
        state.chips.append((values[0], values[1], values[2], values[3]))


def _proc(state: _State, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 4)
    values = _integers(tokens) if tail is not None else None
    if values is not None and state.room("procs"):
        state.procs.append((values[0], values[1], values[2], values[3]))


def _value(state: _State, rest: bytes, is_int: bool) -> None:
    tokens, tail = _tokens(rest, 3)
    where = _integers(tokens[:2]) if tail is not None else None
    if where is None or tail is None or len(tokens[2]) >= _KEY_BYTES:
        return
    key = (where[0], where[1], tokens[2])
    if is_int:
        value_tokens, after = _tokens(tail, 1)
        value = _integer(value_tokens[0]) if after is not None else None
        if value is not None and state.room("ints"):
            state.ints.append((*key, value))
            state.int_index.setdefault(key, value)
    elif state.room("texts"):
        text = _text(tail)
        state.texts.append((*key, text))
        state.text_index.setdefault(key, text)


def _error(state: _State, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 3)
    values = _integers(tokens) if tail is not None else None
    if values is not None and tail is not None and state.room("errors"):
        state.errors.append((values[0], values[1], values[2], _text(tail)))


def _fault(kind: str) -> Callable[[_State, bytes], None]:
    def parse(state: _State, rest: bytes) -> None:
        name, tail = _tokens(rest, 1)
        if tail is None or len(name[0]) >= _NAME_BYTES:
            return
        tokens, after = _tokens(tail, 2 if kind == "crash" else 3)
        values = _integers(tokens) if after is not None else None
        if values is None or not state.room("faults"):
            return
        state.faults.append(_Fault(name[0], values[0], values[1], kind, 0 if kind == "crash" else values[2]))

    return parse


def _omit(state: _State, rest: bytes) -> None:
    name, tail = _tokens(rest, 1)
    if tail is not None:
        state.omit.append(name[0].decode("ascii", "replace"))


_HANDLERS: Dict[bytes, Callable[[_State, bytes], None]] = {
    b"card": _card,
    b"chip": _chip,
    b"proc": _proc,
    b"i": lambda state, rest: _value(state, rest, True),
    b"s": lambda state, rest: _value(state, rest, False),
    b"err": _error,
    b"rc": _fault("rc"),
    b"hang": _fault("hang"),
    b"crash": _fault("crash"),
    b"omit": _omit,
}


def parse_state(data: bytes) -> _State:
    """The state a file's bytes describe, read exactly as ``fake_dcmi.c`` reads them."""
    state = _State()
    for raw in data[:_MAX_FILE_BYTES].split(b"\n"):
        line = raw[: _LINE_BYTES - 1].split(b"\0", 1)[0].rstrip(b"\r\n")
        _parse_line(state, line)
    return state


def read_omitted(path: Optional[str]) -> Tuple[str, ...]:
    """The functions the state file at ``path`` says the library lacks (``omit`` lines)."""
    if not path:
        return ()
    try:
        with open(path, "rb") as handle:
            return tuple(parse_state(handle.read(_MAX_FILE_BYTES)).omit)
    except OSError:
        return ()


# ---------------------------------------------------------------- ctypes arguments


def _address(argument: object) -> int:
    """The address a ctypes argument points at (0 for None/NULL)."""
    if argument is None:
        return 0
    if isinstance(argument, int):
        return argument
    if isinstance(argument, (ctypes._Pointer, ctypes.c_void_p, ctypes.c_char_p)):
        return ctypes.cast(argument, ctypes.c_void_p).value or 0
    target = getattr(argument, "_obj", None)  # ctypes.byref(x)
    if target is not None:
        return ctypes.addressof(target)
    return ctypes.addressof(argument)  # type: ignore[arg-type]  # an array, structure or simple value


def _number(argument: object, bits: int = 32, signed: bool = True) -> int:
    """An integer argument as C receives it: wrapped to ``bits``, signed or not."""
    value = int(getattr(argument, "value", argument))  # type: ignore[call-overload]
    value &= (1 << bits) - 1
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _put(kind: Type[ctypes._SimpleCData], address: int, value: int) -> None:
    kind.from_address(address).value = value


def _put_text(address: int, size: int, text: bytes) -> None:
    """``copy_text``: at most ``size - 1`` bytes and a NUL; the rest of the buffer untouched."""
    if size <= 0:
        return
    data = text[: size - 1] + b"\0"
    ctypes.memmove(address, data, len(data))


def _zeroed(kind: Type[ctypes.Structure], address: int) -> ctypes.Structure:
    ctypes.memset(address, 0, ctypes.sizeof(kind))
    return kind.from_address(address)


# ---------------------------------------------------------------- the library


class _Fake:
    """One process's fake library: the parsed state, the counters and the initialisation flag."""

    def __init__(self) -> None:
        self.state = _State()
        self.loaded: Optional[Tuple[str, int, int, int, int]] = None
        self.totals: Dict[str, int] = {name: 0 for name in abi.PROTOTYPES}
        self.counters: Dict[Tuple[str, int, int], int] = {}
        self.initialised = False

    # -- the C helpers

    def refresh(self) -> bool:
        path = os.environ.get(STATE_VARIABLE, "")
        if not path or len(path.encode()) >= 4096:
            return False
        try:
            info = os.stat(path)
        except OSError:
            return False
        key = (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
        if self.loaded == key:
            return True
        try:
            with open(path, "rb") as handle:
                data = handle.read(_MAX_FILE_BYTES)
        except OSError:
            return False
        self.state = parse_state(data)
        self.loaded = key
        return True

    def count(self, name: str, card: int, dev: int) -> None:
        self.totals[name] += 1
        key = (name, card, dev)
        if key in self.counters:
            self.counters[key] += 1
        elif len(self.counters) < _MAX_COUNTERS:
            self.counters[key] = 1

    def enter(self, name: str, card: int = -1, dev: int = -1) -> int:
        self.count(name, card, dev)
        if not self.refresh():
            return _INNER_ERR
        for fault in self.state.faults:
            if fault.function != name.encode() or fault.card not in (-1, card) or fault.dev not in (-1, dev):
                continue
            if fault.kind == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)  # as the C code's write through NULL
            elif fault.kind == "hang":
                _hang(fault.value)
            else:
                return _number(fault.value)
        if name != "dcmi_init" and not self.initialised:
            return _INNER_ERR
        return _OK

    def card(self, card: int) -> Optional[Tuple[int, int, int, int, int]]:
        return next((c for c in self.state.cards if c[0] == card), None)

    def chip(self, card: int, dev: int) -> Optional[Tuple[int, int, int, int]]:
        return next((c for c in self.state.chips if c[0] == card and c[1] == dev), None)

    def known(self, card: int, dev: int) -> bool:
        found = self.card(card)
        if self.chip(card, dev) is not None:
            return True
        return found is not None and (
            (found[3] >= 0 and found[3] == dev) or (found[4] >= 0 and found[4] == dev)
        )

    def get(self, card: int, dev: int, key: str) -> Optional[int]:
        return self.state.int_index.get((card, dev, key.encode()))

    def get_or_zero(self, card: int, dev: int, key: str) -> int:
        value = self.get(card, dev, key)
        return 0 if value is None else value

    def text(self, card: int, dev: int, key: str) -> Optional[bytes]:
        return self.state.text_index.get((card, dev, key.encode()))

    def enter_device(self, name: str, card: int, dev: int, out: int) -> int:
        code = self.enter(name, card, dev)
        if code != _OK:
            return code
        if not out:
            return _INVALID_PARAMETER
        return _OK if self.known(card, dev) else _INVALID_DEVICE_ID

    def device_value(self, name: str, card: object, dev: object, key: str, out: object, signed: bool) -> int:
        c, d, address = _number(card), _number(dev), _address(out)
        code = self.enter_device(name, c, d, address)
        if code != _OK:
            return code
        value = self.get(c, d, key)
        if value is None:
            return _NOT_SUPPORT
        _put(ctypes.c_int if signed else ctypes.c_uint, address, value)
        return _OK

    def global_text(self, name: str, key: str, out: object, size: object) -> int:
        code = self.enter(name)
        if code != _OK:
            return code
        address, length = _address(out), _number(size, 64)
        if not address or length <= 0:
            return _INVALID_PARAMETER
        text = self.text(-1, -1, key)
        if text is None:
            return _NOT_SUPPORT
        _put_text(address, length, text)
        return _OK

    def list_cards(self, name: str, card_num: object, card_list: object, list_len: object) -> int:
        code = self.enter(name)
        if code != _OK:
            return code
        number, listed, length = _address(card_num), _address(card_list), _number(list_len)
        if not number or not listed or length <= 0:
            return _INVALID_PARAMETER
        ids = [c[0] for c in self.state.cards][:length]
        for index, card in enumerate(ids):
            _put(ctypes.c_int, listed + 4 * index, card)
        _put(ctypes.c_int, number, len(ids))
        return _OK

    def fill_chip_info(self, card: int, dev: int, info: ctypes.Structure) -> None:
        base = ctypes.addressof(info)
        for field_name in ("chip_type", "chip_name", "chip_ver"):
            text = self.text(card, dev, field_name) or b""
            _put_text(base + getattr(type(info), field_name).offset, 32, text)
        info.aicore_cnt = self.get_or_zero(card, dev, "aicore_cnt")

    def struct_call(
        self, name: str, card: object, dev: object, out: object, required: str
    ) -> Tuple[int, int, int, int]:
        """enter_device() and the required key: (code, card, dev, address)."""
        c, d, address = _number(card), _number(dev), _address(out)
        code = self.enter_device(name, c, d, address)
        if code == _OK and self.get(c, d, required) is None:
            code = _NOT_SUPPORT
        return code, c, d, address

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
        rows = [p for p in self.state.procs if p[0] == card and p[1] == dev][:_MAX_PROCS_PER_CHIP]
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


def _name(argument: object) -> str:
    raw = getattr(argument, "value", argument)
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw)


def _hang(seconds: int) -> None:
    if seconds > 0:
        time.sleep(seconds)
        return
    while True:  # a wedged driver: the caller's deadline must kill us
        time.sleep(3600)


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
    """The stand-in library (``python:npuwatch.probes.dcmi.fake.standin``), minus the state's ``omit``."""
    return StandIn(_FAKE, read_omitted(os.environ.get(STATE_VARIABLE)))
