"""Provides the value readers every npu-smi parser shares (placeholders, integers, decimals) and
the kernel's PID range."""

from __future__ import annotations

import re
from typing import Optional

#: The kernel's largest PID (PID_MAX_LIMIT, 2**22 on 64-bit): a PID outside 1..this is not one.
PID_MAX = 4_194_304

#: What npu-smi prints where it has no value (docs/design.md §2.2: placeholders become None), compared
#: without case: ``NA`` (310P power, 044), ``-`` (A3 chip 1 power, 007), ``N/A``, ``Failed``,
#: ``NOT SUPPORT`` (key/value queries).
PLACEHOLDERS = frozenset({"", "NA", "N/A", "-", "--", "FAILED", "NOT SUPPORT"})

# ASCII only: str.isdigit() and \d accept digits int() or float() read differently (²,  ٣).
_INT_RE = re.compile(r"^[+-]?[0-9]+(?:\.0+)?$", re.ASCII)
_HEX_RE = re.compile(r"^0[xX][0-9a-fA-F]+$")
_FLOAT_RE = re.compile(r"^[+-]?[0-9]+(?:\.[0-9]+)?$", re.ASCII)


def is_placeholder(value: str) -> bool:
    """Whether npu-smi printed ``value`` to mean "no value"."""
    return value.strip().upper() in PLACEHOLDERS


def to_text(value: Optional[str]) -> Optional[str]:
    """The value, stripped, or ``None`` for a placeholder such as ``NA``."""
    if value is None:
        return None
    value = value.strip()
    return None if value.upper() in PLACEHOLDERS else value


def to_int(value: Optional[str]) -> Optional[int]:
    """An integer (decimal, or ``0x`` hex as npu-smi prints IDs); ``None`` otherwise."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit() and text.isascii():  # the common case, cheaply (a table has hundreds)
        return int(text)
    if text.upper() in PLACEHOLDERS:
        return None
    if _HEX_RE.match(text):
        return int(text, 16)
    if _INT_RE.match(text):
        return int(text.split(".")[0])
    return None


def to_float(value: Optional[str]) -> Optional[float]:
    """A decimal number such as ``93.4``; ``None`` for placeholders and anything else."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.replace(".", "", 1).isdigit():  # the common case, cheaply
        return float(text)
    if text.upper() in PLACEHOLDERS or not _FLOAT_RE.match(text):
        return None
    return float(text)
