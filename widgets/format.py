"""Provides the unit formatting every view shares: MiB→GiB, W, °C, %, durations, ``n/a``."""

from __future__ import annotations

from typing import Optional, Sequence

from npuwatch.model import Health

NA = "n/a"
MIB_PER_GIB = 1024

#: A distinct glyph per health, so a state reads without colour (NO_COLOR, plain text).
HEALTH_GLYPHS = {
    Health.OK: "✔",
    Health.WARNING: "▲",
    Health.ALARM: "✖",
    Health.CRITICAL: "‼",
    Health.UNKNOWN: "?",
}


def mib(value: Optional[float]) -> str:
    """``3120`` → ``3120 MiB`` (npu-smi's per-process figure, as printed)."""
    return NA if value is None else f"{value:.0f} MiB"


def load(values: Optional[Sequence[float]]) -> str:
    """``(0.1, 0.25, 1.5)`` → ``0.10 0.25 1.50``."""
    return NA if not values else " ".join(f"{v:.2f}" for v in values)


def gib(mib: Optional[float], digits: int = 1) -> str:
    """``53984`` MiB → ``52.7``; ``None`` → ``n/a``."""
    if mib is None:
        return NA
    return f"{mib / MIB_PER_GIB:.{digits}f}"


def used_total_gib(used_mib: Optional[float], total_mib: Optional[float]) -> str:
    """``52.7/64.0 GiB``, or ``n/a`` when either side is missing."""
    if used_mib is None or total_mib is None:
        return NA
    return f"{gib(used_mib)}/{gib(total_mib)} GiB"


def used_total_bytes(used_bytes: Optional[float], total_bytes: Optional[float]) -> str:
    """Host memory, which arrives in bytes: ``24.1/64.0 GiB``."""
    if used_bytes is None or total_bytes is None:
        return NA
    return used_total_gib(used_bytes / 2**20, total_bytes / 2**20)


def percent(value: Optional[float], digits: int = 0) -> str:
    """``7`` → ``7%``."""
    return NA if value is None else f"{value:.{digits}f}%"


def watts(value: Optional[float], rated_w: Optional[float] = None) -> str:
    """``90.7 W`` or ``90.7/400 W`` against a rating."""
    if value is None:
        return NA
    if rated_w:
        return f"{value:.1f}/{rated_w:.0f} W"
    return f"{value:.1f} W"


def celsius(value: Optional[float]) -> str:
    """``37 °C``."""
    return NA if value is None else f"{value:.0f} °C"


def bytes_iec(value: Optional[float]) -> str:
    """``1536`` → ``1.5 KiB``; scales up to TiB."""
    if value is None:
        return NA
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def duration(seconds: Optional[float]) -> str:
    """``3725`` → ``1:02:05``; days as ``2d 03:04``."""
    if seconds is None or seconds < 0:
        return NA
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}:{minutes:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def with_unit(value: Optional[float], unit: str) -> str:
    """A metric's value in its unit (the metric table's ``unit``): ``64%``, ``52.7 GiB`` for MiB,
    ``90.7 W``, ``37 °C``, ``12 pages``."""
    if value is None:
        return NA
    shown = _UNIT_FORMATS.get(unit)
    return shown(value) if shown is not None else f"{value:g} {unit}"


def _gib_text(value: Optional[float]) -> str:
    return f"{gib(value)} GiB"


_UNIT_FORMATS = {"%": percent, "MiB": _gib_text, "W": watts, "°C": celsius}


def number(value: Optional[float], digits: int = 0) -> str:
    """A plain number or ``n/a``."""
    return NA if value is None else f"{value:.{digits}f}"
