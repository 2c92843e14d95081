"""A source that names nothing usable is a usage error (exit 64, one line) in every command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from npuwatch.cli import EXIT_USAGE, main

NPUWATCH = Path(sys.executable).parent / "npuwatch"
#: Commands that read a machine, with what makes each one run briefly when it does start.
READING_COMMANDS = {
    "snapshot": ["snapshot"],
    "live": ["--plain"],
    "record": ["record", "{tmp}/out.ndjson", "--duration", "0.1"],
    "serve": ["serve", "--listen", "127.0.0.1:0"],
    "doctor": ["doctor"],
    "check": ["check"],
    "selftest": ["selftest"],
}


def _argv(name: str, tmp_path: Path) -> list[str]:
    return [word.replace("{tmp}", str(tmp_path)) for word in READING_COMMANDS[name]]


@pytest.mark.parametrize("command", sorted(READING_COMMANDS))
def test_a_root_that_is_not_a_folder_is_exit_64_in_every_command(command, tmp_path, capsys):
    code = main([*_argv(command, tmp_path), "--root", str(tmp_path / "nonexistent")])
    captured = capsys.readouterr()
    assert code == EXIT_USAGE, captured
    assert f"--root {tmp_path / 'nonexistent'}: no such directory" in captured.err
    assert "internal error" not in captured.err


def test_a_root_that_is_a_file_says_so(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert main(["snapshot", "--root", str(a_file)]) == EXIT_USAGE
    assert f"--root {a_file}: not a directory" in capsys.readouterr().err


def test_npuwatch_root_names_the_variable_not_the_option(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NPUWATCH_ROOT", str(tmp_path / "gone"))
    assert main(["snapshot"]) == EXIT_USAGE
    assert f"NPUWATCH_ROOT={tmp_path / 'gone'}: no such directory" in capsys.readouterr().err


REPLAYING_COMMANDS = ("snapshot", "live", "record", "serve")


@pytest.fixture
def random_file(tmp_path) -> Path:
    path = tmp_path / "random.bin"
    path.write_bytes(bytes(range(256)) * 16)
    return path


@pytest.mark.parametrize("command", REPLAYING_COMMANDS)
def test_a_file_that_is_neither_a_recording_nor_a_capture_is_exit_64(command, random_file, tmp_path, capsys):
    code = main([*_argv(command, tmp_path), "--replay", str(random_file)])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert f"--replay {random_file}: neither a recording made by `npuwatch record`" in err
    assert "nor a saved `npu-smi info` output" in err
    assert "doctor" not in err


def test_some_other_text_file_is_not_a_capture_either(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\nthis is not npu-smi\n")
    assert main(["snapshot", "--replay", str(notes)]) == EXIT_USAGE
    assert "no chip table in it" in capsys.readouterr().err


def test_a_saved_npu_smi_error_text_still_replays_as_the_failure_it_was(tmp_path, capsys):
    saved = tmp_path / "failed.txt"
    saved.write_text("dcmi module initialize failed. ret is -8005\n")
    code = main(["snapshot", "--replay", str(saved)])
    assert code == 1  # no NPU could be read: explained, not a usage error
    assert "-8005" in capsys.readouterr().err


@pytest.mark.parametrize("command", REPLAYING_COMMANDS)
def test_a_directory_given_to_replay_says_so(command, tmp_path, capsys):
    folder = tmp_path / "recordings"
    folder.mkdir()
    assert main([*_argv(command, tmp_path), "--replay", str(folder)]) == EXIT_USAGE
    assert f"--replay {folder}: a directory, not a file" in capsys.readouterr().err


def test_the_live_view_refuses_a_random_file_before_showing_anything(random_file, tmp_path):
    """The live view (here its plain form: stdout is a pipe) must not open empty with "no alerts"."""
    proc = subprocess.run(
        [str(NPUWATCH), "--replay", str(random_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == EXIT_USAGE
    assert "neither a recording" in proc.stderr
