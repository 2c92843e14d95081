"""`npuwatch check` on each chip backend: DCMI (no npu-smi process), npu-smi, and auto's fallback."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Dict, List, Tuple

import psutil
import pytest

from npuwatch.check_command import run
from npuwatch.cli import main
from npuwatch.probes.npu_smi import NpuSmi

WORKER = "npuwatch.probes.dcmi.worker"


def workers() -> List[psutil.Process]:
    """DCMI worker processes this test process started and did not end."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(WORKER in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def _no_worker_left():
    yield
    assert workers() == [], "a DCMI worker outlived npuwatch check"


@pytest.fixture
def npu_smi_calls(monkeypatch) -> List[Tuple[str, ...]]:
    """Every npu-smi call the check makes (it still runs: the count is the point)."""
    calls: List[Tuple[str, ...]] = []
    original = NpuSmi.call

    def counted(self, args):
        calls.append(tuple(args))
        return original(self, args)

    monkeypatch.setattr(NpuSmi, "call", counted)
    return calls


def check_json(capsys, *argv: str) -> Tuple[int, Dict]:
    code = main(["check", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("scenario", "chips"), [("910b-training", 8), ("a3", 16), ("310p-duo", 4), ("950", 8)]
)
@pytest.mark.parametrize(("backend", "reads"), [("auto", "dcmi"), ("dcmi", "dcmi"), ("npu-smi", "npu-smi")])
def test_each_backend_reads_every_chip_of_the_demo(capsys, scenario, chips, backend, reads):
    code, doc = check_json(capsys, "--demo", scenario, "--backend", backend)
    assert code == 0, doc["line"]
    assert doc["chips_ok"] == doc["chips_total"] == chips
    assert doc["source"] == f"demo:{scenario}"
    assert doc["backend"] == reads
    assert doc["backend_note"] is None


@pytest.mark.parametrize("backend", ["auto", "dcmi"])
def test_dcmi_runs_no_npu_smi_process(capsys, npu_smi_calls, backend):
    code, doc = check_json(capsys, "--demo", "910b-training", "--backend", backend)
    assert code == 0
    assert doc["backend"] == "dcmi"
    assert npu_smi_calls == []


def test_npu_smi_backend_runs_npu_smi_once(capsys, npu_smi_calls):
    code, doc = check_json(capsys, "--demo", "910b-training", "--backend", "npu-smi")
    assert code == 0
    assert doc["backend"] == "npu-smi"
    assert npu_smi_calls == [("info",)]


def test_a_chip_in_alarm_is_judged_with_dcmi_s_error_code_and_no_npu_smi(capsys, npu_smi_calls):
    code, doc = check_json(capsys, "--demo", "chip-alarm", "--backend", "dcmi")
    assert code == 1
    assert doc["line"].startswith("unhealthy: NPU 3 chip 0 Alarm (80E01801 → restart-business)")
    assert doc["backend"] == "dcmi"
    assert npu_smi_calls == []


def test_auto_falls_back_to_npu_smi_and_says_why(capsys):
    code, doc = check_json(capsys, "--demo", "dcmi-permission", "--backend", "auto")
    assert code == 0, doc["line"]
    assert doc["backend"] == "npu-smi"
    assert doc["backend_note"].startswith("dcmi failed (dcmi_init failed with -8002")
    assert doc["backend_note"].endswith("this tick read through npu-smi")


def test_auto_s_npu_smi_side_is_the_check_s_own(capsys, npu_smi_calls):
    code, doc = check_json(capsys, "--demo", "dcmi-missing", "--backend", "auto")
    assert code == 0
    assert doc["backend"] == "npu-smi"
    assert npu_smi_calls == [("info",)]  # no `info -m` for logic IDs: check does not show them


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        (
            "dcmi-permission",
            "DCMI failed: dcmi_init failed with -8002: not root and not in the HwHiAiUser group",
        ),
        ("dcmi-crash", "the DCMI library crashed (SIGSEGV) in the worker; npuwatch kept running"),
    ],
)
def test_an_explicit_dcmi_backend_never_falls_back(capsys, scenario, message):
    code, doc = check_json(capsys, "--demo", scenario, "--backend", "dcmi")
    assert code == 1
    assert doc["backend"] == "dcmi"
    assert [(p["reason"], p["message"]) for p in doc["problems"]] == [("dcmi", message)]
    assert doc["chips"] == []


def test_a_hanging_dcmi_costs_a_hedge_then_npu_smi_answers(capsys):
    code, doc = check_json(capsys, "--demo", "dcmi-hang", "--timeout", "0.5", "--backend", "auto")
    assert code == 0
    assert doc["backend"] == "npu-smi"
    assert "dcmi has not answered for" in doc["backend_note"]


def test_npuwatch_backend_variable_chooses(capsys):
    code = run(argparse.Namespace(demo="dcmi-missing", json=True), environ={"NPUWATCH_BACKEND": "dcmi"})
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["backend"] == "dcmi"
    assert doc["problems"][0]["message"].startswith("libdcmi.so not found")


def test_a_bad_npuwatch_backend_is_unhealthy_before_any_demo_starts(capsys):
    code = run(argparse.Namespace(demo="910b-training"), environ={"NPUWATCH_BACKEND": "cuda"})
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("unhealthy: NPUWATCH_BACKEND='cuda' is not a chip-data backend")


def test_a_replay_names_npu_smi_as_its_backend(capsys, tmp_path):
    from tests.conftest import capture_text

    saved = tmp_path / "info.txt"
    saved.write_text(capture_text("001"))
    code, doc = check_json(capsys, "--replay", str(saved))
    assert code == 0
    assert doc["source"] == "replay:info.txt"
    assert doc["backend"] == "npu-smi"


# --- what the parent imports --------------------------------------------------------------------

CHILD_ONLY = ("npuwatch.probes.dcmi.reader", "npuwatch.probes.dcmi.library")


def loaded(argv: List[str], modules: Tuple[str, ...]) -> str:
    code = (
        "import sys; from npuwatch.cli import main; "
        f"code = main({argv!r}); "
        f"print(code, [m for m in {modules!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr


def test_the_dcmi_backend_loads_and_reads_the_library_only_in_its_worker():
    heavy = ("textual", "rich", "npuwatch.sampler", "npuwatch.history", "npuwatch.doctor", *CHILD_ONLY)
    assert loaded(["check", "--demo", "910b-training", "--backend", "dcmi"], heavy) == "0 []"


def test_the_npu_smi_backend_loads_nothing_of_dcmi(tmp_path):
    from npuwatch.probes.sysroot_builder import SysrootBuilder
    from tests.conftest import capture_text

    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes(range(8))
    capture = builder.write_file("/capture.txt", capture_text("001"))
    builder.install_executable("/usr/local/bin/npu-smi", f"#!/bin/sh\nexec cat {capture}\n")
    dcmi = ("npuwatch.probes.dcmi", "npuwatch.fallback_source", "ctypes")
    argv = ["check", "--root", str(builder.root), "--trust-root", "--backend", "npu-smi"]
    assert loaded(argv, dcmi) == "0 []"


# --- auto on a machine without libdcmi.so: no worker to learn it ---------------------------------


@pytest.fixture
def spawned_workers(monkeypatch) -> List[List[str]]:
    """The argv of every DCMI worker process started."""
    started: List[List[str]] = []
    original = subprocess.Popen

    def spy(argv, *args, **kwargs):
        if any(WORKER in str(part) for part in argv):
            started.append(list(argv))
        return original(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    return started


def test_auto_without_any_libdcmi_starts_no_worker_and_simply_reads_npu_smi(capsys, spawned_workers):
    code, doc = check_json(capsys, "--demo", "dcmi-missing", "--backend", "auto")
    assert code == 0
    assert spawned_workers == []
    assert doc["backend"] == "npu-smi"
    assert doc["backend_note"] is None  # no DCMI here is no news (snapshot and the views agree)


def test_auto_with_a_libdcmi_starts_its_worker(capsys, spawned_workers):
    code, doc = check_json(capsys, "--demo", "910b-training", "--backend", "auto")
    assert code == 0
    assert len(spawned_workers) == 1
    assert doc["backend"] == "dcmi"


def test_an_explicit_dcmi_backend_always_asks_the_worker(capsys, spawned_workers):
    code, doc = check_json(capsys, "--demo", "dcmi-missing", "--backend", "dcmi")
    assert code == 1
    assert len(spawned_workers) >= 1
    assert doc["problems"][0]["message"].startswith("libdcmi.so not found")


def test_a_libdcmi_on_ld_library_path_may_load(tmp_path):
    from npuwatch.feeds import MachineHandle, auto_backend
    from npuwatch.probes.sysroot import Sysroot

    (tmp_path / "libdcmi.so").write_bytes(b"")
    environ = {"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"}
    assert auto_backend(MachineHandle(Sysroot("/", environ=environ), None, environ)) == ("auto", None)


def test_a_tree_with_the_driver_s_libdcmi_may_load(tmp_path):
    from npuwatch.feeds import MachineHandle, auto_backend
    from npuwatch.probes.sysroot_builder import SysrootBuilder

    builder = SysrootBuilder(tmp_path)
    trusted = {"NPUWATCH_TRUST_ROOT": "1"}
    assert auto_backend(MachineHandle(builder.sysroot(), None, trusted)) == ("npu-smi", None)
    builder.install_library("/usr/local/Ascend/driver/lib64/driver/libdcmi.so")
    assert auto_backend(MachineHandle(builder.sysroot(), None, trusted)) == ("auto", None)
    backend, held = auto_backend(MachineHandle(builder.sysroot(), None, {}))  # an untrusted tree's
    assert backend == "npu-smi"
    assert held is not None and "was not loaded: pass --trust-root" in held
