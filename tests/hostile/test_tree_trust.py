"""A ``--root`` tree runs nothing of its own unless trusted (issue 27, item 11).

The tree of a bug report is files: npuwatch must read it without executing its ``npu-smi`` or
loading its libraries.  The tree here plants both: ``/usr/local/bin/npu-smi`` is a script that
writes a marker when run, and ``/usr/local/dcmi/libdcmi.so`` (also copied to where the driver puts
``libascend_hal.so``) is built with ``cc`` from a few lines of C whose constructor writes a marker
when the library is loaded.  Every reading command, run as users run it (a child ``python -m
npuwatch``), must leave no marker; with ``--trust-root`` or ``NPUWATCH_TRUST_ROOT=1`` they run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest

from npuwatch.probes.simulator import Simulation
from npuwatch.probes.simulator.dcmi_fake.build import compiler_command
from tests.conftest import need
from tests.hostile.test_verdicts import DEADLINE_S, FULL_TABLE, build_machine, run_npuwatch

#: A library whose constructor runs at ``dlopen``: it appends a line to MARK (a -D define).
PLANTED_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *mark = fopen(MARK, "a");
    if (mark != NULL) {
        fputs("loaded\n", mark);
        fclose(mark);
    }
}
"""
LIBRARIES = ("/usr/local/dcmi/libdcmi.so", "/usr/local/Ascend/driver/lib64/driver/libascend_hal.so")
TRUSTED = {"NPUWATCH_TRUST_ROOT": "1"}
LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


class Planted(NamedTuple):
    root: Path
    marks: Path  # outside the tree: ``npu-smi`` and ``library`` appear here when tree code runs

    def ran(self) -> List[str]:
        return sorted(path.name for path in self.marks.iterdir())


@pytest.fixture(scope="module")
def planted_library(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, Path]:
    """The planted library, compiled once: (the .so, the marker file its constructor appends to)."""
    compiler = compiler_command()
    need(compiler is not None, "a C compiler (cc) builds the planted library")
    assert compiler is not None
    folder = tmp_path_factory.mktemp("planted")
    source, built, mark = folder / "planted.c", folder / "planted.so", folder / "mark"
    source.write_text(PLANTED_C, encoding="utf-8")
    define = f'-DMARK="{mark}"'
    subprocess.run(
        [*compiler, "-shared", "-fPIC", define, "-o", str(built), str(source)], check=True, timeout=60
    )
    return built, mark


@pytest.fixture
def planted(tmp_path: Path, planted_library: Tuple[Path, Path]) -> Planted:
    """Eight 910B2 chips in sysfs and /dev, a planted npu-smi (it works: prints capture 001) and
    the planted library where the driver puts libdcmi.so and libascend_hal.so."""
    built, shared_mark = planted_library
    marks = tmp_path / "marks"
    marks.mkdir()
    builder = build_machine(tmp_path / "root")
    table = tmp_path / "table.txt"
    table.write_text(FULL_TABLE, encoding="utf-8")
    builder.install_executable(
        "/usr/local/bin/npu-smi", f"#!/bin/sh\necho ran >> {marks / 'npu-smi'}\ncat {table}\n"
    )
    for library in LIBRARIES:
        target = builder.path(library)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(built, target)
    # The constructor writes to one compiled-in file: link it into this test's marks folder.
    if shared_mark.exists() or shared_mark.is_symlink():
        shared_mark.unlink()
    shared_mark.symlink_to(marks / "library")
    return Planted(builder.root, marks)


def npuwatch(planted: Planted, *args: str, env: Optional[Dict[str, str]] = None) -> Tuple[int, str, str]:
    return run_npuwatch(*args, "--root", str(planted.root), env=env)


def snapshot_json(planted: Planted, *args: str, env: Optional[Dict[str, str]] = None) -> Dict:
    _, out, err = npuwatch(planted, "snapshot", "--json", *args, env=env)
    assert out, err
    document: Dict = json.loads(out)
    return document


def serve_briefly(planted: Planted, tmp_path: Path, *args: str) -> str:
    """``npuwatch serve`` over the tree until /metrics answered once (a sample was taken); its stderr."""
    import http.client

    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NPUWATCH_", "ASCEND_"))}
    err_path = tmp_path / "serve.err"
    with open(err_path, "wb") as err:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "npuwatch",
                "serve",
                "--root",
                str(planted.root),
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "0.2",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=environ,
        )
    try:
        assert child.stdout is not None
        found = LISTENING.search(child.stdout.readline())
        assert found, err_path.read_text()
        conn = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=DEADLINE_S)
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 200
        conn.close()
        time.sleep(0.5)  # a few more ticks: a later tick must not run the tree's code either
    finally:
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=DEADLINE_S)
    return err_path.read_text()


# ---------------------------------------------------------------- untrusted: nothing runs


def test_snapshot_runs_nothing_of_the_tree_and_says_what_it_did_not_run(planted: Planted) -> None:
    document = snapshot_json(planted)
    assert planted.ran() == []
    assert len(document["chips"]) == 8  # from sysfs, every metric null with the reason
    reason = document["chips"][0]["unavailable"]["power_w"]
    assert "the tree's npu-smi was not run: pass --trust-root to run it" in reason
    assert any("was not run" in warning for warning in document["warnings"]), document["warnings"]
    assert "libdcmi.so (/usr/local/dcmi/libdcmi.so) was not loaded" in document["backend_note"]


def test_check_runs_nothing_and_is_unhealthy_saying_why(planted: Planted) -> None:
    code, out, err = npuwatch(planted, "check")
    assert planted.ran() == []
    assert code == 1
    assert out == "unhealthy: the tree's npu-smi was not run: pass --trust-root to run it\n", out
    assert "/usr/local/bin/npu-smi is not run" in err and "NPUWATCH_TRUST_ROOT=1" in err, err


def test_the_doctor_loads_nothing_and_skips_what_would_run_tree_code(planted: Planted) -> None:
    _, out, _ = npuwatch(planted, "doctor", "--json")
    assert planted.ran() == []
    results = {result["id"]: result for result in json.loads(out)["results"]}
    for check in ("npu-smi", "dcmi"):
        assert results[check]["status"] == "skip", results[check]
        assert "the tree is not trusted (--trust-root)" in results[check]["summary"]
        assert any("NPUWATCH_TRUST_ROOT=1" in line for line in results[check]["details"]), results[check]
    assert "not loaded (untrusted tree)" in results["driver-install"]["summary"]


def test_record_runs_nothing_of_the_tree(planted: Planted, tmp_path: Path) -> None:
    code, _, err = npuwatch(
        planted, "record", str(tmp_path / "out.ndjson"), "--duration", "1", "--interval", "0.2"
    )
    assert code == 0, err
    assert planted.ran() == []


def test_serve_runs_nothing_of_the_tree(planted: Planted, tmp_path: Path) -> None:
    serve_briefly(planted, tmp_path)
    assert planted.ran() == []


# ---------------------------------------------------------------- trusted: it runs (the test can see it)


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_trusted_tree_runs_its_npu_smi_and_loads_its_library(planted: Planted, how: str) -> None:
    args, env = (("--trust-root",), None) if how == "option" else ((), TRUSTED)
    document = snapshot_json(planted, *args, env=env)
    assert planted.ran() == ["library", "npu-smi"]
    assert document["chips"][0]["power_w"] == 135.9  # npu-smi's table, read live


def test_a_trusted_check_runs_the_tree(planted: Planted) -> None:
    _, out, err = npuwatch(planted, "check", "--trust-root")
    assert planted.ran() == ["library", "npu-smi"]
    assert out.startswith("healthy: 8/8 chips OK"), out + err


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_trusted_doctor_loads_the_tree_s_libraries(planted: Planted, how: str) -> None:
    args, env = (("--trust-root",), None) if how == "option" else ((), TRUSTED)
    npuwatch(planted, "doctor", "--only", "npu-smi,dcmi,driver-install", *args, env=env)
    assert planted.ran() == ["library", "npu-smi"]


def test_a_trusted_record_and_serve_run_the_tree(planted: Planted, tmp_path: Path) -> None:
    code, _, err = npuwatch(
        planted,
        "record",
        str(tmp_path / "out.ndjson"),
        "--duration",
        "1",
        "--interval",
        "0.2",
        "--trust-root",
    )
    assert code == 0, err
    assert planted.ran() == ["library", "npu-smi"]
    for mark in planted.marks.iterdir():
        mark.unlink()
    serve_briefly(planted, tmp_path, "--trust-root")
    assert planted.ran() == ["library", "npu-smi"]


# ---------------------------------------------------------------- saved outputs, the simulator's trees


def test_an_untrusted_tree_s_chips_come_from_its_saved_npu_smi_output(planted: Planted) -> None:
    saved = planted.root / "npuwatch" / "npu-smi-info.txt"
    saved.parent.mkdir()
    saved.write_text(FULL_TABLE, encoding="utf-8")
    document = snapshot_json(planted)
    assert planted.ran() == []
    assert [chip["power_w"] for chip in document["chips"]][:1] == [135.9]
    note = next(w for w in document["warnings"] if "saved npu-smi output" in w)
    assert "/npuwatch/npu-smi-info.txt" in note and "was not run" in note and "--trust-root" in note
    code, out, err = npuwatch(planted, "check")
    assert (code, out) == (0, "healthy: 8/8 chips OK, max 44 °C\n"), err
    assert planted.ran() == []


def test_a_copy_of_a_demo_tree_is_not_trusted_but_the_demo_is(tmp_path: Path) -> None:
    with Simulation.start("910b-training", workdir=tmp_path / "root") as sim:
        marker = tmp_path / "ran"
        script = sim.npu_smi.read_text()
        sim.npu_smi.write_text(script.replace("\n", f"\necho ran >> {marker}\n", 1))
        code, out, err = run_npuwatch("snapshot", "--json", "--root", str(sim.root))
        document = json.loads(out)
        assert not marker.exists(), "the copied demo tree's npu-smi ran"
        assert document["backend"] == "npu-smi" and "was not loaded" in document["backend_note"]
    code, out, err = run_npuwatch("snapshot", "--json", "--demo")
    document = json.loads(out)
    assert code == 0, err
    assert document["backend"] == "dcmi" and len(document["chips"]) == 8  # its fake library, live


def test_a_named_npu_smi_is_the_user_s_and_runs(planted: Planted) -> None:
    named = planted.root / "usr" / "local" / "bin" / "npu-smi"
    document = snapshot_json(planted, "--npu-smi", str(named), "--backend", "npu-smi")
    assert planted.ran() == ["npu-smi"]
    assert document["chips"][0]["power_w"] == 135.9


def test_a_bad_trust_variable_is_refused_not_read_as_trust(planted: Planted) -> None:
    code, out, _ = npuwatch(planted, "check", env={"NPUWATCH_TRUST_ROOT": "yes"})
    assert planted.ran() == []
    assert code == 1 and "NPUWATCH_TRUST_ROOT='yes'" in out, out


def test_trust_is_refused_with_a_demo_or_a_replay(tmp_path: Path) -> None:
    code, _, err = run_npuwatch("snapshot", "--demo", "--trust-root")
    assert code == 64 and "--demo brings its own machine" in err, err
    capture = tmp_path / "c.txt"
    capture.write_text(FULL_TABLE, encoding="utf-8")
    code, _, err = run_npuwatch("snapshot", "--replay", str(capture), "--trust-root")
    assert code == 64 and "--trust-root" in err, err
