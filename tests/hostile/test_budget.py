"""Hostile DCMI libraries against the one time budget and the chip count (issue 27, items 1 and 4).

Each case builds a real ``libdcmi.so`` from a few lines of C with ``cc`` (hanging in
``dcmi_init``, or listing no chip), a machine tree with eight Ascend PCI functions and their
``/dev`` nodes, and a fake ``npu-smi`` that prints a real capture (or hangs).  The commands run
as a user runs them, in a fresh interpreter.  Bounds are relative to ``--timeout``: "within the
timeout plus 2 s" is the README's promise for ``check``; nothing asserts a speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, List, Sequence, Tuple

import psutil
import pytest

from npuwatch.probes.sysroot_builder import SysrootBuilder

DATA = Path(__file__).resolve().parents[1] / "data" / "npu_smi"
CAPTURE = DATA / "001_910b2-x8-v25.2.0-multiproc.txt"  # eight 910B2 chips
#: What the budget allows on top of ``--timeout`` (README: `check` "within --timeout + 2 s").
SLACK_S = 2.0

_LIBRARY = r"""
#include <unistd.h>
int dcmi_init(void) {
#ifdef HANG_INIT
    for (;;) pause();
#endif
    return 0;
}
int dcmi_get_card_list(int *count, int *cards, int most) {
    (void)cards; (void)most;
    *count = CARDS;
    return 0;
}
"""


def _compile(folder: Path, defines: Sequence[str]) -> Path:
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler (cc): the hostile-library tier needs one")
        pytest.skip("no C compiler (cc)")
    source = folder / "hostile.c"
    source.write_text(_LIBRARY)
    target = folder / "libdcmi.so"
    flags = [f"-D{define}" for define in defines]
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(target), str(source), *flags], check=True)
    return target


def _machine(tmp_path: Path, *, npu_smi: str) -> Tuple[Path, Path]:
    """A tree with eight 910B PCI functions and their device nodes, and an npu-smi outside it."""
    root = tmp_path / "tree"
    tree = SysrootBuilder(root)
    for index in range(8):
        tree.add_pci_function(f"0000:{0xC1 + index:02x}:00.0", 0xD802)
    tree.add_dev_nodes(range(8))
    script = tmp_path / "npu-smi"
    if npu_smi == "hang":
        script.write_text("#!/bin/sh\nexec sleep 600\n")
    else:
        script.write_text(f'#!/bin/sh\n[ "$1" = info ] && [ $# -eq 1 ] && exec cat {CAPTURE}\nexit 1\n')
    script.chmod(0o755)
    return root, script


def _npuwatch(*args: str, timeout_s: float = 120.0) -> Tuple[int, str, str, float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "npuwatch", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={k: v for k, v in os.environ.items() if not k.startswith("NPUWATCH_")},
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - began


def _leftovers(marker: str) -> List[int]:
    """Processes still running that npuwatch started for this case (its tree's path in their command)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in " ".join(proc.info["cmdline"] or ()):
                found.append(proc.pid)
    return found


def _no_leftovers(marker: str) -> None:
    deadline = time.monotonic() + 20.0
    while _leftovers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _leftovers(marker) == []


@pytest.mark.parametrize("timeout_s", [1, 3])
def test_check_with_dcmi_init_hung_answers_through_npu_smi_within_the_budget(tmp_path, timeout_s):
    library = _compile(tmp_path, ["HANG_INIT", "CARDS=8"])
    root, npu_smi = _machine(tmp_path, npu_smi="capture")
    code, out, _err, took_s = _npuwatch(
        "check", "--json", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi),
        "--timeout", str(timeout_s),
    )  # fmt: skip
    doc = json.loads(out)
    assert (code, doc["healthy"], doc["backend"]) == (0, True, "npu-smi")
    assert doc["backend_note"].startswith("dcmi has not answered for")
    assert took_s < timeout_s + SLACK_S
    _no_leftovers(str(tmp_path))


@pytest.mark.parametrize("backend", ["auto", "dcmi"])
def test_check_with_every_source_hung_says_so_within_the_budget(tmp_path, backend):
    timeout_s = 2
    library = _compile(tmp_path, ["HANG_INIT", "CARDS=8"])
    root, npu_smi = _machine(tmp_path, npu_smi="hang")
    code, out, _err, took_s = _npuwatch(
        "check", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi),
        "--timeout", str(timeout_s), "--backend", backend,
    )  # fmt: skip
    assert code == 1
    assert out.startswith("unhealthy: ")
    assert "did not" in out  # npu-smi "did not answer", or DCMI's call "did not return"
    assert took_s < timeout_s + SLACK_S
    _no_leftovers(str(tmp_path))


def test_snapshot_with_dcmi_init_hung_reads_npu_smi_within_the_budget(tmp_path):
    timeout_s = 2
    library = _compile(tmp_path, ["HANG_INIT", "CARDS=8"])
    root, npu_smi = _machine(tmp_path, npu_smi="capture")
    code, out, _err, took_s = _npuwatch(
        "snapshot", "--json", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi),
        "--timeout", str(timeout_s),
    )  # fmt: skip
    doc = json.loads(out)
    assert (code, doc["backend"], len(doc["chips"])) == (0, "npu-smi", 8)
    assert all(chip["temperature_c"] is not None for chip in doc["chips"])
    assert took_s < timeout_s + SLACK_S
    _no_leftovers(str(tmp_path))


@pytest.mark.parametrize("cards", ["0", "-3"])
def test_a_library_listing_no_chip_is_read_through_npu_smi(tmp_path, cards):
    library = _compile(tmp_path, [f"CARDS={cards}"])
    root, npu_smi = _machine(tmp_path, npu_smi="capture")
    code, out, _err, _took_s = _npuwatch(
        "snapshot", "--json", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi),
    )  # fmt: skip
    doc = json.loads(out)
    assert (code, doc["backend"], len(doc["chips"])) == (0, "npu-smi", 8)
    assert doc["backend_note"].startswith("dcmi lists 0 of 8 chips (8 Ascend PCI functions, 8 /dev/davinciN)")
    code, out, _err, _took_s = _npuwatch(
        "check", "--json", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi),
    )  # fmt: skip
    assert (code, json.loads(out)["backend"]) == (0, "npu-smi")


def test_a_library_listing_no_chip_without_npu_smi_keeps_the_sysfs_chips_and_is_unhealthy(tmp_path):
    library = _compile(tmp_path, ["CARDS=0"])
    root, _npu_smi = _machine(tmp_path, npu_smi="capture")
    absent = str(tmp_path / "no-npu-smi")
    code, out, _err, _took_s = _npuwatch(
        "snapshot", "--json", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", absent
    )
    doc = json.loads(out)
    assert len(doc["chips"]) == 8  # from sysfs, each with the reason
    reasons = {chip["unavailable"]["temperature_c"] for chip in doc["chips"]}
    assert all("DCMI lists no chip; the machine has 8" in reason for reason in reasons), reasons
    code, out, _err, _took_s = _npuwatch(
        "check", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", absent
    )
    assert code == 1 and out.startswith("unhealthy: ")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _serving(args: Sequence[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    server = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "serve", "--listen", f"127.0.0.1:{port}", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield server
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)


def _get(url: str) -> Tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _metric(text: str, name: str) -> Dict[str, float]:
    return {
        line.split(" ")[0]: float(line.split(" ")[-1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    }


def test_healthz_stays_healthy_through_npu_smi_while_dcmi_hangs(tmp_path):
    """The first sample comes within the budget, and every probe after it is 200: the hung
    library costs no tick its time (it answered 503 for the first 31 s, and once a minute after)."""
    library = _compile(tmp_path, ["HANG_INIT", "CARDS=8"])
    root, npu_smi = _machine(tmp_path, npu_smi="capture")
    port = _free_port()
    args = ["--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi)]
    with _serving([*args, "--timeout", "1", "--interval", "0.2"], port) as server:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60.0
        status, listening = 0, None
        while status != 200:
            assert server.poll() is None and time.monotonic() < deadline
            with contextlib.suppress(OSError):
                status, _ = _get(f"{base}/healthz")
                listening = time.monotonic() if listening is None else listening
            time.sleep(0.05)
        assert listening is not None and time.monotonic() - listening < 1 + SLACK_S  # --timeout 1
        answers = []
        for _ in range(30):  # several seconds: past DCMI's deadline and its worker's restarts
            answers.append(_get(f"{base}/healthz"))
            time.sleep(0.2)
        assert [status for status, _ in answers] == [200] * 30, answers
        _, metrics = _get(f"{base}/metrics")
        assert _metric(metrics, "npuwatch_up") == {"npuwatch_up": 1.0}
    _no_leftovers(str(tmp_path))


def test_metrics_say_down_when_no_source_lists_a_chip(tmp_path):
    library = _compile(tmp_path, ["CARDS=0"])
    root, _npu_smi = _machine(tmp_path, npu_smi="capture")
    port = _free_port()
    args = ["--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(tmp_path / "none")]
    with _serving([*args, "--interval", "0.5"], port) as server:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60.0
        body = ""
        while "npuwatch_up" not in body or "npuwatch_scrape_duration_seconds" not in body:
            assert server.poll() is None and time.monotonic() < deadline
            with contextlib.suppress(OSError):
                _, body = _get(f"{base}/metrics")
            time.sleep(0.1)
        assert _metric(body, "npuwatch_up") == {"npuwatch_up": 0.0}
        status, text = _get(f"{base}/healthz")
        assert status == 503 and "lists no chip" in text, text


def test_doctor_waits_for_a_hung_library_beside_a_hung_npu_smi_not_after_it(tmp_path):
    """DCMI's first read begins as the doctor begins: the two hangs overlap (they added up)."""
    timeout_s = 4
    library = _compile(tmp_path, ["HANG_INIT", "CARDS=8"])
    root, npu_smi = _machine(tmp_path, npu_smi="hang")
    code, out, _err, took_s = _npuwatch(
        "doctor", "--root", str(root), "--dcmi-lib", str(library), "--npu-smi", str(npu_smi),
        "--timeout", str(timeout_s), "--only", "npu-smi,dcmi",
    )  # fmt: skip
    assert code == 2
    assert "npu-smi did not answer within 4 s" in out and "DCMI hangs" in out
    assert took_s < 2 * timeout_s  # one wait, not one after the other
    _no_leftovers(str(tmp_path))
