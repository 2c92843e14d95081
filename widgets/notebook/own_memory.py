"""Provides own_memory_text(): this kernel's torch_npu allocator figures as the notebook shows them.

The figures are read by ``npuwatch.probes.torch_memory`` (the notebook command hands the live
view that reader); this module only words them beside the chip's HBM.
"""

from __future__ import annotations

from typing import Callable, Dict, Mapping, Sequence, Tuple

from npuwatch.model import ChipSample, OwnMemory
from npuwatch.widgets import format as fmt

ChipKey = Tuple[int, int]
#: What reads the figures (``npuwatch.probes.torch_memory.own_memory``): chips → figures by chip key.
OwnMemoryReader = Callable[[Sequence[ChipSample]], Mapping[ChipKey, OwnMemory]]


def figure_text(figure: OwnMemory, chip: ChipSample) -> str:
    """``npu:0 · 1.5 GiB allocated · 2.0 GiB reserved (torch_npu) · 4% of the HBM in use``."""
    return (
        f"npu:{figure.torch_device} · {fmt.bytes_iec(figure.allocated_bytes)} allocated · "
        f"{fmt.bytes_iec(figure.reserved_bytes)} reserved (torch_npu){_share(figure, chip)}"
    )


def _share(figure: OwnMemory, chip: ChipSample) -> str:
    """`` · 4% of the HBM in use``: how much of what npu-smi shows is this kernel's."""
    used_mib = chip.hbm_used_mib if chip.hbm_total_mib else chip.memory_used_mib
    if not used_mib:
        return ""
    share = figure.reserved_bytes / (used_mib * 2**20)
    memory = "HBM" if chip.hbm_total_mib else "memory"
    return f" · {share:.0%} of the {memory} in use"


def own_memory_text(figures: Mapping[ChipKey, OwnMemory], chips: Sequence[ChipSample]) -> Dict[ChipKey, str]:
    """Each chip's figures as display text, by chip key (chips without figures are left out)."""
    by_key = {chip.identity.key: chip for chip in chips}
    return {key: figure_text(figure, by_key[key]) for key, figure in figures.items() if key in by_key}
