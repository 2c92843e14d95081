"""Provides Sysroot: every filesystem read npuwatch makes goes through one root (default ``/``).

Tests and the simulator pass a tree (``tests/data/sysroot/<case>/``, or a generated one)
that holds the parts of a machine npuwatch reads::

    <root>/
      sys/bus/pci/devices/<BDF> -> ../../../devices/pci0000:00/.../<BDF>
      sys/bus/pci/drivers/devdrv_device_driver/<BDF>
      dev/davinci0 … davinci_manager devmm_svm hisi_hdc
      proc/self/ns/pid            (symlink text "pid:[4026531836]" on the host)
      usr/local/Ascend/driver/version.info
      usr/local/Ascend/firmware/version.info
      usr/local/Ascend/ascend-toolkit/latest/…   or  usr/local/Ascend/cann/…
      etc/ascend_install.info
      usr/local/bin/npu-smi

With a root other than ``/``, absolute paths found in the environment (``ASCEND_HOME_PATH``,
``LD_LIBRARY_PATH`` …) and in install files are resolved under the root too, so a tree
plus an environment is a complete machine.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional, Union

PathLike = Union[str, PurePosixPath]

#: The live machine's root (``Sysroot.is_live`` compares with it on every read).
_LIVE_ROOT = Path("/")

#: How a machine file is opened: never waits for a writer (a FIFO), never becomes our terminal.
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


def read_regular(path: Union[str, Path], limit: int) -> Optional[bytes]:
    """Up to ``limit`` bytes of the regular file ``path``; ``None`` for anything else.

    A FIFO, socket or device in place of a file would block a plain ``open()`` or ``read()``
    forever (or stream without end): the file is opened non-blocking and refused unless
    ``fstat`` says it is a regular file (sysfs and procfs attributes are).  Never raises OSError.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def cannot_read(path: PathLike, user: str) -> str:
    """``cannot read /dev as this user (alice)``: the words every surface uses for a folder this
    user may not read (never "missing" or "not installed")."""
    return f"cannot read {path} as this user ({user})"


class Sysroot:
    """A machine's filesystem as seen from ``root``; reads never raise for missing files."""

    def __init__(
        self,
        root: Union[str, Path] = "/",
        environ: Optional[Mapping[str, str]] = None,
    ) -> None:
        self.root = Path(root)
        self.environ: Mapping[str, str] = os.environ if environ is None else environ

    def __repr__(self) -> str:
        return f"Sysroot({str(self.root)!r})"

    @property
    def is_live(self) -> bool:
        """True when this is the running machine (root ``/``), not a tree."""
        return self.root == _LIVE_ROOT

    def path(self, absolute: PathLike) -> Path:
        """The real path of the machine path ``absolute`` (``/etc/x`` → ``<root>/etc/x``)."""
        text = str(absolute)
        if self.is_live:
            return Path(text)
        return self.root / text.lstrip("/")

    def exists(self, absolute: PathLike) -> bool:
        """Whether ``absolute`` exists; a dangling link or a folder we may not enter counts as absent."""
        # os.path.exists, unlike Path.exists on Python ≤ 3.11, never raises PermissionError.
        return os.path.exists(self.path(absolute))

    def lexists(self, absolute: PathLike) -> bool:
        """Whether ``absolute`` exists as a name, even a dangling symlink; never raises."""
        return os.path.lexists(self.path(absolute))

    def read_text(self, absolute: PathLike, limit: int = 1 << 20) -> Optional[str]:
        """The first ``limit`` bytes of the file as text, or ``None`` when it is missing, unreadable
        or not a regular file (see ``read_regular``)."""
        data = read_regular(self.path(absolute), limit)
        return None if data is None else data.decode("utf-8", errors="replace")

    def read_bytes(self, absolute: PathLike, limit: int) -> Optional[bytes]:
        """Up to ``limit`` bytes of the file, or ``None`` when it cannot be read or is not a regular file."""
        return read_regular(self.path(absolute), limit)

    def read_line(self, absolute: PathLike) -> Optional[str]:
        """The first line of a one-value file (sysfs attributes), stripped."""
        text = self.read_text(absolute, limit=4096)
        if text is None:
            return None
        lines = text.strip().splitlines()
        return lines[0].strip() if lines else ""

    def listdir(self, absolute: PathLike) -> list[str]:
        """Sorted entry names of a directory; empty when it is missing or unreadable."""
        try:
            return sorted(os.listdir(self.path(absolute)))
        except OSError:
            return []

    def entries(self, absolute: PathLike) -> list[str]:
        """Sorted entry names of a directory; ``OSError`` when it cannot be listed (``listdir``
        says nothing then), so a caller can tell "cannot read" from "empty"."""
        return sorted(os.listdir(self.path(absolute)))

    def readlink(self, absolute: PathLike) -> Optional[str]:
        """The text of a symlink, or ``None`` when it is not one."""
        try:
            return os.readlink(self.path(absolute))
        except OSError:
            return None

    def realpath(self, absolute: PathLike) -> Path:
        """The canonical real path, symlinks resolved (relative links stay inside a tree)."""
        return Path(os.path.realpath(self.path(absolute)))

    def getenv(self, name: str) -> Optional[str]:
        """A variable of the machine's environment."""
        return self.environ.get(name)

    def env_paths(self, name: str) -> list[Path]:
        """The entries of a ``:``-separated path variable, resolved under the root."""
        value = self.environ.get(name) or ""
        return [self.path(entry) for entry in value.split(":") if entry]
