"""Provides the option values the commands share: positive numbers from flags, seconds from variables."""

from __future__ import annotations

import argparse
import math
import os
from typing import List, Mapping, Optional

from npuwatch.errors import UsageError, VariableError

#: The longest interval or timeout: a day.  Anything longer is a typo, and a sleep or a timer that
#: long overflows the C clocks Python hands it to (``1e300`` was an "internal error").
MAX_SECONDS = 86400.0


def positive(text: str, expected: str, unit: str, maximum: float = math.inf) -> float:
    """``text`` as a finite number above 0, at most ``maximum``; the error names what was ``expected``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected more than 0 {unit}, got {text!r}")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"expected at most {maximum:g} {unit}, got {text!r}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a positive number of seconds, at most a day (``MAX_SECONDS``)."""
    return positive(text, "seconds", "seconds", MAX_SECONDS)


def duration(text: str) -> float:
    """An argparse type: how long to run (``record --duration``), at most a year of seconds."""
    return positive(text, "seconds", "seconds", 366 * MAX_SECONDS)


def minutes(text: str) -> float:
    """An argparse type: a positive number of minutes (``%npuwatch --history``), at most a day."""
    return positive(text, "minutes", "minutes", MAX_SECONDS / 60)


def megabytes(text: str) -> float:
    """An argparse type: a positive size in MB (MiB), like ``50`` or ``0.5``."""
    return positive(text, "a size in MB like 50 or 0.5", "MB")


def speed_factor(text: str) -> float:
    """An argparse type: a replay speed factor, like ``2`` or ``0.5``."""
    return positive(text, "a speed factor like 2 or 0.5", "as the speed factor")


def parse_npu_ids(text: str) -> List[int]:
    """NPU IDs like ``0,1,3`` (at least one, none negative); ``ValueError`` saying what was expected."""
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        ids = []
    if not ids or any(i < 0 for i in ids):
        raise ValueError(f"expected NPU IDs like 0,1,3, got {text!r}")
    return ids


def npu_ids(text: str) -> List[int]:
    """An argparse type: ``--devices 0,1,3``."""
    try:
        return parse_npu_ids(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def env_seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """Seconds from the variable ``name`` (``NPUWATCH_TIMEOUT`` …), ``default`` when unset.

    ``VariableError`` names the variable when its value is not a number of seconds above 0 and
    at most a day (NaN and infinity are not).
    """
    text = environ.get(name)
    if not text:
        return default
    hint = f"unset it or give seconds, e.g. {name}=5"
    try:
        value = float(text)
    except ValueError:
        raise VariableError(f"{name}={text!r} is not a number of seconds", name, hint) from None
    if not 0 < value < math.inf:
        raise VariableError(f"{name}={text!r} must be more than 0 seconds", name, hint)
    if value > MAX_SECONDS:
        raise VariableError(f"{name}={text!r} must be at most {MAX_SECONDS:g} seconds (a day)", name, hint)
    return value


def machine_root(given: Optional[str], environ: Mapping[str, str]) -> str:
    """The folder the machine is read from: ``--root``, else ``NPUWATCH_ROOT``, else ``/``.

    A value that is not a folder is a ``UsageError`` naming the option, or a ``VariableError``
    naming the variable.
    """
    root = given or environ.get("NPUWATCH_ROOT") or "/"
    if os.path.isdir(root):
        return root
    why = "not a directory" if os.path.exists(root) else "no such directory"
    advice = "give the folder a machine's files are read from, such as /"
    if given:
        raise UsageError(f"--root {given}: {why} ({advice})")
    hint = "unset NPUWATCH_ROOT or point it at a machine root folder"
    raise VariableError(f"NPUWATCH_ROOT={root}: {why} ({advice})", "NPUWATCH_ROOT", hint)
