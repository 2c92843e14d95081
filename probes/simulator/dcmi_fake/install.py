"""Provides install(): put a demo machine's DCMI library in place — the fake, or none at all.

With a C compiler, ``fake_dcmi.c`` is built (once per user: ``build.py``'s cache) without the
scenario's omitted functions and copied to ``<root>/usr/local/dcmi/libdcmi.so``, where the driver
package puts the real one; without one (or with ``NPUWATCH_FAKE_DCMI=python``) the demo names the
pure-Python stand-in ``python:npuwatch.probes.simulator.dcmi_fake.standin``.  A scenario without DCMI
(``DcmiSpec(present=False)``) gets no library at all: ``/usr/local/dcmi`` is removed from the tree.
The first state file is written here; the environment names it and the refresh function.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from npuwatch.probes.simulator.dcmi_fake import build
from npuwatch.probes.simulator.dcmi_fake.state import (
    REFRESH_FUNCTION,
    REFRESH_VARIABLE,
    STATE_FILE,
    STATE_VARIABLE,
    write_for,
)
from npuwatch.probes.simulator.scenarios import Scenario

#: Where the driver package installs libdcmi.so (driver-interfaces.md §6.1), inside the tree.
LIBRARY_PATH = "usr/local/dcmi/libdcmi.so"
#: The loader's name for the stand-in.
STANDIN = "python:npuwatch.probes.simulator.dcmi_fake.standin"
#: ``python`` forces the stand-in (a machine without a compiler, on one that has it).
CHOICE_VARIABLE = "NPUWATCH_FAKE_DCMI"


@dataclass(frozen=True)
class FakeDcmi:
    """The demo's DCMI library: what to load, what it is, and the environment it reads."""

    library: Optional[str]  # a path, STANDIN, or None (the machine has no libdcmi.so)
    kind: str  # "fake libdcmi.so (C, built with cc)" …
    environ: Mapping[str, str] = field(default_factory=dict)
    state_path: Optional[Path] = None


def install(
    scenario: Scenario,
    root: Path,
    folder: Path,
    started_at: float,
    seed: int,
    environ: Optional[Mapping[str, str]] = None,
) -> FakeDcmi:
    """Place the library of ``scenario`` in the tree at ``root``; its state goes in ``folder``
    (beside the fake npu-smi's ``npu-smi.json``)."""
    env = os.environ if environ is None else environ
    if not scenario.dcmi.present:
        shutil.rmtree(root / "usr/local/dcmi", ignore_errors=True)
        return FakeDcmi(None, f"none: this machine has no libdcmi.so (scenario {scenario.name})")
    state_path = folder / STATE_FILE
    write_for(scenario, state_path, started_at, seed)
    variables = {STATE_VARIABLE: str(state_path), REFRESH_VARIABLE: REFRESH_FUNCTION}
    if env.get(CHOICE_VARIABLE, "").strip().lower() == "python":
        reason = f"{CHOICE_VARIABLE}=python"
    else:
        built = build.build(scenario.dcmi.omit, env)
        if built.path is not None:
            target = root / LIBRARY_PATH
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            shutil.copyfile(built.path, target)
            target.chmod(0o755)
            return FakeDcmi(
                str(target), f"fake libdcmi.so (C, built with {built.compiler})", variables, state_path
            )
        reason = built.reason
    return FakeDcmi(STANDIN, f"fake DCMI (pure-Python stand-in: {reason})", variables, state_path)
