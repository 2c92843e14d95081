"""Provides ``TreeWriter``: the files, scripts and relative links of one simulated machine's tree."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Dict, Union

from npuwatch.probes.sysroot import Sysroot

Content = Union[str, bytes]
MachinePath = Union[str, PurePosixPath]


class TreeWriter:
    """Writes files and relative links under ``root`` (``SysrootBuilder``'s base): every link
    relative, so a tree can be copied; ``environ`` collects the machine's environment."""

    def __init__(self, root: Union[str, Path]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.environ: Dict[str, str] = {}

    def __repr__(self) -> str:
        return f"SysrootBuilder({str(self.root)!r})"

    def sysroot(self) -> Sysroot:
        """A Sysroot over this tree with a copy of ``environ``."""
        return Sysroot(self.root, environ=dict(self.environ))

    def path(self, machine_path: MachinePath) -> Path:
        """Where the machine path ``/etc/x`` lives in the tree."""
        return self.root / str(machine_path).lstrip("/")

    def write_file(self, machine_path: MachinePath, content: Content, mode: int = 0o644) -> Path:
        """Write ``content`` (text or bytes) at ``machine_path``, making parent folders.

        A file or link already there is replaced (also a read-only 0444 sysfs file, as a non-root
        user).  Written with the system calls themselves, folders made only when missing: a demo
        machine is some 500 files, built while the dashboard starts.
        """
        target = self.path(machine_path)
        name = str(target)
        data = content.encode("utf-8") if isinstance(content, str) else content
        fd = _create(name)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        return target

    def install_executable(self, machine_path: MachinePath, text: str) -> Path:
        """Write a script (e.g. a fake ``/usr/local/bin/npu-smi``) with mode 755."""
        return self.write_file(machine_path, text, mode=0o755)

    def symlink(self, machine_path: MachinePath, target: MachinePath) -> Path:
        """Link ``machine_path`` to the machine path ``target`` with a relative link."""
        link = self.path(machine_path)
        link.parent.mkdir(parents=True, exist_ok=True)
        relative = os.path.relpath(self.path(target), link.parent)
        return self._replace_link(link, relative)

    @staticmethod
    def _replace_link(link: Path, text: str) -> Path:
        if link.is_symlink() or link.is_file():
            link.unlink()
        os.symlink(text, link)
        return link


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _create(name: str) -> int:
    """A new file at ``name`` open for writing, replacing a file or link there and making its
    folders when they are missing."""
    try:
        return os.open(name, _NEW_FILE, 0o600)
    except FileExistsError:
        os.unlink(name)  # a directory there raises, as writing into it would
    except FileNotFoundError:
        os.makedirs(os.path.dirname(name), exist_ok=True)
    return os.open(name, _NEW_FILE, 0o600)
