"""Provides METRICS: the one table of per-chip metrics that the model, the history, the exporter
and every view read.

A new per-chip metric is a row here, the field of the same name in ``model.ChipSample``, and
what its chip source fills in: the JSON (``model.CHIP_METRICS``), the history
(``history.HISTORY_METRICS``), ``/metrics`` (``exporter.metrics``), the dashboard's detail
screen (its row and its graph), the cards of the dashboard and the notebook, and the text view's
columns (through the view model's cells) all follow from the row.  A metric without a card cell
shows as its ``extra`` says (beside a cell, a bar, a detail line) on a chip that reports it, and
nowhere on one that does not (an npu-smi chip has none of the driver-only metrics).  Standard
library only: the model imports this module.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

#: The most memory (HBM or DDR) one chip can report, in MiB: 1 TiB, eight times the largest any
#: Ascend chip has (the 950PR's 131072 MiB in capture 082; 64 GiB per 910B or A3 die; 48 GiB
#: per 310P; docs/plausible-ranges.md).  Past it a total or a use is a garbled value (a DCMI
#: ``0xFFFFFFFFFFFFFFFF`` read as 1.8·10¹⁹ MiB), never a reading.
MAX_CHIP_MEMORY_MIB = 2**20
#: The most huge pages one chip can report: its whole memory in the smallest (2 MiB) pages.
MAX_CHIP_HUGEPAGES = MAX_CHIP_MEMORY_MIB // 2


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


class Extra(enum.Enum):
    """How a metric without a card cell shows on a chip's card (dashboard and notebook) and in the
    text view, when the chip reports it; a chip that does not report it shows nothing for it."""

    #: Next to the card cell ``ChipMetric.beside`` names: ``1300/1800 MHz`` beside AI Core.
    BESIDE = "beside"
    #: A bar of its own under the cells: Vector, HBM bandwidth.
    BAR = "bar"
    #: One of the chip's detail lines: ``Cube 12%``, ``ECC 2-bit 0 errors``.
    DETAIL = "detail"


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
    #: How the card shows a metric that has no ``cell`` (None: the detail screen only).
    extra: Optional[Extra] = None
    beside: Optional[str] = None  # the card cell an ``Extra.BESIDE`` metric is shown next to
    #: The metric holding this one's rated value (its text becomes ``1300/1800 MHz``; its graph
    #: tops at it unless the data goes past it).
    rated: Optional[str] = None


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
        highest=MAX_CHIP_MEMORY_MIB,
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
        highest=MAX_CHIP_MEMORY_MIB,
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
        highest=MAX_CHIP_MEMORY_MIB,
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
        highest=MAX_CHIP_MEMORY_MIB,
    ),
    ChipMetric(
        "hugepages_used",
        "pages",
        "Huge pages",
        "Huge pages",
        "HUGE",
        total="hugepages_total",
        highest=MAX_CHIP_HUGEPAGES,
    ),
    ChipMetric(
        "hugepages_total", "pages", "Huge pages total", "Huge pages total", "HUGE", highest=MAX_CHIP_HUGEPAGES
    ),
    # --- the driver-only metrics (DCMI reads them; npu-smi's table prints none of them) ---------
    ChipMetric(
        "aicore_freq_mhz",
        "MHz",
        "Freq",
        "AI Core frequency",
        "FREQ",
        graphed=True,
        exporter_name="npu_chip_info_aicore_current_freq",
        exporter_help="the npu ai core current frequency, unit is 'MHz'",
        highest=10000.0,
        extra=Extra.BESIDE,
        beside="util",
        rated="aicore_rated_freq_mhz",
    ),
    ChipMetric(
        "aicore_rated_freq_mhz",
        "MHz",
        "Rated freq",
        "AI Core rated frequency",
        "FMAX",
        exporter_name="npuwatch_chip_aicore_rated_freq",
        exporter_help="the npu ai core rated (maximum) frequency, unit is 'MHz'",
        highest=10000.0,
    ),
    ChipMetric(
        "vector_percent",
        "%",
        "Vector",
        "Vector utilisation",
        "VEC",
        Scale.PERCENT,
        ceiling=100.0,
        graphed=True,
        exporter_name="npu_chip_info_vector_utilization",
        exporter_help="the vector core utilization, unit is '%'",
        highest=100.0,
        extra=Extra.BAR,
    ),
    ChipMetric(
        "cube_percent",
        "%",
        "Cube",
        "Cube utilisation",
        "CUBE",
        Scale.PERCENT,
        ceiling=100.0,
        exporter_name="npu_chip_info_cube_utilization",
        exporter_help="the cube core utilization, unit is '%'",
        highest=100.0,
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "aicpu_percent",
        "%",
        "AI CPU",
        "AI CPU utilisation",
        "ACPU",
        Scale.PERCENT,
        ceiling=100.0,
        exporter_name="npuwatch_chip_aicpu_utilization",
        exporter_help="the ai cpu utilization, unit is '%'",
        highest=100.0,
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "ctrlcpu_percent",
        "%",
        "Ctrl CPU",
        "Control CPU utilisation",
        "CCPU",
        Scale.PERCENT,
        ceiling=100.0,
        exporter_name="npuwatch_chip_ctrlcpu_utilization",
        exporter_help="the control cpu utilization, unit is '%'",
        highest=100.0,
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "hbm_bandwidth_percent",
        "%",
        "HBM BW",
        "HBM bandwidth utilisation",
        "HBW",
        Scale.PERCENT,
        ceiling=100.0,
        graphed=True,
        exporter_name="npu_chip_info_hbm_bandwidth_utilization",
        exporter_help="the npu hbm bandwidth utilization, unit is '%'",
        highest=100.0,
        extra=Extra.BAR,
    ),
    ChipMetric(
        "hbm_temperature_c",
        "°C",
        "HBM temp",
        "HBM temperature",
        "HBMT",
        Scale.FIXED,
        ceiling=100.0,
        graphed=True,
        exporter_name="npu_chip_info_hbm_temperature",
        exporter_help="the npu hbm temperature, unit is 'C'",
        lowest=-60.0,
        highest=150.0,
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "voltage_v",
        "V",
        "Voltage",
        "Voltage",
        "VOLT",
        exporter_name="npu_chip_info_voltage",
        exporter_help="the npu voltage, unit is 'V'",
        highest=20.0,
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "ecc_single_bit_errors",
        "errors",
        "ECC 1-bit",
        "HBM ECC single-bit errors",
        "SBE",
        exporter_name="npu_chip_info_hbm_ecc_single_bit_error_cnt",
        exporter_help="the npu hbm single-bit ecc error count",
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "ecc_double_bit_errors",
        "errors",
        "ECC 2-bit",
        "HBM ECC double-bit errors",
        "DBE",
        exporter_name="npu_chip_info_hbm_ecc_double_bit_error_cnt",
        exporter_help="the npu hbm double-bit ecc error count",
        extra=Extra.DETAIL,
    ),
    ChipMetric(
        "ecc_isolated_pages",
        "pages",
        "ECC pages",
        "HBM pages isolated after ECC errors",
        "ISOP",
        exporter_name="npuwatch_chip_hbm_ecc_isolated_pages",
        exporter_help="the npu hbm pages isolated after ecc errors",
        extra=Extra.DETAIL,
    ),
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


#: The metrics without a card cell that the card shows when the chip reports them, in table order.
EXTRAS: Tuple[ChipMetric, ...] = tuple(row for row in METRICS if row.extra is not None)
#: The metrics shown only where a chip reports them, never as ``n/a``: the extras and the rated
#: values they are shown against (an npu-smi chip reports none of them).
SHOWN_WHEN_REPORTED: FrozenSet[str] = frozenset(row.name for row in EXTRAS) | frozenset(
    row.rated for row in EXTRAS if row.rated is not None
)


def cell_metrics(cell: str) -> Tuple[ChipMetric, ...]:
    """The metrics that can fill ``cell``, first choice first."""
    return _BY_CELL.get(cell, ())


_BY_CELL: Dict[str, Tuple[ChipMetric, ...]] = {
    cell: tuple(row for row in METRICS if row.cell == cell) for cell in CELLS
}
