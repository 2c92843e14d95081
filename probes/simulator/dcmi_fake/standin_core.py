"""Provides ``FakeCore``: one process's fake library state (the parsed state file, the call
counters, the initialisation flag) and the helpers of ``fake_dcmi.c`` every exported function
uses (enter a call: count it, refresh the state, inject its faults; find a card, a chip, a value).
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import Dict, Optional, Tuple

from npuwatch.probes.dcmi import abi
from npuwatch.probes.simulator.dcmi_fake.standin_args import INNER_ERR as _INNER_ERR
from npuwatch.probes.simulator.dcmi_fake.standin_args import INVALID_DEVICE_ID as _INVALID_DEVICE_ID
from npuwatch.probes.simulator.dcmi_fake.standin_args import INVALID_PARAMETER as _INVALID_PARAMETER
from npuwatch.probes.simulator.dcmi_fake.standin_args import NOT_SUPPORT as _NOT_SUPPORT
from npuwatch.probes.simulator.dcmi_fake.standin_args import OK as _OK
from npuwatch.probes.simulator.dcmi_fake.standin_args import address as _address
from npuwatch.probes.simulator.dcmi_fake.standin_args import hang as _hang
from npuwatch.probes.simulator.dcmi_fake.standin_args import number as _number
from npuwatch.probes.simulator.dcmi_fake.standin_args import put as _put
from npuwatch.probes.simulator.dcmi_fake.standin_args import put_text as _put_text
from npuwatch.probes.simulator.dcmi_fake.standin_state import (
    MAX_COUNTERS,
    MAX_FILE_BYTES,
    STATE_VARIABLE,
    FakeState,
    parse_state,
)


class FakeCore:
    """One process's fake library: the parsed state, the counters and the initialisation flag."""

    def __init__(self) -> None:
        self.state = FakeState()
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
                data = handle.read(MAX_FILE_BYTES)
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
        elif len(self.counters) < MAX_COUNTERS:
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
