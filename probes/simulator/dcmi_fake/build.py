"""Provides build(): compile the fake ``libdcmi.so`` (``fake_dcmi.c``) once per user into a cache.

``cc -shared -fPIC -O2`` (``CC`` honoured, flags and all), through ``probes.runner.run`` with a
timeout, into ``$XDG_CACHE_HOME/npuwatch/fake-dcmi/<key>/libdcmi.so`` (``~/.cache`` without the
variable; a private ``npuwatch-fake-dcmi-<uid>`` folder in the temp dir when the cache is not
writable).  The key hashes the source, the omitted functions (``-DNPUWATCH_FAKE_OMIT_<name>``, a
build variant without those symbols), the compiler command and the machine, so a cached library
is never rebuilt and never stale.  The compiler writes a temporary file that is renamed into
place: two builds at once both succeed.  No compiler: ``BuildResult.path`` is ``None`` and
``reason`` says why (the demo then runs the pure-Python stand-in).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shlex
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from npuwatch.probes.dcmi import abi
from npuwatch.probes.runner import LaunchError, run

#: The C source, shipped as package data.
SOURCE = Path(__file__).with_name("fake_dcmi.c")
LIBRARY_NAME = "libdcmi.so"
#: A cold ``cc -O2`` of the source takes well under a second; this only stops a wedged compiler.
COMPILE_TIMEOUT_S = 120.0
OMIT_PREFIX = "NPUWATCH_FAKE_OMIT_"


@dataclass(frozen=True)
class BuildResult:
    """The built (or cached) library, or why there is none."""

    path: Optional[Path]
    reason: str = ""  # why ``path`` is None: "no C compiler (cc not found; set CC)" …
    compiler: str = ""  # the compiler's name as run: "cc", "gcc", "clang"
    cached: bool = False  # True: found in the cache, nothing compiled


def compiler_command(environ: Optional[Mapping[str, str]] = None) -> Optional[List[str]]:
    """``CC`` split as a shell would (``"ccache gcc -m64"``), or ``cc``; ``None`` when not on PATH."""
    env = os.environ if environ is None else environ
    try:
        words = shlex.split(env.get("CC", "").strip() or "cc")
    except ValueError:  # an unbalanced quote in CC
        return None
    if not words or shutil.which(words[0], path=env.get("PATH")) is None:
        return None
    return words


def cache_root(environ: Optional[Mapping[str, str]] = None) -> Path:
    """``$XDG_CACHE_HOME/npuwatch/fake-dcmi`` (``~/.cache/…`` when the variable is unset or relative)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path(os.path.expanduser("~")) / ".cache"
    return root / "npuwatch" / "fake-dcmi"


def build_key(source: bytes, omit: Sequence[str], compiler: Sequence[str]) -> str:
    """The cache folder's name: a hash of everything that makes the library what it is."""
    digest = hashlib.sha256(source)
    for part in (*sorted(omit), "|", *compiler, "|", platform.machine(), platform.system()):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()[:20]


def build(
    omit: Sequence[str] = (),
    environ: Optional[Mapping[str, str]] = None,
    cache_dir: Optional[Path] = None,
) -> BuildResult:
    """The fake library without the functions ``omit`` names: from the cache, else compiled now.

    ``ValueError`` when ``omit`` names a function that is not in ``abi.PROTOTYPES``.
    """
    unknown = sorted(set(omit) - set(abi.PROTOTYPES))
    if unknown:
        raise ValueError(f"cannot omit {', '.join(unknown)}: not a function of abi.PROTOTYPES")
    env = dict(os.environ if environ is None else environ)
    compiler = compiler_command(env)
    if compiler is None:
        named = env.get("CC", "").strip() or "cc"
        return BuildResult(None, f"no C compiler ({named} not found; set CC)")
    try:
        source = SOURCE.read_bytes()
    except OSError as exc:
        return BuildResult(None, f"the fake's C source is missing ({exc.strerror or exc})")
    key = build_key(source, omit, compiler)
    name = os.path.basename(compiler[0])
    folder = _folder(key, cache_dir, env)
    if folder is None:
        return BuildResult(None, "no writable cache folder for the fake library", name)
    target = folder / LIBRARY_NAME
    if target.is_file():
        return BuildResult(target, "", name, cached=True)
    reason = _compile(compiler, omit, folder, target, env)
    return BuildResult(target if not reason else None, reason, name)


def _folder(key: str, cache_dir: Optional[Path], env: Mapping[str, str]) -> Optional[Path]:
    """``<cache>/<key>``, created; the private temp folder when the cache cannot be written."""
    # The private temp folder is made only when the cache cannot be written (a demo must leave
    # nothing in the temp dir it did not need).
    roots = [lambda: cache_dir] if cache_dir is not None else [lambda: cache_root(env), _private_temp]
    for choose in roots:
        root = choose()
        if root is None:
            continue
        folder = root / key
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK | os.X_OK):
            return folder
    return None


def _private_temp() -> Optional[Path]:
    """``<tmp>/npuwatch-fake-dcmi-<uid>``: mode 0700 and ours, or ``None`` (never load a library
    from a shared folder someone else could have written)."""
    folder = Path(tempfile.gettempdir()) / f"npuwatch-fake-dcmi-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder


def _compile(
    compiler: List[str], omit: Sequence[str], folder: Path, target: Path, env: Mapping[str, str]
) -> str:
    """Compile into a temporary file and rename it to ``target``; ``""``, or why it failed."""
    handle, temporary = tempfile.mkstemp(prefix=".libdcmi-", suffix=".so", dir=folder)
    os.close(handle)
    defines = [f"-D{OMIT_PREFIX}{name}" for name in sorted(set(omit))]
    argv = [*compiler, "-shared", "-fPIC", "-O2", *defines, "-o", temporary, str(SOURCE)]
    try:
        result = run(argv, COMPILE_TIMEOUT_S, env=env)
    except LaunchError as exc:
        _remove(temporary)
        return f"the C compiler could not start ({exc})"
    if result.timed_out or result.exit_code != 0:
        _remove(temporary)
        if result.timed_out:
            return f"{compiler[0]} took longer than {COMPILE_TIMEOUT_S:.0f} s"
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        return f"{compiler[0]} failed (exit {result.exit_code}): {lines[-1] if lines else 'no message'}"
    try:
        os.chmod(temporary, 0o755)
        os.replace(temporary, target)
    except OSError as exc:
        _remove(temporary)
        return f"could not place the built library ({exc.strerror or exc})"
    return ""


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
