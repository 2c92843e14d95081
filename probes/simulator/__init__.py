"""npuwatch.probes.simulator: the simulated machines behind ``--demo`` (docs/design.md §4).

``Simulation`` and ``list_scenarios`` load lazily: the fake npu-smi imports this package on
every call and must not pay for the tree builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npuwatch.probes.simulator.default import DEFAULT_SCENARIO

if TYPE_CHECKING:
    from npuwatch.probes.simulator.catalog import list_scenarios
    from npuwatch.probes.simulator.machine import Simulation

__all__ = ["DEFAULT_SCENARIO", "Simulation", "list_scenarios"]


def __getattr__(name: str) -> Any:
    if name == "Simulation":
        from npuwatch.probes.simulator.machine import Simulation

        return Simulation
    if name == "list_scenarios":
        from npuwatch.probes.simulator.catalog import list_scenarios

        return list_scenarios
    raise AttributeError(f"module 'npuwatch.probes.simulator' has no attribute {name!r}")
