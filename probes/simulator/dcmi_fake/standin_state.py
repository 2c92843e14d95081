"""Provides the stand-in's state file reader: ``parse_state`` reads the fake ``libdcmi.so``'s state
file (``NPUWATCH_FAKE_DCMI_STATE``) exactly as ``fake_dcmi.c`` does, every rule mirroring one there
(the C file's limits on lines, texts, keys and tables too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

STATE_VARIABLE = "NPUWATCH_FAKE_DCMI_STATE"

# The C file's limits (fake_dcmi.c): lines, texts, keys and table sizes.
_LINE_BYTES = 1024
MAX_FILE_BYTES = 1024 * 1024
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
MAX_PROCS_PER_CHIP = 32
MAX_COUNTERS = 4096
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


@dataclass(frozen=True)
class Fault:
    function: bytes
    card: int
    dev: int
    kind: str  # "rc", "hang", "crash"
    value: int


@dataclass
class FakeState:
    """The parsed state file: every table of the C ``struct state``, first record wins."""

    cards: List[Tuple[int, int, int, int, int]] = field(default_factory=list)  # id, num, max, mcu, cpu
    chips: List[Tuple[int, int, int, int]] = field(default_factory=list)  # card, dev, logic, phy
    ints: List[Tuple[int, int, bytes, int]] = field(default_factory=list)
    texts: List[Tuple[int, int, bytes, bytes]] = field(default_factory=list)
    procs: List[Tuple[int, int, int, int]] = field(default_factory=list)
    errors: List[Tuple[int, int, int, bytes]] = field(default_factory=list)
    faults: List[Fault] = field(default_factory=list)
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


def _parse_line(state: FakeState, line: bytes) -> None:
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


def _card(state: FakeState, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 5)
    values = _integers(tokens) if tail is not None else None
    if values is not None and state.room("cards"):
        state.cards.append((values[0], values[1], values[2], values[3], values[4]))


def _chip(state: FakeState, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 4)
    values = _integers(tokens) if tail is not None else None
    if values is not None and state.room("chips"):
        state.chips.append((values[0], values[1], values[2], values[3]))


def _proc(state: FakeState, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 4)
    values = _integers(tokens) if tail is not None else None
    if values is not None and state.room("procs"):
        state.procs.append((values[0], values[1], values[2], values[3]))


def _value(state: FakeState, rest: bytes, is_int: bool) -> None:
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


def _error(state: FakeState, rest: bytes) -> None:
    tokens, tail = _tokens(rest, 3)
    values = _integers(tokens) if tail is not None else None
    if values is not None and tail is not None and state.room("errors"):
        state.errors.append((values[0], values[1], values[2], _text(tail)))


def _fault(kind: str) -> Callable[[FakeState, bytes], None]:
    def parse(state: FakeState, rest: bytes) -> None:
        name, tail = _tokens(rest, 1)
        if tail is None or len(name[0]) >= _NAME_BYTES:
            return
        tokens, after = _tokens(tail, 2 if kind == "crash" else 3)
        values = _integers(tokens) if after is not None else None
        if values is None or not state.room("faults"):
            return
        state.faults.append(Fault(name[0], values[0], values[1], kind, 0 if kind == "crash" else values[2]))

    return parse


def _omit(state: FakeState, rest: bytes) -> None:
    name, tail = _tokens(rest, 1)
    if tail is not None:
        state.omit.append(name[0].decode("ascii", "replace"))


_HANDLERS: Dict[bytes, Callable[[FakeState, bytes], None]] = {
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


def parse_state(data: bytes) -> FakeState:
    """The state a file's bytes describe, read exactly as ``fake_dcmi.c`` reads them."""
    state = FakeState()
    for raw in data[:MAX_FILE_BYTES].split(b"\n"):
        line = raw[: _LINE_BYTES - 1].split(b"\0", 1)[0].rstrip(b"\r\n")
        _parse_line(state, line)
    return state


def read_omitted(path: Optional[str]) -> Tuple[str, ...]:
    """The functions the state file at ``path`` says the library lacks (``omit`` lines)."""
    if not path:
        return ()
    try:
        with open(path, "rb") as handle:
            return tuple(parse_state(handle.read(MAX_FILE_BYTES)).omit)
    except OSError:
        return ()
