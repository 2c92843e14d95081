"""A demo's tree built by a forked child (``Simulation.begin``), as the dashboard starts it.

The child writes the same tree ``Simulation.start`` writes; ``wait()`` hands it over, raises
what building raised, or says in one line that the builder ended without an answer; ``close()``
on any path reaps the child and removes the tree unless ``wait()`` took it.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Dict, List

import pytest

from npuwatch.feeds import FeedOptions, OpeningFeed
from npuwatch.probes.simulator import DEFAULT_SCENARIO, machine
from npuwatch.probes.simulator.machine import DEMO_PREFIX, PendingSimulation, Simulation


@pytest.fixture
def demo_dir(tmp_path, monkeypatch) -> Path:
    """Demo trees go in ``tmp_path`` (the folder the user named)."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(machine, "demo_folder", lambda *args: tmp_path)
    return tmp_path


def _trees(folder: Path) -> List[Path]:
    return sorted(folder.glob(f"{DEMO_PREFIX}*"))


def _files(root: Path) -> Dict[str, str]:
    """Every file and link under ``root`` (path → what it is), the fake library's bytes left out."""
    found = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = "-> " + os.readlink(path)
        elif path.is_file():
            found[name] = f"file {oct(path.stat().st_mode & 0o777)}"
        else:
            found[name] = "dir"
    return found


def _no_child_left(pending: PendingSimulation) -> None:
    pid = pending._pid  # what the object still owns
    assert pid is None, f"child {pid} not reaped"


def test_the_forked_build_writes_the_same_machine_as_start_and_close_removes_it(demo_dir):
    with Simulation.start("a3") as started:
        expected = _files(started.root)
        expected_environ = dict(started.environ)
        kind = started.dcmi_kind
    pending = Simulation.begin("a3")
    try:
        sim = pending.wait()
    finally:
        pending.close()  # after wait(): nothing (the Simulation owns the tree)
    _no_child_left(pending)
    with sim:
        assert sim.root.is_dir()
        assert _files(sim.root) == expected
        assert sim.environ.keys() == expected_environ.keys()
        assert sim.dcmi_kind == kind
        assert sim.npu_smi == sim.root / "usr/local/bin/npu-smi"
        assert sim.npu_smi.exists()
        assert sim.scenario.name == "a3"
    assert _trees(demo_dir) == []


def test_a_single_threaded_caller_gets_a_child_and_close_before_wait_leaves_nothing(demo_dir):
    if threading.active_count() != 1:
        pytest.skip("another thread runs in this test process: the build is not forked")
    pending = Simulation.begin("a3")
    assert pending._pid is not None  # forked
    assert len(_trees(demo_dir)) == 1  # made before the child starts: close() always knows it
    pending.close()
    _no_child_left(pending)
    assert _trees(demo_dir) == []
    with pytest.raises(RuntimeError, match="closed before it was taken"):
        pending.wait()


def test_with_another_thread_running_the_tree_is_built_by_wait_itself(demo_dir):
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        pending = Simulation.begin("a3")
        assert pending._pid is None  # no fork beside a running thread
        with pending.wait() as sim:
            assert sim.npu_smi.exists()
        pending.close()
    finally:
        stop.set()
        other.join()
    assert _trees(demo_dir) == []


def test_what_building_raised_in_the_child_is_raised_by_wait_and_nothing_is_left(demo_dir, monkeypatch):
    def broken(*args: object) -> None:
        raise OSError(28, "No space left on device", "/dev/shm/x")

    monkeypatch.setattr(machine, "build_tree", broken)  # the fork copies the patched module
    pending = Simulation.begin("a3")
    with pytest.raises(OSError, match="No space left on device") as raised:
        pending.wait()
    assert raised.value.errno == 28
    _no_child_left(pending)
    assert _trees(demo_dir) == []


def test_a_builder_killed_from_outside_is_one_clear_error_and_nothing_is_left(demo_dir, monkeypatch):
    if threading.active_count() != 1:
        pytest.skip("another thread runs in this test process: the build is not forked")

    def killed(*args: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)  # runs in the child

    monkeypatch.setattr(machine, "build_tree", killed)
    pending = Simulation.begin("a3")
    with pytest.raises(RuntimeError) as raised:
        pending.wait()
    message = str(raised.value)
    assert "'a3'" in message and "without an answer" in message and f"signal {signal.SIGKILL}" in message
    _no_child_left(pending)
    assert _trees(demo_dir) == []


def test_the_opening_feed_takes_the_forked_demo_and_closing_leaves_nothing(demo_dir):
    opening = OpeningFeed(FeedOptions(demo="a3", backend="npu-smi"))
    try:
        feed, banner = opening.result()
        try:
            assert "demo a3" in banner
            snapshot = feed.sample()
            assert len(snapshot.chips) == 16
        finally:
            feed.close()
    finally:
        opening.close()
    assert _trees(demo_dir) == []


def test_an_opening_feed_nobody_takes_removes_its_demo(demo_dir):
    opening = OpeningFeed(FeedOptions(demo="a3", backend="npu-smi"))
    opening.close()
    assert _trees(demo_dir) == []


def test_the_demo_standing_in_for_a_machine_without_an_npu_is_built_in_a_child_too(demo_dir, monkeypatch):
    import npuwatch.availability

    begun: List[str] = []
    original = Simulation.begin

    def recording_begin(scenario: str = "a3", seed: int = 0) -> PendingSimulation:
        begun.append(scenario)
        return original(scenario, seed)

    for name in ("NPUWATCH_ROOT", "NPUWATCH_NPU_SMI", "NPUWATCH_DCMI_LIB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(npuwatch.availability, "machine_has_npu", lambda sysroot: False)
    monkeypatch.setattr(Simulation, "begin", staticmethod(recording_begin))
    opening = OpeningFeed(FeedOptions(backend="npu-smi"))
    try:
        feed, banner = opening.result()
        try:
            assert banner.startswith("No Ascend NPU here")
            assert begun == [DEFAULT_SCENARIO]
            assert len(feed.sample().chips) > 0
        finally:
            feed.close()
    finally:
        opening.close()
    assert _trees(demo_dir) == []
