"""Provides PythonEnv: the Python the user's jobs run in, read from files without importing any package.

The doctor must never import torch, torch_npu or acl into its own process (a broken torch_npu
can crash or hang the importer, runtime-and-doctor.md §10 rows 6, 32).  So versions come from
installed distributions' metadata (``importlib.metadata`` over explicit paths), modules are found
as the import system would find them (``importlib.machinery.FileFinder``, nothing executed), and
files such as ``torch/version.py`` are read as text.

On a live machine (root ``/``) the search path is this interpreter's ``sys.path``; in a sysroot
tree it is the machine's ``PYTHONPATH`` (resolved under the root), the active virtual or conda
environment, then the system's ``site-packages``/``dist-packages`` folders.
"""

from __future__ import annotations

import importlib.machinery
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from npuwatch.probes.sysroot import Sysroot

#: System package folders of a tree, most specific first (pip as root on Debian writes
#: ``/usr/local/lib/python3.X/dist-packages``; distribution packages go to ``/usr/lib``).
_SYSTEM_SITES = (
    "usr/local/lib/python3.*/site-packages",
    "usr/local/lib/python3.*/dist-packages",
    "usr/lib/python3*/site-packages",
    "usr/lib/python3*/dist-packages",
)
_ENV_SITES = ("lib/python3.*/site-packages",)
_PYTHON_DIR = re.compile(r"^python(\d)\.(\d{1,2})$")

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
    #: [normalized name → (version, site folder)], built on first use (a list: the record is frozen).
    _index: List[Dict[str, Tuple[str, Path]]] = field(
        default_factory=list, compare=False, hash=False, repr=False
    )

    @classmethod
    def for_sysroot(cls, sysroot: Sysroot) -> PythonEnv:
        """The Python of ``sysroot``: this interpreter on a live machine, else the tree's folders."""
        if sysroot.is_live:
            return cls._live(sysroot)
        return cls._tree(sysroot)

    @classmethod
    def _live(cls, sysroot: Sysroot) -> PythonEnv:
        extra = sysroot.env_paths("PYTHONPATH")  # a machine environment other than ours
        paths = _unique([*extra, *(Path(entry) for entry in sys.path if entry)])
        return cls(paths, (sys.version_info[0], sys.version_info[1]), "this interpreter")

    @classmethod
    def _tree(cls, sysroot: Sysroot) -> PythonEnv:
        sites: List[Path] = []
        for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
            prefix = sysroot.getenv(variable) or ""
            if prefix.startswith("/"):
                sites += _glob_sites(sysroot.path(prefix), _ENV_SITES)
        sites += _glob_sites(sysroot.root, _SYSTEM_SITES)
        paths = _unique([*sysroot.env_paths("PYTHONPATH"), *sites])
        version: Tuple[int, int] = (sys.version_info[0], sys.version_info[1])
        source = "assumed: no python3.N folder in the tree"
        for site in sites:
            found = _PYTHON_DIR.match(site.parent.name)
            if found:
                version = (int(found.group(1)), int(found.group(2)))
                source = "/" + site.parent.relative_to(sysroot.root).as_posix()
                break
        return cls(paths, version, source, root=sysroot.root)

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
            try:
                with open(folder / relative, "rb") as handle:
                    return handle.read(limit).decode("utf-8", errors="replace")
            except OSError:
                continue
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
