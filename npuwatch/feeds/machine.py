"""Provides ``open_machine()``: the machine the options name (a demo's simulated tree, ``--root``
or this machine, and its npu-smi), and ``demo_fallback()``: the demo when no source was chosen
and there is no NPU.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from npuwatch.feeds.machine_handle import MachineHandle
from npuwatch.feeds.options import FeedOptions, environ_of
from npuwatch.option_values import machine_root
from npuwatch.probes.simulator import DEFAULT_SCENARIO

if TYPE_CHECKING:
    from npuwatch.probes.simulator.machine import PendingSimulation


def demo_fallback(
    options: FeedOptions, environ: Optional[Mapping[str, str]] = None
) -> Tuple[FeedOptions, str]:
    """The options to watch, and a banner: the demo when no source was chosen and there is no NPU."""
    if options.names_a_source(environ):
        return options, ""
    from npuwatch.availability import machine_has_npu
    from npuwatch.probes.sysroot import Sysroot

    if machine_has_npu(Sysroot("/")):
        return options, ""
    banner = (
        "No Ascend NPU here (no npu-smi, no Ascend PCI device): showing the simulated "
        f"'{DEFAULT_SCENARIO}' machine. `npuwatch --demo list` shows other scenarios."
    )
    return replace(options, demo=DEFAULT_SCENARIO), banner


def open_machine(
    options: FeedOptions,
    environ: Optional[Mapping[str, str]] = None,
    pending: Optional[PendingSimulation] = None,
) -> MachineHandle:
    """The machine ``options`` name: a demo's simulated tree, ``--root`` or this machine.

    ``--root`` falls back to ``NPUWATCH_ROOT``, ``--npu-smi`` to ``NPUWATCH_NPU_SMI``; a root that
    is not a folder is a ``UsageError`` (a ``VariableError`` when the variable named it).  A tree's
    own npu-smi and libraries run only when it is trusted (``--trust-root``, written into the
    machine's environment as ``NPUWATCH_TRUST_ROOT=1``: ``probes.tree_trust``).
    ``pending``: the demo's machine already being built (``Simulation.begin``), taken over here.
    """
    options.validate()
    env = environ_of(environ)
    from npuwatch.probes.npu_smi import find_npu_smi, withheld_npu_smi
    from npuwatch.probes.sysroot import Sysroot

    if options.demo is not None:
        from npuwatch.probes.simulator import Simulation

        sim = pending.wait() if pending is not None else Simulation.start(options.demo)
        return MachineHandle(
            sim.sysroot(),
            sim.npu_smi,
            dict(sim.environ),
            scenario=sim.scenario.name,
            process_lookup=sim.process_lookup,
            dcmi_library=sim.dcmi_library,
            dcmi_kind=sim.dcmi_kind,
            _close=sim.close,
        )
    root = machine_root(options.root, env)
    if options.trust_root:
        from npuwatch.probes.tree_trust import TRUST_VARIABLE

        env = {**env, TRUST_VARIABLE: "1"}
    else:
        options.trusts_root(env)  # a bad NPUWATCH_TRUST_ROOT is a VariableError, never read as trust
    sysroot = Sysroot(root, environ=env)
    explicit = options.npu_smi or env.get("NPUWATCH_NPU_SMI")
    npu_smi = find_npu_smi(sysroot, explicit)
    withheld = None if explicit else withheld_npu_smi(sysroot)
    library = options.dcmi_lib or env.get("NPUWATCH_DCMI_LIB") or None
    return MachineHandle(sysroot, npu_smi, env, dcmi_library=library, npu_smi_withheld=withheld)
