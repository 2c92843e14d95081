"""Provides the SoC family of a chip, as CANN names its operator-kernel folders (``ascend910b`` …).

Derived without a live runtime (``acl.get_soc_name()`` needs one): from the PCI device ID or
the chip name npu-smi prints, through the chip-family table (``npuwatch.chip_families``, whose
``soc`` column names the folders: runtime-and-doctor.md §6.2 and §12 row 14).
"""

from __future__ import annotations

from typing import Optional

from npuwatch.chip_families import family_of


def soc_from_device_id(device_id: Optional[int]) -> Optional[str]:
    """The kernel folder for a PCI device ID, or ``None`` when it is not an Ascend one we know."""
    return None if device_id is None else family_of(device_id=device_id).soc


def soc_from_chip_name(name: Optional[str]) -> Optional[str]:
    """The kernel folder for an npu-smi chip name (``910B3`` → ``ascend910b``)."""
    return family_of(name).soc if name else None
