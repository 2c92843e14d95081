"""Every command of the installed npuwatch, as a user runs it: from a directory that is not the
repository, in a fresh venv holding only the wheel (and its extras), on every Python of the tier.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional, Tuple

import pytest

from tests.browser.jupyter_server import free_port
from tests.installed.product import FAKE_RUNTIME, SOURCE, Dists, Installed

pytestmark = pytest.mark.slow

SCHEMA = "snapshot-v1.schema.json"
SERVE_DEADLINE_S = 60.0
STOP_TIMEOUT_S = 30.0

#: Validates stdin against the schema the installed package ships, read as a user's code would.
VALIDATE = f"""\
import json, sys
from importlib.resources import files
import jsonschema
schema = json.loads(files("npuwatch").joinpath({SCHEMA!r}).read_text(encoding="utf-8"))
jsonschema.validate(json.loads(sys.stdin.read()), schema)
print("valid", schema.get("$id", ""))
"""


def output(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def assert_valid_snapshot(installed: Installed, document: str, cwd: Path) -> dict:
    """``document`` is an npuwatch/snapshot/v1 the installed schema accepts; return it decoded."""
    checked = subprocess.run(
        [str(installed.python), "-c", VALIDATE],
        input=document,
        cwd=str(cwd),
        env=installed.environ(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, output(checked)
    decoded = json.loads(document)
    assert decoded["chips"], decoded
    return dict(decoded)


# --- what is installed ----------------------------------------------------------------------------


def test_the_venv_runs_the_wheel_not_the_source(installed: Installed, dists: Dists, workdir: Path):
    probe = (
        "import json, npuwatch, npuwatch.widgets.tui as tui\n"
        "from importlib.metadata import distribution\n"
        "dist = distribution('npuwatch')\n"
        "where = [npuwatch.__file__, tui.__file__, dist.version, dist.read_text('direct_url.json')]\n"
        "print(json.dumps(where))"
    )
    done = installed.run(["python", "-c", probe], cwd=workdir)
    assert done.returncode == 0, output(done)
    package, tui, version, direct_url = json.loads(done.stdout)
    assert Path(package).parent == installed.site_packages / "npuwatch"
    assert Path(tui).is_relative_to(installed.site_packages / "npuwatch" / "widgets")
    assert version == dists.version
    assert "editable" not in json.loads(direct_url or "{}").get("dir_info", {})
    # Every run-time data file the source has is installed beside its module.
    for shipped in ("py.typed", SCHEMA, "widgets/tui/npuwatch.tcss"):
        assert (installed.site_packages / "npuwatch" / shipped).is_file(), shipped


def test_python_m_npuwatch_version(installed: Installed, dists: Dists, workdir: Path):
    done = installed.run(["python", "-m", "npuwatch", "--version"], cwd=workdir)
    assert done.returncode == 0, output(done)
    assert dists.version in done.stdout, output(done)


def test_python_m_npuwatch_snapshot_demo(installed: Installed, workdir: Path):
    done = installed.run(["python", "-m", "npuwatch", "snapshot", "--demo"], cwd=workdir)
    assert done.returncode == 0, output(done)
    assert "source demo:910b-training" in done.stdout
    assert len(re.findall(r"^\d+\s+0\s+\S+\s+910B3\s", done.stdout, re.MULTILINE)) == 8, output(done)


def test_snapshot_json_is_valid_against_the_installed_schema(installed: Installed, workdir: Path):
    assert (installed.site_packages / "npuwatch" / SCHEMA).is_file()
    done = installed.run(["npuwatch", "snapshot", "--json", "--demo"], cwd=workdir)
    assert done.returncode == 0, output(done)
    snapshot = assert_valid_snapshot(installed, done.stdout, workdir)
    assert len(snapshot["chips"]) == 8


def test_the_demo_reads_its_chips_through_the_installed_fake_libdcmi(installed: Installed, workdir: Path):
    """The wheel's fake_dcmi.c is compiled (or its Python twin used) and read through ctypes."""
    done = installed.run(["npuwatch", "snapshot", "--json", "--demo", "a3"], cwd=workdir)
    assert done.returncode == 0, output(done)
    snapshot = assert_valid_snapshot(installed, done.stdout, workdir)
    assert snapshot["backend"] == "dcmi" and snapshot.get("backend_note") is None, output(done)
    chips = snapshot["chips"]
    assert len(chips) == 16
    assert all(isinstance(chip["aicore_freq_mhz"], int) for chip in chips), output(done)
    assert [chip["power_w"] is None for chip in chips] == [False, True] * 8  # A3: power per card, chip 0


# --- doctor, check, selftest ----------------------------------------------------------------------


def test_doctor_demo_reports_with_a_documented_exit_code(installed: Installed, workdir: Path):
    done = installed.run(["npuwatch", "doctor", "--demo"], cwd=workdir)
    assert done.returncode in (0, 1, 2), output(done)  # 0 all pass, 1 warnings, 2 failures
    summary = re.search(r"^\d+ passed.*\(exit (\d)\)$", done.stdout, re.MULTILINE)
    assert summary, output(done)
    assert int(summary.group(1)) == done.returncode
    assert "chip-health" in done.stdout and "Traceback" not in done.stdout + done.stderr


def test_check_demo_is_healthy(installed: Installed, workdir: Path):
    done = installed.run(["npuwatch", "check", "--demo"], cwd=workdir)
    assert done.returncode == 0, output(done)
    assert done.stdout.startswith("healthy: 8/8 chips OK"), output(done)


def test_check_demo_chip_alarm_is_unhealthy(installed: Installed, workdir: Path):
    done = installed.run(["npuwatch", "check", "--demo", "chip-alarm"], cwd=workdir)
    assert done.returncode == 1, output(done)
    assert done.stdout.startswith("unhealthy:"), output(done)


@pytest.mark.parametrize("where", ["tmp", "source"])
def test_selftest_with_the_fake_runtime_passes(installed: Installed, workdir: Path, where: str):
    # From the source tree, a child that imported npuwatch from the current directory would fail.
    cwd = workdir if where == "tmp" else SOURCE
    done = installed.run(
        ["npuwatch", "selftest", "--device", "0"], cwd=cwd, PYTHONPATH=str(FAKE_RUNTIME), timeout=180
    )
    assert done.returncode == 0, output(done)
    assert re.search(r"^1 device: 1 passed .*exit 0$", done.stdout, re.MULTILINE), output(done)
    assert "No module named" not in done.stdout + done.stderr


# --- serve ----------------------------------------------------------------------------------------


def http_get(url: str) -> Tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def wait_healthy(base: str, server: subprocess.Popen, log: Path) -> str:
    """Poll ``/healthz`` until it answers 200; fail with the server's output if it never does."""
    deadline = time.monotonic() + SERVE_DEADLINE_S
    last: Optional[str] = None
    while time.monotonic() < deadline:
        assert server.poll() is None, f"serve exited {server.returncode}:\n{log.read_text()}"
        with contextlib.suppress(OSError):
            status, body = http_get(f"{base}/healthz")
            if status == 200:
                return body
            last = f"{status} {body}"
        time.sleep(0.2)
    pytest.fail(f"/healthz never answered 200 (last: {last}):\n{log.read_text()}")


def test_serve_answers_a_real_scrape_and_stops_on_sigterm(installed: Installed, workdir: Path):
    port = free_port()
    log = workdir / "serve.log"
    argv = [str(installed.bin("npuwatch")), "serve", "--demo", "--listen", f"127.0.0.1:{port}"]
    with open(log, "wb") as sink:
        server = subprocess.Popen(
            argv,
            cwd=str(workdir),
            env=installed.environ(),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        assert wait_healthy(base, server, log).startswith("healthy: 8/8 chips OK")
        status, metrics = http_get(f"{base}/metrics")
        assert status == 200
        assert re.search(r"^npu_chip_info_health_status\{.*\} 1\.0$", metrics, re.MULTILINE), metrics[:2000]
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=STOP_TIMEOUT_S) == 0, log.read_text()
    finally:
        if server.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=STOP_TIMEOUT_S)


# --- record and replay ----------------------------------------------------------------------------


def test_record_then_replay_gives_a_valid_snapshot(installed: Installed, workdir: Path):
    recording = workdir / "demo.ndjson"
    recorded = installed.run(
        ["npuwatch", "record", str(recording), "--demo", "--interval", "0.2", "--duration", "2"], cwd=workdir
    )
    assert recorded.returncode == 0, output(recorded)
    assert len(recording.read_text().splitlines()) >= 2
    replayed = installed.run(["npuwatch", "snapshot", "--json", "--replay", str(recording)], cwd=workdir)
    assert replayed.returncode == 0, output(replayed)
    snapshot = assert_valid_snapshot(installed, replayed.stdout, workdir)
    assert len(snapshot["chips"]) == 8
