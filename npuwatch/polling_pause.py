"""Provides is_paused() and pause(): a cross-process marker asking npuwatch's pollers to wait out a self-test.

A pause is a file ``pause-<pid>-<expiry>`` in a per-user folder (``$XDG_RUNTIME_DIR/npuwatch``, else
``<tmp>/npuwatch-<uid>``).  It counts while that process lives and the expiry (Unix seconds) has not
passed, so a crashed self-test never pauses anyone for long, and a reused PID cannot either.
``is_paused()`` costs one ``scandir`` of a usually missing folder, plus a ``kill(pid, 0)`` per marker.
Concurrent DCMI polling skews bandwidth measurements (reference/anchors.md).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Mapping, Optional

_PREFIX = "pause-"


@dataclass(frozen=True)
class Pause:
    """One live pause: who holds it and until when."""

    pid: int
    expires_at: float  # Unix seconds
    path: Path


def marker_dir(environ: Optional[Mapping[str, str]] = None) -> Path:
    """The per-user folder the markers live in."""
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "npuwatch"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"npuwatch-{uid}"


def active_pauses(environ: Optional[Mapping[str, str]] = None, now: Optional[float] = None) -> List[Pause]:
    """Every pause that still counts: its process is alive and it has not expired."""
    folder = marker_dir(environ)
    try:
        entries = list(os.scandir(folder))
    except OSError:  # no folder: nobody ever paused (the usual case)
        return []
    moment = time.time() if now is None else now
    found = []
    for entry in entries:
        pause = _parse(entry.name, folder)
        if pause is not None and pause.expires_at > moment and _alive(pause.pid):
            found.append(pause)
    return found


def is_paused(environ: Optional[Mapping[str, str]] = None) -> bool:
    """True while a self-test (any process of this user) is measuring: pollers should skip this tick."""
    return bool(active_pauses(environ))


class PauseHandle:
    """A held pause; ``extend`` moves its expiry, ``release`` (or leaving the ``with``) ends it."""

    def __init__(self, folder: Path, pid: int) -> None:
        self.folder = folder
        self.pid = pid
        self.path: Optional[Path] = None

    def extend(self, seconds: float) -> None:
        """Count for ``seconds`` from now (the marker is renamed, never rewritten in place)."""
        target = self.folder / f"{_PREFIX}{self.pid}-{int(time.time() + seconds) + 1}"
        try:
            if self.path is None:
                target.touch()
            else:
                os.replace(self.path, target)
            self.path = target
        except OSError:  # an unwritable folder: measure anyway, just without pausing others
            self.path = None

    def release(self) -> None:
        """End the pause."""
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


@contextlib.contextmanager
def pause(seconds: float, environ: Optional[Mapping[str, str]] = None) -> Iterator[PauseHandle]:
    """Pause npuwatch's polling for at most ``seconds`` (extendable) while the block runs."""
    folder = marker_dir(environ)
    handle = PauseHandle(folder, os.getpid())
    if _usable(folder):
        _clear_stale(folder)
        handle.extend(seconds)
    try:
        yield handle
    finally:
        handle.release()


def _usable(folder: Path) -> bool:
    """Create the folder private to this user; refuse one that another user (or a symlink) holds."""
    try:
        folder.mkdir(mode=0o700, parents=False, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return False
    own = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return own and not os.path.islink(folder)


def _clear_stale(folder: Path) -> None:
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            pause = _parse(entry.name, folder)
            if pause is not None and (pause.expires_at <= now or not _alive(pause.pid)):
                with contextlib.suppress(OSError):
                    os.unlink(pause.path)


def _parse(name: str, folder: Path) -> Optional[Pause]:
    if not name.startswith(_PREFIX):
        return None
    parts = name[len(_PREFIX) :].split("-")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    return Pause(int(parts[0]), float(parts[1]), folder / name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    except OSError:
        return False
    return True
