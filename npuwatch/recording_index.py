"""Provides RecordingIndex: where each snapshot of a recording file starts, by time, so a replay
seeks in the file and decodes one snapshot when it is shown instead of holding them all.

Seen (issue 27): one sample from a 1 GB recording took 30 s and 1.26 GB, the dashboard replaying
it 1.5 GB.  The index is built by streaming the file once (``recording.StreamReader``: the same
line, size and count limits as any reading): per snapshot line its time (read from the line's
``"taken_at"`` without parsing the rest), its offset and length in the decoded stream and its
line number — 32 bytes a line, ~5.5 MB at the 172 800-line limit, whatever the file's size.  A
line is parsed when it is shown; one that is not a snapshot is skipped then, with a warning.

Plain files are read at the line's offset.  A gzip stream cannot seek: while indexing, the
decompressor's state is kept every ``CHECKPOINT_BYTES`` of decoded data (a copy is ~40 KB), at
most ``MAX_CHECKPOINTS`` of them (past that every other one is dropped and the spacing doubles),
so a line is found by decompressing from the checkpoint before it: at most the spacing (8 MiB
up to the 2 GiB limit).  Playing forward continues from where the last line was read.

Lines are played in file order: a line whose time goes back is played where it stands (at the
time of the line before it), with one warning, as a stream cannot be sorted without holding it.
"""

from __future__ import annotations

import bisect
import contextlib
import re
import threading
import zlib
from array import array
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, List, Optional, Tuple, Union

from npuwatch.recording import GZIP_MAGIC, RecordingError, StreamReader

#: Decoded bytes between two kept decompressor states of a gzip recording.
CHECKPOINT_BYTES = 4 << 20
#: At most this many decompressor states are kept (~40 KB each).
MAX_CHECKPOINTS = 256
_READ_CHUNK = 64 << 10
_TAKEN_AT = re.compile(rb'"taken_at"\s*:\s*"([^"\\]{1,64})"')


def line_time_s(line: bytes) -> Optional[float]:
    """The epoch seconds of a snapshot line's ``taken_at`` (``None`` when it has none)."""
    found = _TAKEN_AT.search(line)
    if found is None:
        return None
    try:
        taken = datetime.fromisoformat(found.group(1).decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if taken.tzinfo is None:
        taken = taken.replace(tzinfo=timezone.utc)
    return taken.timestamp()


class RecordingIndex:
    """The snapshot lines of one recording file, indexed as the file is streamed.

    ``build()`` streams the whole file (on a thread of the caller's choice; ``stop()`` ends it
    early); ``build_until(count)`` only its beginning.  ``count()``, ``time_s(i)``,
    ``index_at(t)`` and ``line(i)`` are safe while it builds.  ``close()`` ends it.
    """

    def __init__(self, path: Union[str, Path]) -> None:
        self.path = Path(path)
        try:
            self._file: IO[bytes] = open(self.path, "rb")  # noqa: SIM115 - closed by close()
            self.compressed = self._file.read(len(GZIP_MAGIC)) == GZIP_MAGIC
        except OSError as exc:
            raise RecordingError(f"cannot read the recording {self.path}: {exc.strerror or exc}") from None
        self._lock = threading.Lock()  # the arrays and warnings (appended by the builder)
        self._io_lock = threading.Lock()  # the file's position and the gzip cursor
        self._times = array("d")
        self._offsets = array("q")
        self._lengths = array("q")
        self._numbers = array("q")
        self._checkpoints: List[Tuple[int, int, Any]] = []  # (file bytes, decoded bytes, decompressor)
        self._spacing = CHECKPOINT_BYTES
        self._cursor: Optional[_Cursor] = None  # where playing forward continues decoding
        self._reader = StreamReader(self.path.name, self._checkpoint if self.compressed else None)
        self._lines: Optional[Any] = None
        self._stopped = threading.Event()
        self._went_back = False
        self._building = False  # build() runs (on a thread): it closes its handle itself
        self.complete = False

    # --- building --------------------------------------------------------------------------------

    def build_until(self, count: int) -> None:
        """Index until ``count`` lines are known or the file ends."""
        while not self.complete and self.count() < count and not self._stopped.is_set():
            self._next()

    def build(self) -> None:
        """Index the rest of the file (until ``stop()``), then close what it read with."""
        self._building = True
        try:
            self.build_until(1 << 62)
        finally:
            if self._lines is not None:
                with contextlib.suppress(OSError):
                    self._lines[0].close()

    def stop(self) -> None:
        self._stopped.set()

    def _next(self) -> None:
        if self._lines is None:
            handle = open(self.path, "rb")  # noqa: SIM115 - the builder's own, closed at the end
            self._lines = (handle, self._reader.lines(handle))
        handle, lines = self._lines
        entry = next(lines, None)
        if entry is None:
            handle.close()
            with self._lock:
                self.complete = True
            return
        number, offset, line = entry
        taken_s = line_time_s(line)
        with self._lock:
            if taken_s is None:
                self._reader.warn(f"{self.path.name}: line {number} is not a snapshot (no taken_at); skipped")
                return
            if self._times and taken_s < self._times[-1]:
                if not self._went_back:
                    self._went_back = True
                    self._reader.warn(
                        f"{self.path.name}: line {number} goes back in time; lines are played in file order"
                    )
                taken_s = self._times[-1]
            if len(self._times) >= _max_lines():
                self._reader.warn(
                    f"{self.path.name}: stopped at line {number}: a replay keeps at most "
                    f"{_max_lines()} snapshots",
                    last=True,
                )
                self.complete = True
                self._stopped.set()
                return
            self._times.append(taken_s)
            self._offsets.append(offset)
            self._lengths.append(len(line))
            self._numbers.append(number)

    def _checkpoint(self, read: int, decoded: int, inflate: Any) -> None:
        last = self._checkpoints[-1][1] if self._checkpoints else 0
        if self._checkpoints and decoded - last < self._spacing:
            return
        with self._io_lock:
            self._checkpoints.append((read, decoded, inflate.copy()))
            if len(self._checkpoints) > MAX_CHECKPOINTS:
                self._checkpoints = self._checkpoints[::2]
                self._spacing *= 2

    # --- reading ---------------------------------------------------------------------------------

    def count(self) -> int:
        with self._lock:
            return len(self._times)

    def time_s(self, index: int) -> float:
        with self._lock:
            return self._times[index]

    def length(self, index: int) -> int:
        """The bytes of line ``index``."""
        with self._lock:
            return self._lengths[index]

    def number(self, index: int) -> int:
        with self._lock:
            return self._numbers[index]

    def index_at(self, time_s: float) -> int:
        """The last line taken at or before ``time_s`` (0 when none is)."""
        with self._lock:
            return max(0, bisect.bisect_right(self._times, time_s) - 1)

    def warnings(self) -> Tuple[str, ...]:
        with self._lock:
            return tuple(self._reader.warnings)

    def warn(self, text: str) -> None:
        with self._lock:
            self._reader.warn(text)

    def line(self, index: int) -> bytes:
        """The bytes of line ``index`` (read now; ``RecordingError`` when the file fails)."""
        with self._lock:
            offset, length = self._offsets[index], self._lengths[index]
        with self._io_lock:
            try:
                if not self.compressed:
                    self._file.seek(offset)
                    return self._file.read(length)
                return self._gunzip(offset, length)
            except (OSError, zlib.error) as exc:
                raise RecordingError(f"cannot read {self.path.name} again: {exc}") from None

    def _gunzip(self, offset: int, length: int) -> bytes:
        """Decode from the cursor or the nearest checkpoint before ``offset`` (``_io_lock`` held)."""
        before = [c for c in self._checkpoints if c[1] <= offset]
        cursor = self._cursor
        if cursor is not None and cursor.at <= offset and (not before or cursor.at >= before[-1][1]):
            state = cursor
        elif before:
            read, decoded, inflate = before[-1]
            state = _Cursor(inflate.copy(), read, decoded, b"", b"")
        else:
            state = _Cursor(zlib.decompressobj(31), 0, 0, b"", b"")
        self._cursor = None
        buffered = bytearray(state.buffered)
        at, read, tail = state.at, state.read, state.tail
        inflate = state.inflate
        self._file.seek(read)
        while True:
            if at < offset:  # what comes before the line is dropped as it is decoded
                dropped = min(len(buffered), offset - at)
                del buffered[:dropped]
                at += dropped
            if (at == offset and len(buffered) >= length) or inflate.eof:
                break
            data = tail or self._file.read(_READ_CHUNK)
            if not tail:
                read += len(data)
            if not data:
                break
            buffered += inflate.decompress(data, 1 << 20)
            tail = inflate.unconsumed_tail
        if at != offset or len(buffered) < length:
            raise RecordingError(f"{self.path.name} ended before a line it held")
        self._cursor = _Cursor(inflate, read, offset + length, tail, bytes(buffered[length:]))
        return bytes(buffered[:length])

    def close(self) -> None:
        """Stop building (a ``build()`` under way closes its own handle) and close the file."""
        self.stop()
        with contextlib.suppress(OSError):
            self._file.close()
            if self._lines is not None and not self._building:
                self._lines[0].close()


class _Cursor:
    """A gzip stream decoded up to ``at`` (plus ``buffered``, decoded but not yet used), with
    ``read`` bytes of the file read and ``tail`` of them not yet fed to ``inflate``."""

    def __init__(self, inflate: Any, read: int, at: int, tail: bytes, buffered: bytes) -> None:
        self.inflate = inflate
        self.read = read
        self.at = at
        self.tail = tail
        self.buffered = buffered


def _max_lines() -> int:
    from npuwatch import recording

    return recording.MAX_SNAPSHOTS
