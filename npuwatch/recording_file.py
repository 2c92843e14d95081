"""Provides a recorder's output file: never written through a link, locked against a second
recorder, and a ``--force`` replacement renamed into place; and the errors of recording files.

* A symbolic link is refused as the output, with ``--force`` too: its target (a copy of
  ``/etc/passwd`` in issue 27) is neither overwritten nor, for a dangling link, created.  A link
  to a device or a pipe (``/dev/stdout``) is written to: there is no file there to lose.
* A new file is created with ``O_EXCL | O_NOFOLLOW``: whatever appears at the path meanwhile
  makes the open fail instead of being written through.
* ``--force`` never truncates the old file: it writes a new one beside it (``.NAME.XXXXXXXX.part``)
  and renames it over the old one as soon as its first line is complete.  So at any moment a
  kill can come, the path holds a valid recording: the old one until the first line, the new
  one (every complete line of it) after; a recording stopped before its first line leaves the
  old file as it was and removes its part file.
* While a recorder writes a file it holds an ``flock`` on ``.NAME.lock`` beside it (the lock
  must outlive the rename, so it cannot be on the file itself), and a second recorder of the
  same file is refused (``RecordingBusyError``) instead of both reporting success while one
  writes into a file the other replaced.  The lock file is removed at the end.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from pathlib import Path
from typing import NoReturn, Optional, Union

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_LOCK_TRIES = 5


class RecordingError(Exception):
    """A file that cannot be read or written as a recording; the message says why."""


class RecordingExistsError(RecordingError):
    """The file to record into already holds data and replacing it was not allowed."""


class RecordingLinkError(RecordingExistsError):
    """The file to record into is a symbolic link (to a file, or to nothing): refused."""


class RecordingBusyError(RecordingError):
    """Another recorder is writing the same file."""


def check_output(path: Union[str, Path], overwrite: bool) -> None:
    """Refuse, before anything starts, an output that is a link to a file or to nothing
    (``RecordingLinkError``) or an existing file when not ``overwrite``
    (``RecordingExistsError``); opening checks again, safely."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return  # none yet (or unreadable: opening says why)
    if stat.S_ISLNK(mode):
        try:
            target = os.stat(path).st_mode
        except OSError:
            _refuse_link(path)
        if stat.S_ISREG(target) or stat.S_ISDIR(target):
            _refuse_link(path)
    elif stat.S_ISREG(mode) and not overwrite:
        raise RecordingExistsError(f"{path} already exists: not replacing it (pass --force to replace it)")


class OutputFile:
    """An open output: write to ``fd``, call ``line_written()`` after each complete line, then
    ``close()``.  Raises ``RecordingError`` (or one of its kinds above) when it cannot be opened."""

    def __init__(self, path: Union[str, Path], overwrite: bool) -> None:
        self.path = Path(path)
        self._part: Optional[Path] = None  # a --force replacement not yet renamed into place
        self._lock: Optional[_Lock] = None
        self.fd = -1
        try:
            self.fd = self._open(overwrite)
        except OSError as exc:
            self.close()
            raise RecordingError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        except BaseException:
            self.close()
            raise

    @property
    def replacing(self) -> bool:
        """True while a ``--force`` replacement waits for its first line (the old file is kept)."""
        return self._part is not None

    def line_written(self) -> None:
        """A complete line reached the file: a replacement takes the old file's place now."""
        if self._part is None:
            return
        try:
            os.replace(self._part, self.path)  # replaces a link put there meanwhile, never its target
        except OSError as exc:
            raise RecordingError(
                f"cannot put the new recording in place of {self.path}: {exc.strerror or exc}"
            ) from None
        self._part = None

    def close(self) -> None:
        """Close the file; a replacement that never got a line is removed (the old file stays)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._part is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._part)
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()

    # --- opening ---------------------------------------------------------------------------------

    def _open(self, overwrite: bool) -> int:
        mode = _mode_of(self.path)
        if mode is not None and stat.S_ISLNK(mode):
            return _through_link(self.path)
        if mode is not None and stat.S_ISDIR(mode):
            raise RecordingError(f"cannot write {self.path}: it is a folder")
        if mode is not None and not stat.S_ISREG(mode):  # a device or a pipe: nothing to lose
            return os.open(self.path, os.O_WRONLY | os.O_NOCTTY | _NOFOLLOW | _CLOEXEC)
        self._lock = _Lock.take(self.path)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            return os.open(self.path, flags, 0o666)
        except FileExistsError:
            pass
        mode = _mode_of(self.path)  # there already, or made since the look above
        if mode is not None and stat.S_ISLNK(mode):
            _refuse_link(self.path)
        if mode is None or not stat.S_ISREG(mode):
            raise RecordingError(f"cannot write {self.path}: it changed while being opened")
        if not overwrite:
            raise RecordingExistsError(
                f"{self.path} already exists: not replacing it (pass --force to replace it)"
            )
        part = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.part")
        fd = os.open(part, flags, 0o666)
        self._part = part
        return fd


def _mode_of(path: Path) -> Optional[int]:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


def _through_link(path: Path) -> int:
    """A link to a device or a pipe is opened (never created through); any other is refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | _CLOEXEC)  # no O_CREAT: a dangling link fails
    except (FileNotFoundError, IsADirectoryError):
        _refuse_link(path)
    if stat.S_ISREG(os.fstat(fd).st_mode):  # opened without truncating: nothing was changed
        os.close(fd)
        _refuse_link(path)
    return fd


def _refuse_link(path: Path) -> NoReturn:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    dangling = not os.path.exists(path)
    what = f"a symbolic link to nothing ({target})" if dangling else f"a symbolic link to {target}"
    raise RecordingLinkError(
        f"{path} is {what}: npuwatch does not record through a link; name the file itself"
    )


class _Lock:
    """An ``flock`` held on ``.NAME.lock`` beside a recording while it is written."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def take(cls, recording: Path) -> _Lock:
        path = recording.with_name(f".{recording.name}.lock")
        for _ in range(_LOCK_TRIES):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise RecordingBusyError(
                    f"{recording} is being recorded by another npuwatch{holder}: not recording into it "
                    "twice (stop that one, or choose another file)"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            # Its last holder may have removed the lock file between our open and our lock.
            held = os.fstat(fd)
            try:
                named = os.lstat(path)
            except FileNotFoundError:
                named = None
            if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                return cls(fd, path)
            os.close(fd)
        raise RecordingBusyError(f"{recording}: its lock file {path.name} keeps changing; not recording")

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # while still held: a recorder that opened it then finds it gone
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _holder(fd: int) -> str:
    """`` (pid N)`` from the lock file, when it says."""
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        if text.isdigit():
            return f" (pid {int(text)})"
    return ""
