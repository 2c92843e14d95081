"""Provides disagreements(): where DCMI and npu-smi read the same machine differently (the dcmi check).

Two reads are a moment apart and the values move, so each metric has a tolerance, stated in the
check's text (``TOLERANCES_TEXT``).  A metric only one backend has (an A3's second die has no
power in npu-smi's table) is not a disagreement; a chip only one backend lists is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Tuple

from npuwatch.chip_source import ChipReading
from npuwatch.model import ChipSample

#: How far the two backends' values may be apart and still agree (values move between two reads).
TEMPERATURE_TOLERANCE_C = 2.0
POWER_TOLERANCE_W = 5.0
POWER_TOLERANCE_SHARE = 0.05
AICORE_TOLERANCE_POINTS = 10.0
TOLERANCES_TEXT = "temperature ±2 °C, power ±5 W or 5 %, AI Core ±10 points"


@dataclass(frozen=True)
class Disagreement:
    """One chip and metric the two backends read differently (or a chip only one lists)."""

    key: Tuple[int, int, str]  # (NPU, chip, metric): the same disagreement in two rounds
    text: str


def _temperature(value: float) -> str:
    return f"{value:g} °C"


def _power(value: float) -> str:
    return f"{value:.1f} W"


def _percent(value: float) -> str:
    return f"{value:g} %"


def _power_tolerance(a: float, b: float) -> float:
    return max(POWER_TOLERANCE_W, POWER_TOLERANCE_SHARE * max(abs(a), abs(b)))


#: (field, words, format, allowed difference for the two values, tolerance in words)
METRICS: Tuple[Tuple[str, str, Callable[[float], str], Callable[[float, float], float], str], ...] = (
    ("temperature_c", "temperature", _temperature, lambda a, b: TEMPERATURE_TOLERANCE_C, "±2 °C"),
    ("power_w", "power", _power, _power_tolerance, "±5 W or 5 %"),
    ("aicore_percent", "AI Core", _percent, lambda a, b: AICORE_TOLERANCE_POINTS, "±10 points"),
)


def disagreements(dcmi: ChipReading, npu_smi: ChipReading) -> List[Disagreement]:
    """Chips only one backend lists, and values both have that differ by more than the tolerance."""
    ours = {chip.identity.key: chip for chip in dcmi.chips}
    theirs = {chip.identity.key: chip for chip in npu_smi.chips}
    found: List[Disagreement] = []
    for key in sorted(set(ours) ^ set(theirs)):
        chip = ours.get(key) or theirs[key]
        lister, other = ("DCMI", "npu-smi") if key in ours else ("npu-smi", "DCMI")
        found.append(
            Disagreement((*key, "listed"), f"{_chip_label(chip)} listed by {lister}, not by {other}")
        )
    for key in sorted(set(ours) & set(theirs)):
        found.extend(_chip_disagreements(ours[key], theirs[key]))
    return found


def _chip_disagreements(ours: ChipSample, theirs: ChipSample) -> List[Disagreement]:
    found: List[Disagreement] = []
    for name, words, show, allowed, tolerance in METRICS:
        a, b = ours.metric(name), theirs.metric(name)
        if a is None or b is None or abs(a - b) <= allowed(a, b):
            continue  # a metric one backend lacks (A3 chip 1 power) is not a disagreement
        label = _chip_label(ours)
        text = f"{label} {words}: DCMI {show(a)}, npu-smi {show(b)} (tolerance {tolerance})"
        found.append(Disagreement((*ours.identity.key, name), text))
    return found


def _chip_label(chip: ChipSample) -> str:
    npu_id, chip_id = chip.identity.key
    return f"NPU {npu_id} chip {chip_id}"
