"""``npuwatch record`` never loses data (issue 14, defect 13).

It refuses to replace an existing file without ``--force``, recognises the file being replayed by
identity (not by how its path is spelt), and reports a full disk as such: exit 1 and what was kept.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable, List

import pytest

from npuwatch import recording as recording_module
from npuwatch.cli import EXIT_USAGE, main
from npuwatch.recording import read_recording
from tests.conftest import CAPTURES

CAPTURE = str(next(CAPTURES.glob("044_*.txt")))
FAST = ["--replay", CAPTURE, "--interval", "0.05", "--duration", "0.3"]


@pytest.fixture(autouse=True)
def _crash_reports_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _record(tmp_path: Path, name: str, *extra: str) -> Path:
    path = tmp_path / name
    assert main(["record", str(path), *FAST, "--quiet", *extra]) == 0
    return path


def test_record_refuses_to_replace_a_file_without_force(tmp_path, capsys):
    path = tmp_path / "precious.ndjson"
    path.write_text("my data\n", encoding="utf-8")
    code = main(["record", str(path), *FAST])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert str(path) in err and "--force" in err
    assert path.read_text(encoding="utf-8") == "my data\n"


def test_record_force_replaces_the_file(tmp_path, capsys):
    path = tmp_path / "old.ndjson"
    path.write_text("my data\n", encoding="utf-8")
    assert main(["record", str(path), *FAST, "--force"]) == 0
    assert read_recording(path).snapshots


def test_record_refuses_the_replayed_file_however_its_path_is_spelt(tmp_path, monkeypatch, capsys):
    (tmp_path / "rec").mkdir()
    source = _record(tmp_path / "rec", "x.ndjson")
    before = source.read_bytes()
    monkeypatch.chdir(tmp_path)
    link = tmp_path / "link.ndjson"
    link.symlink_to(source)
    hard = tmp_path / "hard.ndjson"
    os.link(source, hard)
    for target, replay in [
        ("./rec/x.ndjson", "rec/x.ndjson"),
        ("rec/../rec/x.ndjson", str(source)),
        (str(link), "rec/x.ndjson"),
        (str(hard), "rec/x.ndjson"),
    ]:
        for force in ([], ["--force"]):
            code = main(["record", target, "--replay", replay, "--duration", "0.2", *force])
            err = capsys.readouterr().err
            assert code == EXIT_USAGE, (target, replay, force, err)
            assert "--replay" in err
    assert source.read_bytes() == before


def _disk_fills_after(lines: int) -> Callable[[int, bytes], int]:
    """An ``os.write`` that takes ``lines`` whole writes and half the next, then fails as a full disk does."""
    real = os.write
    calls: List[int] = [0]

    def write(fd: int, data: bytes) -> int:
        calls[0] += 1
        if calls[0] <= lines:
            return real(fd, data)
        if calls[0] == lines + 1:
            return real(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


@pytest.mark.parametrize("name", ["full.ndjson", "full.ndjson.gz"])
def test_a_full_disk_is_reported_with_what_was_kept(name, tmp_path, monkeypatch, capsys):
    path = tmp_path / name
    monkeypatch.setattr(recording_module.os, "write", _disk_fills_after(3))
    code = main(["record", str(path), "--replay", CAPTURE, "--interval", "0.05", "--duration", "5"])
    err = capsys.readouterr().err
    monkeypatch.undo()
    assert code == 1, err
    assert "No space left on device" in err
    assert "internal error" not in err and "Traceback" not in err
    kept = read_recording(path)
    assert len(kept.snapshots) == 3
    assert "3 snapshots" in err
    assert not [w for w in kept.warnings if "incomplete" in w or "damaged" in w]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("name", ["full.ndjson", "full.ndjson.gz"])
def test_recording_into_dev_full_exits_1_with_the_summary(name, tmp_path):
    path = tmp_path / name
    path.symlink_to("/dev/full")
    child = subprocess.run(
        [sys.executable, "-m", "npuwatch", "record", str(path), *FAST],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert child.returncode == 1, child.stderr
    assert "No space left on device" in child.stderr
    assert "0 snapshots" in child.stderr
    assert "internal error" not in child.stderr and "Traceback" not in child.stderr
