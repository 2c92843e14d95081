"""Provides per-model facts for the views: rated power (the judge's table) and a chip's memory kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from npuwatch.judge.limits import limits_for
from npuwatch.model import ChipSample
from npuwatch.probes.soc import soc_from_chip_name


def rated_power_w(model_name: Optional[str]) -> Optional[float]:
    """The rated power for a chip npu-smi names ``model_name`` (``910B3``, ``310P3``), if known:
    the judge's per-model table (``npuwatch.judge.limits``).

    ``Ascend910`` (A3, two dies per card, power printed per card) and the 950 have no published
    figure, so they give ``None`` and the views show watts without a ratio.
    """
    return limits_for(model_name).rated_power_w if model_name else None


#: The SoC families without HBM: the 310 family computes from DDR (310P and 310B print it in
#: the Memory-Usage column, capture 044 and 039); the 910 family and the 950 have HBM.
_DDR_SOCS = frozenset({"ascend310", "ascend310p", "ascend310b"})


def memory_kind(model_name: Optional[str]) -> Optional[str]:
    """``HBM`` or ``DDR``: the memory of a chip named ``model_name`` (npu-smi's ``910B3`` or the
    PCI inventory's ``Ascend 910B``), or ``None`` for a model this table does not know."""
    soc = soc_from_chip_name(model_name)
    if soc is None:
        return None
    return "DDR" if soc in _DDR_SOCS else "HBM"


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
