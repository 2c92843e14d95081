"""Where a demo's tree goes, and how fast its DCMI side starts (what comes before the first screen).

A demo's tree is temporary: it goes in the temp folder the user named (``TMPDIR``), else in a
RAM-backed folder when the machine has a usable one (``/dev/shm``: writable, not ``noexec``, with
room), else in the default temp folder; it is removed when the demo closes, and a killed demo's
tree is swept from either place.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from npuwatch.probes.simulator import demo_folders
from npuwatch.probes.simulator.machine import DEMO_PREFIX, OWNER_FILE, Simulation, demo_folder


@pytest.fixture
def no_temp_variables(monkeypatch):
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)


def test_a_named_temp_folder_is_used_even_when_a_ram_folder_is_usable(tmp_path):
    named = tmp_path / "named"
    named.mkdir()
    ram = tmp_path / "ram"
    ram.mkdir()
    assert demo_folder({"TMPDIR": str(named)}, ram_folder=str(ram)) == Path(tempfile.gettempdir())
    assert demo_folder({"TMP": "/somewhere"}, ram_folder=str(ram)) != ram


def test_without_a_named_temp_folder_a_usable_ram_folder_is_used(tmp_path):
    assert demo_folder({}, ram_folder=str(tmp_path)) == tmp_path


def test_a_ram_folder_that_is_absent_noexec_read_only_or_full_is_not_used(tmp_path, monkeypatch):
    default = Path(tempfile.gettempdir())
    assert demo_folder({}, ram_folder=str(tmp_path / "absent")) == default
    real = os.statvfs(tmp_path)
    noexec = getattr(os, "ST_NOEXEC", 8)
    for flag, free_blocks in ((noexec, real.f_bavail), (os.ST_RDONLY, real.f_bavail), (0, 1)):
        fake = SimpleNamespace(f_flag=real.f_flag | flag, f_bavail=free_blocks, f_frsize=real.f_frsize)
        monkeypatch.setattr(demo_folders.os, "statvfs", lambda path, fake=fake: fake)
        assert demo_folder({}, ram_folder=str(tmp_path)) == default, (flag, free_blocks)


def test_a_demo_without_a_named_temp_folder_lives_in_the_ram_folder_and_leaves_nothing(
    tmp_path, monkeypatch, no_temp_variables
):
    monkeypatch.setattr(demo_folders, "RAM_FOLDER", str(tmp_path))
    with Simulation.start("a3") as sim:
        assert sim.root.parent.parent == tmp_path
        assert (sim.root / "usr/local/bin/npu-smi").exists()
    assert list(tmp_path.glob(f"{DEMO_PREFIX}*")) == []


def test_a_killed_demos_tree_is_swept_from_the_default_temp_folder_too(tmp_path, monkeypatch):
    ram, default = tmp_path / "ram", tmp_path / "default"
    ram.mkdir()
    default.mkdir()
    monkeypatch.setattr(demo_folders, "demo_folder", lambda *args: ram)
    monkeypatch.setattr(demo_folders.tempfile, "gettempdir", lambda: str(default))
    left = [folder / f"{DEMO_PREFIX}a3-dead" for folder in (ram, default)]
    for tree in left:
        tree.mkdir()
        (tree / OWNER_FILE).write_text("999999999\n")  # no such process
    demo_folders.sweep_stale_demo_trees()
    assert [tree.exists() for tree in left] == [False, False]
