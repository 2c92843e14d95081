"""Provides the DCMI reader's call gate: what a return code means for the next call of the same
function on the same chip, and the record of one chip's values and codes while a tick is read.

Return codes (driver-interfaces.md §9.1 rule 3), per chip and function:

* ``-8255``/``-8013`` (not supported): sticky — the function is never called for that chip again
  and every later tick reports the same code.
* ``-8006``/``-8012``/``-8017`` (transient): after ``n`` failures in a row the call is skipped for
  ``min(2**(n-1) - 1, 30)`` of the chip's ticks (the next tick retries after one failure), each
  skipped tick reporting the last code; a success resets the count.
* anything else: reported, and asked again next tick.
"""

from __future__ import annotations

from typing import Callable, Dict, Protocol, Sequence, Tuple

from npuwatch.probes.dcmi import abi
from npuwatch.probes.dcmi.records import INVALID_VALUE

#: Codes after which a function is never asked again for that chip.
UNSUPPORTED = frozenset({abi.NOT_SUPPORT, abi.NOT_SUPPORT_IN_CONTAINER})
#: Codes worth asking again later, with back-off.
TRANSIENT = frozenset({abi.TIME_OUT, abi.NOT_READY, abi.IS_UPGRADING})
#: Most ticks a transient failure can make the reader skip a call.
MAX_SKIPPED_TICKS = 30
#: Spare room after lists the library fills (it is told the list's length, but may be wrong).
SPARE_BYTES = abi.OUTPUT_BYTES

_MIN_TEMPERATURE_C = -275  # MindCluster: below this a temperature read failed

Key = Tuple[int, int, str]


class CallSurface(Protocol):
    """What the reader needs of a library: ``library.DcmiLibrary`` is one."""

    def has(self, name: str) -> bool: ...

    def call(self, name: str, *args: object) -> int: ...


class Gate:
    """Sticky "not supported" and transient back-off per (card, device, function).

    One dict holds every call that is not simply made: ``key → (ask again at tick, failures in a
    row, code)``, the tick ``-1`` for a sticky one; a call not in it goes straight through.
    """

    def __init__(self) -> None:
        self.tick_no = 0
        self._held: Dict[Key, Tuple[int, int, int]] = {}

    def call(self, function: Callable[..., object], key: Key, *args: object) -> int:
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


class Out:
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
