"""Tests for the one subprocess runner: output, exit codes, timeouts that kill the group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from npuwatch.probes.runner import LaunchError, run


def _script(tmp_path: Path, body: str, name: str = "tool") -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_captures_stdout_stderr_and_exit_code(tmp_path):
    tool = _script(tmp_path, "echo out; echo err >&2; exit 3")
    result = run([str(tool)], timeout_s=5)
    assert (result.stdout, result.stderr, result.exit_code, result.timed_out) == (
        "out\n",
        "err\n",
        3,
        False,
    )


def test_timeout_kills_the_whole_process_group_and_leaves_no_orphan(tmp_path):
    marker = tmp_path / "child.pid"
    # The tool forks a grandchild that would outlive a plain kill of the parent.
    tool = _script(tmp_path, f"sleep 60 & echo $! > {marker}; echo started; wait")
    result = run([str(tool)], timeout_s=0.5)
    assert result.timed_out
    assert result.exit_code is None
    assert result.stdout == "started\n"  # output printed before the kill is kept
    grandchild = int(marker.read_text())
    # SIGKILL is delivered at once, but the kernel may take a moment to mark the process dead.
    for _ in range(40):
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_missing_binary_is_a_launch_error(tmp_path):
    with pytest.raises(LaunchError) as info:
        run([str(tmp_path / "nope")], timeout_s=1)
    assert info.value.errno_name == "ENOENT"


def test_not_executable_is_a_permission_launch_error(tmp_path):
    # A directory cannot be executed even by root, so this holds for every user.
    with pytest.raises(LaunchError) as info:
        run([str(tmp_path)], timeout_s=1)
    assert info.value.errno_name == "EACCES"


def test_not_a_program_is_a_launch_error(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x7fELF\x00garbage")
    junk.chmod(0o755)
    with pytest.raises(LaunchError) as info:
        run([str(junk)], timeout_s=1)
    assert info.value.errno_name == "ENOEXEC"


def test_undecodable_output_is_replaced_not_raised(tmp_path):
    tool = tmp_path / "bin.py"
    tool.write_text(f"#!{sys.executable}\nimport sys; sys.stdout.buffer.write(b'ok\\xff\\xfe')\n")
    tool.chmod(0o755)
    assert run([str(tool)], timeout_s=5).stdout.startswith("ok")


def test_a_python_child_imports_the_installed_npuwatch_not_a_folder_in_the_current_directory(
    tmp_path, monkeypatch
):
    """A source checkout's npuwatch/ (without probes/ inside) must not shadow the installed package."""
    from npuwatch.probes.runner import python_module_argv

    shadow = tmp_path / "npuwatch"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('npuwatch/ of the current directory')\n")
    extra = tmp_path / "on-pythonpath"
    extra.mkdir()
    (extra / "marker_module.py").write_text("")
    monkeypatch.chdir(tmp_path)
    code = "import marker_module, npuwatch.probes.runner; print(npuwatch.probes.runner.__name__)"
    (extra / "child_probe.py").write_text(code + "\n")
    env = {**os.environ, "PYTHONPATH": str(extra)}  # PYTHONPATH (CANN's set_env.sh) is kept
    result = run(python_module_argv(sys.executable, "child_probe", []), 60, env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "npuwatch.probes.runner"
