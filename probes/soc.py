"""Provides the SoC family of a chip, as CANN names its operator-kernel folders (``ascend910b`` …).

Derived without a live runtime (``acl.get_soc_name()`` needs one): from the PCI device ID or
the chip name npu-smi prints.  Folder names: runtime-and-doctor.md §6.2 and §12 row 14;
``ascend950`` is inferred from the product name and unverified (§14 item 4).
"""

from __future__ import annotations

import re
from typing import Optional

#: PCI device ID → kernel folder (driver-interfaces.md / runtime-and-doctor.md §6.4).
SOC_BY_DEVICE_ID = {
    0xD100: "ascend310",
    0xD105: "ascend310",
    0xD500: "ascend310p",
    0xD501: "ascend310p",
    0xD801: "ascend910",
    0xD802: "ascend910b",
    0xD803: "ascend910_93",
    0xD804: "ascend910_93",
    0xD806: "ascend950",
    0xD807: "ascend950",
    0xD808: "ascend950",
}

# npu-smi names: 910B3, Ascend910B4, 910PremiumA, Ascend910, 310P3, 310, 310B4, Ascend950DT.
_NAME_RULES = (
    (re.compile(r"910_?93|910C", re.IGNORECASE), "ascend910_93"),
    (re.compile(r"910B", re.IGNORECASE), "ascend910b"),
    (re.compile(r"910", re.IGNORECASE), "ascend910"),
    (re.compile(r"310P", re.IGNORECASE), "ascend310p"),
    (re.compile(r"310B", re.IGNORECASE), "ascend310b"),
    (re.compile(r"310", re.IGNORECASE), "ascend310"),
    (re.compile(r"950", re.IGNORECASE), "ascend950"),
)


def soc_from_device_id(device_id: Optional[int]) -> Optional[str]:
    """The kernel folder for a PCI device ID, or ``None`` when it is not an Ascend one we know."""
    return None if device_id is None else SOC_BY_DEVICE_ID.get(device_id)


def soc_from_chip_name(name: Optional[str]) -> Optional[str]:
    """The kernel folder for an npu-smi chip name (``910B3`` → ``ascend910b``)."""
    if not name:
        return None
    for pattern, soc in _NAME_RULES:
        if pattern.search(name):
            return soc
    return None
