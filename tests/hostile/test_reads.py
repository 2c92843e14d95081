"""Hostile filesystem reads (issue 14, defect 4): a FIFO where a sysfs or install file belongs.

Opening a FIFO for reading blocks until a writer comes; reading one with a writer that never
writes blocks forever.  Every read of a machine file is non-blocking, refuses what is not a
regular file and is bounded in size, so ``snapshot`` and ``doctor`` finish.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Tuple

import pytest

from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, Status
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder

#: Generous: a healthy run of either command over a small tree takes a second or two.
DEADLINE_S = 60.0
BDF = "0000:c1:00.0"
DEVICE = f"/sys/devices/pci0000:c0/0000:c0:00.0/{BDF}"

FIFOS = {
    "vendor": f"{DEVICE}/vendor",
    "config": f"{DEVICE}/config",
    "current_link_speed": f"{DEVICE}/current_link_speed",
    "version.info": "/usr/local/Ascend/driver/version.info",
    "ascend_install.info": "/etc/ascend_install.info",
}


def machine(root: Path) -> SysrootBuilder:
    """One 910B chip with its driver installed and no npu-smi."""
    builder = SysrootBuilder(root)
    builder.add_pci_function(BDF, device_id=0xD802, root_port="0000:c0:00.0")
    builder.add_dev_nodes(range(1))
    builder.install_driver("24.1.rc2", firmware="7.5.0.1.129", userland=False)
    return builder


def put_fifo(builder: SysrootBuilder, machine_path: str) -> Path:
    target = builder.path(machine_path)
    assert target.exists(), machine_path  # the file the FIFO replaces is one the probes read
    target.unlink()
    os.mkfifo(target)
    return target


def run_child(*args: str) -> Tuple[int, str, str, bool]:
    """Run ``npuwatch ARGS`` in its own process group: (exit code, stdout, stderr, timed out).

    Past the deadline the whole group is killed; either way none of it is left afterwards.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(DEADLINE_S, kill)
    timer.start()
    try:
        out, err = proc.communicate()
    finally:
        timer.cancel()
    try:
        os.killpg(proc.pid, 0)
        left = True
    except ProcessLookupError:
        left = False
    assert not left, "a process of the run outlived it"
    return proc.returncode, out, err, timed_out.is_set()


@pytest.mark.parametrize("command", ["snapshot", "doctor"])
@pytest.mark.parametrize("which", sorted(FIFOS))
def test_a_fifo_in_place_of_a_machine_file_does_not_hang(tmp_path: Path, command: str, which: str) -> None:
    builder = machine(tmp_path / "root")
    put_fifo(builder, FIFOS[which])
    code, _out, err, timed_out = run_child(command, "--root", str(builder.root))
    assert not timed_out, f"`npuwatch {command}` was still blocked after {DEADLINE_S:g} s"
    assert code in (0, 1, 2), err
    assert "Traceback" not in err


def test_sysroot_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    builder = machine(tmp_path / "root")
    put_fifo(builder, FIFOS["vendor"])
    box = []
    worker = threading.Thread(
        target=lambda: box.append(Sysroot(builder.root).read_line(FIFOS["vendor"])), daemon=True
    )
    worker.start()
    worker.join(10)
    if worker.is_alive():  # release the blocked open() so the thread ends
        with open(builder.path(FIFOS["vendor"]), "wb"):
            pass
        worker.join(10)
        pytest.fail("reading a FIFO blocked")
    assert box == [None]


def test_sysroot_reads_regular_files_as_before(tmp_path: Path) -> None:
    builder = machine(tmp_path / "root")
    root = Sysroot(builder.root)
    assert root.read_line(FIFOS["vendor"]) == "0x19e5"
    assert root.read_bytes(FIFOS["config"], 4) == bytes.fromhex("e5 19 02 d8")
    assert root.read_text("/etc/ascend_install.info", limit=5) is not None
    assert len(root.read_text("/etc/ascend_install.info", limit=5) or "") == 5
    assert root.read_text("/no/such/file") is None
    assert root.read_text("/etc") is None  # a folder is not a file


class _HungScanMachine(Machine):
    """A machine whose hardware scan never returns (a sysfs read stuck in a hung driver)."""

    def __init__(self, sysroot: Sysroot, release: threading.Event) -> None:
        super().__init__(sysroot, None)
        self._release = release

    def has_hardware(self) -> bool:
        self._release.wait(120)
        return True


def test_the_doctors_hardware_scan_is_under_a_deadline(tmp_path: Path) -> None:
    builder = machine(tmp_path / "root")
    release = threading.Event()
    hung = _HungScanMachine(builder.sysroot(), release)
    check = Check(
        "x.ok", Group.HARDWARE, "a check", lambda m: Finding(Status.PASS, "fine"), needs_hardware=True
    )
    box = []
    worker = threading.Thread(target=lambda: box.append(run_doctor(hung, [check])), daemon=True)
    worker.start()
    worker.join(DEADLINE_S)
    finished = bool(box)
    release.set()  # lets the blocked scan end, so no thread is left behind
    worker.join(10)
    assert finished, "run_doctor waited for the hung hardware scan"
    (result,) = box[0].results
    assert result.status is Status.PASS  # cannot tell: the hardware checks run and explain
