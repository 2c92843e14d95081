"""Provides per-model facts for ratios: rated power by npu-smi model name (approximate, with sources)."""

from __future__ import annotations

from typing import Optional, Tuple

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
