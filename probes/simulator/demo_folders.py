"""Provides where a demo's temporary tree goes (``demo_folder``: the user's temp folder, else a
usable RAM folder) and the sweep of trees a killed npuwatch left behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping, Optional

#: The temp folders a demo makes (``<prefix><scenario>-XXXX``) and the file naming their owner's PID.
DEMO_PREFIX = "npuwatch-demo-"
OWNER_FILE = "owner.pid"
#: Where a demo's tree goes when no ``TMPDIR`` (``TEMP``, ``TMP``) names a folder: a RAM-backed
#: one, when the machine has one that allows executables and has room.  A tree is about 660 small
#: files written at start (over 0.2 s on some disks, tens of ms in RAM), and the DCMI demo rewrites
#: its state file every tick; the fake npu-smi runs from the tree and the fake libdcmi.so is loaded
#: from it, so a ``noexec`` folder is never used.
RAM_FOLDER = "/dev/shm"
#: The room the RAM folder must have left to be used (a tree takes about 10 MB).
RAM_FOLDER_MIN_FREE = 256 * 1024 * 1024
_TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")


def demo_folder(environ: Optional[Mapping[str, str]] = None, ram_folder: Optional[str] = None) -> Path:
    """The folder a demo's temporary tree goes in: the temp folder the user named (``TMPDIR``,
    ``TEMP``, ``TMP``), else ``ram_folder`` (``RAM_FOLDER``) when it is usable (a folder we
    may write in, not ``noexec``, with ``RAM_FOLDER_MIN_FREE`` left), else the default temp folder."""
    env = os.environ if environ is None else environ
    ram = RAM_FOLDER if ram_folder is None else ram_folder
    named = any(env.get(name) for name in _TEMP_VARIABLES)
    if not named and _usable_ram_folder(ram):
        return Path(ram)
    return Path(tempfile.gettempdir())


def _usable_ram_folder(folder: str) -> bool:
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):  # absent, or no statvfs (not POSIX)
        return False
    noexec = getattr(os, "ST_NOEXEC", 8)  # Linux's MS_NOEXEC: the flag statvfs reports
    return (
        os.path.isdir(folder)
        and os.access(folder, os.W_OK | os.X_OK)
        and not info.f_flag & (noexec | os.ST_RDONLY)
        and info.f_bavail * info.f_frsize >= RAM_FOLDER_MIN_FREE
    )


def sweep_stale_demo_trees(folder: Optional[Path] = None) -> None:
    """Remove demo trees a killed npuwatch left in ``folder``, else in the demo folder and the
    default temp folder (``kill -9`` skips its cleanup).

    Only this user's trees that name their owner, and only when that owner is gone or is no
    longer an npuwatch: a running demo's tree, a folder without the owner file and another
    user's tree are never touched.
    """
    folders = (
        [folder] if folder is not None else list(dict.fromkeys((demo_folder(), Path(tempfile.gettempdir()))))
    )
    for where in folders:
        try:
            candidates = list(where.glob(f"{DEMO_PREFIX}*"))
        except OSError:
            continue
        for tree in candidates:
            if _is_stale(tree):
                shutil.rmtree(tree, ignore_errors=True)


def _is_stale(tree: Path) -> bool:
    try:
        info = tree.lstat()
        if not tree.is_dir() or tree.is_symlink() or info.st_uid != os.getuid():
            return False
        pid = int((tree / OWNER_FILE).read_text(encoding="ascii").strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return pid != os.getpid() and not _is_npuwatch(pid)


def _is_npuwatch(pid: int) -> bool:
    """Whether ``pid`` runs and is an npuwatch (a recycled PID of another program does not count)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (or hidden): trust that the PID lives
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    return b"npuwatch" in cmdline or b"pytest" in cmdline or b"python" in cmdline
