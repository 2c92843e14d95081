"""Provides the stand-in's side of a C call: the arguments as C receives them (an address, a
wrapped integer), the results written through them, the return codes, and a hang as the C
code's.
"""

from __future__ import annotations

import ctypes
import time
from typing import Type

from npuwatch.probes.dcmi import abi

OK = abi.DCMI_OK
INVALID_PARAMETER = abi.INVALID_PARAMETER
INNER_ERR = abi.INNER_ERR
INVALID_DEVICE_ID = -8007
NOT_SUPPORT = abi.NOT_SUPPORT


def address(argument: object) -> int:
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


def number(argument: object, bits: int = 32, signed: bool = True) -> int:
    """An integer argument as C receives it: wrapped to ``bits``, signed or not."""
    value = int(getattr(argument, "value", argument))  # type: ignore[call-overload]
    value &= (1 << bits) - 1
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def put(kind: Type[ctypes._SimpleCData], address: int, value: int) -> None:
    kind.from_address(address).value = value


def put_text(address: int, size: int, text: bytes) -> None:
    """``copy_text``: at most ``size - 1`` bytes and a NUL; the rest of the buffer untouched."""
    if size <= 0:
        return
    data = text[: size - 1] + b"\0"
    ctypes.memmove(address, data, len(data))


def zeroed(kind: Type[ctypes.Structure], address: int) -> ctypes.Structure:
    ctypes.memset(address, 0, ctypes.sizeof(kind))
    return kind.from_address(address)


def name(argument: object) -> str:
    raw = getattr(argument, "value", argument)
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw)


def hang(seconds: int) -> None:
    if seconds > 0:
        time.sleep(seconds)
        return
    while True:  # a wedged driver: the caller's deadline must kill us
        time.sleep(3600)
