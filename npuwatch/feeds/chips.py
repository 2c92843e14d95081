"""Provides ``chip_source()``: the machine's chip source for ``--backend`` (npu-smi, DCMI, or DCMI
falling back to npu-smi), and ``auto_backend()``: what ``auto`` means on a machine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from npuwatch.feeds.budgets import ERROR_QUERIES_BUDGET_S, WORKER_START_GRACE_S
from npuwatch.feeds.machine_handle import MachineHandle

if TYPE_CHECKING:
    from npuwatch.chip_source import ChipSource


def chip_source(
    machine: MachineHandle,
    backend: str,
    timeout_s: float,
    npu_smi: Optional[ChipSource] = None,
    *,
    deadline: Optional[float] = None,
) -> ChipSource:
    """The machine's chip source for ``backend``: npu-smi, DCMI, or DCMI falling back to npu-smi.

    ``timeout_s`` is one read's budget (docs/design.md §2.1 ``--timeout``): one npu-smi call, one DCMI
    read (its worker's start gets ``WORKER_START_GRACE_S`` more), and under ``auto`` both together
    (``FallbackSource`` reads npu-smi beside a DCMI read that has not answered within
    ``hedge_for(timeout_s)``), so a read ends within the timeout plus about a second whichever
    source hangs.  DCMI's worker process starts first, before anything else is imported, so it
    loads, initialises and enumerates while the rest is wired and its first reading is ready by
    the first tick.  ``npu_smi``: the npu-smi side to use (``npuwatch check`` reads it its own
    way); default, the sampler's, whose error-code queries (chips not OK) share
    ``ERROR_QUERIES_BUDGET_S`` a tick.  ``deadline``: a one-shot's end, no npu-smi call runs past it.
    """
    worker = None
    note = None
    if backend == "auto":
        backend, note = auto_backend(machine)
    if backend != "npu-smi":
        from npuwatch.probes.dcmi.worker import start_worker

        root = str(machine.sysroot.root)
        worker = start_worker(
            machine.dcmi_library,
            root,
            timeout_s,
            machine.environ,
            start_grace_s=WORKER_START_GRACE_S,
            restart_at_once=deadline is None,  # a one-shot reads once: no worker for a next read
        )
    try:
        if npu_smi is None:
            from npuwatch.probes.npu_smi.source import NpuSmiSource

            npu_smi = NpuSmiSource(
                machine.npu_smi(timeout_s, deadline),
                label=machine.label,
                errors_budget_s=min(timeout_s, ERROR_QUERIES_BUDGET_S),
            )
        if worker is None:
            if note is None:
                return npu_smi
            from npuwatch.chip_source import NotedSource

            return NotedSource(npu_smi, note)
        from npuwatch.fallback_source import FallbackSource, hedge_for
        from npuwatch.machine_chips import MachineChipsWatch
        from npuwatch.probes.dcmi.source import DcmiSource

        dcmi = DcmiSource(worker, label="dcmi" if machine.scenario is None else machine.label)
        return FallbackSource(
            dcmi,
            npu_smi,
            switching=backend == "auto",
            details=npu_smi,
            hedge_s=hedge_for(timeout_s),
            expected_chips=MachineChipsWatch(machine.sysroot),
        )
    except BaseException:
        if worker is not None:
            worker.close()
        raise


def auto_backend(machine: MachineHandle) -> Tuple[str, Optional[str]]:
    """``auto``'s backend on ``machine`` and the note that explains it: ``("auto", None)`` where a
    libdcmi.so may load; ``("npu-smi", None)`` on a machine without any (a few ``stat`` calls,
    where a worker that finds nothing costs a Python start and a failed tick a minute: such a
    machine simply reads npu-smi); ``("npu-smi", note)`` when an untrusted tree's library was held
    back (``--trust-root``)."""
    from npuwatch.probes.dcmi.search import absent, withheld

    root = str(machine.sysroot.root)
    held = withheld(machine.dcmi_library, root, machine.environ)
    if held is not None:
        return "npu-smi", f"dcmi: {held}: read through npu-smi"
    if absent(machine.dcmi_library, root, machine.environ) is not None:
        return "npu-smi", None
    return "auto", None
