"""Hostile cases about the processes npuwatch starts and how npuwatch ends (issue 14: 1, 3, 15, 19, 20).

Every case uses a fake npu-smi written by the test under its own ``tmp_path`` (directly with
``--npu-smi FAKE``, or as the demo's npu-smi with ``TMPDIR=tmp_path``), so a process whose
command line holds that path is one the case started: after each case none may be left.
Nothing asserts how long anything took; waits are generous deadlines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import psutil
import pytest

from npuwatch.doctor.engine import check_timeout_s
from npuwatch.doctor.result import Check, Finding, Group, Status
from npuwatch.probes import runner
from npuwatch.probes.npu_smi import FailureKind, NpuSmi, NpuSmiError
from npuwatch.probes.runner import run
from npuwatch.probes.simulator.machine import Simulation
from tests.widgets.test_tui_tmux import NPUWATCH, Terminal, terminal  # noqa: F401 (a fixture)

DEADLINE_S = 60.0
_TABLE_LINE = (
    "| 0     910B3               | OK            | 93.6        38                0    / 0             |"
)


def _fake(folder: Path, body: str, name: str = "npu-smi") -> Path:
    """A /bin/sh npu-smi; ``"$0" child`` re-runs it, so every process of the tree names its path."""
    path = folder / name
    path.write_text(f'#!/bin/sh\nif [ "$1" = child ]; then while :; do sleep 1; done; fi\n{body}\n')
    path.chmod(0o755)
    return path


def _marked(marker: str) -> List[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or ())
            if marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE and proc.pid != os.getpid():
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"never saw {what}")


def _assert_none_left(marker: str) -> None:
    """No process naming ``marker`` (SIGKILL is at once, the kernel's reaping may take a moment)."""
    left: List[psutil.Process] = []
    for _ in range(50):
        left = _marked(marker)
        if not left:
            return
        time.sleep(0.1)
    described = [" ".join(p.cmdline()) for p in left if p.is_running()]
    for proc in left:  # never leak into the next test
        with contextlib.suppress(psutil.Error):
            proc.kill()
    pytest.fail(f"left running: {described}")


@pytest.fixture
def marker(tmp_path) -> Iterator[str]:
    """The case's unique path; whatever still names it at the end is killed (and the case fails)."""
    yield str(tmp_path)
    for proc in _marked(str(tmp_path)):
        with contextlib.suppress(psutil.Error):
            proc.kill()


def _environ(tmp_path: Path) -> Dict[str, str]:
    """The environment of an npuwatch under test: demo trees go to the case's own temp folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NPUWATCH_"))}
    temp = tmp_path / "temp"
    temp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(temp)
    return env


def _npu_smi_in_flight(marker: str) -> Callable[[], bool]:
    return lambda: any("npu-smi" in " ".join(p.cmdline()) for p in _marked(marker) if p.is_running())


# --- 1: nothing npuwatch starts outlives it ---------------------------------------------------------


def _dcmi_worker_in_flight(marker: str) -> Callable[[], bool]:
    return lambda: any("npuwatch.probes.dcmi.worker" in " ".join(p.cmdline()) for p in _marked(marker))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["q", "SIGTERM", "SIGHUP", "SIGINT"])
@pytest.mark.parametrize(
    ("scenario", "backend", "hung"),
    [("npu-smi-hang", "npu-smi", "npu-smi"), ("dcmi-hang", "dcmi", "DCMI worker")],
)
def test_quitting_the_dashboard_while_the_chip_source_hangs_leaves_nothing(
    terminal,  # noqa: F811
    tmp_path,
    marker,
    how,
    scenario,
    backend,
    hung,
):
    env = _environ(tmp_path)
    program = ["env", f"TMPDIR={env['TMPDIR']}", str(NPUWATCH), "--demo", scenario, "--backend", backend]
    terminal.start([*program, "--timeout", "30"], 120, 40)
    terminal.wait_text(f"demo:{scenario}")
    in_flight = _npu_smi_in_flight(marker) if backend == "npu-smi" else _dcmi_worker_in_flight(marker)
    _wait_for(in_flight, f"the hung {hung}")
    if how == "q":
        terminal.keys("q")
    else:
        pane = int(terminal.tmux("display-message", "-p", "-t", "main", "#{pane_pid}").stdout)
        dashboard = next(
            p for p in psutil.Process(pane).children(recursive=True) if "npuwatch" in " ".join(p.cmdline())
        )
        dashboard.send_signal(getattr(signal, how))
    terminal.wait_exit()
    _assert_none_left(marker)


def _start(argv: List[str], tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(NPUWATCH), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_environ(tmp_path),
    )


def _stop(proc: subprocess.Popen, signum: int) -> tuple:
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"npuwatch did not end on signal {signum}: {err.decode(errors='replace')}")
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_doctor_while_npu_smi_hangs_leaves_no_npu_smi(tmp_path, marker, signum):
    proc = _start(["doctor", "--demo", "npu-smi-hang", "--timeout", "30"], tmp_path)
    _wait_for(_npu_smi_in_flight(marker), "the hung npu-smi")
    _stop(proc, signum)
    _assert_none_left(marker)


def _wait_listening(proc: subprocess.Popen) -> None:
    """Wait for serve's start-up line: from then on its own handler answers SIGTERM with exit 0
    (a signal before it, while the feed opens, ends serve with 128 + SIGTERM, as every command)."""
    import select

    seen, end = b"", time.monotonic() + DEADLINE_S
    assert proc.stdout is not None
    while b"listening on" not in seen:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, end - time.monotonic()))
        chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
        if not chunk:
            pytest.fail(f"serve printed no start-up line: {seen.decode(errors='replace')}")
        seen += chunk


def test_serve_with_a_long_timeout_stops_on_sigterm_without_leaving_npu_smi(tmp_path, marker):
    argv = ["serve", "--demo", "npu-smi-hang", "--timeout", "30", "--listen", "127.0.0.1:0"]
    proc = _start(argv, tmp_path)
    _wait_listening(proc)
    _wait_for(_npu_smi_in_flight(marker), "the hung npu-smi")
    code, _out, err = _stop(proc, signal.SIGTERM)
    assert code == 0, err
    _assert_none_left(marker)


def test_the_runner_kills_every_live_child_when_asked(tmp_path, marker):
    """What npuwatch's exit (atexit, the signal handlers) relies on, for a thread blocked in run()."""
    import threading

    fake = _fake(tmp_path, 'sleep 300 & "$0" child & wait')
    results: List[runner.RunResult] = []
    worker = threading.Thread(target=lambda: results.append(run([str(fake), "info"], 300)), daemon=True)
    worker.start()
    _wait_for(lambda: len(_marked(marker)) >= 2, "the fake and its child")
    runner.kill_all()
    worker.join(DEADLINE_S)
    assert not worker.is_alive(), "the thread blocked in run() was not released"
    assert results and results[0].exit_code is None
    _assert_none_left(marker)


# --- 3: runaway output ------------------------------------------------------------------------------


# The child's own peak (VmHWM of its address space): ``ru_maxrss`` would also carry the peak of the
# process it was forked from before its exec (Linux keeps it across execve), here pytest's own.
_PEAK = """
import sys
from npuwatch.probes.npu_smi import NpuSmi, NpuSmiError
from pathlib import Path
try:
    NpuSmi(Path(sys.argv[1]), timeout_s=5).info()
    print("no-error")
except NpuSmiError as exc:
    print(exc.failure.kind.value, "|", exc.failure.message)
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
"""


def test_an_npu_smi_that_never_stops_printing_is_cut_off_as_too_large(tmp_path, marker):
    fake = _fake(tmp_path, f"exec yes '{_TABLE_LINE}'")
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(fake)], capture_output=True, text=True, timeout=DEADLINE_S
    )
    assert done.returncode == 0, done.stderr
    verdict, peak_kib = done.stdout.strip().splitlines()
    assert verdict.startswith("too-large |"), verdict
    assert "too large" in verdict or "more than" in verdict
    assert int(peak_kib) < 300 * 1024  # well under the GiBs of an uncapped read
    _assert_none_left(marker)


def test_runaway_output_stops_the_run_at_the_cap_not_the_timeout(tmp_path, marker):
    fake = _fake(tmp_path, f"exec yes '{_TABLE_LINE}'")
    result = run([str(fake), "info"], timeout_s=120)  # the cap, not this timeout, must end it
    assert result.too_large and not result.timed_out
    assert len(result.stdout.encode()) <= runner.MAX_OUTPUT_BYTES
    with pytest.raises(NpuSmiError) as info:
        NpuSmi(fake, timeout_s=120).info()
    assert info.value.failure.kind is FailureKind.TOO_LARGE
    _assert_none_left(marker)


# --- 15: a grandchild that leaves the group ---------------------------------------------------------


def test_a_grandchild_in_its_own_session_is_killed_with_a_hung_npu_smi(tmp_path, marker):
    fake = _fake(tmp_path, 'setsid "$0" child & echo started; sleep 300')
    result = run([str(fake), "info"], timeout_s=0.5)
    assert result.timed_out and result.stdout == "started\n"
    # The escaped grandchild holds the pipes for 300 s and is not waited on (a hang, not a
    # speed, is what this bounds).
    assert result.duration_s < 60
    _assert_none_left(marker)


def test_a_double_forked_daemon_holding_the_pipe_is_killed_at_the_timeout(tmp_path, marker):
    # The middle process exits at once: the daemon is reparented to init, in its own session.
    fake = _fake(tmp_path, '( setsid "$0" child & ) ; sleep 300')
    result = run([str(fake), "info"], timeout_s=0.5)
    assert result.timed_out
    _assert_none_left(marker)


def test_the_doctor_gives_an_npu_smi_check_the_runner_s_worst_case():
    check = Check(
        id="x", group=Group.DRIVER, title="t", run=lambda m: Finding(Status.PASS, "ok"), runs_npu_smi=True
    )

    class _Machine:
        timeout_s = 1.0

    assert check_timeout_s(check, _Machine()) > runner.worst_case_s(1.0)  # type: ignore[arg-type]


def test_the_doctor_reports_a_hung_npu_smi_with_an_escaped_grandchild_as_a_failure(tmp_path, marker):
    with Simulation.start("910b-training", workdir=tmp_path / "tree") as sim:
        npu_smi = sim.npu_smi
        npu_smi.unlink()
        npu_smi.write_text('#!/bin/sh\nif [ "$1" = child ]; then while :; do sleep 1; done; fi\n'
                           'setsid "$0" child & sleep 300\n')  # fmt: skip
        npu_smi.chmod(0o755)
        argv = ["doctor", "--root", str(sim.root), "--trust-root", "--only", "npu-smi", "--timeout", "1"]
        done = subprocess.run(
            [str(NPUWATCH), *argv], capture_output=True, text=True, timeout=DEADLINE_S, env=_environ(tmp_path)
        )
    assert "did not finish within" not in done.stdout, done.stdout
    assert "did not answer within 1" in done.stdout, done.stdout
    assert done.returncode == 2, done.stdout
    _assert_none_left(marker)


# --- 19: a stop by signal after a clean close is exit 0 ---------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["TERM", "HUP", "INT"])
def test_record_stopped_by_a_signal_closes_the_file_and_exits_0(tmp_path, marker, signum):
    recording = tmp_path / "rec.ndjson"
    proc = _start(["record", str(recording), "--demo", "--interval", "0.2"], tmp_path)
    _wait_for(lambda: recording.exists() and recording.read_text().count("\n") >= 2, "two recorded lines")
    code, _out, err = _stop(proc, signum)
    assert code == 0, err
    assert "snapshots" in err and "Traceback" not in err
    assert recording.read_text().endswith("\n")
    _assert_none_left(marker)


def test_serve_stopped_by_sighup_exits_0(tmp_path, marker):
    proc = _start(["serve", "--demo", "--listen", "127.0.0.1:0"], tmp_path)
    assert proc.stdout is not None
    assert "listening on" in proc.stdout.readline().decode()
    code, _out, err = _stop(proc, signal.SIGHUP)
    assert code == 0, err
    _assert_none_left(marker)


# --- 20: killed demos leave no tree behind ----------------------------------------------------------


def _demo_trees(temp: Path) -> List[Path]:
    return sorted(temp.glob("npuwatch-demo-*"))


def _owner_named(tree: Path) -> bool:
    try:
        return (tree / "owner.pid").read_text().strip().isdigit()
    except OSError:
        return False


def test_a_demo_killed_with_sigkill_has_its_tree_swept_by_the_next_run(tmp_path, marker):
    env = _environ(tmp_path)
    temp = Path(env["TMPDIR"])
    proc = subprocess.Popen(
        [str(NPUWATCH), "--demo", "--plain"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    # The demo names its owner right after making the tree: wait for that, so the kill lands
    # while the demo runs (a kill between the two leaves a tree no sweep may touch).
    _wait_for(lambda: any(_owner_named(tree) for tree in _demo_trees(temp)), "the demo's tree and owner")
    proc.kill()
    proc.wait(DEADLINE_S)
    (killed,) = _demo_trees(temp)
    done = subprocess.run(
        [str(NPUWATCH), "snapshot", "--demo"], capture_output=True, text=True, timeout=DEADLINE_S, env=env
    )
    assert done.returncode == 0, done.stderr
    assert not killed.exists()
    assert _demo_trees(temp) == []
    _assert_none_left(marker)


def test_the_sweep_keeps_trees_of_running_demos_and_foreign_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    first = Simulation.start("910b-training")
    try:
        stray = tmp_path / "npuwatch-demo-910b-training-notours"
        stray.mkdir()  # no owner file: not a tree npuwatch made, never removed
        dead = tmp_path / "npuwatch-demo-910b-training-dead"
        dead.mkdir()
        (dead / "owner.pid").write_text(f"{_dead_pid()}\n")
        with Simulation.start("910b-training"):
            assert first.root.exists(), "a running demo's tree was swept"
            assert stray.exists()
            assert not dead.exists()
    finally:
        first.close()


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
