"""The npuwatch a user installs: a wheel and an sdist built from a clean copy of the source, in a
fresh virtual environment per Python, run from a directory that is not the repository.

The source is the repository (``tests.conftest.REPO``), or the tree ``NPUWATCH_TEST_SOURCE``
names (to show that this tier catches a broken packaging change made in another checkout).  It
is copied without build artefacts first: setuptools puts whatever an earlier build left in
``build/lib`` (and lists in ``*.egg-info/SOURCES.txt``) into the next wheel, which would hide a
run-time file that the packaging no longer ships.  The wheel is then built from the sdist, as
``python -m build`` does, so the sdist is proven complete too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

from tests.conftest import REPO

SOURCE = Path(os.environ.get("NPUWATCH_TEST_SOURCE") or REPO).resolve()
FAKE_RUNTIME = REPO / "tests" / "fakes" / "runtime"
BUILD_TIMEOUT_S = 300.0
INSTALL_TIMEOUT_S = 900.0
RUN_TIMEOUT_S = 120.0

#: What the venv gets beside the wheel's extras (tools/refresh_constraints.sh pins the same for 3.9).
EXTRAS = "jupyter,exporter"
ALSO_INSTALLED = ["ipykernel", "jsonschema"]

#: Build artefacts, caches and local environments: never part of what a user builds from.
_NOT_SOURCE = shutil.ignore_patterns(
    ".*", "build", "dist", "*.egg-info", "__pycache__", "test-artifacts", "*.pyc"
)
#: The caller's variables that would change what the installed program imports or shows.
_DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "COLUMNS", "LINES")
_DROPPED_PREFIXES = ("NPUWATCH_", "PYTEST_", "TEXTUAL_", "TMUX")


class ProductError(RuntimeError):
    """A build or install step failed; the message carries the command and its output."""


def run_checked(
    argv: Sequence[str], *, cwd: Path, timeout: float, env: Optional[Mapping[str, str]] = None
) -> str:
    """Run a build or install step; its stdout, or ProductError with everything it printed."""
    try:
        done = subprocess.run(
            list(argv),
            cwd=str(cwd),
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise ProductError(f"{' '.join(argv)} did not finish within {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise ProductError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


# --- the distributions --------------------------------------------------------------------------


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path

    @property
    def version(self) -> str:
        """The version in the wheel's file name (``npuwatch-<version>-py3-none-any.whl``)."""
        return self.wheel.name.split("-")[1]


def build_dists(out: Path) -> Dists:
    """sdist from a clean copy of SOURCE, then the wheel from that sdist (no build isolation)."""
    tree = out / "source"
    shutil.copytree(SOURCE, tree, symlinks=True, ignore=_NOT_SOURCE)
    dist = out / "dist"
    dist.mkdir()
    backend = f"from setuptools import build_meta; print(build_meta.build_sdist({str(dist)!r}))"
    name = (
        run_checked([sys.executable, "-c", backend], cwd=tree, timeout=BUILD_TIMEOUT_S)
        .strip()
        .splitlines()[-1]
    )
    sdist = dist / name
    unpacked = out / "unpacked"
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(unpacked, filter="data")
        else:  # Python < 3.11.4: our own archive, just built
            archive.extractall(unpacked)
    (top,) = unpacked.iterdir()
    run_checked(pip_wheel_argv(top, dist), cwd=out, timeout=BUILD_TIMEOUT_S)
    (wheel,) = dist.glob("npuwatch-*.whl")
    return Dists(sdist=sdist, wheel=wheel)


def pip_wheel_argv(source: Path, wheel_dir: Path) -> List[str]:
    """``pip wheel`` of the project at ``source`` into ``wheel_dir``, with the build tools installed
    here (no download) and without its dependencies."""
    return [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(wheel_dir),
        str(source),
    ]


def sdist_names(sdist: Path) -> List[str]:
    """Every member of the sdist, without its ``npuwatch-<version>/`` top folder."""
    with tarfile.open(sdist) as archive:
        return [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]


# --- the Pythons ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interpreter:
    """A Python to make a venv from; ``name`` (``py311``) is the test id."""

    name: str
    python: Path


def _version_of(python: Path) -> Optional[str]:
    """``"3.9"`` for a Python that runs, None for one that does not (a pyenv shim with no version)."""
    try:
        done = subprocess.run(
            [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def current_python() -> Interpreter:
    return Interpreter(f"py{sys.version_info[0]}{sys.version_info[1]}", Path(sys.executable))


def python39() -> Optional[Interpreter]:
    """Python 3.9 from pyenv (``$(pyenv root)/versions/3.9.*``) or ``python3.9`` on PATH."""
    candidates = [
        python
        for root in _pyenv_roots()
        for python in sorted(root.glob("versions/3.9.*/bin/python3.9"), key=_patch_level, reverse=True)
    ]
    on_path = shutil.which("python3.9")  # may be a pyenv shim that runs nothing: _version_of tells
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if _version_of(candidate) == "3.9":
            return Interpreter("py39", candidate)
    return None


def _pyenv_roots() -> List[Path]:
    """Where pyenv keeps its Pythons: what ``pyenv root`` says, else $PYENV_ROOT or ~/.pyenv."""
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            said = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30)
            roots.insert(0, said.stdout.strip())
    return [Path(root) for root in dict.fromkeys(roots) if root]


def _patch_level(python: Path) -> int:
    found = re.search(r"3\.9\.(\d+)", str(python))
    return int(found.group(1)) if found else -1


def constraints_for(version: str) -> Path:
    """The pins for a venv of this Python version: ``constraints-py39.txt`` for 3.9, else CI's."""
    specific = REPO / f"constraints-py{version.replace('.', '')}.txt"
    return specific if specific.exists() else REPO / "constraints.txt"


# --- the installed product ------------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    """npuwatch installed from the wheel into ``venv``; run its commands as a user would."""

    name: str
    venv: Path
    version: str  # the venv's Python, "3.9"
    site_packages: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    def environ(self, **extra: str) -> Dict[str, str]:
        """The caller's environment as a user's shell with this venv activated would have it."""
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in _DROPPED and not key.startswith(_DROPPED_PREFIXES)
        }
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env.update(LANG="C.UTF-8", LC_ALL="C.UTF-8")
        env.update(extra)
        return env

    def run(
        self, argv: Sequence[str], *, cwd: Path, timeout: float = RUN_TIMEOUT_S, **extra_env: str
    ) -> subprocess.CompletedProcess:
        """``argv`` (its first word a program of the venv: ``npuwatch``, ``python``) from ``cwd``."""
        program, *args = argv
        return subprocess.run(
            [str(self.bin(program)), *args],
            cwd=str(cwd),
            env=self.environ(**extra_env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def install(interpreter: Interpreter, dists: Dists, venv: Path) -> Installed:
    """A fresh venv of ``interpreter`` with the wheel installed (not editable), pinned by constraints."""
    version = _version_of(interpreter.python)
    if version is None:
        raise ProductError(f"{interpreter.python} does not run")
    home = venv.parent
    run_checked([str(interpreter.python), "-m", "venv", str(venv)], cwd=home, timeout=BUILD_TIMEOUT_S)
    bare = Installed(interpreter.name, venv, version, Path())
    pip = [str(bare.python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    wanted = [f"{dists.wheel}[{EXTRAS}]", *ALSO_INSTALLED]
    run_checked(
        [*pip, "-c", str(constraints_for(version)), *wanted],
        cwd=home,
        timeout=INSTALL_TIMEOUT_S,
        env=bare.environ(),
    )
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = run_checked([str(bare.python), "-c", purelib], cwd=home, timeout=RUN_TIMEOUT_S, env=bare.environ())
    return Installed(interpreter.name, venv, version, Path(site.strip()))
