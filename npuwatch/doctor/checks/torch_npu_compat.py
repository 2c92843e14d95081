"""Check torch-npu-compat: torch, torch_npu, CANN and Python versions form a tested combination.

Read from package metadata and ``torch/version.py`` only: nothing is imported (a mismatched
torch_npu crashes its importer).  Failure modes: runtime-and-doctor.md §10 rows 6 (torch ≠
torch_npu: ``undefined symbol``), 7 (torch_npu built for another CANN), 10 (a torch_npu source
tree in the current directory), 30 (a CUDA torch beside torch_npu: ERR00007) and 32 (torch ≥
2.5.1 imports torch_npu itself, so a broken torch_npu breaks ``import torch``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from npuwatch.doctor.facts import active_home, home_version, version_key, version_matches
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, Problem, Status, combine, skipped
from npuwatch.probes.python_env import PythonEnv, normalize_name
from npuwatch.probes.requirements import parse_requirement, prerelease, release_part

#: (CANN, ((torch_npu, torch), …)), newest first: Ascend/pytorch README / COMPATIBILITY.en.md
#: as summarised in runtime-and-doctor.md §8.1.
TORCH_NPU_MATRIX: Tuple[Tuple[str, Tuple[Tuple[str, str], ...]], ...] = (
    ("9.1.0", (("2.12.0", "2.12.0"), ("2.11.0", "2.11.0"), ("2.10.0.post4", "2.10.0"),
               ("2.9.0.post6", "2.9.0"), ("2.7.1.post8", "2.7.1"))),
    ("9.0.0", (("2.9.0.post2", "2.9.0"), ("2.8.0.post4", "2.8.0"), ("2.7.1.post4", "2.7.1"))),
    ("8.5.0", (("2.9.0", "2.9.0"), ("2.8.0.post2", "2.8.0"), ("2.7.1.post2", "2.7.1"),
               ("2.6.0.post5", "2.6.0"))),
    ("8.3.RC1", (("2.8.0", "2.8.0"), ("2.7.1", "2.7.1"), ("2.6.0.post3", "2.6.0"),
                 ("2.1.0.post17", "2.1.0"))),
    ("8.2.RC1", (("2.6.0", "2.6.0"), ("2.5.1.post1", "2.5.1"), ("2.1.0.post13", "2.1.0"))),
    ("8.1.RC1", (("2.5.1", "2.5.1"), ("2.4.0.post4", "2.4.0"), ("2.3.1.post6", "2.3.1"),
                 ("2.1.0.post12", "2.1.0"))),
    ("8.0.0", (("2.4.0.post2", "2.4.0"), ("2.3.1.post4", "2.3.1"), ("2.1.0.post10", "2.1.0"))),
    ("8.0.RC3", (("2.4.0", "2.4.0"), ("2.3.1.post2", "2.3.1"), ("2.1.0.post8", "2.1.0"))),
    ("8.0.RC2", (("2.3.1", "2.3.1"), ("2.2.0.post2", "2.2.0"), ("2.1.0.post6", "2.1.0"),
                 ("1.11.0.post14", "1.11.0"))),
    ("8.0.RC1", (("2.2.0", "2.2.0"), ("2.1.0.post4", "2.1.0"))),
    ("7.0.0", (("2.1.0", "2.1.0"), ("2.0.1.post1", "2.0.1"), ("1.11.0.post8", "1.11.0"))),
)  # fmt: skip

#: torch (major, minor) → supported Python (lowest, highest), runtime-and-doctor.md §8.1.
PYTHON_FOR_TORCH = {
    (2, 1): ((3, 8), (3, 11)),
    (2, 3): ((3, 8), (3, 11)),
    (2, 4): ((3, 8), (3, 11)),
    (2, 5): ((3, 9), (3, 11)),
    (2, 6): ((3, 9), (3, 11)),
    (2, 7): ((3, 9), (3, 13)),
    (2, 8): ((3, 9), (3, 13)),
    (2, 9): ((3, 10), (3, 13)),
    (2, 10): ((3, 10), (3, 13)),
    (2, 11): ((3, 10), (3, 14)),
    (2, 12): ((3, 10), (3, 14)),
    (2, 13): ((3, 10), (3, 14)),
}

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
_CUDA_LINE = re.compile(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


def torch_base(version: str) -> str:
    """``2.1.0+cu121`` → ``2.1.0``: the local tag dropped."""
    return version.split("+", 1)[0]


def torch_npu_base(version: str) -> str:
    """``2.1.0.post6`` or ``2.7.1.dev20250724`` → the torch release a torch_npu build is for."""
    return release_part(version)


def cuda_build(env: PythonEnv, torch_version: str) -> Optional[str]:
    """Why this torch is a CUDA build (``+cu121`` tag, or ``cuda = '12.1'`` in torch/version.py)."""
    _, _, local = torch_version.partition("+")
    if re.match(r"^cu\d+", local):
        return f"its version is {torch_version}"
    text = env.read_text("torch/version.py")
    found = _CUDA_LINE.search(text or "")
    if found:
        return f"torch/version.py says cuda = '{found.group(1)}'"
    return None


def cann_pairs(cann: str) -> Optional[Tuple[Tuple[str, str], ...]]:
    """The tested (torch_npu, torch) pairs for ``cann``, or ``None`` when the matrix lacks it."""
    for line, pairs in TORCH_NPU_MATRIX:
        if version_matches(cann, line):
            return pairs
    return None


def canns_for(torch_npu: str) -> List[str]:
    """The CANN versions a torch_npu build is listed for (a dev/rc build: its release's)."""
    if prerelease(torch_npu):
        base = release_part(torch_npu)
        return [line for line, pairs in TORCH_NPU_MATRIX if any(t == base for _, t in pairs)]
    return [line for line, pairs in TORCH_NPU_MATRIX if any(npu == torch_npu for npu, _ in pairs)]


def torch_npu_for(torch: str, cann: Optional[str]) -> Optional[Tuple[str, str]]:
    """(torch_npu to install for ``torch``, the CANN it is listed for): this CANN's first."""
    rows = [
        (line, pairs) for line, pairs in TORCH_NPU_MATRIX if cann is not None and version_matches(cann, line)
    ]
    rows += list(TORCH_NPU_MATRIX)
    for line, pairs in rows:
        for npu, paired in pairs:
            if paired == torch:
                return npu, line
    return None


def _autoload_note(machine: Machine, torch: str) -> str:
    """§10 row 32: torch ≥ 2.5.1 imports torch_npu on `import torch` unless told not to."""
    if (
        version_key(torch) < version_key("2.5.1")
        or machine.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0"
    ):
        return ""
    return (
        "; until then `import torch` fails too (torch ≥ 2.5.1 loads torch_npu itself): "
        "`export TORCH_DEVICE_BACKEND_AUTOLOAD=0` to use torch without it meanwhile"
    )


def _mismatch(machine: Machine, torch: str, npu: str, cann: Optional[str]) -> Problem:
    base = release_part(torch)
    fixes = []
    pick = torch_npu_for(base, cann)
    if pick is not None:
        where = f"CANN {pick[1]}"
        fixes.append(f"`pip install torch_npu=={pick[0]}` (the build for torch {base} on {where})")
    fixes.append(f"keep torch_npu and `pip install torch=={torch_npu_base(npu)}`")
    return Problem(
        Status.FAIL,
        f"torch {torch} and torch_npu {npu} do not match: `import torch_npu` fails with `undefined symbol`",
        " or ".join(fixes) + _autoload_note(machine, base),
    )


def _cuda(machine: Machine, torch: str, why: str) -> Problem:
    base = torch_base(torch)
    return Problem(
        Status.FAIL,
        f"torch {torch} is a CUDA build ({why}): `import torch_npu` fails with ERR00007 `Two "
        "accelerators cannot be used at the same time in PyTorch: npu and cuda`",
        f"install the CPU build of the same torch: `pip uninstall -y torch && pip install torch=={base} "
        f"--index-url {CPU_INDEX}`" + _autoload_note(machine, base),
    )


def _cann_pairing(torch: str, npu: str, cann: Optional[str]) -> List[Problem]:
    if cann is None:
        return _prerelease_untested(torch, npu, None, None)
    base = release_part(torch)
    pairs = cann_pairs(cann)
    if pairs is None:
        return [_unknown_cann(npu, cann)]
    here = next((p for p, t in pairs if t == base), None)
    if prerelease(npu) or prerelease(torch):
        if here is not None:
            return _prerelease_untested(torch, npu, cann, here)
    elif (npu, base) in pairs or (torch_base(npu), base) in pairs:
        return []
    elsewhere = canns_for(npu)
    fix = f"`pip install torch_npu=={here}` (the build for CANN {cann})" if here else ""
    if not fix:
        tested = ", ".join(f"torch {t} + torch_npu {p}" for p, t in pairs)
        first_npu, first_torch = pairs[0]
        command = f"pip install torch=={first_torch} torch_npu=={first_npu}"
        fix = f"install a pair CANN {cann} lists ({tested}), e.g. `{command}`"
    if prerelease(npu):
        released = (
            f" (torch_npu {release_part(npu)} is listed for CANN {', '.join(elsewhere)})" if elsewhere else ""
        )
        summary = (
            f"torch_npu {npu} is a development build, not in the compatibility table for CANN {cann}"
            f"{released}: untested"
        )
        if elsewhere:
            fix += f", or install CANN {elsewhere[0]}"
    elif elsewhere:
        summary = (
            f"torch_npu {npu} is built for CANN {', '.join(elsewhere)}, this machine has CANN {cann}: "
            "untested (`undefined symbol` in CANN/ATB libraries is the usual sign)"
        )
        fix += f", or install CANN {elsewhere[0]}"
    else:
        summary = f"torch_npu {npu} is not in the compatibility table for CANN {cann}: untested"
    return [Problem(Status.WARN, summary, fix)]


def _unknown_cann(npu: str, cann: str) -> Problem:
    """A CANN the table has no row for: the verdict would rest on the table's gap, so say which
    fact is missing (issue 29) rather than calling the pair untested."""
    newest, oldest = TORCH_NPU_MATRIX[0][0], TORCH_NPU_MATRIX[-1][0]
    if version_key(cann) > version_key(newest):
        edge = f"its newest row is CANN {newest}"
    elif version_key(cann) < version_key(oldest):
        edge = f"its oldest row is CANN {oldest}"
    else:
        edge = f"its rows run from CANN {oldest} to {newest}, without this one"
    listed = canns_for(npu)
    known = (
        f"torch_npu {npu} is listed for CANN {', '.join(listed)}"
        if listed
        else f"torch_npu {npu} is listed for no CANN"
    )
    return Problem(
        Status.WARN,
        f"npuwatch's torch_npu table has no row for CANN {cann} ({edge}): whether torch_npu {npu} was "
        f"tested on it is not known here ({known})",
        f"look up CANN {cann} in Ascend/pytorch's README (version compatibility) for torch_npu {npu}; "
        f"or use a CANN it is listed for ({', '.join(listed) or 'none'})",
    )


def _prerelease_untested(torch: str, npu: str, cann: Optional[str], listed: Optional[str]) -> List[Problem]:
    """A dev/rc build of a listed release: untested, never a mismatch (issue 29 item 2)."""
    builds = [f"{name} {v}" for name, v in (("torch", torch), ("torch_npu", npu)) if prerelease(v)]
    if not builds:
        return []
    base = release_part(torch)
    what = " and ".join(builds) + (
        " are development builds" if len(builds) > 1 else " is a development build"
    )
    if listed is None:
        return [
            Problem(
                Status.WARN,
                f"{what} of {base}: the compatibility table lists releases only, so this is untested",
                f"keep it if the image that ships it was tested with it (vllm-ascend images are), or install "
                f"the release: `pip install torch=={base}` and the torch_npu listed for your CANN",
            )
        ]
    return [
        Problem(
            Status.WARN,
            f"{what} of {base}; CANN {cann} lists torch {base} with torch_npu {listed}: untested",
            f"keep it if the image that ships it was tested with it (vllm-ascend images are), or install the "
            f"tested build: `pip install torch=={base} torch_npu=={listed}`",
        )
    ]


#: Frameworks that pin torch and torch_npu in their metadata (``Requires-Dist: torch-npu==…``).
PINNING_FRAMEWORKS = ("vllm-ascend",)


def _required_by_frameworks(env: PythonEnv, installed: Dict[str, str]) -> List[Problem]:
    """A framework's ``Requires-Dist`` pin on torch/torch_npu the installed one does not meet."""
    problems: List[Problem] = []
    for framework in PINNING_FRAMEWORKS:
        version = env.distribution_version(framework)
        if version is None:
            continue
        for line in env.requires(framework):
            requirement = parse_requirement(line)
            if requirement is None or requirement.marker.startswith("extra"):
                continue
            have = installed.get(normalize_name(requirement.name))
            if have is None or not requirement.clauses or requirement.allows(have) is not False:
                continue
            wants = f"{requirement.name}{requirement.specifier}"
            problems.append(
                Problem(
                    Status.FAIL,
                    f"{framework} {version} requires {wants}, but {requirement.name} {have} is installed: "
                    f"{framework} fails to import or crashes with `undefined symbol`",
                    f"`pip install '{wants}'` (what {framework} {version} was built for), or install the "
                    f"{framework} release made for {requirement.name} {have}",
                )
            )
    return problems


def _python_range(env: PythonEnv, torch: str) -> List[Problem]:
    parts = torch_base(torch).split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return []
    supported = PYTHON_FOR_TORCH.get((int(parts[0]), int(parts[1])))
    if supported is None:
        return []
    (low, high), have = supported, env.version
    if low <= have <= high:
        return []
    span = f"{low[0]}.{low[1]}–{high[0]}.{high[1]}"
    return [
        Problem(
            Status.WARN,
            f"Python {env.version_text} is outside torch {torch_base(torch)}'s supported {span}: no "
            "torch/torch_npu wheels exist for it",
            f"use Python {span} (e.g. `conda create -n npu python={high[0]}.{high[1]}`), or a torch whose "
            f"range includes {env.version_text}",
        )
    ]


def _source_tree(machine: Machine) -> List[Problem]:
    """§10 row 10: ``python`` started beside a torch_npu source tree imports that instead."""
    if not machine.sysroot.is_live:
        return []
    try:
        here = Path.cwd()
        package = here / "torch_npu"
        if not (package / "__init__.py").is_file() or any(package.glob("_C*.so")):
            return []
    except OSError:
        return []
    return [
        Problem(
            Status.WARN,
            f"the current directory {here} holds a torch_npu source tree: Python started here imports it "
            "and fails with `No module named 'torch_npu._C'`",
            "run Python from another directory (`cd ~`), or build it in place with `python setup.py develop`",
        )
    ]


def run(machine: Machine) -> Finding:
    """Compare versions read from metadata; skip when torch or torch_npu is not installed."""
    env = machine.python()
    torch = env.distribution_version("torch")
    npu = env.distribution_version("torch_npu")
    if torch is None or npu is None:
        missing = " and ".join(name for name, v in (("torch", torch), ("torch_npu", npu)) if v is None)
        return skipped(
            f"{missing} not installed in this Python ({env.version_text}, {env.version_source})",
            [f"searched: {', '.join(env.display(p) for p in env.paths)}"],
        )
    home = active_home(machine)
    cann = home_version(machine, home) if home is not None else None
    details = [
        f"torch {torch} in {env.display(env.distribution_location('torch') or Path())}",
        f"torch_npu {npu} in {env.display(env.distribution_location('torch_npu') or Path())}",
        f"CANN {cann} at {home}" if cann else "CANN: not found, so the CANN pairing is not checked",
        f"Python {env.version_text} ({env.version_source})",
    ]
    problems: List[Problem] = []
    why = cuda_build(env, torch)
    if why is not None:
        problems.append(_cuda(machine, torch, why))
    wanted = _required_by_frameworks(env, {"torch-npu": npu, "torch": torch})
    problems += wanted
    if release_part(npu) != release_part(torch):
        if not wanted:  # a framework's own pin, when it disagrees, is the cause to name
            problems.append(_mismatch(machine, torch, npu, cann))
    else:
        problems += _cann_pairing(torch, npu, cann)
    problems += _python_range(env, torch)
    problems += _source_tree(machine)
    on = f" on CANN {cann}" if cann else ""
    return combine(
        problems,
        f"torch {torch} + torch_npu {npu}{on}, Python {env.version_text}: tested together",
        details,
    )


CHECK = Check(
    id="torch-npu-compat",
    group=Group.FRAMEWORKS,
    title="torch, torch_npu, CANN and Python versions form a tested combination",
    run=run,
)
