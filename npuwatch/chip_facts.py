"""Provides per-model facts: rated power (approximate, with sources) and which memory a chip has."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from npuwatch.model import ChipSample
from npuwatch.probes.soc import soc_from_chip_name

# (name prefix as npu-smi prints it, rated power in W, source); first match wins, so longer
# prefixes come first.  From shared/reference/runtime-and-doctor.md §11 "Chip facts": Huawei
# publishes few per-SKU figures, so these are the commonly quoted ones.
_RATED_POWER_W: Tuple[Tuple[str, float, str], ...] = (
    ("910B", 400.0, "910B family ~400 W (third-party figures)"),
    ("910", 310.0, "Ascend 910 (910A/ProA/ProB) 310 W, Huawei launch material"),
    ("310P", 72.0, "Atlas 300I Pro card 72 W"),
    ("310B", 24.0, "Atlas 200I DK A2 board 24 W typical"),
    ("310", 8.0, "Ascend 310 chip 8 W"),
)


def rated_power_w(model_name: Optional[str]) -> Optional[float]:
    """The rated power for a chip npu-smi names ``model_name`` (``910B3``, ``310P3``), if known.

    ``Ascend910`` (A3, two dies per card, power printed per card) and the 950 have no published
    figure, so they give ``None`` and the views show watts without a ratio.
    """
    if not model_name:
        return None
    name = model_name.strip()
    if name.startswith("Ascend"):
        return None
    for prefix, watts, _source in _RATED_POWER_W:
        if name.startswith(prefix):
            return watts
    return None


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
