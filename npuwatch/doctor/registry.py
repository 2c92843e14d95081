"""Provides all_checks(): every doctor check in the order they run, hardware up (docs/design.md §6)."""

from __future__ import annotations

import importlib
from typing import Tuple

from npuwatch.doctor.result import Check

#: Check modules under npuwatch.doctor.checks, in run order; each defines ``CHECK``.
CHECK_MODULES = (
    "pci_devices",
    "driver_bound",
    "device_nodes",
    "device_permissions",
    "driver_install",
    "firmware_compat",
    "npu_smi",
    "dcmi",
    "chip_health",
    "cann_install",
    "cann_env",
    "cann_libraries",
    "driver_cann_compat",
    "torch_npu_compat",
    "visible_devices",
    "container_mounts",
    "op_kernels",
    "hbm_held",
    "pcie_link",
    "cann_python_deps",
)


def all_checks() -> Tuple[Check, ...]:
    """Every check, in run order."""
    checks = []
    for name in CHECK_MODULES:
        module = importlib.import_module(f"npuwatch.doctor.checks.{name}")
        checks.append(module.CHECK)
    return tuple(checks)


def select(
    checks: Tuple[Check, ...], only: Tuple[str, ...] = (), skip: Tuple[str, ...] = ()
) -> Tuple[Check, ...]:
    """The checks ``--only``/``--skip`` leave; ``ValueError`` naming an unknown ID."""
    known = {check.id for check in checks}
    unknown = [name for name in (*only, *skip) if name not in known]
    if unknown:
        raise ValueError(f"unknown check ID {', '.join(unknown)}; `npuwatch doctor --list` shows them")
    return tuple(check for check in checks if (not only or check.id in only) and check.id not in skip)
