"""Provides where ``libdcmi.so`` is looked for, and whether it can be there at all (standard library only).

Search order (driver-interfaces.md §6.1, §9.1 rule 1): the path the user named (``--dcmi-lib`` /
``NPUWATCH_DCMI_LIB``), else ``libdcmi.so`` on the loader path (only when the machine's root is
``/``: the loader path is this machine's), then the driver package's two copies under the root —
under a ``--root`` tree only when it is trusted (``probes.tree_trust``: an untrusted tree's
library is never loaded, ``withheld()`` says which one was not).
``library.load_library`` tries these in order; ``npuwatch check`` asks ``absent()`` first, so a
container without the library costs a few ``stat`` calls, not a worker's Python start.  No
ctypes here: ``check`` imports this module.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional, Tuple

from npuwatch.probes.tree_trust import runs_tree_code

#: The environment variable naming the library (``--dcmi-lib`` wins).
ENV_VAR = "NPUWATCH_DCMI_LIB"
#: The prefix of a pure-Python stand-in: ``python:<module>``.
PYTHON_PREFIX = "python:"
#: The name ``dlopen`` searches on the loader path (LD_LIBRARY_PATH, ld.so.cache).
LOADER_NAME = "libdcmi.so"
#: Where the driver package installs it, relative to the machine's root (§6.1).
INSTALLED_PATHS = (
    "usr/local/Ascend/driver/lib64/driver/libdcmi.so",
    "usr/local/dcmi/libdcmi.so",
)
#: The folders ``dlopen`` searches after LD_LIBRARY_PATH and ld.so.cache (ld.so(8)), with multiarch.
_LOADER_FOLDERS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")


def candidates(
    explicit: Optional[str] = None, root: str = "/", environ: Optional[Mapping[str, str]] = None
) -> Tuple[str, ...]:
    """Where to look, in order: only ``explicit`` when given, else the loader name and the install
    paths; none under a tree ``environ`` (default: this process's) does not trust."""
    if explicit:
        return (explicit,)
    if not runs_tree_code(root, os.environ if environ is None else environ):
        return ()
    found = [LOADER_NAME] if os.path.abspath(root) == "/" else []
    found.extend(os.path.join(root, relative) for relative in INSTALLED_PATHS)
    return tuple(found)


def withheld(
    explicit: Optional[str], root: str, environ: Optional[Mapping[str, str]] = None
) -> Optional[str]:
    """Why the library of an untrusted tree is not loaded (``the tree's libdcmi.so (…) was not
    loaded: pass --trust-root …``), or ``None`` when nothing was held back (one was named, the
    tree is trusted, or it has none where the driver puts it)."""
    if explicit or runs_tree_code(root, os.environ if environ is None else environ):
        return None
    present = [f"/{path}" for path in INSTALLED_PATHS if os.path.lexists(os.path.join(root, path))]
    if not present:
        return None
    return f"the tree's libdcmi.so ({', '.join(present)}) was not loaded: pass --trust-root to load it"


def absent(explicit: Optional[str], root: str, environ: Mapping[str, str]) -> Optional[str]:
    """Why no libdcmi.so can load here (none where the driver puts it, none on the loader path,
    an untrusted tree's), or ``None`` when one may (or one was named)."""
    if explicit:
        return None
    held = withheld(explicit, root, environ)
    if held is not None:
        return held
    if any(os.path.exists(os.path.join(root, path)) for path in INSTALLED_PATHS):
        return None
    looked = ", ".join(f"/{path}" for path in INSTALLED_PATHS)
    if os.path.abspath(root) == "/":
        if _on_loader_path(environ):
            return None
        looked += " and the loader path"
    return f"libdcmi.so not found (looked in {looked})"


def _on_loader_path(environ: Mapping[str, str]) -> bool:
    """Whether ``dlopen("libdcmi.so")`` could find it: LD_LIBRARY_PATH, ld.so.cache, the default folders."""
    folders = [folder for folder in environ.get("LD_LIBRARY_PATH", "").split(":") if folder]
    for base in _LOADER_FOLDERS:
        folders.append(base)
        try:
            folders += [
                os.path.join(base, entry) for entry in os.listdir(base) if entry.endswith("-linux-gnu")
            ]
        except OSError:
            continue
    if any(os.path.exists(os.path.join(folder, LOADER_NAME)) for folder in folders):
        return True
    try:
        with open("/etc/ld.so.cache", "rb") as cache:
            return LOADER_NAME.encode() in cache.read()
    except OSError:
        return False
