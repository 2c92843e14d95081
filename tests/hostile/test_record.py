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
from tests.hostile.test_processes import _npu_smi_in_flight, marker  # noqa: F401 (a fixture)

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


# --- issue 27, 9: never through a link, one recorder per file, a replacement renamed into place ----

PASSWD_LIKE = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_a_link_to_a_file_is_refused_and_its_target_untouched(tmp_path, capsys, force):
    """Seen: ``record LINK --force`` overwrote the link's target (a copy of /etc/passwd)."""
    target = tmp_path / "passwd"
    target.write_text(PASSWD_LIKE, encoding="utf-8")
    link = tmp_path / "out.ndjson"
    link.symlink_to(target)
    code = main(["record", str(link), *FAST, *force])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert "symbolic link" in err and "Traceback" not in err
    assert target.read_text(encoding="utf-8") == PASSWD_LIKE
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "state") == ["out.ndjson", "passwd"]


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_a_dangling_link_is_refused_and_its_target_not_created(tmp_path, capsys, force):
    """Seen: ``record DANGLING`` created the file the link pointed to."""
    target = tmp_path / "elsewhere" / "made.ndjson"
    target.parent.mkdir()
    link = tmp_path / "out.ndjson"
    link.symlink_to(target)
    code = main(["record", str(link), *FAST, *force])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert "symbolic link to nothing" in err
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_a_link_made_after_the_check_is_still_not_written_through(tmp_path):
    """The writer's own open refuses a link (O_NOFOLLOW, O_EXCL), not only the command's check."""
    from npuwatch.recording import RecordingLinkError, RecordingWriter

    target = tmp_path / "passwd"
    target.write_text(PASSWD_LIKE, encoding="utf-8")
    link = tmp_path / "out.ndjson"
    link.symlink_to(target)
    for overwrite in (False, True):
        with pytest.raises(RecordingLinkError):
            RecordingWriter(link, overwrite=overwrite)
    assert target.read_text(encoding="utf-8") == PASSWD_LIKE
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "state") == ["out.ndjson", "passwd"]


def _recorder(path: Path, tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "record", str(path), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(tmp_path)},
    )


def _lines(path: Path) -> int:
    try:
        return len(read_recording(path).snapshots)
    except recording_module.RecordingError:
        return 0


def _wait(condition: Callable[[], bool], what: str) -> None:
    import time

    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"never saw {what}")


def test_two_force_recorders_of_one_file_the_second_is_refused(tmp_path):
    """Seen: two ``record --force`` runs on one file both reported success while the first wrote
    into a file the second had replaced (its samples lost)."""
    import signal

    path = tmp_path / "shared.ndjson"
    path.write_text("old\n", encoding="utf-8")
    first = _recorder(path, tmp_path, "--force", "--replay", CAPTURE, "--interval", "0.05")
    try:
        _wait(lambda: _lines(path) >= 2, "the first recorder's lines")
        second = _recorder(path, tmp_path, "--force", "--replay", CAPTURE, "--interval", "0.05")
        _out, err2 = second.communicate(timeout=60)
        assert second.returncode == 1, err2
        assert "is being recorded by another npuwatch" in err2 and "Traceback" not in err2
        first.send_signal(signal.SIGTERM)
        _out, err1 = first.communicate(timeout=60)
    finally:
        for proc in (first,):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert first.returncode == 0, err1
    kept = len(read_recording(path).snapshots)
    assert f"npuwatch record: {kept} snapshots" in err1  # every sample it counted is in the file
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no lock, no part


def _writing(pid: int, name: str) -> bool:
    """Whether process ``pid`` holds open a file named after ``name`` (not its lock)."""
    import psutil

    try:
        files = psutil.Process(pid).open_files()
    except psutil.Error:
        return False
    return any(name in Path(f.path).name and not f.path.endswith(".lock") for f in files)


def test_a_force_replacement_killed_at_any_moment_leaves_a_valid_file(tmp_path, marker):  # noqa: F811
    """``--force`` writes beside the old file and renames at the first line: killed before it,
    the old recording is whole; killed after, the new one replays."""
    import signal

    old = _record(tmp_path, "old.ndjson")
    path = tmp_path / "rec.ndjson"
    old.rename(path)
    before = path.read_bytes()
    # A source that never answers: no first line, so the old file must still be there, whole.
    hung = _recorder(
        path, tmp_path, "--force", "--demo", "npu-smi-hang", "--backend", "npu-smi", "--timeout", "60"
    )
    try:
        _wait(lambda: _writing(hung.pid, path.name), "the recorder's output open")
        _wait(_npu_smi_in_flight(marker), "the recorder's first sample under way")
    finally:
        hung.send_signal(signal.SIGKILL)
        hung.communicate(timeout=60)
    assert path.read_bytes() == before
    live = _recorder(path, tmp_path, "--force", "--replay", CAPTURE, "--interval", "0.05")
    try:
        _wait(lambda: path.read_bytes() != before and _lines(path) >= 2, "the replacement in place")
    finally:
        live.send_signal(signal.SIGKILL)
        live.communicate(timeout=60)
    assert _lines(path) >= 2
    assert not [w for w in read_recording(path).warnings if "damaged" in w]
