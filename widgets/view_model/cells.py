"""Provides a chip's cells: the four card cells (util, memory, power, temperature) and the extra
metrics a chip reports, each as text, bar fraction, plot top and the judge's level, from the
metric table (``npuwatch.metrics_table``)."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Callable, Dict, Optional, Sequence, Tuple

from npuwatch.chip_facts import chip_memory
from npuwatch.chip_facts import rated_power_w as _rated_power_w
from npuwatch.history import History
from npuwatch.judge import temperature_level
from npuwatch.judge.limits import PowerRating, power_rating
from npuwatch.judge.rules import memory_bar_level, power_bar_level
from npuwatch.metrics_table import CELLS, EXTRAS, ChipMetric, Extra, Scale, cell_metrics, metric
from npuwatch.model import (
    ChipSample,
    Level,
    MetricStatus,
)
from npuwatch.widgets import format as fmt
from npuwatch.widgets.view_model.rows import ChipKey, MetricCell


@lru_cache(maxsize=256)
def rated_power_w(model_name: Optional[str]) -> Optional[float]:
    """The judge's rated power of a chip model (``chip_facts.rated_power_w``), looked up once per model."""
    return _rated_power_w(model_name)


def cell_columns() -> Tuple[str, ...]:
    """The column header of each cell, in cell order (the metric table's ``column``): Util, Memory …"""
    return tuple(next(row.column or row.label for row in cell_metrics(key)) for key in CELLS)


def _common_reason(cells: Sequence[MetricCell]) -> Optional[str]:
    """The reason at least two of a chip's metrics share: said once for the chip, not per metric."""
    reasons = [cell.reason for cell in cells if cell.reason]
    if len(reasons) < 2:  # most chips: every value read
        return None
    counts = Counter(reasons)
    reason, count = counts.most_common(1)[0]
    return reason if count >= 2 else None


def _reason(chip: ChipSample, *metrics: str) -> Optional[str]:
    """Why the first of ``metrics`` with a note is absent or stale, in words."""
    for name in metrics:
        note = chip.notes.get(name)
        if note is not None and (getattr(chip, name) is None or note.status is MetricStatus.STALE):
            return note.reason if note.status is not MetricStatus.STALE else f"stale: {note.reason}"
    return None


def _series(history: Optional[History], key: ChipKey, name: str, points: int) -> Tuple[Optional[float], ...]:
    if history is None or points <= 0:
        return ()
    return tuple(history.values(key, name, last=points))


def _cell(
    chip: ChipSample,
    history: Optional[History],
    points: int,
    key: str,
    name: str,
    *,
    text: str,
    fraction: Optional[float],
    level: Level,
    ceiling: Optional[float],
    top_label: str,
    reason: Optional[str],
    label: Optional[str] = None,
    tag: Optional[str] = None,
    total: Optional[float] = None,
) -> MetricCell:
    row = metric(name)
    return MetricCell(
        key=key,
        metric=name,
        label=label or row.label,
        tag=tag or row.tag,
        value=chip.metric(name),
        text=text,
        fraction=fraction,
        level=Level.UNKNOWN if text == fmt.NA else level,
        reason=reason,
        ceiling=ceiling,
        top_label=top_label,
        total=total,
        series=_series(history, chip.identity.key, name, points),
    )


def _utilisation(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    """AI Core, or what the layout prints instead (the 950's NPU Util, capture 037)."""
    choices = cell_metrics("util")
    row = next((m for m in choices if getattr(chip, m.name) is not None), choices[0])
    value = chip.metric(row.name)
    return _cell(
        chip,
        history,
        points,
        "util",
        row.name,
        text=fmt.percent(value),
        fraction=None if value is None else value / (row.ceiling or 100.0),
        level=Level.OK,
        ceiling=row.ceiling,
        top_label="100%",
        reason=_reason(chip, row.name),
    )


def _memory(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    """HBM, or DDR on the 310 family (capture 044); the kind the model has when npu-smi gave neither."""
    memory = chip_memory(chip)
    used, total = memory.used_mib, memory.total_mib
    total_metric = metric(memory.used_metric).total or memory.used_metric
    text = fmt.used_total_gib(used, total)
    share = used / total if used is not None and total else None
    return _cell(
        chip,
        history,
        points,
        "memory",
        memory.used_metric,
        label=None if memory.kind else "Memory",
        tag=None if memory.kind else "MEM",
        text=text,
        fraction=share,
        level=memory_bar_level(share),
        ceiling=float(total) if total else None,
        top_label=f"{fmt.gib(total, 0)} GiB" if total else "max",
        reason=_reason(chip, memory.used_metric, total_metric)
        or (None if text != fmt.NA else "not reported"),
        total=total,
    )


def _power(
    chip: ChipSample, history: Optional[History], points: int, rating: Optional[PowerRating] = None
) -> MetricCell:
    """Power against the judge's rating of this reading (``limits.power_rating``: a card-scope
    reading, a 310P Duo's board power, against the card's rating)."""
    rated = (rating or power_rating(chip.identity.name)).watts
    value = chip.power_w
    share = value / rated if rated and value is not None else None
    return _cell(
        chip,
        history,
        points,
        "power",
        "power_w",
        text=fmt.watts(value, rated),
        fraction=share,
        level=power_bar_level(share),
        ceiling=rated,
        top_label=f"{rated:.0f} W" if rated else "max",
        reason=_reason(chip, "power_w"),
    )


def _temperature(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
    row = metric("temperature_c")
    value = chip.temperature_c
    ceiling = row.ceiling or 100.0
    return _cell(
        chip,
        history,
        points,
        "temperature",
        "temperature_c",
        text=fmt.celsius(value),
        fraction=None if value is None else min(1.0, value / ceiling),
        level=temperature_level(chip),  # the judge's per-model limits
        ceiling=ceiling,
        top_label=f"{ceiling:.0f} °C",
        reason=_reason(chip, "temperature_c"),
    )


def _other(key: str) -> CellBuilder:
    """The cell of a metric that has no cell of its own above: its value in its unit, a bar on a
    percentage or fixed scale, the first metric of the cell the chip reports."""

    def build(chip: ChipSample, history: Optional[History], points: int) -> MetricCell:
        choices = cell_metrics(key)
        row = next((m for m in choices if getattr(chip, m.name) is not None), choices[0])
        value = chip.metric(row.name)
        scaled = row.scale in (Scale.PERCENT, Scale.FIXED) and row.ceiling
        return _cell(
            chip,
            history,
            points,
            key,
            row.name,
            text=fmt.with_unit(value, row.unit),
            fraction=value / row.ceiling if scaled and row.ceiling and value is not None else None,
            level=Level.OK,
            ceiling=row.ceiling,
            top_label=fmt.with_unit(row.ceiling, row.unit) if row.ceiling else "max",
            reason=_reason(chip, row.name),
        )

    return build


#: The extras in the order every view shows them: beside a cell, then bars, then detail lines.
_EXTRA_ORDER = (Extra.BESIDE, Extra.BAR, Extra.DETAIL)


_EXTRAS_SHOWN: Tuple[ChipMetric, ...] = tuple(
    row for kind in _EXTRA_ORDER for row in EXTRAS if row.extra is kind
)


#: The extras a dashboard card or line can show: beside a cell, and bars.
_EXTRAS_ON_CARDS: Tuple[ChipMetric, ...] = tuple(
    row for row in _EXTRAS_SHOWN if row.extra is not Extra.DETAIL
)


def _extra(chip: ChipSample, row: ChipMetric, history: Optional[History], points: int) -> MetricCell:
    """A metric without a card cell that the chip reports: ``1300/1800 MHz`` against its rated
    value, ``45%`` with a bar on a percentage scale, else its value in its unit.  Its level is ok:
    what a value means (throttling, ECC) is the judge's to say.

    Without a history series the cell is a function of the value, the rated value and the
    reason, and is kept per those (the dashboard builds three a chip every second, mostly with
    values seen before)."""
    value = chip.metric(row.name)
    rated = chip.metric(row.rated) if row.rated else None
    reason = _reason(chip, row.name)
    if row.graphed and history is not None and points > 0:
        return _extra_cell(row, value, rated, reason, _series(history, chip.identity.key, row.name, points))
    key = (row.name, value, rated, reason)
    cell = _EXTRA_CELLS.get(key)
    if cell is None:
        if len(_EXTRA_CELLS) >= _EXTRA_CELLS_KEPT:
            _EXTRA_CELLS.clear()
        cell = _EXTRA_CELLS[key] = _extra_cell(row, value, rated, reason, ())
    return cell


#: The extra cells built without a series, by (metric, value, rated value, reason).
_EXTRA_CELLS: Dict[Tuple[str, Optional[float], Optional[float], Optional[str]], MetricCell] = {}


_EXTRA_CELLS_KEPT = 4096


def _extra_cell(
    row: ChipMetric,
    value: Optional[float],
    rated: Optional[float],
    reason: Optional[str],
    series: Tuple[Optional[float], ...],
) -> MetricCell:
    ceiling = rated or (row.ceiling if row.scale in (Scale.PERCENT, Scale.FIXED) else None)
    text = f"{amount(value, '')}/{amount(rated, row.unit)}" if rated else amount(value, row.unit)
    return MetricCell(
        key=row.name,
        metric=row.name,
        label=row.label,
        tag=row.tag,
        value=value,
        text=text,
        fraction=None if value is None or not ceiling else min(1.0, max(0.0, value / ceiling)),
        level=Level.OK,
        reason=reason,
        ceiling=ceiling,
        top_label=amount(ceiling, row.unit) if ceiling else "max",
        series=series,
        kind=row.extra.value if row.extra is not None else Extra.DETAIL.value,
        beside=row.beside or "",
    )


def amount(value: Optional[float], unit: str) -> str:
    """A value in its unit: ``45%``, ``41 °C``, ``1800 MHz``, ``0.85 V``, ``3 pages`` (a whole
    number stays whole however large: an ECC count of 1234567 is not ``1.23457e+06``)."""
    if value is None:
        return fmt.NA
    if unit == "%":
        return fmt.percent(value)
    if unit == "°C":
        return fmt.celsius(value)
    number = str(int(value)) if float(value).is_integer() else f"{value:g}"
    if number == "1" and unit in _COUNTED:
        unit = unit[:-1]  # 1 page, 1 error
    return f"{number} {unit}" if unit else number


_COUNTED = frozenset({"errors", "pages"})


CellBuilder = Callable[[ChipSample, Optional[History], int], MetricCell]


_CELL_BUILDERS: Dict[str, CellBuilder] = {
    "util": _utilisation,
    "memory": _memory,
    "power": _power,
    "temperature": _temperature,
}
_CELL_BUILDERS.update({key: _other(key) for key in CELLS if key not in _CELL_BUILDERS})


def graph_top(chip: ChipSample, name: str, values: Sequence[Optional[float]]) -> float:
    """The top of a large graph of ``name``: the metric table's scale, else 1.1 × the data's top.

    A percentage tops at 100; memory at the chip's total; power at the rated power unless the
    data goes past it; a temperature (no true maximum) zooms to the data.
    """
    row = metric(name)
    highest = max((v for v in values if v is not None), default=0.0)
    if row.scale is Scale.PERCENT and row.ceiling:
        return row.ceiling
    if row.scale is Scale.TOTAL and row.total is not None:
        total = chip.metric(row.total)
        if total:
            return total
    if row.scale is Scale.RATED_POWER:
        rated = rated_power_w(chip.identity.name)
        if rated and highest <= rated:
            return rated
    if row.rated is not None:  # AI Core frequency: its rated frequency, unless the data goes past it
        rated_value = chip.metric(row.rated)
        if rated_value and highest <= rated_value:
            return rated_value
    return max((v for v in values if v is not None), default=1.0) * 1.1 or 1.0
