"""Provides the option values the commands share: positive numbers from flags, seconds from variables."""

from __future__ import annotations

import argparse
import math
import os
from typing import Mapping, Optional


class OptionUsageError(ValueError):
    """A shared option or variable whose value cannot be used (the CLI's exit 64)."""


def positive(text: str, expected: str, unit: str) -> float:
    """``text`` as a finite number above 0; argparse's error names what was ``expected``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected more than 0 {unit}, got {text!r}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    return positive(text, "seconds", "seconds")


def minutes(text: str) -> float:
    """An argparse type: a positive number of minutes (``%npuwatch --history``)."""
    return positive(text, "minutes", "minutes")


def megabytes(text: str) -> float:
    """An argparse type: a positive size in MB (MiB), like ``50`` or ``0.5``."""
    return positive(text, "a size in MB like 50 or 0.5", "MB")


def speed_factor(text: str) -> float:
    """An argparse type: a replay speed factor, like ``2`` or ``0.5``."""
    return positive(text, "a speed factor like 2 or 0.5", "as the speed factor")


def env_seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    """Seconds from the variable ``name`` (``NPUWATCH_TIMEOUT`` …), ``default`` when unset.

    ``ValueError`` names the variable when its value is not a positive number.
    """
    text = environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number of seconds") from None
    if value <= 0:
        raise ValueError(f"{name}={text!r} must be more than 0 seconds")
    return value


def machine_root(given: Optional[str], environ: Mapping[str, str]) -> str:
    """The folder the machine is read from: ``--root``, else ``NPUWATCH_ROOT``, else ``/``.

    ``OptionUsageError`` names where a value that is not a folder came from (option or variable).
    """
    if given:
        root, named = given, f"--root {given}"
    else:
        root = environ.get("NPUWATCH_ROOT") or "/"
        named = f"NPUWATCH_ROOT={root}"
    if os.path.isdir(root):
        return root
    why = "not a directory" if os.path.exists(root) else "no such directory"
    raise OptionUsageError(f"{named}: {why} (give the folder a machine's files are read from, such as /)")
