"""Provides the process tree of a child, read from ``/proc``: its session, its descendants, the
holders of its pipes, and the processes that carry a mark (``runner.new_mark``) in their
environment.  ``runner`` kills what these find; nothing here signals a process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import Dict, Optional, Set

#: The environment variable that carries a child's mark to everything it starts (``new_mark``).
MARK_VARIABLE = "NPUWATCH_CHILD_MARK"


def tree_of(proc: subprocess.Popen[bytes]) -> Set[int]:
    """Every process the child spawned that is still running: by session, by parent, by pipe.

    A grandchild that called ``setsid`` left the group and the session but is still a descendant
    (until its parent dies) and, when it kept stdout or stderr, still holds our pipe.
    """
    pipes = _pipe_inodes(proc)
    table = _processes()
    found: Set[int] = {proc.pid}
    for pid, (_ppid, sid) in table.items():
        if sid == proc.pid:
            found.add(pid)
    _add_below(found, table)
    if pipes:
        found |= _holders(pipes, table)
    found.discard(os.getpid())
    found.discard(proc.pid)
    return found


def descendants(root: int) -> Set[int]:
    """Every running process below ``root`` (by parent, from /proc), ``root`` not included."""
    found: Set[int] = {root}
    _add_below(found, _processes())
    found.discard(root)
    return found


def _add_below(found: Set[int], table: Dict[int, tuple[int, int]]) -> None:
    """Add to ``found`` every process below one already in it (``table``: pid → (ppid, sid))."""
    changed = True
    while changed:
        changed = False
        for pid, (ppid, _sid) in table.items():
            if ppid in found and pid not in found:
                found.add(pid)
                changed = True


def marked_processes(marks: Set[str]) -> Set[int]:
    """The processes whose environment carries one of ``marks`` (``new_mark``), from
    ``/proc/PID/environ``: this user's (another user's cannot be read, nor signalled), or every
    one for root (a daemon the library started may have switched to ``HwHiAiUser``); never
    npuwatch itself."""
    wanted = {f"{MARK_VARIABLE}={mark}".encode("ascii") for mark in marks}
    found: Set[int] = set()
    me, uid = os.getpid(), os.getuid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if uid != 0 and os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as environ:
                entries = environ.read(1 << 20).split(b"\0")
        except OSError:
            continue
        if wanted.intersection(entries):
            found.add(int(name))
    return found


def _processes() -> Dict[int, tuple[int, int]]:
    """pid → (ppid, session id) of every process this user can see, from /proc (empty elsewhere)."""
    table: Dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read().decode("ascii", "replace")
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        with contextlib.suppress(IndexError, ValueError):
            table[int(name)] = (int(fields[1]), int(fields[3]))
    return table


def _pipe_inodes(proc: subprocess.Popen[bytes]) -> Set[str]:
    inodes: Set[str] = set()
    for pipe in (proc.stdout, proc.stderr):
        fd = fd_of(pipe)
        if fd < 0:
            continue
        with contextlib.suppress(OSError, ValueError):
            inodes.add(os.readlink(f"/proc/self/fd/{fd}"))
    return inodes


def _holders(pipes: Set[str], table: Dict[int, tuple[int, int]]) -> Set[int]:
    holders: Set[int] = set()
    me = os.getpid()
    for pid in table:
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in pipes:
                    holders.add(pid)
                    break
            except OSError:
                continue
    return holders


def fd_of(pipe: Optional[object]) -> int:
    fileno = getattr(pipe, "fileno", None)
    return int(fileno()) if fileno is not None else -1
