"""Recordings: NDJSON written line by line (plain and gzip) and read back, torn or damaged."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import List

import pytest

from npuwatch import snapshot_json
from npuwatch.model import Snapshot
from npuwatch.recording import RecordingError, RecordingWriter, is_recording, read_recording
from tests.conftest import CAPTURES
from tests.widgets.fakes import capture_snapshot

BASE = capture_snapshot("001")  # 8 × 910B2 with processes and a host


def series(count: int) -> List[Snapshot]:
    """``count`` snapshots one second apart whose chip 0 power counts up (distinct lines)."""
    out = []
    for i in range(count):
        chips = (replace(BASE.chips[0], power_w=100.0 + i), *BASE.chips[1:])
        out.append(replace(BASE, taken_at=BASE.taken_at + timedelta(seconds=i), chips=chips))
    return out


def write(path: Path, snapshots: List[Snapshot], compress: bool = False) -> None:
    with RecordingWriter(path, compress=compress) as writer:
        for snapshot in snapshots:
            writer.write(snapshot)


@pytest.mark.parametrize("name", ["rec.ndjson", "rec.ndjson.gz"])
def test_written_snapshots_read_back_identical(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    snapshots = series(5)
    write(path, snapshots, compress=name.endswith(".gz"))
    recording = read_recording(path)
    assert recording.warnings == ()
    assert [snapshot_json.to_dict(s) for s in recording.snapshots] == [
        snapshot_json.to_dict(s) for s in snapshots
    ]
    assert recording.duration_s == 4.0


def test_plain_file_is_one_schema_v1_object_per_line(tmp_path: Path) -> None:
    path = tmp_path / "rec.ndjson"
    write(path, series(3))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert [json.loads(line)["schema"] for line in lines] == ["npuwatch/snapshot/v1"] * 3
    assert [json.loads(line)["chips"][0]["power_w"] for line in lines] == [100.0, 101.0, 102.0]


def test_gzip_file_is_a_standard_gzip_stream(tmp_path: Path) -> None:
    path = tmp_path / "rec.ndjson.gz"
    write(path, series(3), compress=True)
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    assert [json.loads(line)["chips"][0]["power_w"] for line in lines] == [100.0, 101.0, 102.0]


def test_a_torn_last_line_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "rec.ndjson"
    write(path, series(3))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the third line lost its end, as a kill mid-write leaves it
    recording = read_recording(path)
    assert [s.chips[0].power_w for s in recording.snapshots] == [100.0, 101.0]
    assert recording.warnings == (
        "rec.ndjson: the last line is incomplete (the recorder stopped mid-write); ignored",
    )


def test_every_cut_of_a_gzip_recording_replays_its_complete_lines(tmp_path: Path) -> None:
    """A killed gzip recorder leaves no trailer and maybe half a block: whatever was flushed reads."""
    path = tmp_path / "rec.ndjson.gz"
    write(path, series(4), compress=True)
    data = path.read_bytes()
    cut_path = tmp_path / "cut.ndjson.gz"
    seen = set()
    for cut in range(20, len(data), max(1, len(data) // 60)):
        cut_path.write_bytes(data[:cut])
        try:
            recording = read_recording(cut_path)
        except RecordingError:
            continue  # not even the first line was flushed by this point
        powers = [s.chips[0].power_w for s in recording.snapshots]
        assert powers == [100.0 + i for i in range(len(powers))]
        seen.add(len(powers))
    assert seen >= {1, 2, 3}


def test_a_bad_line_in_the_middle_is_skipped_and_named(tmp_path: Path) -> None:
    path = tmp_path / "rec.ndjson"
    lines = [snapshot_json.dumps(s, indent=None) for s in series(3)]
    path.write_text("\n".join([lines[0], "{not json", lines[1], '{"schema": "other/v9"}', lines[2]]) + "\n")
    recording = read_recording(path)
    assert [s.chips[0].power_w for s in recording.snapshots] == [100.0, 101.0, 102.0]
    assert len(recording.warnings) == 2
    assert recording.warnings[0].startswith("rec.ndjson: line 2 is not a snapshot (JSONDecodeError")
    assert recording.warnings[1].startswith(
        "rec.ndjson: line 4 is not a snapshot (ValueError: not a npuwatch"
    )


def test_lines_out_of_time_order_play_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "rec.ndjson"
    write(path, list(reversed(series(3))))
    recording = read_recording(path)
    assert [s.chips[0].power_w for s in recording.snapshots] == [100.0, 101.0, 102.0]
    assert "out of time order" in recording.warnings[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "holds no complete snapshot"),
        (b"{torn", "holds no complete snapshot: rec.ndjson: the last line"),
    ],
)
def test_a_recording_without_a_complete_snapshot_is_a_clear_error(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "rec.ndjson"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=message):
        read_recording(path)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"cannot read the recording .*nope.ndjson: No such file"):
        read_recording(tmp_path / "nope.ndjson")


def test_an_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match=r"cannot write .*missing-dir/rec.ndjson: No such file"):
        RecordingWriter(tmp_path / "missing-dir" / "rec.ndjson")


def test_recordings_and_npu_smi_captures_are_told_apart(tmp_path: Path) -> None:
    plain, packed = tmp_path / "a.ndjson", tmp_path / "b.gz"
    write(plain, series(1))
    write(packed, series(1), compress=True)
    assert is_recording(plain) and is_recording(packed)
    assert not any(is_recording(capture) for capture in sorted(CAPTURES.glob("*.txt")))
    assert not is_recording(tmp_path / "missing")


def test_encoded_but_unwritten_gzip_data_leaves_the_stream_whole(tmp_path: Path) -> None:
    """`record --max-size` encodes a line, finds it too big and stops: the file must stay valid."""
    path = tmp_path / "rec.ndjson.gz"
    writer = RecordingWriter(path, compress=True)
    first, second = series(2)
    writer.write(first)
    writer.encode(second)  # never written
    writer.close()
    recording = read_recording(path)
    assert recording.warnings == ()
    assert [s.chips[0].power_w for s in recording.snapshots] == [100.0]
    assert gzip.decompress(path.read_bytes()).count(b"\n") == 1
