"""Provides the parsing of option values every command shares: seconds from a flag or a variable."""

from __future__ import annotations

import argparse
from typing import Mapping


def seconds(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, got {text!r}")
    return value


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
