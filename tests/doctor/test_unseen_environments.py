"""Whole-doctor runs on broken (and healthy) environments built like the other tests' but not used there.

Each test breaks a simulated machine the way a real one breaks, runs every check through the
engine, and asserts that the right check (and only it) fails, with an exact fix.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Dict, Iterable

import pytest

from npuwatch.doctor import facts, registry
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.result import CheckResult, Status
from tests.doctor.machines import TestMachine, simulated

TOOLKIT = "/usr/local/Ascend/ascend-toolkit"
SITE = "/usr/local/lib/python3.10/site-packages"
SOURCE = f"`source {TOOLKIT}/set_env.sh`"


@pytest.fixture(autouse=True)
def _as_root(monkeypatch):
    identity = facts.UserIdentity(0, "root", frozenset({0}), process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


def doctor(tm: TestMachine) -> Dict[str, CheckResult]:
    report = run_doctor(tm.machine(), registry.all_checks())
    return {result.id: result for result in report.results}


def failing(results: Dict[str, CheckResult]) -> Dict[str, Status]:
    return {i: r.status for i, r in results.items() if r.status in (Status.FAIL, Status.ERROR)}


def assert_all_good(results: Dict[str, CheckResult], allowed_warnings: Iterable[str] = ()) -> None:
    bad = {i: (r.status, r.summary) for i, r in results.items() if r.status not in (Status.PASS, Status.SKIP)}
    for name in allowed_warnings:
        bad.pop(name, None)
    assert bad == {}


def upgrade_driver_to_25_0(tm: TestMachine) -> None:
    tm.builder.install_driver("25.0.rc1.1", firmware="7.7.0.1.231", compatible_fw="[7.0.0,7.8.99]")


def replace_cann(tm: TestMachine, version: str) -> None:
    """Uninstall the simulator's CANN and source a new one (same layout, 910B kernels)."""
    tm.remove(TOOLKIT)
    tm.builder.environ.clear()
    tm.builder.install_cann(version, sourced=True, kernel_socs=["ascend910b"])
    tm.environ.update(tm.builder.environ)


def replace_torch(tm: TestMachine, torch: str, torch_npu: str) -> None:
    version_py = f"__version__ = '{torch}'\ncuda = None\n"
    tm.remove(f"{SITE}/torch-2.1.0.dist-info")
    tm.remove(f"{SITE}/torch_npu-2.1.0.post6.dist-info")
    tm.builder.install_python_package(
        "torch", torch, modules=["torch"], files={"torch/version.py": version_py}
    )
    tm.builder.install_python_package("torch_npu", torch_npu, modules=["torch_npu"])


# ---------------------------------------------------------------- CANN installs and environment


def test_cann_installed_only_under_home_and_sourced_passes(tmp_path):
    tm = simulated(tmp_path)
    home = "/home/alice/Ascend/ascend-toolkit"
    tm.builder.path("/home/alice/Ascend").mkdir(parents=True)
    shutil.move(str(tm.builder.path(TOOLKIT)), str(tm.builder.path(home)))
    tm.environ = {k: v.replace(TOOLKIT, home) for k, v in tm.environ.items()}
    tm.environ["HOME"] = "/home/alice"
    results = doctor(tm)
    assert_all_good(results)
    assert results["cann-install"].summary == f"CANN 8.0.RC2 at {home}/latest"
    assert results["cann-env"].summary == f"CANN 8.0.RC2 environment is sourced ({home}/set_env.sh)"


def test_two_toolkits_with_ld_library_path_on_the_old_one(tmp_path):
    # 8.1.RC1 installed beside 8.0.RC2 (now `latest`); LD_LIBRARY_PATH still names 8.0.RC2's folders.
    tm = simulated(tmp_path)
    tm.builder.install_cann("8.1.RC1", kernel_socs=["ascend910b"])
    upgrade_driver_to_25_0(tm)
    tm.environ["LD_LIBRARY_PATH"] = tm.environ["LD_LIBRARY_PATH"].replace(
        f"{TOOLKIT}/latest", f"{TOOLKIT}/8.0.RC2"
    )
    results = doctor(tm)
    result = results["cann-env"]
    assert result.status is Status.FAIL
    # The cause leads (not "LD_LIBRARY_PATH lacks …/latest/lib64: … will not be found": they are found).
    assert result.summary.startswith("2 CANN installs mixed on the paths: expect `undefined symbol` errors")
    old = f"{TOOLKIT}/8.0.RC2 (CANN 8.0.RC2) named by LD_LIBRARY_PATH"
    assert any(line.startswith(old) for line in result.details)
    hint = result.hint or ""
    assert hint.startswith("start from a clean environment")
    assert hint.count(SOURCE) == 1  # the source line once, not repeated by each problem
    assert set(failing(results)) == {"cann-env"}


def test_driver_under_opt_with_set_env_for_the_default_path(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.path("/opt/Ascend").mkdir(parents=True)
    for part in ("driver", "firmware"):  # installed with --install-path=/opt/Ascend
        moved = tm.builder.path(f"/usr/local/Ascend/{part}")
        shutil.move(str(moved), str(tm.builder.path(f"/opt/Ascend/{part}")))
    info = tm.builder.path("/etc/ascend_install.info")
    info.write_text(info.read_text().replace("Path_Param=/usr/local/Ascend", "Path_Param=/opt/Ascend"))
    results = doctor(tm)
    result = results["cann-env"]
    assert result.status is Status.FAIL
    assert "LD_LIBRARY_PATH lacks the driver folder /opt/Ascend/driver/lib64/driver" in result.summary
    assert "`export LD_LIBRARY_PATH=/opt/Ascend/driver/lib64:" in (result.hint or "")
    assert results["driver-install"].status is Status.PASS
    assert set(failing(results)) == {"cann-env"}

    # …and once LD_LIBRARY_PATH names /opt/Ascend/driver, everything passes.
    tm.environ["LD_LIBRARY_PATH"] = tm.environ["LD_LIBRARY_PATH"].replace(
        "/usr/local/Ascend/driver", "/opt/Ascend/driver"
    )
    assert_all_good(doctor(tm))


def test_broken_libascendcl_blames_cann_libraries(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_library(f"{TOOLKIT}/8.0.RC2/lib64/libascendcl.so", broken=True)
    results = doctor(tm)
    result = results["cann-libraries"]
    assert result.status is Status.FAIL
    assert result.summary.startswith("libascendcl.so does not load: ")
    assert f"`ldd {TOOLKIT}/latest/lib64/libascendcl.so | grep 'not found'`" in (result.hint or "")
    assert set(failing(results)) == {"cann-libraries"}


# ---------------------------------------------------------------- torch / torch_npu


def test_cpu_torch_wheel_with_matching_torch_npu_on_cann_8_1_passes(tmp_path):
    tm = simulated(tmp_path)
    replace_cann(tm, "8.1.RC1")
    upgrade_driver_to_25_0(tm)
    replace_torch(tm, "2.5.1+cpu", "2.5.1")
    results = doctor(tm)
    assert_all_good(results)
    assert results["torch-npu-compat"].summary.startswith("torch 2.5.1+cpu + torch_npu 2.5.1 on CANN 8.1.RC1")


def test_torch_older_than_torch_npu_on_cann_8_1(tmp_path):
    tm = simulated(tmp_path)
    replace_cann(tm, "8.1.RC1")
    upgrade_driver_to_25_0(tm)
    replace_torch(tm, "2.4.0", "2.5.1")
    results = doctor(tm)
    result = results["torch-npu-compat"]
    assert result.status is Status.FAIL
    assert result.summary.startswith("torch 2.4.0 and torch_npu 2.5.1 do not match")
    assert "`pip install torch_npu==2.4.0.post4`" in (result.hint or "")
    assert "`pip install torch==2.5.1`" in (result.hint or "")
    assert set(failing(results)) == {"torch-npu-compat"}


# ---------------------------------------------------------------- driver and npu-smi


def test_driver_install_status_failed(tmp_path):
    tm = simulated(tmp_path)
    info = tm.builder.path("/etc/ascend_install.info")
    info.write_text(info.read_text().replace("Status=complete", "Status=failed"))
    results = doctor(tm)
    result = results["driver-install"]
    assert result.status is Status.FAIL
    assert "Driver_Install_Status=failed" in result.summary
    assert "npu-driver_<version>_linux-<arch>.run --full" in (result.hint or "")
    assert set(failing(results)) == {"driver-install"}


def test_npu_smi_without_execute_permission(tmp_path):
    tm = simulated(tmp_path)
    assert tm.npu_smi is not None
    os.chmod(tm.npu_smi, 0o644)
    results = doctor(tm)
    result = results["npu-smi"]
    assert result.status is Status.FAIL
    assert result.summary == f"npu-smi at {tm.npu_smi} has no execute permission (mode 0644)"
    # An exact fix: not "run as root" (root cannot run a file without execute bits either).
    assert f"`sudo chmod 755 {tm.npu_smi}`" in (result.hint or "")
    assert "run as root" not in (result.hint or "")
    assert results["chip-health"].status is Status.SKIP
    assert set(failing(results)) == {"npu-smi"}


def test_npu_smi_exiting_0_with_empty_output(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi("")
    results = doctor(tm)
    assert results["npu-smi"].status is Status.FAIL
    assert results["npu-smi"].summary == "npu-smi printed nothing"
    assert "the driver's program" in (results["npu-smi"].hint or "")
    assert set(failing(results)) == {"npu-smi"}


def test_firmware_older_than_the_driver_range_on_310p_duo(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    info = tm.builder.path("/usr/local/Ascend/firmware/version.info")
    info.write_text(re.sub(r"^Version=.*$", "Version=6.4.12.1.241", info.read_text(), flags=re.M))
    results = doctor(tm)
    result = results["firmware-compat"]
    assert result.status is Status.FAIL
    assert result.summary.endswith("outside driver 24.1.0.1's range [7.0.0, 7.8.99]: the firmware is too old")
    assert "npu-firmware_<version>.run --full" in (result.hint or "")
    assert set(failing(results)) == {"firmware-compat"}


# ---------------------------------------------------------------- devices and visibility


def test_a3_host_with_one_of_16_davinci_nodes_missing(tmp_path):
    tm = simulated(tmp_path, "a3")
    tm.remove("/dev/davinci13")
    results = doctor(tm)
    result = results["device-nodes"]
    assert result.status is Status.FAIL
    assert result.summary.startswith("only 15 of 16 chips have a /dev/davinciN node")
    assert "`dmesg | grep -i devdrv`" in (result.hint or "")


def _container_with_davinci3(tmp_path: Path, visible: str) -> TestMachine:
    tm = simulated(tmp_path)
    for chip in range(8):
        if chip != 3:
            tm.remove(f"/dev/davinci{chip}")
    tm.builder.mark_container("docker")
    tm.environ["ASCEND_RT_VISIBLE_DEVICES"] = visible
    return tm


def test_container_with_davinci3_and_rt_visible_devices_3(tmp_path):
    results = doctor(_container_with_davinci3(tmp_path, "3"))
    result = results["visible-devices"]
    assert result.status is Status.FAIL
    assert "/dev/davinci3 is logical device 0 in this container" in result.summary
    assert result.hint == "`export ASCEND_RT_VISIBLE_DEVICES=0`"
    assert set(failing(results)) == {"visible-devices"}


def test_container_with_davinci3_and_rt_visible_devices_0_has_no_failure(tmp_path):
    results = doctor(_container_with_davinci3(tmp_path, "0"))
    assert results["visible-devices"].status is Status.PASS
    assert failing(results) == {}


def test_310p_duo_healthy_passes(tmp_path):
    assert_all_good(doctor(simulated(tmp_path, "310p-duo")))


def test_310p_duo_all_four_logical_ids_pass(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    tm.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1,2,3"
    assert_all_good(doctor(tm))


def test_310p_duo_npu_id_used_as_a_device_id(tmp_path):
    # npu-smi shows NPU IDs 2 and 5; the runtime counts chips 0-3.
    tm = simulated(tmp_path, "310p-duo")
    tm.environ["ASCEND_RT_VISIBLE_DEVICES"] = "5"
    results = doctor(tm)
    result = results["visible-devices"]
    assert result.status is Status.FAIL
    assert "only 4 devices are visible here (logical IDs 0-3)" in result.summary
    assert result.hint == "`export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3`"
    assert set(failing(results)) == {"visible-devices"}
