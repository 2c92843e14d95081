"""Provides render_info(): ``npu-smi info`` tables in the real layouts, from a MachineState.

Every line copies a capture in tests/data/npu_smi/ cell for cell: 98 columns for 910B/A3
(001, 007, 022, 100), 116 for 26.x 910B (008), 106 for 310P (044) and 116 for 950 (037).
Values are left-aligned in fixed fields, so ``33126/ 65536`` loses its space when the used
number fills its 5-character field, exactly as npu-smi prints it (001).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from npuwatch.probes.simulator.dynamics import ChipReading, MachineState, ProcessReading
from npuwatch.probes.simulator.scenarios import Layout

_Rows = Tuple[List[str], List[str]]


@dataclass(frozen=True)
class _Geometry:
    """The fixed parts of one layout: widths, header rows, and the row formatter."""

    width: int  # characters per line
    cells: Tuple[int, ...]  # chip-table cell widths between the `+`
    card_cells: Tuple[int, ...]  # the `+====+` line after each card (950 merges its first two)
    version_width: int  # field of the npu-smi version in the version row
    header: Tuple[str, str]
    process_header: str
    chip_rows: Callable[[ChipReading], _Rows]
    process_row: Callable[[ProcessReading], List[str]]


def _pair(used: int, total: int, used_w: int, total_w: int) -> str:
    return f"{used:<{used_w}}/ {total:<{total_w}}"


def _power(chip: ChipReading, placeholder: str) -> str:
    return placeholder if chip.power_w is None else f"{chip.power_w:.1f}"


def _a2_rows(chip: ChipReading, a3: bool) -> _Rows:
    spec = chip.spec
    ids = f"{spec.chip_id:<6}{spec.phy_id:<20}" if a3 else f"{spec.chip_id:<26}"
    return (
        [
            f" {spec.npu_id:<6}{spec.name:<20}",
            f" {chip.health:<14}",
            f" {_power(chip, '-'):<12}{chip.temperature_c:<18}"
            + _pair(chip.hugepages_used, spec.hugepages_total, 5, 14),
        ],
        [
            f" {ids}",
            f" {spec.bus_id:<14}",
            f" {chip.aicore_percent:<12}"
            + _pair(chip.memory_used_mib, spec.memory_total_mib, 5, 11)
            + _pair(chip.hbm_used_mib, spec.hbm_total_mib, 5, 14),
        ],
    )


def _wide_rows(chip: ChipReading) -> _Rows:
    spec = chip.spec
    return (
        [
            f" {spec.npu_id:<6}{spec.name:<20}",
            f" {chip.health:<14}",
            f" {_power(chip, '-'):<21}{chip.temperature_c:<24}"
            + _pair(chip.hugepages_used, spec.hugepages_total, 5, 17),
        ],
        [
            f" {spec.chip_id:<26}",
            f" {spec.bus_id:<14}",
            f" {chip.aicore_percent:<21}"
            + _pair(chip.memory_used_mib, spec.memory_total_mib, 5, 17)
            + _pair(chip.hbm_used_mib, spec.hbm_total_mib, 5, 17),
        ],
    )


def _p310_rows(chip: ChipReading) -> _Rows:
    spec = chip.spec
    return (
        [
            f" {spec.npu_id:<8}{spec.name:<22}",
            f" {chip.health:<16}",
            f" {_power(chip, 'NA'):<13}{chip.temperature_c:<18}"
            + _pair(chip.hugepages_used, spec.hugepages_total, 6, 14),
        ],
        [
            f" {spec.chip_id:<8}{spec.phy_id:<22}",
            f" {spec.bus_id:<16}",
            f" {chip.aicore_percent:<13}" + _pair(chip.memory_used_mib, spec.memory_total_mib, 5, 33),
        ],
    )


def _a5_rows(chip: ChipReading) -> _Rows:
    spec = chip.spec
    return (
        [
            f" {spec.npu_id:<7}",
            f" {spec.name:<17}",
            f" {chip.health:<14}",
            f" {_power(chip, 'NA'):<22}{chip.temperature_c:<25}"
            + _pair(chip.hugepages_used, spec.hugepages_total, 6, 14),
        ],
        [
            " " * 8,
            " " * 18,
            f" {spec.bus_id:<14}",
            f" {chip.aicore_percent:<22}"
            + _pair(chip.memory_used_mib, spec.memory_total_mib, 6, 17)
            + _pair(chip.hbm_used_mib, spec.hbm_total_mib, 6, 14),
        ],
    )


#: ``Process id in container``: npu-smi on the host prints NA (008).
_NO_CONTAINER_PID = "NA"


_NARROW_PROCESS_HEADER = (
    "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"
)
_WIDE_PROCESS_TAIL = (
    "| Process id    | Process name       | Process memory(MB)    | Process id in container |"
)

_GEOMETRY: Dict[Layout, _Geometry] = {
    Layout.A2: _Geometry(
        98, (27, 15, 52), (27, 15, 52), 24,
        (
            "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",  # noqa: E501
            "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",  # noqa: E501
        ),
        _NARROW_PROCESS_HEADER,
        lambda chip: _a2_rows(chip, a3=False),
        lambda p: [f" {p.spec.npu_id:<8}{p.spec.chip_id:<18}", f" {p.spec.pid:<14}",
                   f" {p.spec.name:<25}", f" {p.npu_memory_mib:<24}"],
    ),
    Layout.A3: _Geometry(
        98, (27, 15, 52), (27, 15, 52), 24,
        (
            "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",  # noqa: E501
            "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",  # noqa: E501
        ),
        _NARROW_PROCESS_HEADER,
        lambda chip: _a2_rows(chip, a3=True),
        lambda p: [f" {p.spec.npu_id:<8}{p.spec.chip_id:<18}", f" {p.spec.pid:<14}",
                   f" {p.spec.name:<25}", f" {p.npu_memory_mib:<24}"],
    ),
    Layout.A2_WIDE: _Geometry(
        116, (27, 15, 70), (27, 15, 70), 35,
        (
            "| NPU   Name                | Health        | Power(W)             Temp(C)                 Hugepages-Usage(page)   |",  # noqa: E501
            "| Chip                      | Bus-Id        | AICore(%)            Memory-Usage(MB)        HBM-Usage(MB)           |",  # noqa: E501
        ),
        "| NPU     Chip              " + _WIDE_PROCESS_TAIL,
        _wide_rows,
        lambda p: [f" {p.spec.npu_id:<8}{p.spec.chip_id:<18}", f" {p.spec.pid:<14}",
                   f" {p.spec.name:<19}", f" {p.npu_memory_mib:<22}", f" {_NO_CONTAINER_PID:<24}"],
    ),
    Layout.P310: _Geometry(
        106, (31, 17, 54), (31, 17, 54), 40,
        (
            "| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |",  # noqa: E501
            "| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |",  # noqa: E501
        ),
        "| NPU     Chip                  | Process id      | Process name             | Process memory(MB)        |",  # noqa: E501
        _p310_rows,
        lambda p: [f" {p.spec.npu_id:<8}{p.spec.chip_id:<22}", f" {p.spec.pid:<16}",
                   f" {p.spec.name:<25}", f" {p.npu_memory_mib:<26}"],
    ),
    Layout.A5: _Geometry(
        116, (8, 18, 15, 70), (27, 15, 70), 35,
        (
            "| NPU ID | Name             | Health        | Power(W)              Temp(C)                  Hugepages-Usage(page) |",  # noqa: E501
            "|        |                  | Bus-Id        | NPU Util(%)           Memory-Usage(MB)         HBM-Usage(MB)         |",  # noqa: E501
        ),
        "| NPU ID                    " + _WIDE_PROCESS_TAIL,
        _a5_rows,
        lambda p: [f" {p.spec.npu_id:<26}", f" {p.spec.pid:<14}", f" {p.spec.name:<19}",
                   f" {p.npu_memory_mib:<22}", f" {_NO_CONTAINER_PID:<24}"],
    ),
}  # fmt: skip


def _border(cells: Tuple[int, ...], fill: str) -> str:
    return "+" + "+".join(fill * width for width in cells) + "+"


def _row(cells: List[str]) -> str:
    return "|" + "|".join(cells) + "|"


def _version_row(geometry: _Geometry, npu_smi: str, driver: str) -> str:
    driver_width = geometry.width - 21 - geometry.version_width
    return f"| npu-smi {npu_smi:<{geometry.version_width}} Version: {driver:<{driver_width}}|"


def _chip_lines(state: MachineState, geometry: _Geometry) -> List[str]:
    layout = state.scenario.layout
    lines: List[str] = []
    previous: Optional[int] = None
    for chip in state.chips:
        if previous is not None:
            if chip.spec.npu_id != previous:
                lines.append(_border(geometry.card_cells, "="))
            elif layout is Layout.P310:
                lines.append(_border(geometry.cells, "-"))  # 044: split form inside a card
            else:
                lines.append("+" + "-" * (geometry.width - 2) + "+")  # 007/100: A3 chips
        first, second = geometry.chip_rows(chip)
        lines += [_row(first), _row(second)]
        previous = chip.spec.npu_id
    if lines:
        lines.append(_border(geometry.card_cells, "="))
    return lines


def _process_lines(state: MachineState, geometry: _Geometry) -> List[str]:
    closing = _border(geometry.card_cells, "=")
    lines = [_border(geometry.card_cells, "-"), geometry.process_header, closing]
    for npu_id in state.scenario.npu_ids:
        rows = [p for p in state.processes if p.spec.npu_id == npu_id]
        rows.sort(key=lambda p: p.spec.chip_id)
        if not rows:
            text = f"No running processes found in NPU {npu_id}"
            lines.append(f"| {text:<{geometry.width - 3}}|")
        lines += [_row(geometry.process_row(p)) for p in rows]
        lines.append(closing)
    return lines


def render_info(state: MachineState) -> str:
    """The full ``npu-smi info`` output (version rows, chips, processes), newline-terminated."""
    scenario = state.scenario
    geometry = _GEOMETRY[scenario.layout]
    versions = scenario.versions
    lines = [
        "+" + "-" * (geometry.width - 2) + "+",
        _version_row(geometry, versions.npu_smi, versions.driver),
        _border(geometry.cells, "-"),
        *geometry.header,
        _border(geometry.cells, "="),
    ]
    lines += _chip_lines(state, geometry)
    lines += _process_lines(state, geometry)
    return "\n".join(lines) + "\n"
