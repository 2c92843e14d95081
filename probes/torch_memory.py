"""Provides own_memory(): this process's torch_npu allocator figures, mapped onto npu-smi's chips.

"How much of this HBM is mine?"  Only when the process has already imported ``torch_npu`` (it is
never imported here: importing it initialises CANN, which takes seconds and device memory).

Device mapping: a torch device index is the runtime's *logical* device, i.e. the position in
``ASCEND_RT_VISIBLE_DEVICES`` when that is set (``npu:0`` is the first ID listed), else the logic
ID itself.  npu-smi's ``-m`` mapping gives each chip its logic ID (``ChipIdentity.logic_id``);
where it is missing, chips in (NPU ID, chip ID) order are taken as logic IDs 0, 1, … — the order
the driver numbers them in.  Inside a container the runtime and npu-smi both see only the mounted
chips, numbered from 0, so the same rule holds.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from npuwatch.model import ChipSample, OwnMemory
from npuwatch.probes.visible_devices import RT_VISIBLE, parse_rt_visible

ChipKey = Tuple[int, int]


def torch_npu_loaded() -> bool:
    """Whether this process has imported torch_npu (we never import it ourselves)."""
    return "torch_npu" in sys.modules


def logic_ids(device_count: int, environ: Optional[Mapping[str, str]] = None) -> Dict[int, int]:
    """torch device index → logic ID, as ``ASCEND_RT_VISIBLE_DEVICES`` maps them (CANN's reading)."""
    env = os.environ if environ is None else environ
    value = env.get(RT_VISIBLE)
    if value is None:
        return {i: i for i in range(device_count)}
    listed = parse_rt_visible(value).read
    return {i: listed[i] for i in range(min(device_count, len(listed)))}


def chip_for_logic(chips: Sequence[ChipSample], logic: int) -> Optional[ChipSample]:
    """The chip whose logic ID is ``logic``; by (NPU, chip) order when npu-smi gave no logic IDs."""
    if any(chip.identity.logic_id is not None for chip in chips):
        return next((chip for chip in chips if chip.identity.logic_id == logic), None)
    ordered = sorted(chips, key=lambda chip: chip.identity.key)
    return ordered[logic] if 0 <= logic < len(ordered) else None


def read_own_memory(npu: Any) -> Dict[int, OwnMemory]:
    """Allocator figures of every device ``npu`` (``torch.npu``) knows; {} when it cannot tell."""
    try:
        count = int(npu.device_count())
        initialised = getattr(npu, "is_initialized", None)
        if initialised is not None and not initialised():
            # Nothing allocated yet, and asking must not be what initialises the runtime.
            return {i: OwnMemory(i, 0, 0) for i in range(count)}
        return {
            i: OwnMemory(i, int(npu.memory_allocated(i)), int(npu.memory_reserved(i))) for i in range(count)
        }
    except Exception:  # a broken runtime must not break the view: the figures are a bonus
        return {}


def own_memory(
    chips: Sequence[ChipSample], environ: Optional[Mapping[str, str]] = None
) -> Dict[ChipKey, OwnMemory]:
    """This process's allocator figures by the key of the chip they are on; {} without torch_npu."""
    if not torch_npu_loaded():
        return {}
    torch = sys.modules.get("torch")
    npu = getattr(torch, "npu", None)
    if npu is None:
        return {}
    figures = read_own_memory(npu)
    mapping = logic_ids(len(figures), environ)
    found: Dict[ChipKey, OwnMemory] = {}
    for index, figure in figures.items():
        logic = mapping.get(index)
        chip = None if logic is None else chip_for_logic(chips, logic)
        if chip is not None:
            found[chip.identity.key] = figure
    return found
