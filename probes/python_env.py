"""Provides PythonEnv: the Python the user's jobs run in, read from files without importing any package.

The doctor must never import torch, torch_npu or acl into its own process (a broken torch_npu
can crash or hang the importer, runtime-and-doctor.md §10 rows 6, 32).  So versions come from
installed distributions' metadata (``importlib.metadata`` over explicit paths), modules are found
as the import system would find them (``importlib.machinery.FileFinder``, nothing executed), and
files such as ``torch/version.py`` are read as text.

The Python judged is the one the job runs in: an interpreter named with ``--python``, else the
active virtual environment (``VIRTUAL_ENV``) or conda environment (``CONDA_PREFIX``), else this
interpreter (live) or, in a tree, the first ``python3`` on the machine's ``PATH`` (Ascend's images
build Python into ``/usr/local/python3.X.Y`` and put it there), else one such ``/usr/local/python3*``,
else the system's ``site-packages``/``dist-packages`` folders (``lib`` and ``lib64``: openEuler puts
compiled wheels in ``lib64``).  A venv
sees the system packages only when its ``pyvenv.cfg`` says ``include-system-site-packages = true``;
a conda environment sees only its own.  On a live machine another interpreter is asked for its
``sys.path`` (``python -E -c``: nothing of the job's is imported); in a tree, or when it cannot be
run, its folders are read from files.  The machine's ``PYTHONPATH`` always comes first.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import posixpath
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from npuwatch.probes.install_files import parse_key_value_file
from npuwatch.probes.runner import LaunchError, run
from npuwatch.probes.sysroot import Sysroot, read_regular

#: System package folders of a tree, most specific first (pip as root on Debian writes
#: ``/usr/local/lib/python3.X/dist-packages``; distribution packages go to ``/usr/lib``).
_SYSTEM_SITES = (
    "usr/local/lib64/python3.*/site-packages",
    "usr/local/lib/python3.*/site-packages",
    "usr/local/lib/python3.*/dist-packages",
    "usr/lib64/python3*/site-packages",
    "usr/lib/python3*/site-packages",
    "usr/lib/python3*/dist-packages",
)
_ENV_SITES = ("lib64/python3.*/site-packages", "lib/python3.*/site-packages")
#: Where Ascend's images build their Python (``/usr/local/python3.11.6/bin/python3``).
_BUILT_PYTHONS = "usr/local/python3*/bin/python3"
_INTERPRETER = re.compile(r"^python(\d)\.(\d{1,2})$")
_LINK_HOPS = 16
#: At most this many Requires-Dist lines are read from one distribution.
_MAX_REQUIRES = 200
_PYTHON_DIR = re.compile(r"^python(\d)\.(\d{1,2})$")
_VERSION = re.compile(r"^(\d)\.(\d{1,2})")
_SYSTEM_PREFIXES = ("/usr", "/usr/local")
#: How long another interpreter may take to print its sys.path (a check has 3 s).
QUERY_TIMEOUT_S = 2.0
_QUERY = "import json, sys; print(json.dumps([list(sys.version_info[:2]), sys.path]))"

_LOADERS = (
    (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
    (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
)


def normalize_name(name: str) -> str:
    """A distribution name as PEP 503 compares it: ``torch_npu`` == ``torch-npu`` == ``Torch.NPU``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PythonEnv:
    """Where the user's Python looks for packages, and which Python it is."""

    paths: Tuple[Path, ...]  # real folders, in search order
    version: Tuple[int, int]  # (major, minor)
    version_source: str  # "this interpreter", the folder it was read from, or why it is assumed
    root: Optional[Path] = None  # the tree's root; None on a live machine
    #: The interpreter the job runs (a machine path) when it is not npuwatch's own; for hints.
    python: Optional[str] = None
    #: Why the path is what it is (``/venv/pyvenv.cfg: include-system-site-packages = false``).
    notes: Tuple[str, ...] = ()
    #: [normalized name → (version, site folder)], built on first use (a list: the record is frozen).
    _index: List[Dict[str, Tuple[str, Path]]] = field(
        default_factory=list, compare=False, hash=False, repr=False
    )

    @classmethod
    def for_sysroot(cls, sysroot: Sysroot, interpreter: Optional[str] = None) -> PythonEnv:
        """The Python the jobs of ``sysroot`` run in (``interpreter``: a machine path to judge instead)."""
        if interpreter:
            prefix = posixpath.dirname(posixpath.dirname(posixpath.normpath(interpreter)))
            return cls._other(sysroot, _Target(interpreter, prefix, "--python"))
        target = _active_environment(sysroot)
        if target is None or (sysroot.is_live and _same_folder(target.prefix, sys.prefix)):
            return cls._live(sysroot) if sysroot.is_live else cls._tree(sysroot)
        return cls._other(sysroot, target)

    @classmethod
    def _live(cls, sysroot: Sysroot) -> PythonEnv:
        extra = sysroot.env_paths("PYTHONPATH")  # a machine environment other than ours
        paths = _unique([*extra, *(Path(entry) for entry in sys.path if entry)])
        return cls(paths, (sys.version_info[0], sys.version_info[1]), "this interpreter")

    @classmethod
    def _tree(cls, sysroot: Sysroot) -> PythonEnv:
        found = _tree_python(sysroot)
        if found is None:
            return cls._from_sites(sysroot, _glob_sites(sysroot.root, _SYSTEM_SITES))
        python, real, how = found
        prefix = posixpath.dirname(posixpath.dirname(real))
        version = _interpreter_version(real) or _interpreter_version(python)
        system = prefix in _SYSTEM_PREFIXES
        sites = _glob_sites(
            sysroot.root if system else sysroot.path(prefix), _SYSTEM_SITES if system else _ENV_SITES
        )
        if version is not None:  # only the interpreter's own python3.X folders
            sites = [site for site in sites if _python_dir_key(site) in (version, (0, 0))]
        notes = (f"judging {python} ({how}{'' if real == python else f', which is {real}'})",)
        target = _Target(python, prefix, "PATH")
        return cls._from_sites(sysroot, sites, target, notes, version, f"{python}")

    @classmethod
    def _from_sites(
        cls,
        sysroot: Sysroot,
        sites: List[Path],
        target: Optional[_Target] = None,
        notes: Tuple[str, ...] = (),
        version: Optional[Tuple[int, int]] = None,
        version_source: Optional[str] = None,
    ) -> PythonEnv:
        paths = _unique([*sysroot.env_paths("PYTHONPATH"), *sites])
        found = version or (sys.version_info[0], sys.version_info[1])
        source = "assumed: no python3.N folder in the tree"
        if version is not None and version_source is not None:
            source = version_source
        elif target is not None and version is not None:
            source = f"{target.prefix}/pyvenv.cfg"
        else:
            for site in sites:
                match = _PYTHON_DIR.match(site.parent.name)
                if match:
                    found = (int(match.group(1)), int(match.group(2)))
                    source = "/" + site.parent.relative_to(sysroot.root).as_posix()
                    break
        python = target.python if target is not None else None
        root = None if sysroot.is_live else sysroot.root
        return cls(paths, found, source, root=root, python=python, notes=notes)

    @classmethod
    def _other(cls, sysroot: Sysroot, target: _Target) -> PythonEnv:
        """An interpreter or environment other than npuwatch's own: asked (live), else read from files."""
        if sysroot.is_live:
            asked = _ask(target.python)
            if asked is not None:
                version, entries = asked
                paths = _unique([*sysroot.env_paths("PYTHONPATH"), *(Path(e) for e in entries if e)])
                return cls(paths, version, target.python, python=target.python, notes=(target.why,))
        return cls._from_files(sysroot, target)

    @classmethod
    def _from_files(cls, sysroot: Sysroot, target: _Target) -> PythonEnv:
        prefix = target.prefix
        sites = _glob_sites(sysroot.path(prefix), _ENV_SITES) if prefix not in _SYSTEM_PREFIXES else []
        notes = [target.why]
        cfg_text = sysroot.read_text(posixpath.join(prefix, "pyvenv.cfg"))
        version: Optional[Tuple[int, int]] = None
        if cfg_text is not None:
            cfg = {key.lower(): value for key, value in parse_key_value_file(cfg_text).items()}
            include = cfg.get("include-system-site-packages", "false").strip().lower()
            notes.append(f"{prefix}/pyvenv.cfg: include-system-site-packages = {include}")
            matched = _VERSION.match(cfg.get("version") or cfg.get("version_info") or "")
            version = (int(matched.group(1)), int(matched.group(2))) if matched else None
            if include == "true":
                sites += _base_sites(sysroot, cfg.get("home", ""))
        elif prefix in _SYSTEM_PREFIXES:
            sites += _glob_sites(sysroot.root, _SYSTEM_SITES)
        elif target.variable == "CONDA_PREFIX":
            notes.append("a conda environment sees only its own site-packages")
        else:
            notes.append(f"no {prefix}/pyvenv.cfg: the system's site-packages are searched too")
            sites += _glob_sites(sysroot.root, _SYSTEM_SITES)
        return cls._from_sites(sysroot, sites, target, tuple(notes), version)

    # ---------------------------------------------------------------- queries

    @property
    def version_text(self) -> str:
        """``3.10``."""
        return f"{self.version[0]}.{self.version[1]}"

    def distribution_version(self, name: str) -> Optional[str]:
        """The installed version of distribution ``name`` (first on the path wins), or ``None``."""
        found = self._distributions().get(normalize_name(name))
        return found[0] if found else None

    def distribution_location(self, name: str) -> Optional[Path]:
        """The folder (``site-packages``) distribution ``name`` is installed in, or ``None``."""
        found = self._distributions().get(normalize_name(name))
        return found[1] if found else None

    def requires(self, name: str) -> Tuple[str, ...]:
        """The ``Requires-Dist`` lines of distribution ``name`` (the one on the path), or ``()``."""
        site = self.distribution_location(name)
        if site is None:
            return ()
        for dist in metadata.distributions(path=[str(site)]):
            try:
                if normalize_name(dist.metadata["Name"] or "") == normalize_name(name):
                    return tuple((dist.requires or [])[:_MAX_REQUIRES])
            except Exception:  # damaged metadata reads as no requirement
                return ()
        return ()

    def distributions_under(self, folder: Path) -> Tuple[str, ...]:
        """The distributions (normalized names) installed in a path folder inside ``folder``."""
        names = []
        for name, (_, site) in self._distributions().items():
            if site == folder or folder in site.parents:
                names.append(name)
        return tuple(sorted(names))

    def find_module(self, name: str) -> Optional[Path]:
        """Where ``import name`` would load from (dotted names too), without importing anything.

        A package gives its ``__init__.py``, a namespace package its first folder, an extension
        module its ``.so``.  ``None`` when the module cannot be found on this path.
        """
        search: List[Path] = list(self.paths)
        location: Optional[Path] = None
        parts = name.split(".")
        for depth in range(len(parts)):
            fullname = ".".join(parts[: depth + 1])
            found = _find(fullname, search)
            if found is None:
                return None
            location, search = found
        return location

    def read_text(self, relative: str, limit: int = 1 << 20) -> Optional[str]:
        """The text of ``relative`` (``torch/version.py``) in the first path folder that has it."""
        for folder in self.paths:
            data = read_regular(folder / relative, limit)  # a FIFO there must not block
            if data is not None:
                return data.decode("utf-8", errors="replace")
        return None

    def display(self, path: Path) -> str:
        """``path`` as the machine sees it (``/usr/local/lib/…`` rather than ``<tree>/usr/…``)."""
        if self.root is None:
            return str(path)
        try:
            return "/" + path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def _distributions(self) -> Dict[str, Tuple[str, Path]]:
        if not self._index:
            index: Dict[str, Tuple[str, Path]] = {}
            for dist in metadata.distributions(path=[str(p) for p in self.paths]):
                try:
                    name, version = dist.metadata["Name"], dist.version
                    site = Path(str(dist.locate_file("")))
                except Exception:  # damaged metadata must not hide the others
                    continue
                if name and version:
                    index.setdefault(normalize_name(name), (version, site))
            self._index.append(index)
        return self._index[0]


@dataclass(frozen=True)
class _Target:
    """The Python to judge: its interpreter and prefix (machine paths), and what named it."""

    python: str
    prefix: str
    variable: str  # "--python", "VIRTUAL_ENV", "CONDA_PREFIX" or "PATH" (a tree's python3)

    @property
    def why(self) -> str:
        if self.variable == "--python":
            return f"judging {self.python} (--python)"
        if self.variable == "PATH":
            return f"judging {self.python}"
        return f"judging the environment the job runs in: {self.variable}={self.prefix}"


def _active_environment(sysroot: Sysroot) -> Optional[_Target]:
    """The activated venv (``VIRTUAL_ENV``, which wins over a conda base) or conda env, if any."""
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = (sysroot.getenv(variable) or "").strip()
        if value.startswith("/") and "\x00" not in value:
            prefix = posixpath.normpath(value)
            return _Target(posixpath.join(prefix, "bin", "python"), prefix, variable)
    return None


def _tree_python(sysroot: Sysroot) -> Optional[Tuple[str, str, str]]:
    """A tree's job Python: (machine path, the file it resolves to in the tree, how it was found):
    the first ``python3`` on the machine's ``PATH``, else an Ascend-built ``/usr/local/python3*``."""
    for entry in (sysroot.getenv("PATH") or "").split(":"):
        if not entry.startswith("/") or "\x00" in entry:
            continue  # ``$PATH`` left unexpanded, or a relative entry: nothing to look at
        candidate = posixpath.join(posixpath.normpath(entry), "python3")
        real = _resolve_in_tree(sysroot, candidate)
        if real is not None:
            return candidate, real, "the first python3 on PATH"
    try:
        built = sorted(sysroot.root.glob(_BUILT_PYTHONS), key=lambda p: _built_key(p), reverse=True)
    except OSError:
        built = []
    for path in built:
        candidate = "/" + path.relative_to(sysroot.root).as_posix()
        real = _resolve_in_tree(sysroot, candidate)
        if real is not None:
            return candidate, real, "no python3 on PATH; Ascend's images build Python there"
    return None


def _built_key(path: Path) -> Tuple[int, ...]:
    """``/usr/local/python3.11.6/bin/python3`` → (3, 11, 6): the newest first."""
    digits = re.findall(r"\d+", path.parent.parent.name)
    return tuple(int(d) for d in digits)


def _resolve_in_tree(sysroot: Sysroot, machine_path: str) -> Optional[str]:
    """The machine path a file's symlinks lead to, absolute links read inside the tree; ``None``
    when it is missing, dangling, looping or not a file."""
    path = machine_path
    for _ in range(_LINK_HOPS):
        link = sysroot.readlink(path)
        if link is None:
            return path if os.path.isfile(sysroot.path(path)) else None
        path = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
    return None


def _interpreter_version(path: str) -> Optional[Tuple[int, int]]:
    """(3, 11) from ``…/python3.11`` or from a prefix ``/usr/local/python3.11.6/bin/python3``."""
    found = _INTERPRETER.match(posixpath.basename(path))
    if found is None:
        found = re.match(
            r"^python(\d)\.(\d{1,2})(?:\.\d+)?$",
            posixpath.basename(posixpath.dirname(posixpath.dirname(path))),
        )
    return (int(found.group(1)), int(found.group(2))) if found else None


def _same_folder(first: str, second: str) -> bool:
    try:
        return os.path.realpath(first) == os.path.realpath(second)
    except (OSError, ValueError):
        return False


def _ask(python: str) -> Optional[Tuple[Tuple[int, int], List[str]]]:
    """``python``'s version and ``sys.path``, by running it (``-E``: the job's PYTHON* are added by us)."""
    try:  # through the runner: a hung interpreter is killed with all it started
        done = run([python, "-E", "-c", _QUERY], QUERY_TIMEOUT_S)
    except LaunchError:
        return None
    if done.exit_code != 0:
        return None
    try:
        version, entries = json.loads(done.stdout.strip().splitlines()[-1])
        if not isinstance(entries, list):
            return None
        return (int(version[0]), int(version[1])), [str(entry) for entry in entries]
    except (ValueError, IndexError, TypeError):
        return None


def _base_sites(sysroot: Sysroot, home: str) -> List[Path]:
    """The base interpreter's site folders for a venv whose ``pyvenv.cfg`` says ``home = …/bin``."""
    base = posixpath.dirname(posixpath.normpath(home.strip())) if home.strip().startswith("/") else ""
    if not base or base in _SYSTEM_PREFIXES:
        return _glob_sites(sysroot.root, _SYSTEM_SITES)
    return _glob_sites(sysroot.path(base), _ENV_SITES)


def _find(fullname: str, search: List[Path]) -> Optional[Tuple[Path, List[Path]]]:
    """One level of the import system's path search: (location, the package's own search path)."""
    portions: List[Path] = []
    for folder in search:
        try:
            if not folder.is_dir():
                continue
            spec = importlib.machinery.FileFinder(str(folder), *_LOADERS).find_spec(fullname)
        except (OSError, ValueError, ImportError):
            continue
        if spec is None:
            continue
        locations = [Path(p) for p in (spec.submodule_search_locations or [])]
        if spec.loader is not None and spec.origin:
            return Path(spec.origin), locations
        portions += locations  # a namespace package: keep collecting its portions
    if portions:
        return portions[0], portions
    return None


def _glob_sites(base: Path, patterns: Tuple[str, ...]) -> List[Path]:
    found: List[Path] = []
    for pattern in patterns:
        try:
            matches = [p for p in base.glob(pattern) if p.is_dir()]
        except OSError:
            continue
        found += sorted(matches, key=_python_dir_key, reverse=True)  # newest Python first
    return found


def _python_dir_key(site: Path) -> Tuple[int, int]:
    found = _PYTHON_DIR.match(site.parent.name)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _unique(paths: List[Path]) -> Tuple[Path, ...]:
    seen: Dict[str, None] = {}
    for path in paths:
        seen.setdefault(str(path), None)
    return tuple(Path(p) for p in seen)
