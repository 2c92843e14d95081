"""Hostile recordings (issue 14, defects 6 and 7): small files that expand to gigabytes, and
lines that are JSON but not snapshots.

A recording is read as a stream: blank runs are skipped in bulk, a line longer than
``MAX_LINE_BYTES`` is skipped, reading stops past ``MAX_DECOMPRESSED_BYTES`` or
``MAX_SNAPSHOTS``; what was read is kept and each limit is named in a warning.  Every line is
validated on the way in: a bad one is skipped with its line number, never a crash, and the
JSON written back is strict (no NaN or Infinity).
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from npuwatch import recording, snapshot_json
from npuwatch.recording import RecordingWriter, read_recording
from tests.widgets.fakes import capture_snapshot

DEADLINE_S = 120.0
#: The child may map at most this much: a regression fails by MemoryError, not by a swapping host.
ADDRESS_SPACE_LIMIT = 4 << 30
PEAK_RSS_LIMIT = 500 << 20
GIB = 1 << 30

BASE = capture_snapshot("001")


def good_line(seconds: int = 0) -> bytes:
    from dataclasses import replace
    from datetime import timedelta

    snapshot = replace(BASE, taken_at=BASE.taken_at + timedelta(seconds=seconds))
    return (snapshot_json.dumps(snapshot, indent=None) + "\n").encode("utf-8")


def write_gzip(path: Path, head: bytes, filler: bytes, size: int) -> Path:
    """A gzip stream of ``head`` then ``size`` bytes of ``filler`` (one byte), a few MB on disk.

    Deflating gigabytes takes long; with a sync flush after each block the compressed form of
    a block of one repeated byte repeats too, so it is computed once and written many times.
    """
    block = filler * (16 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        out.write(deflate.compress(head) + deflate.flush(zlib.Z_SYNC_FLUSH))
        parts = [deflate.compress(block) + deflate.flush(zlib.Z_SYNC_FLUSH) for _ in range(3)]
        assert parts[1] == parts[2]
        out.write(parts[0])
        for _ in range(size // len(block) - 1):
            out.write(parts[1])
    return path


def _limit_memory() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_child(*args: str) -> Tuple[int, str, str, int]:
    """Run ``npuwatch ARGS``: (exit code, stdout, stderr, its peak RSS in bytes); killed past the deadline."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_limit_memory,
    )
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(DEADLINE_S, kill)
    timer.start()
    out: Dict[str, bytes] = {}
    readers = [
        threading.Thread(target=lambda: out.__setitem__("out", proc.stdout.read())),  # type: ignore[union-attr]
        threading.Thread(target=lambda: out.__setitem__("err", proc.stderr.read())),  # type: ignore[union-attr]
    ]
    for reader in readers:
        reader.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    for reader in readers:
        reader.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of the run is left
    assert not timed_out.is_set(), f"`npuwatch {' '.join(args)}` took longer than {DEADLINE_S:g} s"
    decoded = [out[k].decode("utf-8", errors="replace") for k in ("out", "err")]
    return proc.returncode, decoded[0], decoded[1], usage.ru_maxrss * 1024


# --- defect 6: bounded memory -------------------------------------------------------------------


def test_gigabytes_of_newlines_replay_in_bounded_memory(tmp_path: Path) -> None:
    path = write_gzip(tmp_path / "newlines.ndjson.gz", good_line(), b"\n", 2 * GIB)
    assert path.stat().st_size < 8 << 20
    code, out, err, peak = run_child("snapshot", "--replay", str(path), "--json")
    assert "Traceback" not in err and code != 70, err[-2000:]
    assert peak < PEAK_RSS_LIMIT, f"peak RSS {peak >> 20} MiB"
    assert code == 0, err
    assert len(json.loads(out)["chips"]) == 8


def test_one_line_then_gigabytes_without_a_newline_replay_in_bounded_memory(tmp_path: Path) -> None:
    path = write_gzip(tmp_path / "zeros.ndjson.gz", good_line(), b"\0", GIB)
    code, out, err, peak = run_child("snapshot", "--replay", str(path), "--json")
    assert "Traceback" not in err and code != 70, err[-2000:]
    assert peak < PEAK_RSS_LIMIT, f"peak RSS {peak >> 20} MiB"
    assert code == 0, err
    assert len(json.loads(out)["chips"]) == 8
    assert "line 2" in out or "line 2" in err  # the over-long line is named


def test_an_over_long_line_is_skipped_and_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recording, "MAX_LINE_BYTES", 64 << 10)
    path = tmp_path / "long.ndjson"
    path.write_bytes(good_line(0) + b'{"schema": "' + b"x" * (200 << 10) + b'"}\n' + good_line(1))
    rec = read_recording(path)
    assert len(rec.snapshots) == 2
    assert any("line 2" in w and "longer than" in w for w in rec.warnings), rec.warnings


def test_reading_stops_past_the_decompressed_limit_keeping_what_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording, "MAX_DECOMPRESSED_BYTES", 2 << 20)
    path = tmp_path / "big.ndjson.gz"
    with RecordingWriter(path) as writer:
        for i in range(300):  # ~20 KB each (8 chips, 22 metrics): 6 MB decompressed
            writer.write_encoded(writer.encode(snapshot_json.from_dict(json.loads(good_line(i)))))
    rec = read_recording(path)
    assert 50 < len(rec.snapshots) < 300
    assert any("stopped reading" in w for w in rec.warnings), rec.warnings


def test_reading_stops_past_the_snapshot_limit_keeping_what_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording, "MAX_SNAPSHOTS", 10)
    path = tmp_path / "many.ndjson"
    path.write_bytes(b"".join(good_line(i) for i in range(25)))
    rec = read_recording(path)
    assert len(rec.snapshots) == 10
    assert any("stopped reading" in w and "10 snapshots" in w for w in rec.warnings), rec.warnings


# --- defect 7: malformed lines are skipped --------------------------------------------------------


def _with_chip_field(name: str, value: Any) -> bytes:
    data = json.loads(good_line(1))
    data["chips"][0][name] = value
    return (json.dumps(data) + "\n").encode("utf-8")


BAD_LINES: Dict[str, bytes] = {
    "power-as-text": _with_chip_field("power_w", "abc"),
    "name-as-list": _with_chip_field("name", ["9", "1", "0"]),
    "401-digit-integer": _with_chip_field("temperature_c", 10**400),
    "npu-id-as-text": _with_chip_field("npu_id", "zero"),
    "chips-as-text": json.dumps({**json.loads(good_line(1)), "chips": "many"}).encode() + b"\n",
    "a-list": b"[1, 2, 3]\n",
    "nested-brackets": b"[" * 100_000 + b"\n",
    "bad-time": json.dumps({**json.loads(good_line(1)), "taken_at": 5}).encode() + b"\n",
    "process-pid-as-dict": json.dumps(
        {**json.loads(good_line(1)), "processes": [{"npu_id": 0, "chip_id": 0, "pid": {}}]}
    ).encode()
    + b"\n",
}


@pytest.mark.parametrize("which", sorted(BAD_LINES))
def test_a_malformed_line_is_skipped_with_its_number(tmp_path: Path, which: str) -> None:
    path = tmp_path / "bad.ndjson"
    path.write_bytes(good_line(0) + BAD_LINES[which] + good_line(2))
    rec = read_recording(path)
    assert len(rec.snapshots) == 2
    assert any("line 2" in w and "skipped" in w for w in rec.warnings), rec.warnings


@pytest.mark.parametrize("which", ["power-as-text", "name-as-list", "401-digit-integer", "nested-brackets"])
def test_snapshot_replay_of_a_malformed_line_is_not_an_internal_error(tmp_path: Path, which: str) -> None:
    path = tmp_path / "bad.ndjson"
    # A one-shot snapshot parses only the line it shows (issue 27, 7): the bad line comes first,
    # unless it would not be told a recording then (one with no time is skipped as it is indexed).
    bad = BAD_LINES[which]
    first = bad.startswith(b"{")
    path.write_bytes(bad + good_line(2) if first else good_line(0) + bad)
    for extra in ((), ("--json",)):
        code, out, err, _ = run_child("snapshot", "--replay", str(path), *extra)
        assert "Traceback" not in err and code == 0, err[-2000:]
        assert ("line 1" if first else "line 2") in out + err


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_never_reach_the_json_we_write(tmp_path: Path, constant: str) -> None:
    text = good_line(0).decode().replace('"power_w":', f'"power_w":{constant},"was":', 1)
    path = tmp_path / "nan.ndjson"
    path.write_text(text, encoding="utf-8")

    def strict(name: str) -> float:
        raise ValueError(f"non-standard JSON constant {name}")

    rec = read_recording(path)
    out = snapshot_json.dumps(rec.snapshots[0])
    document = json.loads(out, parse_constant=strict)
    chip = document["chips"][0]
    assert chip["power_w"] is None
    assert "power_w" in chip["unavailable"]
    code, out, err, _ = run_child("snapshot", "--replay", str(path), "--json")
    assert code == 0, err
    assert json.loads(out, parse_constant=strict)["chips"][0]["power_w"] is None
    assert not math.isnan(0.0)


def test_a_non_finite_number_from_a_live_probe_is_written_as_null_never_as_nan():
    """The JSON npuwatch writes is strict whatever a probe produced (``allow_nan=False``)."""
    import json as strict_json
    from dataclasses import replace as with_fields
    from datetime import datetime as _datetime
    from datetime import timezone as _timezone

    from npuwatch import snapshot_json as writer
    from npuwatch.model import ChipIdentity, ChipSample, Snapshot

    chip = ChipSample(ChipIdentity(0, 0, name="910B3"))
    chip = with_fields(chip, power_w=float("nan"), aicore_percent=-float("inf"))
    snapshot = Snapshot(_datetime(2026, 1, 1, tzinfo=_timezone.utc), "demo:idle", chips=(chip,))
    text = writer.dumps(snapshot, indent=None)

    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    doc = strict_json.loads(text, parse_constant=refuse)
    assert doc["chips"][0]["power_w"] is None and doc["chips"][0]["aicore_percent"] is None


# --- issue 27, 7: a replay seeks in its file, memory does not grow with its size --------------------


def _long_recording(path: Path, size_bytes: int, gzip: bool = False) -> int:
    """A recording of one snapshot repeated a second apart, ``size_bytes`` long; its line count."""
    template = good_line(0)
    stamp = BASE.taken_at.isoformat().encode("ascii")
    assert template.count(stamp) == 1
    start = BASE.taken_at.timestamp()
    from datetime import datetime, timezone

    lines = size_bytes // len(template)
    block: list = []
    deflate = zlib.compressobj(1, zlib.DEFLATED, 31) if gzip else None
    with open(path, "wb") as out:
        for n in range(lines):
            when = datetime.fromtimestamp(start + n, timezone.utc).isoformat().encode("ascii")
            block.append(template.replace(stamp, when))
            if len(block) == 256 or n == lines - 1:
                data = b"".join(block)
                out.write(deflate.compress(data) if deflate else data)
                block.clear()
        if deflate is not None:
            out.write(deflate.flush())
    return lines


def _replay_peak_bytes(path: Path) -> Tuple[int, float]:
    """tracemalloc's peak while a replay of ``path`` opens, indexes, seeks to its middle and
    shows that sample; and the sample's offset into the recording."""
    import time
    import tracemalloc

    from npuwatch.replay import ReplaySampler

    tracemalloc.start()
    try:
        with ReplaySampler.open(path) as replay:
            deadline = time.monotonic() + DEADLINE_S
            while not getattr(replay, "indexed", True) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert getattr(replay, "indexed", True)
            replay.pause()
            replay.seek_to(replay.duration_s / 2)
            shown = replay.sample()
            offset_s = (shown.taken_at - BASE.taken_at).total_seconds()
        return tracemalloc.get_traced_memory()[1], offset_s
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_a_sample_from_a_large_recording_costs_no_more_memory_than_from_a_small_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gzip: bool
) -> None:
    """Seen: one sample of a 1 GB recording took 1.26 GB (every snapshot parsed and held).
    Ten times the file, the same memory within a margin: the replay holds an index, not the file
    (the cache of recent snapshots is made small here so that it is not what is measured)."""
    from npuwatch import replay as replay_module

    monkeypatch.setattr(replay_module, "CACHE_BYTES", 1 << 20, raising=False)
    small, large = tmp_path / "small.ndjson", tmp_path / "large.ndjson"
    if gzip:
        small, large = small.with_suffix(".ndjson.gz"), large.with_suffix(".ndjson.gz")
    small_lines = _long_recording(small, 10 << 20, gzip)
    large_lines = _long_recording(large, 100 << 20, gzip)
    small_peak, small_at = _replay_peak_bytes(small)
    large_peak, large_at = _replay_peak_bytes(large)
    assert small_at == pytest.approx((small_lines - 1) / 2, abs=1)  # the middle, by the recorded time
    assert large_at == pytest.approx((large_lines - 1) / 2, abs=1)
    assert large_peak < 1.5 * small_peak + (4 << 20), (small_peak, large_peak)


def test_a_replay_skips_an_over_long_line_without_holding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's index reads lines as any reading does: one past ``MAX_LINE_BYTES`` is
    skipped, named, and never held (here 64 KiB stands for the 16 MiB limit)."""
    from npuwatch.replay import ReplaySampler

    monkeypatch.setattr(recording, "MAX_LINE_BYTES", 64 << 10)
    path = tmp_path / "long.ndjson"
    path.write_bytes(good_line(0) + b'{"taken_at": "' + b"x" * (200 << 10) + b'"}\n' + good_line(1))
    with ReplaySampler.open(path) as replay:
        replay.pause()
        replay.seek_to(replay.duration_s)
        shown = replay.sample()
    assert replay.duration_s == 1.0
    assert (shown.taken_at - BASE.taken_at).total_seconds() == 1.0
    assert any("line 2" in w and "longer than" in w for w in shown.warnings), shown.warnings
