"""Provides per-model facts for the views: rated power and a chip's memory kind (the family table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from npuwatch.chip_families import family_of
from npuwatch.model import ChipSample


def rated_power_w(model_name: Optional[str]) -> Optional[float]:
    """The rated power for a chip npu-smi names ``model_name`` (``910B3``, ``310P3``), if known:
    its row of the chip-family table (``npuwatch.chip_families``).

    ``Ascend910`` (A3, two dies per card, power printed per card) and the 950 have no published
    figure, so they give ``None`` and the views show watts without a ratio.
    """
    return family_of(model_name).rated_power_w if model_name else None


def memory_kind(model_name: Optional[str]) -> Optional[str]:
    """``HBM`` or ``DDR``: the memory of a chip named ``model_name`` (npu-smi's ``910B3`` or the
    PCI inventory's ``Ascend 910B``), or ``None`` for a model the family table does not know."""
    return family_of(model_name).memory_kind if model_name else None


@dataclass(frozen=True)
class ChipMemory:
    """The memory a view shows for a chip: its kind and figures, and the History metric of its use."""

    kind: Optional[str]  # HBM, DDR, or None when neither npu-smi nor the model tells
    used_mib: Optional[int]
    total_mib: Optional[int]
    used_metric: str  # hbm_used_mib or memory_used_mib


def chip_memory(chip: ChipSample) -> ChipMemory:
    """HBM when npu-smi gives its figures, DDR when it gives only Memory-Usage (310P, 310B); when it
    gave neither (npu-smi failed), the kind the chip's model has, so a 910B still says HBM."""
    if chip.hbm_total_mib:
        return ChipMemory("HBM", chip.hbm_used_mib, chip.hbm_total_mib, "hbm_used_mib")
    if chip.memory_total_mib:
        return ChipMemory("DDR", chip.memory_used_mib, chip.memory_total_mib, "memory_used_mib")
    kind = memory_kind(chip.identity.name)
    if kind == "DDR":
        return ChipMemory(kind, chip.memory_used_mib, chip.memory_total_mib, "memory_used_mib")
    return ChipMemory(kind, chip.hbm_used_mib, chip.hbm_total_mib, "hbm_used_mib")
