"""Check cann-python-deps: the Python packages CANN's operator compiler imports are installed.

CANN compiles operators (TBE) in the user's Python at the first op; a missing package shows as
``EH9999 … init env failed`` or 500001 there, far from its cause (runtime-and-doctor.md §10 row 8,
Ascend/pytorch #7).  Packages are found by metadata or by module, never imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, warned


@dataclass(frozen=True)
class PythonDep:
    """One package: its pip name, the module it provides, and whether the compiler needs it."""

    pip_name: str
    module: str
    required: bool  # False: used by CANN's tools rather than at operator compile time


#: The list CANN's install guide has users pip-install before the toolkit (§10 row 8; the
#: simulator installs the same, CANN_PYTHON_DEPS).  Assumption (not verified on hardware):
#: requests and absl-py serve CANN's tools (profiling, tuning, model conversion), so a missing
#: one warns; the rest are imported by the TBE compiler and fail.  pathlib2 is left out: it
#: backports the standard pathlib, which every supported Python has.
CANN_PYTHON_DEPS: Tuple[PythonDep, ...] = (
    PythonDep("decorator", "decorator", True),
    PythonDep("sympy", "sympy", True),
    PythonDep("cffi", "cffi", True),
    PythonDep("protobuf", "google.protobuf", True),
    PythonDep("attrs", "attr", True),
    PythonDep("pyyaml", "yaml", True),
    PythonDep("psutil", "psutil", True),
    PythonDep("numpy", "numpy", True),
    PythonDep("scipy", "scipy", True),
    PythonDep("requests", "requests", False),
    PythonDep("absl-py", "absl", False),
)


def run(machine: Machine) -> Finding:
    """Find each package by distribution name, else by module; name only the missing ones."""
    env = machine.python()
    found: List[str] = []
    missing: List[PythonDep] = []
    for dep in CANN_PYTHON_DEPS:
        version = env.distribution_version(dep.pip_name)
        if version is not None:
            found.append(f"{dep.pip_name} {version}")
        elif env.find_module(dep.module) is not None:
            found.append(f"{dep.pip_name} (module {dep.module}, no package metadata)")
        else:
            missing.append(dep)
    python = env.python or f"python{env.version_text}"
    details = [
        f"Python {env.version_text} ({env.version_source})",
        *env.notes,
        "searched: " + ", ".join(env.display(path) for path in env.paths),
    ]
    if found:
        details.append("found: " + ", ".join(found))
    if not missing:
        return passed(
            f"all {len(CANN_PYTHON_DEPS)} Python packages CANN's compiler uses are installed", details
        )
    names = " ".join(dep.pip_name for dep in missing)
    where = "" if env.python else " (in the Python your jobs run in)"
    hint = f"`{python} -m pip install {names}`{where}"
    required = [dep.pip_name for dep in missing if dep.required]
    if required:
        return failed(
            f"Python packages CANN's operator compiler imports are missing: {', '.join(required)}; the "
            "first operator fails with `EH9999 … init env failed` / 500001",
            hint,
            details,
        )
    return warned(
        f"Python packages CANN's tools use are missing: {', '.join(dep.pip_name for dep in missing)}",
        hint,
        details,
    )


CHECK = Check(
    id="cann-python-deps",
    group=Group.FRAMEWORKS,
    title="the Python packages CANN's operator compiler imports are installed",
    run=run,
    requires=("cann-install",),
)
