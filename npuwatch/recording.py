"""Provides NDJSON recordings of Snapshots: a crash-safe writer and a tolerant reader.

One ``npuwatch/snapshot/v1`` object per line.  Each line is handed to the operating system
as soon as it is written, so a recorder killed with ``kill -9`` leaves a file whose complete
lines all replay.  A ``.gz`` file is one gzip stream whose every line ends with a zlib sync
flush: the bytes on disk always decode up to the last complete line, even without the gzip
trailer a killed recorder never wrote.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Iterator, List, Optional, Tuple, TypeVar, Union

from npuwatch import snapshot_json
from npuwatch.model import Snapshot
from npuwatch.recording_file import (  # noqa: F401 (the errors of recordings, named here too)
    OutputFile,
    RecordingBusyError,
    RecordingError,
    RecordingExistsError,
    RecordingLinkError,
)

#: What a recording's line is read into (a Snapshot, a fleet snapshot).
Parsed = TypeVar("Parsed")

GZIP_MAGIC = b"\x1f\x8b"
#: gzip framing for zlib (RFC 1952 header and trailer).
_GZIP_WBITS = 31
#: Damaged gzip data loses at most this much decoded output before the damage.
_READ_CHUNK = 4096
#: Decoded data is handled in pieces of at most this size.
_OUT_CHUNK = 1 << 20

# Limits on reading a recording (issue 14): a small hostile file must not exhaust memory.
#: A line longer than this is skipped: a 16-chip snapshot is ~18 KB, one listing 10 000 NPU
#: processes ~3 MB; parsing a line this long costs ~10× its size in memory.
MAX_LINE_BYTES = 16 << 20
#: Reading stops after this much (decompressed) data: a day recorded at 1 s is ~1.5 GB plain,
#: and what is kept of it in memory is ~2× its text, ~4 GiB at this limit.
MAX_DECOMPRESSED_BYTES = 2 << 30
#: Reading stops after this many snapshots: two days at 1 s.
MAX_SNAPSHOTS = 2 * 86_400
#: At most this many lines are named in warnings.
MAX_WARNINGS = 100


@dataclass(frozen=True)
class Recording:
    """The snapshots a recording holds, oldest first, and what was skipped on the way."""

    path: Path
    snapshots: Tuple[Snapshot, ...]
    warnings: Tuple[str, ...] = ()

    @property
    def duration_s(self) -> float:
        """Seconds from the first snapshot to the last."""
        if len(self.snapshots) < 2:
            return 0.0
        return (self.snapshots[-1].taken_at - self.snapshots[0].taken_at).total_seconds()


def is_recording(path: Union[str, Path]) -> bool:
    """Whether ``path`` looks like a recording (gzip, or JSON lines) rather than npu-smi text."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    return head.startswith(GZIP_MAGIC) or head.lstrip().startswith(b"{")


class RecordingWriter:
    """Appends snapshots to a new NDJSON file, gzip-compressed when ``compress`` (or ``.gz``).

    The file is opened by ``recording_file.OutputFile``: never through a symbolic link
    (``RecordingLinkError``), locked against a second recorder (``RecordingBusyError``), an
    existing file replaced only when ``overwrite`` (else ``RecordingExistsError``) and then by a
    new file renamed over it at its first line.
    A write that fails (a full disk) cuts the file back to its last complete line, so what was
    written before stays a valid recording, and raises ``RecordingError`` saying what was kept.
    """

    def __init__(
        self, path: Union[str, Path], compress: Optional[bool] = None, *, overwrite: bool = False
    ) -> None:
        self.path = Path(path)
        self.compress = self.path.suffix == ".gz" if compress is None else compress
        self._output = OutputFile(self.path, overwrite)
        self._fd = self._output.fd
        self._deflate = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS) if self.compress else None
        self._pending: Optional[Tuple[bytes, Any]] = None
        self.lines = 0
        self.bytes_written = 0

    def encode(self, snapshot: Snapshot) -> bytes:
        """The bytes one snapshot would add to the file; nothing is written until ``write_encoded``.

        For gzip the compressor's state is advanced on a copy, so bytes that are never written
        (``record --max-size`` reached) leave the stream consistent.
        """
        return self.encode_text(snapshot_json.dumps(snapshot, indent=None))

    def encode_text(self, text: str) -> bytes:
        """The bytes one line of ``text`` (one JSON document, no newline) would add (see ``encode``)."""
        line = (text + "\n").encode("utf-8")
        if self._deflate is None:
            return line
        trial = self._deflate.copy()
        data = trial.compress(line) + trial.flush(zlib.Z_SYNC_FLUSH)
        self._pending = (data, trial)
        return data

    def write_encoded(self, data: bytes) -> None:
        """Write what ``encode`` returned straight to the OS (no buffer: survives kill -9)."""
        self._write_all(data)
        if self._pending is not None and self._pending[0] is data:
            self._deflate = self._pending[1]
        self._pending = None
        self.lines += 1
        self.bytes_written += len(data)
        self._output.line_written()

    @property
    def kept_old_file(self) -> bool:
        """True when ``overwrite`` found a file and nothing replaced it (no line was written)."""
        return self._output.replacing

    def write(self, snapshot: Snapshot) -> None:
        """Append one snapshot as one line."""
        self.write_encoded(self.encode(snapshot))

    def close(self) -> None:
        """Finish the gzip stream (its trailer, when it fits) and close the file; never raises."""
        if self._fd < 0:
            return
        try:
            if self._deflate is not None:
                tail = self._deflate.flush(zlib.Z_FINISH)
                self._deflate = None
                try:
                    self._write_all(tail)
                    self.bytes_written += len(tail)
                except RecordingError:
                    pass  # no trailer: the reader reads a stream without one up to its last line
        finally:
            self._fd = -1
            self._output.close()

    def _write_all(self, data: bytes) -> None:
        """All of ``data`` or nothing: a failed write cuts off the part of it that reached the file."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            with contextlib.suppress(OSError):  # not a regular file (/dev/full, a pipe): nothing to cut
                os.ftruncate(self._fd, self.bytes_written)
            raise RecordingError(_write_failure(self.path, exc, self.lines)) from None

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _write_failure(path: Path, exc: OSError, lines: int) -> str:
    """What went wrong, and that the complete lines written before are kept."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        why = f"the disk is full ({why})"
    return f"cannot write {path}: {why}; the {lines} snapshots written before are kept"


def read_recording(path: Union[str, Path]) -> Recording:
    """Every complete, valid line of a recording; a torn last line or a bad line is a warning.

    The file is read as a stream within the limits above (``MAX_LINE_BYTES``,
    ``MAX_DECOMPRESSED_BYTES``, ``MAX_SNAPSHOTS``): past one, reading stops, what was read is
    kept and a warning says which limit was met.
    """
    path = Path(path)
    snapshots, warnings = read_documents(path, snapshot_json.from_dict, "a snapshot")
    if not snapshots:
        raise RecordingError(f"{path} holds no complete snapshot" + (f": {warnings[0]}" if warnings else ""))
    ordered = tuple(sorted(snapshots, key=lambda s: s.taken_at))
    if ordered != tuple(snapshots):
        warnings.append(f"{path.name}: lines were out of time order; replayed in time order")
    return Recording(path, ordered, tuple(warnings))


def read_documents(path: Path, parse: Callable[[Any], Parsed], what: str) -> Tuple[List[Parsed], List[str]]:
    """What ``parse`` makes of each complete line of the NDJSON file at ``path`` (plain or gzip),
    read within the limits above, and a warning for each line it refuses (``what`` names the
    record: "a snapshot"); ``RecordingError`` when the file cannot be opened."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise RecordingError(f"cannot read the recording {path}: {exc.strerror or exc}") from None
    reader = StreamReader(path.name)
    with handle:
        return reader.documents(handle, parse, what), reader.warnings


_NON_BLANK = re.compile(rb"\S")


#: Called while a gzip file is read, where its decoded stream may be resumed later: the bytes of
#: the file read so far, the decoded bytes so far, and a copy of the decompressor there.
Checkpoint = Callable[[int, int, Any], None]


class StreamReader:
    """Reads one recording as a bounded stream of lines; collects what was wrong as warnings."""

    def __init__(self, name: str, checkpoint: Optional[Checkpoint] = None) -> None:
        self.name = name
        self.warnings: List[str] = []
        self.stopped = False  # a limit was met: the rest of the file is not read
        self.checkpoint = checkpoint
        self.compressed = False

    def documents(self, handle: IO[bytes], parse: Callable[[Any], Parsed], what: str) -> List[Parsed]:
        """What ``parse`` makes of every complete line, up to ``MAX_SNAPSHOTS``."""
        out: List[Parsed] = []
        for number, _offset, line in self.lines(handle):
            if len(out) >= MAX_SNAPSHOTS:
                self._stop(f"at line {number}: a replay keeps at most {MAX_SNAPSHOTS} snapshots")
                break
            try:
                out.append(parse(json.loads(line.decode("utf-8", errors="replace"))))
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
                self.warn(f"{self.name}: line {number} is not {what} ({_short(exc)}); skipped")
        return out

    def warn(self, text: str, last: bool = False) -> None:
        """Keep ``text``, up to ``MAX_WARNINGS`` (a file of a million bad lines is one more);
        ``last``: what ends the reading is always kept."""
        if last or len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)
        elif len(self.warnings) == MAX_WARNINGS:
            self.warnings.append(
                f"{self.name}: more lines were skipped; only the first {MAX_WARNINGS} are named"
            )

    def lines(self, handle: IO[bytes]) -> Iterator[Tuple[int, int, bytes]]:
        """(line number, offset in the decoded stream, bytes) of each complete, non-blank line."""
        return self._lines(self._decoded(handle))

    def _stop(self, why: str) -> None:
        self.stopped = True
        self.warn(f"{self.name}: stopped reading {why}; the rest of the file is not replayed", last=True)

    def _decoded(self, handle: IO[bytes]) -> Iterator[bytes]:
        """The file's bytes (gunzipped when it is gzip) in bounded chunks, up to the total limit."""
        head = handle.read(len(GZIP_MAGIC))
        self.compressed = head == GZIP_MAGIC
        chunks = self._gunzipped(handle, head) if head == GZIP_MAGIC else self._plain(handle, head)
        total = 0
        for chunk in chunks:
            total += len(chunk)
            if total > MAX_DECOMPRESSED_BYTES:
                self._stop(f"after {MAX_DECOMPRESSED_BYTES >> 20} MiB of data (the replay limit)")
                return
            yield chunk

    @staticmethod
    def _plain(handle: IO[bytes], head: bytes) -> Iterator[bytes]:
        yield head
        while True:
            chunk = handle.read(_OUT_CHUNK)
            if not chunk:
                return
            yield chunk

    def _gunzipped(self, handle: IO[bytes], head: bytes) -> Iterator[bytes]:
        """Decompress a gzip stream that may lack its end (a killed recorder wrote no trailer)."""
        inflate = zlib.decompressobj(_GZIP_WBITS)
        data = head
        read = decoded = 0
        try:
            while not inflate.eof:
                data += handle.read(_READ_CHUNK)
                if not data:
                    return
                read += len(data)
                out = inflate.decompress(data, _OUT_CHUNK)  # bounded: a gzip bomb expands 1000×
                while out:
                    decoded += len(out)
                    yield out
                    out = inflate.decompress(inflate.unconsumed_tail, _OUT_CHUNK)
                data = b""
                if self.checkpoint is not None and not inflate.unconsumed_tail:
                    self.checkpoint(read, decoded, inflate)
        except zlib.error as exc:
            self.warn(
                f"{self.name}: the gzip data is damaged after some point ({exc}); read up to it", last=True
            )

    def _lines(self, chunks: Iterator[bytes]) -> Iterator[Tuple[int, int, bytes]]:
        """(line number, offset, bytes) of each complete, non-blank line; runs of blanks are
        skipped in bulk, and a line past ``MAX_LINE_BYTES`` is skipped without being held."""
        number = 0  # newlines passed
        pending = bytearray()
        too_long = False  # the current line passed MAX_LINE_BYTES: skip to its end
        base = 0  # the decoded offset of the chunk's first byte
        line_at = 0  # the decoded offset of the current line's first byte
        for chunk in chunks:
            pos, end = 0, len(chunk)
            while pos < end:
                if not pending and not too_long:
                    found = _NON_BLANK.search(chunk, pos)
                    start = end if found is None else found.start()
                    number += chunk.count(b"\n", pos, start)
                    pos = start
                    if found is None:
                        break
                    line_at = base + pos
                newline = chunk.find(b"\n", pos)
                stop = end if newline < 0 else newline
                if not too_long and len(pending) + stop - pos > MAX_LINE_BYTES:
                    too_long, pending = True, bytearray()
                elif not too_long:
                    pending += chunk[pos:stop]
                if newline < 0:
                    break
                number += 1
                if too_long:
                    self.warn(f"{self.name}: line {number} is {_too_long()}; skipped")
                else:
                    yield number, line_at, bytes(pending)
                too_long, pending, pos = False, bytearray(), newline + 1
            base += end
        if too_long and not self.stopped:
            self.warn(f"{self.name}: line {number + 1} is {_too_long()} and has no end; ignored", last=True)
        elif pending and not self.stopped:
            self.warn(
                f"{self.name}: the last line is incomplete (the recorder stopped mid-write); ignored",
                last=True,
            )


def _too_long() -> str:
    return f"longer than {MAX_LINE_BYTES >> 20} MiB (no snapshot is)"


def _short(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 80 else text[:77] + "..."
