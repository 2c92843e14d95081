"""Check cann-env: CANN's ``set_env.sh`` is sourced, for one install only, with no stub libraries.

What ``set_env.sh`` sets is runtime-and-doctor.md §7.1; the failures it explains are §10 rows 1
(libhccl.so not found, ERR00008), 4 (``No module named 'acl'``), 21 (two toolkits on the paths:
undefined symbols), 31 (driver folder missing from ``LD_LIBRARY_PATH``) and ACL error 100039
(stub libraries first on ``LD_LIBRARY_PATH``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Dict, List, Optional

from npuwatch.doctor.facts import active_home, display_real, home_version, set_env_script, source_advice
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import (
    Check,
    Finding,
    Group,
    Problem,
    Status,
    combine,
    skipped,
)

#: The variables set_env.sh exports that name a folder (§7.1, §12 row 8).
FOLDER_VARIABLES = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH")


def cann_home_of(entry: str) -> Optional[PurePosixPath]:
    """The CANN home a path entry belongs to (``…/ascend-toolkit/<v>``, ``…/cann[-<v>]``), if any."""
    parts = PurePosixPath(entry).parts
    for index, part in enumerate(parts):
        if part == "ascend-toolkit" and index + 1 < len(parts) and parts[index + 1] != "set_env.sh":
            return PurePosixPath(*parts[: index + 2])
        if part == "cann" or (part.startswith("cann-") and part[5:6].isdigit()):
            return PurePosixPath(*parts[: index + 1])
    return None


def _entries(machine: Machine, variable: str) -> List[str]:
    return [entry for entry in (machine.environ.get(variable) or "").split(":") if entry]


def _real(machine: Machine, entry: str) -> Path:
    return machine.sysroot.realpath(entry)


def _contains(machine: Machine, variable: str, wanted: PurePosixPath) -> bool:
    target = _real(machine, str(wanted))
    return any(_real(machine, entry) == target for entry in _entries(machine, variable))


def _folder_problems(machine: Machine, script: PurePosixPath) -> List[Problem]:
    unset = [name for name in FOLDER_VARIABLES if not machine.environ.get(name)]
    names = ", ".join(f"${name}" for name in unset)
    if len(unset) == len(FOLDER_VARIABLES):
        consequence = (
            "without it, `import torch_npu` fails with `libhccl.so: cannot open shared object file "
            "… Please run 'source set_env.sh'` (ERR00008)"
        )
        return [
            Problem(
                Status.FAIL,
                f"CANN environment not sourced: {names} unset",
                source_advice(script),
                (consequence,),
            )
        ]
    problems = []
    if unset:
        problems.append(
            Problem(Status.FAIL, f"CANN environment partly set: {names} unset", source_advice(script))
        )
    for name in FOLDER_VARIABLES:
        value = machine.environ.get(name)
        if value and not machine.sysroot.exists(value):
            summary = f"${name} points at a missing folder: {value}"
            problems.append(Problem(Status.FAIL, summary, source_advice(script)))
    opp = machine.environ.get("ASCEND_OPP_PATH")
    if opp and machine.sysroot.exists(opp) and not machine.sysroot.exists(PurePosixPath(opp) / "built-in"):
        problems.append(
            Problem(
                Status.FAIL,
                f"$ASCEND_OPP_PATH ({opp}) has no built-in/ operators: init fails with 148049 "
                "ACL_ERROR_INVALID_OPP_PATH",
                f"point it at the toolkit's opp folder: {source_advice(script)}",
            )
        )
    return problems


def _library_path_problems(machine: Machine, home: PurePosixPath, script: PurePosixPath) -> List[Problem]:
    problems = []
    lib64 = home / "lib64"
    if not _contains(machine, "LD_LIBRARY_PATH", lib64):
        problems.append(
            Problem(
                Status.FAIL,
                f"LD_LIBRARY_PATH lacks {lib64}: libascendcl.so/libhccl.so will not be found",
                source_advice(script),
                ("`import torch_npu` fails with `libhccl.so: cannot open shared object file` (ERR00008)",),
            )
        )
    driver = machine.driver_dir() / "lib64" / "driver"
    if not _contains(machine, "LD_LIBRARY_PATH", driver):
        problems.append(_driver_path_problem(machine, driver, script))
    return problems


def _driver_path_problem(machine: Machine, driver: PurePosixPath, script: PurePosixPath) -> Problem:
    base = driver.parent.parent
    export = f"export LD_LIBRARY_PATH={base}/lib64:{base}/lib64/common:{driver}:$LD_LIBRARY_PATH"
    info = machine.install_info()
    if info is None or not info.driver_install_path:
        # set_env.sh finds the driver through /etc/ascend_install.info (§10 row 31).
        why = (
            "/etc/ascend_install.info is missing"
            if info is None
            else "/etc/ascend_install.info has no Driver_Install_Path_Param"
        )
        hint = (
            f"/etc/ascend_install.info {why}, so set_env.sh could not add the driver: mount it from the host "
            "(`-v /etc/ascend_install.info:/etc/ascend_install.info`) and source set_env.sh again, "
            f"or `{export}`"
        )
    else:
        hint = f"`{export}` (or {source_advice(script)})"
    return Problem(
        Status.FAIL,
        f"LD_LIBRARY_PATH lacks the driver folder {driver}: libascend_hal.so will not be found",
        hint,
    )


def _python_path_problem(machine: Machine, home: PurePosixPath, script: PurePosixPath) -> List[Problem]:
    site = home / "python" / "site-packages"
    if _contains(machine, "PYTHONPATH", site):
        return []
    value = machine.environ.get("PYTHONPATH")
    if value:  # set, but not by set_env.sh: overwritten after sourcing (§10 row 4)
        hint = (
            f"PYTHONPATH was overwritten after sourcing: append instead, "
            f"`export PYTHONPATH={site}:$PYTHONPATH`, or source {script} after your own export"
        )
    else:
        hint = source_advice(script)
    return [
        Problem(
            Status.FAIL,
            f"PYTHONPATH lacks {site}: `import acl` (and CANN's te/tbe) fail with ModuleNotFoundError",
            hint,
            (f"PYTHONPATH={value or ''}",),
        )
    ]


def _mixed_homes(machine: Machine, home: PurePosixPath, script: PurePosixPath) -> List[Problem]:
    """Several CANN installs named on the paths (§10 row 21)."""
    named: Dict[Path, List[str]] = {}
    for variable in ("LD_LIBRARY_PATH", "PYTHONPATH", *FOLDER_VARIABLES):
        for entry in _entries(machine, variable):
            found = cann_home_of(entry)
            if found is not None:
                named.setdefault(_real(machine, str(found)), []).append(f"{variable}: {entry}")
    if len(named) < 2:
        return []
    lines = []
    for real, uses in named.items():
        shown = display_real(machine, real)
        if machine.sysroot.exists(shown):
            what = f"CANN {home_version(machine, PurePosixPath(shown)) or 'version unknown'}"
        else:
            what = "missing"
        more = f" and {len(uses) - 1} more" if len(uses) > 1 else ""
        lines.append(f"{shown} ({what}) named by {uses[0]}{more}")
    return [
        Problem(
            Status.FAIL,
            f"{len(named)} CANN installs mixed on the paths: expect `undefined symbol` errors "
            "(e.g. in libops_host_cpu.so)",
            "start from a clean environment (a new shell; remove old Ascend exports from ~/.bashrc "
            f"or the Dockerfile), then only {source_advice(script)}",
            tuple(lines),
        )
    ]


def _stub_problems(machine: Machine, home: PurePosixPath) -> List[Problem]:
    """Stub libraries (link-time only) on LD_LIBRARY_PATH: ACL error 100039 when they come first."""
    entries = _entries(machine, "LD_LIBRARY_PATH")
    stubs = [(i, e) for i, e in enumerate(entries) if _is_stub_folder(e)]
    if not stubs:
        return []
    real_lib64 = _real(machine, str(home / "lib64"))
    first_real = next((i for i, e in enumerate(entries) if _real(machine, e) == real_lib64), None)
    shadowing = [e for i, e in stubs if first_real is None or i < first_real]
    names = ", ".join(e for _, e in stubs)
    fix = f"remove {names} from LD_LIBRARY_PATH (stub libraries are for linking only)"
    if shadowing:
        return [
            Problem(
                Status.FAIL,
                f"stub libraries come first on LD_LIBRARY_PATH ({', '.join(shadowing)}): "
                "every ACL call fails with 100039 ACL_ERROR_COMPILING_STUB_MODE",
                fix,
            )
        ]
    return [Problem(Status.WARN, f"stub libraries on LD_LIBRARY_PATH ({names}), after the real ones", fix)]


def _is_stub_folder(entry: str) -> bool:
    # <T>/runtime/lib64/stub, <T>/lib64/stub, <T>/<arch>-linux/devlib (link-time stubs).
    path = PurePosixPath(entry)
    return "stub" in path.parts or path.name == "devlib"


def run(machine: Machine) -> Finding:
    """Compare the environment with what set_env.sh of the install in use would set."""
    home = active_home(machine)
    if home is None:
        return skipped("no CANN install found (see cann-install)")
    script = set_env_script(machine, home)
    details = [f"CANN home: {home}", f"set_env.sh: {script}"]
    for name in (*FOLDER_VARIABLES, "LD_LIBRARY_PATH", "PYTHONPATH"):
        details.append(f"{name}={machine.environ.get(name, '(unset)')}")
    problems = _folder_problems(machine, script)
    if not any(machine.environ.get(name) for name in FOLDER_VARIABLES):
        return combine(problems, "", details)  # nothing sourced: the path checks would only repeat it
    # Another install's folders on the paths is the cause when this one's are missing: lead with it.
    problems += _mixed_homes(machine, home, script)
    problems += _library_path_problems(machine, home, script)
    problems += _python_path_problem(machine, home, script)
    problems += _stub_problems(machine, home)
    version = home_version(machine, home) or "(version unknown)"
    return combine(problems, f"CANN {version} environment is sourced ({script})", details)


CHECK = Check(
    id="cann-env",
    group=Group.CANN,
    title="CANN's set_env.sh is sourced for one install (variables, LD_LIBRARY_PATH, PYTHONPATH)",
    run=run,
    requires=("cann-install",),
)
