"""Gates run as tests so the one README command covers them: ruff, ruff format, mypy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, need

SOURCES = ["npuwatch", "probes", "widgets", "tests", "benchmarks"]


def _tool(name: str) -> str:
    found = Path(sys.executable).parent / name
    path = str(found) if found.exists() else shutil.which(name)
    need(path is not None, f"{name} is not installed (pip install -e '.[test]')")
    assert path is not None
    return path


def test_ruff_check_is_clean():
    out = subprocess.run([_tool("ruff"), "check", *SOURCES], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_is_clean():
    out = subprocess.run(
        [_tool("ruff"), "format", "--check", *SOURCES], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_is_clean(tmp_path):
    # mypy cannot follow setuptools' package-dir mapping (probes/ → npuwatch.probes), so it
    # checks a link farm laid out as the installed package is (docs/reference/aesthetics.md §6).
    farm = tmp_path / "npuwatch"
    farm.mkdir()
    for entry in (REPO / "npuwatch").iterdir():
        if entry.name != "__pycache__":
            (farm / entry.name).symlink_to(entry)
    (farm / "probes").symlink_to(REPO / "probes")
    (farm / "widgets").symlink_to(REPO / "widgets")
    env = {**os.environ, "MYPYPATH": str(tmp_path)}
    config = REPO / "pyproject.toml"
    out = subprocess.run(
        [
            _tool("mypy"),
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / ".mypy"),
            "-p",
            "npuwatch",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
