"""Whole-doctor runs on environments the doctor misjudged (one false alarm, two misses, four weak hints).

Each test builds the machine as a sysroot tree (real version-file texts, real npu-smi layouts and
error texts, pyvenv.cfg files), runs the doctor through the engine or the CLI with ``--root``, and
asserts the check, its verdict and the fix it prints.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, Optional

import pytest

from npuwatch.doctor import facts, registry
from npuwatch.doctor.checks import cann_python_deps
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import CheckResult, Status
from npuwatch.probes.sysroot import Sysroot
from tests.conftest import capture_text
from tests.doctor.machines import TestMachine, simulated

TOOLKIT = "/usr/local/Ascend/ascend-toolkit"
SITE = "/usr/local/lib/python3.10/site-packages"
#: What npu-smi prints to a normal user where DCMI is root-only (hw-native-sys/simpler PR #2043,
#: the source runtime-and-doctor.md §10 row 28 cites), with its exit code.
ROOT_ONLY_TEXT = "DrvMngGetConsoleLogLevel failed. (ret=4)\ndcmi module initialize failed. ret is -8005\n"
ROOT_ONLY_EXIT = 187


def act_as(monkeypatch, uid: int, name: str, gids: Iterable[int]) -> None:
    identity = facts.UserIdentity(uid, name, frozenset(gids), process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


@pytest.fixture(autouse=True)
def _as_root(monkeypatch):
    act_as(monkeypatch, 0, "root", {0})


def doctor(tm: TestMachine, machine: Optional[Machine] = None) -> Dict[str, CheckResult]:
    report = run_doctor(machine or tm.machine(), registry.all_checks())
    return {result.id: result for result in report.results}


def not_good(results: Dict[str, CheckResult], allowed: Iterable[str] = ()) -> Dict[str, Status]:
    return {
        i: r.status
        for i, r in results.items()
        if r.status not in (Status.PASS, Status.SKIP) and i not in set(allowed)
    }


# ---------------------------------------------------------------- 1. every firmware range


def test_bracket_lists_are_read_whole():
    from npuwatch.probes.install_files import parse_bracket_lists, parse_driver_version_info

    assert parse_bracket_lists("[6.4.0,6.4.99],[7.0.0,8.9.9]") == (("6.4.0", "6.4.99"), ("7.0.0", "8.9.9"))
    assert parse_bracket_lists("[V100R001C13], [V100R001C15]") == (("V100R001C13",), ("V100R001C15",))
    assert parse_bracket_lists("") == ()
    info = parse_driver_version_info("Version=25.3.rc1\ncompatible_version_fw=[6.4.0,6.4.99],[7.0.0,8.9.9]\n")
    assert info.compatible_firmware_ranges == (("6.4.0", "6.4.99"), ("7.0.0", "8.9.9"))


def _driver_with_two_firmware_ranges(tm: TestMachine, firmware: str) -> None:
    # A real 310P driver 25.3.rc1 version.info lists two ranges.
    tm.builder.install_driver("25.3.rc1", firmware=firmware, compatible_fw="[6.4.0,6.4.99],[7.0.0,8.9.9]")


def test_310p_firmware_in_the_drivers_second_range_passes(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    _driver_with_two_firmware_ranges(tm, "7.8.0.2.212")
    results = doctor(tm)
    result = results["firmware-compat"]
    assert result.status is Status.PASS, result.summary
    assert result.summary == (
        "firmware 7.8.0.2.212 is within driver 25.3.rc1's range [7.0.0, 8.9.9] "
        "(of [6.4.0, 6.4.99], [7.0.0, 8.9.9])"
    )
    assert not_good(results, {"driver-cann-compat"}) == {}


def test_310p_firmware_between_the_two_ranges_fails_naming_both(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    _driver_with_two_firmware_ranges(tm, "6.5.0.1.100")
    result = doctor(tm)["firmware-compat"]
    assert result.status is Status.FAIL
    assert result.summary == (
        "firmware 6.5.0.1.100 is outside driver 25.3.rc1's ranges [6.4.0, 6.4.99], [7.0.0, 8.9.9]: "
        "the firmware is too old"
    )


# ---------------------------------------------------------------- 2. another container's job


def _wide_one_chip(hbm: str, memory: str) -> str:
    """Capture 008 cut to NPU 0 (a container given one chip); its process says NA in container."""
    lines = capture_text("008").splitlines()
    text = "\n".join(lines[0:9] + lines[30:35]) + "\n"
    return text.replace("8676 / 65536", hbm).replace("| 5175 ", f"| {memory} ")


def test_container_chip_full_with_another_containers_job(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    for chip in range(1, 8):
        tm.remove(f"/dev/davinci{chip}")
    tm.builder.mark_container("docker")  # a private PID namespace: PID 485946 is not here
    tm.scripted_npu_smi(_wide_one_chip("62260 / 65536", "58000"))
    # npu-smi alone is scripted: the demo's fake DCMI would still read all 8 chips (dcmi would warn).
    tm.builder.install_library("/usr/local/dcmi/libdcmi.so")
    results = doctor(tm)
    result = results["hbm-held"]
    assert result.status is Status.WARN, result.summary
    assert result.summary == "NPU 0 is busy with another container's job (PID 485946 pytest, 58000 MiB)"
    hint = result.hint or ""
    assert "ask for another chip" in hint
    assert "on the host" in hint and "`npu-smi info`" in hint
    assert any("Process id in container: NA" in line for line in result.details)
    assert not_good(results, {"hbm-held"}) == {}


def test_own_job_in_the_container_is_not_another_containers(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    for chip in range(1, 8):
        tm.remove(f"/dev/davinci{chip}")
    tm.builder.mark_container("docker")
    text = _wide_one_chip("62260 / 65536", "58000").replace("| NA     ", "| 42     ")
    tm.scripted_npu_smi(text)
    tm.builder.write_file("/proc/42/comm", "pytest\n")
    result = doctor(tm)["hbm-held"]
    assert result.status is Status.PASS, result.summary


def test_privileged_container_seeing_another_tenants_chip(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    tm.builder.mark_container("docker")
    tm.scripted_npu_smi(capture_text("008"))
    results = doctor(tm)
    assert results["container-mounts"].status is Status.WARN
    result = results["hbm-held"]
    assert result.status is Status.WARN, result.summary
    assert result.summary == "NPU 0 is busy with another container's job (PID 485946 pytest, 5175 MiB)"
    assert "`export ASCEND_RT_VISIBLE_DEVICES=1,2,3,4,5,6,7`" in (result.hint or "")


# ---------------------------------------------------------------- 3. the Python the job runs in


def _venv(tm: TestMachine, prefix: str, include_system: bool) -> None:
    flag = "true" if include_system else "false"
    tm.builder.write_file(
        f"{prefix}/pyvenv.cfg", f"home = /usr/bin\ninclude-system-site-packages = {flag}\nversion = 3.10.12\n"
    )
    tm.builder.path(f"{prefix}/lib/python3.10/site-packages").mkdir(parents=True)
    tm.builder.install_executable(f"{prefix}/bin/python", "#!/bin/sh\n")


def test_venv_without_system_packages_misses_canns_python_deps(tmp_path):
    tm = simulated(tmp_path)
    _venv(tm, "/home/alice/job-venv", include_system=False)
    tm.environ["VIRTUAL_ENV"] = "/home/alice/job-venv"
    results = doctor(tm)
    result = results["cann-python-deps"]
    assert result.status is Status.FAIL, result.summary
    assert "decorator, sympy" in result.summary
    assert (result.hint or "").startswith("`/home/alice/job-venv/bin/python -m pip install decorator sympy")
    (searched,) = [line for line in result.details if line.startswith("searched: ")]
    assert searched.endswith(", /home/alice/job-venv/lib/python3.10/site-packages")
    assert SITE not in searched
    assert any("include-system-site-packages = false" in line for line in result.details)


def test_venv_with_system_packages_passes(tmp_path):
    tm = simulated(tmp_path)
    _venv(tm, "/home/alice/job-venv", include_system=True)
    tm.environ["VIRTUAL_ENV"] = "/home/alice/job-venv"
    assert doctor(tm)["cann-python-deps"].status is Status.PASS


def test_conda_env_does_not_see_system_packages(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.path("/opt/conda/envs/job/lib/python3.9/site-packages").mkdir(parents=True)
    tm.environ["CONDA_PREFIX"] = "/opt/conda/envs/job"
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.FAIL
    assert (result.hint or "").startswith("`/opt/conda/envs/job/bin/python -m pip install")
    assert any(line.startswith("Python 3.9 ") for line in result.details)


def test_python_option_names_the_interpreter_in_the_tree(tmp_path):
    tm = simulated(tmp_path)
    _venv(tm, "/srv/venv", include_system=False)
    machine = Machine(Sysroot(tm.root, environ=tm.environ), tm.npu_smi, python="/srv/venv/bin/python")
    finding = cann_python_deps.CHECK.run(machine)
    assert finding.status is Status.FAIL
    assert (finding.hint or "").startswith("`/srv/venv/bin/python -m pip install")


def _real_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path / "bin" / "python"


def test_python_option_judges_another_live_interpreter(tmp_path):
    python = _real_venv(tmp_path / "venv")
    machine = Machine(Sysroot("/", environ=dict(os.environ)), None, python=str(python))
    finding = cann_python_deps.CHECK.run(machine)
    assert finding.status is Status.FAIL, finding.summary
    assert (finding.hint or "").startswith(f"`{python} -m pip install")
    assert any(
        f"Python {sys.version_info[0]}.{sys.version_info[1]} ({python})" == line for line in finding.details
    )


def test_live_virtual_env_is_judged_rather_than_npuwatchs_own(tmp_path):
    python = _real_venv(tmp_path / "venv")
    environ = {**os.environ, "VIRTUAL_ENV": str(tmp_path / "venv")}
    environ.pop("CONDA_PREFIX", None)
    finding = cann_python_deps.CHECK.run(Machine(Sysroot("/", environ=environ), None))
    assert finding.status is Status.FAIL, finding.summary
    assert (finding.hint or "").startswith(f"`{python} -m pip install")


def test_doctor_cli_takes_python(tmp_path):
    tm = simulated(tmp_path)
    _venv(tm, "/srv/venv", include_system=False)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "npuwatch",
            "doctor",
            "--root",
            str(tm.root),
            "--python",
            "/srv/venv/bin/python",
            "--only",
            "cann-python-deps",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 2, done.stderr
    assert "/srv/venv/bin/python -m pip install" in done.stdout


# ---------------------------------------------------------------- 4. hints


def test_npu_smi_root_only_for_a_user_whose_nodes_open(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    gid = os.stat(tm.builder.path("/dev/davinci0")).st_gid
    act_as(monkeypatch, 1000, "alice", {1000, gid})  # the nodes (0660) open through the group
    tm.builder.write_file("/etc/passwd", "alice:x:1000:1000::/home/alice:/bin/bash\n")  # the tree names her
    tm.scripted_npu_smi(stderr=ROOT_ONLY_TEXT, exit_code=ROOT_ONLY_EXIT)
    results = doctor(tm)
    assert results["device-permissions"].status is Status.PASS
    result = results["npu-smi"]
    assert result.status is Status.FAIL
    assert result.summary == (
        "npu-smi failed with DCMI error -8005 for alice while every device node opens: "
        "DCMI is restricted to root on this host"
    )
    hint = result.hint or ""
    assert "`sudo usermod -aG HwHiAiUser alice`" in hint
    assert "--install-for-all" in hint
    assert "reboot" not in hint and "does not match its kernel" not in hint


def test_npu_smi_8005_for_root_still_blames_the_driver(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(stderr=ROOT_ONLY_TEXT, exit_code=ROOT_ONLY_EXIT)
    result = doctor(tm)["npu-smi"]
    assert result.status is Status.FAIL
    assert "does not match its kernel module" in (result.hint or "")


def test_cann_8_0_0_listing_driver_24_1_is_supported(tmp_path):
    tm = simulated(tmp_path)
    tm.remove(TOOLKIT)
    tm.builder.environ.clear()
    tm.builder.install_cann(
        "8.0.0", sourced=True, kernel_socs=["ascend910b"], inner_version="V100R001C20SPC001B231"
    )
    tm.environ.update(tm.builder.environ)
    info = tm.builder.path(f"{TOOLKIT}/8.0.0/aarch64-linux/ascend_toolkit_install.info")
    info.write_text(
        re.sub(
            r"(?m)^compatible_version=.*$",
            "compatible_version=[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19],[V100R001C20]",
            info.read_text(),
        )
    )
    tm.builder.install_driver("24.1.0", firmware="7.5.0.1.129", inner_version="V100R001C19SPC001B226")
    result = doctor(tm)["driver-cann-compat"]
    assert result.status is Status.PASS, result.summary
    assert result.summary == "driver 24.1.0 is listed as compatible by CANN 8.0.0's install info"


def test_atlas_200i_dk_a2_soc_board_has_no_pci_warning(tmp_path):
    tm = simulated(tmp_path, "idle")
    tm.remove("/sys/bus/pci/devices")
    for chip in range(1, 8):
        tm.remove(f"/dev/davinci{chip}")
    tm.scripted_npu_smi(capture_text("039"))
    result = doctor(tm)["pci-devices"]
    assert result.status is Status.PASS, result.summary
    assert result.summary == "Ascend 310B4 SoC board (npu-smi): no PCIe endpoint to find, as expected"


def test_soc_board_without_npu_smi_answer_still_warns(tmp_path):
    tm = simulated(tmp_path, "idle")
    tm.remove("/sys/bus/pci/devices")
    tm.scripted_npu_smi(capture_text("022"))  # a 910B4 PCIe card's table: no SoC
    assert doctor(tm)["pci-devices"].status is Status.WARN


def test_device_permissions_names_the_trees_user(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    act_as(monkeypatch, 1000, "hostuser", {1000})  # the name this host's /etc/passwd gives uid 1000
    tm.builder.write_file(
        "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\nmlops:x:1000:1000::/home/mlops:/bin/sh\n"
    )
    result = doctor(tm)["device-permissions"]
    assert result.status is Status.FAIL
    assert result.summary.startswith("mlops (uid 1000) cannot open")
    assert "hostuser" not in result.summary
