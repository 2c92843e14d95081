"""Check cann-python-deps: the Python packages CANN's operator compiler imports are installed.

CANN compiles operators (TBE) in the user's Python at the first op; a missing package shows as
``EH9999 … init env failed`` or 500001 there, far from its cause (runtime-and-doctor.md §10 row 8,
Ascend/pytorch #7).  Packages are found by metadata or by module, never imported.  numpy must
also meet CANN's own requirement (issue 29 item 7; runtime-and-doctor.md §8.4): what CANN's
Python packages state (``Requires-Dist``) when the machine has them, else CANN ≤ 8.2's numpy < 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from npuwatch.doctor.facts import active_home, home_version, release
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, Problem, Status, combine
from npuwatch.probes.python_env import PythonEnv, normalize_name
from npuwatch.probes.requirements import Requirement, parse_requirement


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


#: The Python packages CANN installs (its wheels: te, topi, hccl, op_compile_tool …), whose
#: ``Requires-Dist`` state CANN's own numpy requirement; any distribution under the CANN home
#: (``<home>/python/site-packages``) counts too.
CANN_PACKAGES = (
    "te", "topi", "hccl", "op-compile-tool", "op-gen", "auto-tune", "schedule-search", "dataflow",
    "llm-datadist",
)  # fmt: skip

#: The newest CANN line whose Python tools need numpy < 2 when the install states nothing itself:
#: runtime-and-doctor.md §8.4 (vllm-ascend #472, #1875, #2210: CANN 8.2 with numpy 2.0.2 fails
#: set_device with 500001).
NUMPY_1_UNTIL = (8, 2)
NUMPY_1 = Requirement("numpy", (("<", "2"),))


def run(machine: Machine) -> Finding:
    """Find each package by distribution name, else by module; name only the missing ones; then
    numpy's version against CANN's requirement."""
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
    problems: List[Problem] = []
    if missing:
        problems.append(_missing(env, python, missing))
    problems += _numpy(machine, env, python, details)
    return combine(
        problems, f"all {len(CANN_PYTHON_DEPS)} Python packages CANN's compiler uses are installed", details
    )


def _missing(env: PythonEnv, python: str, missing: List[PythonDep]) -> Problem:
    names = " ".join(dep.pip_name for dep in missing)
    where = "" if env.python else " (in the Python your jobs run in)"
    hint = f"`{python} -m pip install {names}`{where}"
    required = [dep.pip_name for dep in missing if dep.required]
    if required:
        return Problem(
            Status.FAIL,
            f"Python packages CANN's operator compiler imports are missing: {', '.join(required)}; the "
            "first operator fails with `EH9999 … init env failed` / 500001",
            hint,
        )
    return Problem(
        Status.WARN,
        f"Python packages CANN's tools use are missing: {', '.join(dep.pip_name for dep in missing)}",
        hint,
    )


def cann_numpy_requirement(machine: Machine, env: PythonEnv) -> Optional[Tuple[Requirement, str]]:
    """CANN's numpy requirement and who states it: a CANN package's ``Requires-Dist`` when one is
    installed, else the rule for CANN ≤ 8.2; ``None`` when nothing is known."""
    home = active_home(machine)
    names = {normalize_name(name) for name in CANN_PACKAGES}
    if home is not None:
        names.update(env.distributions_under(machine.sysroot.path(home)))
    for name in sorted(names):
        for line in env.requires(name):
            requirement = parse_requirement(line)
            if (
                requirement is not None
                and normalize_name(requirement.name) == "numpy"
                and requirement.clauses
            ):
                version = env.distribution_version(name)
                return requirement, f"CANN's {name} {version} (Requires-Dist: {line.strip()})"
    cann = home_version(machine, home) if home is not None else None
    if cann is not None and release(cann) and release(cann)[:2] <= NUMPY_1_UNTIL:
        line = ".".join(str(n) for n in NUMPY_1_UNTIL)
        return NUMPY_1, f"CANN {cann} (CANN ≤ {line} needs numpy < 2)"
    return None


def _numpy(machine: Machine, env: PythonEnv, python: str, details: List[str]) -> List[Problem]:
    numpy = env.distribution_version("numpy")
    if numpy is None:
        return []
    rule = cann_numpy_requirement(machine, env)
    if rule is None:
        return []
    requirement, source = rule
    details.append(f"numpy {numpy}; {source} asks for numpy{requirement.specifier}")
    if requirement.allows(numpy) is not False:
        return []
    return [
        Problem(
            Status.FAIL,
            f"numpy {numpy} does not meet numpy{requirement.specifier}, which {source.split(' (')[0]} needs: "
            "the first operator (or torch.npu.set_device) fails with 500001 / `SetPrecisionMode … error code "
            "is 500001`",
            f"`{python} -m pip install 'numpy{requirement.specifier}'`",
        )
    ]


CHECK = Check(
    id="cann-python-deps",
    group=Group.FRAMEWORKS,
    title="the Python packages CANN's operator compiler imports are installed",
    run=run,
    requires=("cann-install",),
)
