"""Provides machine_chips(): how many chips this machine has, from PCI sysfs and ``/dev``, so a
chip source that lists fewer (a table cut short, chips the driver lost) is caught by the sampler,
``npuwatch check`` and the doctor alike."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from npuwatch.chip_source import source_title
from npuwatch.model import ChipSample
from npuwatch.probes.devices import DevNodes, scan_dev
from npuwatch.probes.pci import ASCEND_DRIVER, PciInventory, normalize_bdf, scan_pci
from npuwatch.probes.sysroot import Sysroot
from npuwatch.verdict import Problem, Reason


@dataclass(frozen=True)
class MachineChips:
    """The chips this machine (or this container) has, and the evidence that says so."""

    count: int = 0
    evidence: Tuple[str, ...] = ()  # "8 Ascend PCI functions", "8 /dev/davinciN"
    bus_ids: Tuple[str, ...] = ()  # the counted PCI functions (``0000:c1:00.0``), when PCI counts


def machine_chips(
    inventory: Optional[PciInventory], nodes: Optional[DevNodes], in_container: bool
) -> MachineChips:
    """How many chips npu-smi should list here: the largest count the machine's evidence gives.

    ``/dev/davinciN`` is one node per chip on every board (a 310B SoC board has no PCI function,
    an A3 NPU has two chips with a node and a PCI function each).  On a host the Ascend PCI
    functions count too, each for its chips (a 310P Duo function carries two); SR-IOV VFs and
    functions given to another driver (vfio-pci: passed to a VM) do not.  In a container sysfs
    shows the host's every function, so only the nodes it was given count.
    """
    evidence: List[str] = []
    counts: List[int] = []
    bus_ids: Tuple[str, ...] = ()
    if inventory is not None and not in_container:
        functions = [
            f
            for f in inventory.functions
            if not f.is_virtual_function and (f.driver is None or f.driver == ASCEND_DRIVER)
        ]
        if functions:
            total = sum(f.chips for f in functions)
            plural = "s" if len(functions) != 1 else ""
            extra = f" ({total} chips)" if total != len(functions) else ""
            evidence.append(f"{len(functions)} Ascend PCI function{plural}{extra}")
            counts.append(total)
            bus_ids = tuple(f.bdf.lower() for f in functions)
    if nodes is not None and nodes.davinci_ids:
        evidence.append(f"{len(nodes.davinci_ids)} /dev/davinciN")
        counts.append(len(nodes.davinci_ids))
    return MachineChips(max(counts, default=0), tuple(evidence), bus_ids)


def read_machine_chips(sysroot: Sysroot, nodes: Optional[DevNodes] = None) -> MachineChips:
    """``machine_chips`` for the machine ``sysroot`` shows (PCI is not scanned in a container)."""
    from npuwatch.probes.container import detect_container

    in_container = detect_container(sysroot).in_container
    inventory = None if in_container else scan_pci(sysroot)
    return machine_chips(inventory, scan_dev(sysroot) if nodes is None else nodes, in_container)


def unreported_chips(
    machine: MachineChips, listed: Sequence[ChipSample], source: str = "npu-smi"
) -> Optional[Problem]:
    """The problem when the chip source (``source``: its probe name) lists fewer chips than
    ``machine`` has (a table cut short, lost chips); ``None`` when it lists them all, or none
    (``chip_problems`` says that)."""
    keys = {chip.identity.key for chip in listed}
    if not keys or len(keys) >= machine.count:
        return None
    seen = {normalize_bdf(chip.identity.bus_id) for chip in listed}
    missing = [bdf for bdf in machine.bus_ids if bdf not in seen]
    named = ", ".join(missing[:4]) + (" …" if len(missing) > 4 else "")
    where = f"not listed: {named}; " if named else ""
    return Problem(
        Reason.CHIP_MISSING,
        f"{source_title(source)} lists {len(keys)} of {machine.count} chips ({', '.join(machine.evidence)})",
        f"{where}a listing cut short or chips the driver lost: run `npu-smi info` by hand, check "
        "`dmesg | grep -i devdrv`, then `npuwatch doctor`",
    )


class MachineChipsWatch:
    """``read_machine_chips`` for one sysroot, read again at most every ``refresh_s``: what a chip
    source's listing is held against each tick (``FallbackSource.expected_chips``) without a
    sysfs scan per tick.  Call it for the current ``MachineChips``; thread-safe."""

    def __init__(
        self, sysroot: Sysroot, refresh_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.sysroot = sysroot
        self.refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._known: Optional[Tuple[MachineChips, float]] = None

    def __call__(self) -> MachineChips:
        with self._lock:
            now = self._clock()
            if self._known is None or now - self._known[1] >= self.refresh_s:
                self._known = (read_machine_chips(self.sysroot), now)
            return self._known[0]
