"""Check cann-libraries: CANN's core libraries are found on LD_LIBRARY_PATH and load (dlopen in a child).

The libraries are those torch_npu and the self-test open first (runtime-and-doctor.md §12 row 9);
the loader's own error text is kept, as users paste it into issues (§10 rows 1, 2, 5).  ATB
(``libatb.so``, NNAL) is checked where NNAL is installed or ``ATB_HOME_PATH`` is set, and where
something installed needs it (vllm-ascend, MindIE, a torch_npu dev build): NNAL's version must be
CANN's (``nnal/atb/latest/version.info``; issue 29 item 8, runtime-and-doctor.md §8.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Dict, List, Optional, Tuple

from npuwatch.doctor.facts import (
    active_home,
    cann_arch,
    home_version,
    not_trusted,
    same_release,
    set_env_script,
    source_advice,
)
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import (
    Check,
    Finding,
    Group,
    Problem,
    Status,
    combine,
    failed,
    skipped,
)
from npuwatch.probes.install_files import DEFAULT_ASCEND_ROOT, parse_key_value_file
from npuwatch.probes.library_load import load_libraries
from npuwatch.probes.requirements import prerelease

#: What torch_npu and pyACL load first; libopapi/libnnopbase carry the aclnn operators (§2.1).
CORE_LIBRARIES = ("libascendcl.so", "libhccl.so", "libopapi.so", "libnnopbase.so")
ATB_LIBRARY = "libatb.so"
NNAL_ATB = PurePosixPath(DEFAULT_ASCEND_ROOT) / "nnal" / "atb"
NNAL_VERSION_INFO = NNAL_ATB / "latest" / "version.info"
#: MindIE's install folder: MindIE runs on ATB.
MINDIE = PurePosixPath(DEFAULT_ASCEND_ROOT) / "mindie"

Errors = Dict[str, Optional[str]]  # str(path) → None (loaded) or the loader's text

#: All libraries share one budget inside the check's own 3 s (docs/design.md §2.3).
LOAD_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Located:
    """Where one library was found: on LD_LIBRARY_PATH, only in the toolkit, or nowhere."""

    name: str
    path: Optional[Path]  # the real file in the tree (None: not found)
    on_library_path: bool


def locate(machine: Machine, name: str, fallbacks: Tuple[PurePosixPath, ...]) -> Located:
    """``name`` on ``LD_LIBRARY_PATH`` (resolved under the root), else in one of ``fallbacks``."""
    for folder in machine.sysroot.env_paths("LD_LIBRARY_PATH"):
        candidate = folder / name
        if candidate.is_file():
            return Located(name, candidate, True)
    for fallback in fallbacks:
        candidate = machine.sysroot.path(fallback / name)
        if candidate.is_file():
            return Located(name, candidate, False)
    return Located(name, None, False)


def _shown(machine: Machine, path: Path) -> str:
    if machine.sysroot.is_live:
        return str(path)
    try:
        return "/" + path.relative_to(machine.sysroot.root).as_posix()
    except ValueError:
        return str(path)


def _load(machine: Machine, found: List[Located]) -> Errors:
    paths = [str(item.path) for item in found if item.path is not None]
    if not paths:
        return {}
    library_path = [str(p) for p in machine.sysroot.env_paths("LD_LIBRARY_PATH")]
    # A library found outside LD_LIBRARY_PATH still needs its neighbours to load.
    library_path += sorted({str(Path(p).parent) for p in paths} - set(library_path))
    return load_libraries(paths, library_path, LOAD_TIMEOUT_S)


def run(machine: Machine) -> Finding:
    """Locate and load the core libraries (fail) and, where ATB is in use, libatb.so (warn); NNAL's
    version against CANN's, and NNAL's absence where something installed needs ATB."""
    home = active_home(machine)
    if home is None:
        return skipped("no CANN install found (see cann-install)")
    atb = _atb(machine)
    nnal = _nnal_problems(machine, home, atb)  # read from files: said even where nothing is loaded
    untrusted = not_trusted(machine, f"loading CANN's libraries from {home}")
    if untrusted is not None:
        return combine(nnal, "", [untrusted.summary, *untrusted.details]) if nnal else untrusted
    core = [locate(machine, name, (home / "lib64",)) for name in CORE_LIBRARIES]
    everything = [*core, *([atb] if atb is not None else [])]
    errors = _load(machine, everything)
    details = []
    for item in everything:
        if item.path is None:
            details.append(f"{item.name}: not found")
            continue
        where = "" if item.on_library_path else " (not on LD_LIBRARY_PATH)"
        error = errors.get(str(item.path))
        state = "loads" if error is None else f"does not load: {error}"
        details.append(f"{item.name}: {_shown(machine, item.path)}{where} {state}")
    core_finding = _core_verdict(machine, home, core, errors, details)
    if core_finding is not None:
        return core_finding
    problems = list(nnal)
    if atb is not None and not (nnal and atb.path is None):
        problem = _atb_verdict(machine, atb, errors)
        if problem is not None:
            problems.append(problem)
    names = [name[: -len(".so")] for name in (*CORE_LIBRARIES, *([ATB_LIBRARY] if atb is not None else []))]
    return combine(problems, f"{', '.join(names)} load from LD_LIBRARY_PATH", details)


def nnal_version(machine: Machine) -> Optional[str]:
    """NNAL's version (``nnal/atb/latest/version.info``: ``Version=``), or ``None``."""
    text = machine.sysroot.read_text(NNAL_VERSION_INFO, limit=64 * 1024)
    if text is None:
        return None
    values = {key.lower(): value.strip() for key, value in parse_key_value_file(text).items()}
    return values.get("version") or values.get("package_version") or None


def atb_users(machine: Machine) -> List[str]:
    """What is installed here that runs on ATB: vllm-ascend, MindIE, a torch_npu dev build."""
    env = machine.python()
    users = []
    for name in ("vllm-ascend", "mindie-llm", "mindie-torch"):
        version = env.distribution_version(name)
        if version is not None:
            users.append(f"{name} {version}")
    npu = env.distribution_version("torch_npu")
    if npu is not None and prerelease(npu):
        users.append(f"torch_npu {npu} (a dev build)")
    if machine.sysroot.exists(MINDIE):
        users.append(f"MindIE ({MINDIE})")
    return users


def _nnal_problems(machine: Machine, home: PurePosixPath, atb: Optional[Located]) -> List[Problem]:
    cann = home_version(machine, home)
    nnal = nnal_version(machine)
    arch = cann_arch(machine, home)
    install = (
        f"install NNAL {cann or '<the CANN version>'} (`bash Ascend-cann-nnal_{cann or '<version>'}_linux-"
        f"{arch}.run --install`), then `source {NNAL_ATB / 'set_env.sh'}` after CANN's set_env.sh"
    )
    if nnal is not None:
        if cann is None or same_release(nnal, cann):
            return []
        return [
            Problem(
                Status.WARN,
                f"NNAL {nnal} ({NNAL_VERSION_INFO}) is not for CANN {cann}: ATB users fail with "
                "`undefined symbol` in libatb.so or CANN's libraries",
                install,
            )
        ]
    if atb is not None and atb.path is not None:
        return []  # ATB found elsewhere (ATB_HOME_PATH): nothing says its version
    users = atb_users(machine)
    if not users:
        return []
    return [
        Problem(
            Status.FAIL,
            f"{ATB_LIBRARY} will not be found: install NNAL {cann or ''}".rstrip()
            + f" (no {NNAL_ATB}; {', '.join(users)} need{'s' if len(users) == 1 else ''} ATB)",
            install,
        )
    ]


def _core_verdict(
    machine: Machine, home: PurePosixPath, core: List[Located], errors: Errors, details: List[str]
) -> Optional[Finding]:
    script = set_env_script(machine, home)
    missing = [item.name for item in core if item.path is None]
    if missing:
        version = home_version(machine, home) or "<version>"
        arch = cann_arch(machine, home)
        return failed(
            f"{', '.join(missing)} not found in {home}/lib64 or on LD_LIBRARY_PATH: the CANN runtime "
            "is not (fully) installed",
            f"reinstall the toolkit, which carries the runtime: `bash Ascend-cann-toolkit_{version}_linux-"
            f"{arch}.run --full`, then {source_advice(script)}",
            details,
        )
    hidden = [item.name for item in core if not item.on_library_path]
    if hidden:
        return failed(
            f"{', '.join(hidden)} not on LD_LIBRARY_PATH (found in {home}/lib64): `import torch_npu` "
            f"fails with `{hidden[0]}: cannot open shared object file` (ERR00008)",
            source_advice(script),
            details,
        )
    broken = [item for item in core if errors.get(str(item.path)) is not None]
    if broken:
        first = broken[0]
        shown = _shown(machine, first.path) if first.path is not None else first.name
        return failed(
            f"{', '.join(item.name for item in broken)} do{'es' if len(broken) == 1 else ''} not load: "
            f"{errors[str(first.path)]}",
            "a library that is present but does not load is damaged or from another install: look for "
            f"mixed CANN versions on LD_LIBRARY_PATH (cann-env), check `ldd {shown}"
            " | grep 'not found'`, and reinstall the toolkit if the file itself is damaged",
            details,
        )
    return None


def _atb(machine: Machine) -> Optional[Located]:
    """libatb.so, only where ATB is in use: NNAL installed or ATB_HOME_PATH set."""
    atb_home = machine.environ.get("ATB_HOME_PATH")
    if not atb_home and not machine.sysroot.exists(NNAL_ATB):
        return None
    fallbacks: List[PurePosixPath] = []
    if atb_home:
        fallbacks.append(PurePosixPath(atb_home) / "lib")
    for abi in ("cxx_abi_1", "cxx_abi_0"):  # NNAL installs one build per C++ ABI
        fallbacks.append(NNAL_ATB / "latest" / "atb" / abi / "lib")
    return locate(machine, ATB_LIBRARY, tuple(fallbacks))


def _atb_verdict(machine: Machine, atb: Located, errors: Errors) -> Optional[Problem]:
    script = NNAL_ATB / "set_env.sh"
    if atb.path is None or not atb.on_library_path:
        where = "is not installed" if atb.path is None else "is not on LD_LIBRARY_PATH"
        unset = "" if machine.environ.get("ATB_HOME_PATH") else " ($ATB_HOME_PATH unset)"
        hint = f"`source {script}` after CANN's set_env.sh (vllm-ascend, MindIE and MindSpeed need ATB)"
        if atb.path is None:
            hint = (
                "install NNAL of the same version as CANN (`bash Ascend-cann-nnal_<version>_linux-"
                f"<arch>.run --install`), then {hint}"
            )
        return Problem(
            Status.WARN,
            f"{ATB_LIBRARY} {where}{unset}: ATB users fail with "
            f"`{ATB_LIBRARY}: cannot open shared object file`",
            hint,
        )
    error = errors.get(str(atb.path))
    if error is not None:
        return Problem(
            Status.WARN,
            f"{ATB_LIBRARY} does not load: {error}",
            "ATB must match CANN and torch's C++ ABI: reinstall NNAL of the CANN version in use and "
            f"`source {script}`",
        )
    return None


CHECK = Check(
    id="cann-libraries",
    group=Group.CANN,
    title="CANN's libraries (libascendcl, libhccl, libopapi, libnnopbase; ATB where used) load",
    run=run,
    requires=("cann-install",),
)
