"""Provides METRICS: the one table of per-chip metrics that the model, the history, the exporter
and every view read.

A new per-chip metric is a row here, the field of the same name in ``model.ChipSample``, and
what its chip source fills in: the JSON (``model.CHIP_METRICS``), the history
(``history.HISTORY_METRICS``), ``/metrics`` (``exporter.metrics``), the dashboard's detail
screen (its row and its graph), the cards of the dashboard and the notebook, and the text view's
columns (through the view model's cells) all follow from the row.  Standard library only: the
model imports this module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, Optional, Tuple


class Scale(enum.Enum):
    """Where a metric's bar ends and what tops its graph."""

    #: 0 to 100 %: bars, sparklines and graphs alike.
    PERCENT = "percent"
    #: 0 to the chip's total of the same memory (the row's ``total`` names that metric).
    TOTAL = "total"
    #: 0 to the chip model's rated power (the judge's per-model table); the data's top without one.
    RATED_POWER = "rated-power"
    #: Bars and sparklines 0 to ``ceiling``; a large graph zooms to the data (no true maximum).
    FIXED = "fixed"
    #: No scale: no bar, graphs top at the data's largest value.
    NONE = "none"


@dataclass(frozen=True)
class ChipMetric:
    """One per-chip metric: the ``ChipSample`` field, how views label and scale it, how it is exported."""

    name: str  # the ChipSample field and the JSON key: power_w
    unit: str  # %, MiB, W, °C, pages
    label: str  # the short label of a card: AI Core, NPU Util, HBM, DDR, Power, Temp
    title: str  # the detail screen's row and graph title: HBM used, Temperature
    tag: str  # the terminal's 4-column label (dashboard cards, text view): AIC, NPU, HBM, PWR, TEMP
    scale: Scale = Scale.NONE
    ceiling: Optional[float] = None  # the top of a PERCENT or FIXED scale
    #: The metric holding the chip's total of this memory (itself for a total); a chip whose total
    #: is 0 or absent has no such memory (910B prints DDR as ``0 / 0``).
    total: Optional[str] = None
    graphed: bool = False  # kept in the history and drawn as a graph
    #: The card cell the metric fills (util, memory, power, temperature); a cell's first metric
    #: the chip reports wins (AI Core before NPU Util, HBM before DDR).  None: details only.
    cell: Optional[str] = None
    column: Optional[str] = None  # the text view's column header of that cell: Util, Memory
    exporter_name: Optional[str] = None  # npu-exporter's name (None: not exported)
    exporter_help: str = ""
    #: The range a real chip can report (None: no bound that side); a value outside it is set
    #: aside as implausible (``npuwatch.plausible``).
    lowest: Optional[float] = 0.0
    highest: Optional[float] = None


#: The per-chip metrics, in the order the JSON schema lists them.  Every one is a number or
#: ``None``; a ``None`` always has its reason in ``ChipSample.notes``.
METRICS: Tuple[ChipMetric, ...] = (
    ChipMetric(
        "power_w",
        "W",
        "Power",
        "Power",
        "PWR",
        Scale.RATED_POWER,
        graphed=True,
        cell="power",
        column="Power",
        exporter_name="npu_chip_info_power",
        exporter_help="the npu power, unit is 'W'",
        highest=2000.0,
    ),
    ChipMetric(
        "temperature_c",
        "°C",
        "Temp",
        "Temperature",
        "TEMP",
        Scale.FIXED,
        ceiling=100.0,
        graphed=True,
        cell="temperature",
        column="Temp",
        exporter_name="npu_chip_info_temperature",
        exporter_help="the npu temperature, unit is 'C'",
        lowest=-60.0,
        highest=150.0,
    ),
    ChipMetric(
        "aicore_percent",
        "%",
        "AI Core",
        "AI Core",
        "AIC",
        Scale.PERCENT,
        ceiling=100.0,
        graphed=True,
        cell="util",
        column="Util",
        exporter_name="npu_chip_info_utilization",
        exporter_help="the ai core utilization, unit is '%'",
        highest=100.0,
    ),
    ChipMetric(
        "npu_util_percent",
        "%",
        "NPU Util",
        "NPU Util",
        "NPU",
        Scale.PERCENT,
        ceiling=100.0,
        graphed=True,
        cell="util",
        column="Util",
        exporter_name="npu_chip_info_overall_utilization",
        exporter_help=(
            "the overall utilization of npu (NPU Util, which the 950 prints instead of AI Core), unit is '%'"
        ),
        highest=100.0,
    ),
    ChipMetric(
        "hbm_used_mib",
        "MiB",
        "HBM",
        "HBM used",
        "HBM",
        Scale.TOTAL,
        total="hbm_total_mib",
        graphed=True,
        cell="memory",
        column="Memory",
        exporter_name="npu_chip_info_hbm_used_memory",
        exporter_help="the npu hbm used memory, unit is 'MB'",
    ),
    ChipMetric(
        "hbm_total_mib",
        "MiB",
        "HBM total",
        "HBM total",
        "HBM",
        total="hbm_total_mib",
        exporter_name="npu_chip_info_hbm_total_memory",
        exporter_help="the npu hbm total memory, unit is 'MB'",
    ),
    ChipMetric(
        "memory_used_mib",
        "MiB",
        "DDR",
        "DDR used",
        "DDR",
        Scale.TOTAL,
        total="memory_total_mib",
        graphed=True,
        cell="memory",
        column="Memory",
        exporter_name="npu_chip_info_used_memory",
        exporter_help="the npu ddr used memory, unit is 'MB'",
    ),
    ChipMetric(
        "memory_total_mib",
        "MiB",
        "DDR total",
        "DDR total",
        "DDR",
        total="memory_total_mib",
        exporter_name="npu_chip_info_total_memory",
        exporter_help="the npu ddr total memory, unit is 'MB'",
    ),
    ChipMetric("hugepages_used", "pages", "Huge pages", "Huge pages", "HUGE", total="hugepages_total"),
    ChipMetric("hugepages_total", "pages", "Huge pages total", "Huge pages total", "HUGE"),
)

#: Each metric by name.
BY_NAME: Dict[str, ChipMetric] = {metric.name: metric for metric in METRICS}
_CARD_ORDER = ("util", "memory", "power", "temperature")
#: The card cells in the order every view shows them: util, memory, power, temperature, then any
#: other cell a row names (a new metric with a new cell gets a card line and a text column).
CELLS: Tuple[str, ...] = _CARD_ORDER + tuple(
    dict.fromkeys(row.cell for row in METRICS if row.cell and row.cell not in _CARD_ORDER)
)


def metric(name: str) -> ChipMetric:
    """The row of the metric called ``name`` (a ``KeyError`` for a name the table lacks)."""
    return BY_NAME[name]


def cell_metrics(cell: str) -> Tuple[ChipMetric, ...]:
    """The metrics that can fill ``cell``, first choice first."""
    return _BY_CELL.get(cell, ())


_BY_CELL: Dict[str, Tuple[ChipMetric, ...]] = {
    cell: tuple(row for row in METRICS if row.cell == cell) for cell in CELLS
}
