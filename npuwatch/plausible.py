"""Provides plausible() and capped(): impossible chip values set aside, warnings bounded.

A broken sensor or a garbled table can give values no chip can have (−273 000 °C, −363 W,
AI Core 999 %, more HBM used than the chip has).  Such a value is never shown or graphed as a
reading: the metric becomes unavailable (``MetricStatus.ERROR``) and its reason keeps the raw
value, so the JSON and the text still say what the source printed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Iterable, List, Optional, Tuple

from npuwatch.metrics_table import METRICS
from npuwatch.model import ChipSample, MetricNote, MetricStatus

#: metric → (lowest, highest, unit) a real chip can report (the metric table's); ``None``: no bound.
_RANGES: Dict[str, Tuple[Optional[float], Optional[float], str]] = {
    row.name: (row.lowest, row.highest, row.unit) for row in METRICS
}
#: (used, total): used above a known total is impossible; the used value is set aside.
_PAIRS = tuple((row.name, row.total) for row in METRICS if row.total is not None and row.total != row.name)


def plausible(chip: ChipSample) -> Tuple[ChipSample, Tuple[str, ...]]:
    """``chip`` with its impossible values made unavailable, and a warning naming them (or none)."""
    reasons: Dict[str, str] = {}
    for metric, (low, high, unit) in _RANGES.items():
        raw = getattr(chip, metric)  # every tick, every chip: no float() unless it is out of range
        if raw is not None and ((low is not None and raw < low) or (high is not None and raw > high)):
            value = float(raw)
            reasons[metric] = f"implausible value {value:g} {unit} (outside {_range(low, high, unit)})"
    for used, total in _PAIRS:
        used_value, total_value = chip.metric(used), chip.metric(total)
        if used in reasons or total in reasons or used_value is None or not total_value:
            continue
        if used_value > total_value:
            unit = _RANGES[used][2]
            reasons[used] = (
                f"implausible value {used_value:g} {unit} (more than the {total_value:g} {unit} total)"
            )
    if not reasons:
        return chip, ()
    notes = dict(chip.notes)
    for metric, reason in reasons.items():
        notes[metric] = MetricNote(MetricStatus.IMPLAUSIBLE, f"{reason}: not a real reading")
    cleared = {metric: None for metric in reasons}
    values = ", ".join(f"{metric} {chip.metric(metric):g}" for metric in reasons)
    why = "a broken sensor or a garbled table"
    warning = f"{chip.identity.label}: implausible {values}: not shown or graphed ({why})"
    return replace(chip, notes=notes, **cleared), (warning,)  # type: ignore[arg-type]


def capped(warnings: Iterable[str], limit: int) -> Tuple[str, ...]:
    """The distinct ``warnings`` in order, at most ``limit``: the last then says how many more."""
    distinct: List[str] = list(dict.fromkeys(warnings))
    if len(distinct) <= limit:
        return tuple(distinct)
    hidden = len(distinct) - (limit - 1)
    return (*distinct[: limit - 1], f"… and {hidden} more warnings")


def _range(low: Optional[float], high: Optional[float], unit: str) -> str:
    if high is None:
        return f"at least {_bound(low)} {unit}"
    if low is None:
        return f"at most {_bound(high)} {unit}"
    return f"{_bound(low)} to {_bound(high)} {unit}"


def _bound(value: Optional[float]) -> str:
    """A range's end as written in the metric table: ``1048576``, not ``1.04858e+06``."""
    number = float(value or 0)
    return str(int(number)) if number.is_integer() else f"{number:g}"
