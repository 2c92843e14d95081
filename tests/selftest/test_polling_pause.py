"""The cross-process pause marker: counts while its process lives and before its expiry, never after."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from npuwatch import polling_pause
from npuwatch.selftest import run_selftest
from tests.selftest.helpers import fake_env


def test_no_folder_means_not_paused(tmp_path):
    assert polling_pause.is_paused({"XDG_RUNTIME_DIR": str(tmp_path)}) is False


def test_pause_counts_only_inside_the_block(tmp_path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    with polling_pause.pause(30, env) as hold:
        assert polling_pause.is_paused(env)
        (active,) = polling_pause.active_pauses(env)
        assert active.pid == os.getpid() and active.expires_at > time.time() + 25
        hold.extend(100)
        assert polling_pause.active_pauses(env)[0].expires_at > time.time() + 95
    assert not polling_pause.is_paused(env)
    assert list((tmp_path / "npuwatch").iterdir()) == []


def test_another_process_sees_the_pause(tmp_path):
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    code = "from npuwatch.polling_pause import is_paused; print(is_paused())"
    with polling_pause.pause(30, env):
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
    assert out.stdout.strip() == "True"


def test_expired_or_dead_markers_do_not_count(tmp_path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    folder = polling_pause.marker_dir(env)
    folder.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (folder / f"pause-{int(dead.stdout)}-{int(time.time()) + 600}").touch()
    (folder / f"pause-{os.getpid()}-{int(time.time()) - 5}").touch()
    (folder / "unrelated").touch()
    assert not polling_pause.is_paused(env)
    with polling_pause.pause(10, env):  # taking a pause clears the stale markers
        pass
    assert sorted(p.name for p in folder.iterdir()) == ["unrelated"]


def test_selftest_holds_the_pause_while_it_runs(tmp_path):
    seen = []
    env = fake_env(tmp_path)
    run_selftest(
        [0],
        environ=env,
        timeout_s=30,
        on_progress=lambda device, event: seen.append(polling_pause.is_paused(env)),
    )
    assert seen and all(seen)
    assert not polling_pause.is_paused(env)
