"""Real failure modes (runtime-and-doctor.md §10) seen through the hardware and driver checks.

Each test builds the broken machine as a sysroot tree (plus environment and a scripted npu-smi
where the failure shows in its output) and asserts which check catches it, how, and the fix.
Rows 3 and 11 in a container are also container-mounts' business; these assert this side.
"""

from __future__ import annotations

from npuwatch.doctor import facts
from npuwatch.doctor.checks import (
    chip_health,
    device_nodes,
    device_permissions,
    driver_install,
    hbm_held,
    npu_smi,
)
from npuwatch.doctor.result import Status
from tests.conftest import capture_text
from tests.doctor.machines import NPU_SMI, TestMachine, simulated

DRIVER = "/usr/local/Ascend/driver"


def as_user(monkeypatch, uid: int, name: str, gids: frozenset) -> None:
    identity = facts.UserIdentity(uid, name, gids, process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


def health_table(npu_id: int, state: str) -> str:
    """Capture 022 (8 × 910B4, no process) with one chip's Health cell changed."""
    lines = capture_text("022").splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(f"| {npu_id} ") and "| OK" in line:
            lines[i] = line.replace("| OK      ", f"| {state:<8}", 1)
            break
    return "".join(lines)


def npu_smi_by_command(tm: TestMachine, answers: dict) -> None:
    """An npu-smi script answering each command line (``info``, ``info -t health -i 3 -c 0``)."""
    script = '#!/bin/sh\ncase "$*" in\n'
    for index, (command, text) in enumerate(answers.items()):
        out = tm.builder.write_file(f"/usr/local/bin/answer{index}.txt", text)
        script += f"  '{command}') cat '{out}' ;;\n"
    script += "  *) echo 'Error parameter of -t' ; exit 1 ;;\nesac\n"
    tm.npu_smi = tm.builder.install_executable(NPU_SMI, script)


def test_row_03_libascend_hal_missing_in_a_container(tmp_path):
    # `libascend_hal.so: cannot open shared object file`: the image has no driver userland mount.
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove(f"{DRIVER}/lib64")
    finding = tm.run(driver_install.CHECK)
    assert driver_install.CHECK.id == "driver-install"
    assert finding.status is Status.FAIL
    assert (
        finding.summary
        == f"{DRIVER}/lib64/driver/libascend_hal.so is missing: CANN and torch_npu cannot start"
    )
    assert "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64" in finding.hint


def test_row_03_no_driver_at_all_in_a_container(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove(DRIVER)
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("the Ascend driver is not installed in this container")
    assert "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info" in finding.hint
    assert "-v /etc/ascend_install.info:/etc/ascend_install.info" in finding.hint


def test_row_11_npu_smi_not_mounted_in_a_container(tmp_path):
    # `bash: /usr/local/bin/npu-smi: No such file or directory` (capture 075).
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove(NPU_SMI)
    finding = tm.run(npu_smi.CHECK)
    assert npu_smi.CHECK.id == "npu-smi"
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("npu-smi not found at ")
    assert "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi" in finding.hint
    assert "-v /usr/local/dcmi:/usr/local/dcmi" in finding.hint


def test_row_11_npu_smi_cannot_load_libc_sec(tmp_path):
    # `npu-smi: error while loading shared libraries: libc_sec.so` (capture 069, HAMi #615).
    tm = simulated(tmp_path)
    tm.builder.mark_container("kubernetes")
    tm.scripted_npu_smi(stderr=capture_text("069"), exit_code=127)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "npu-smi cannot load libc_sec.so: the driver's libraries are not visible"
    assert "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64" in finding.hint


def test_row_12_dcmi_8005_container_without_manager_nodes(tmp_path):
    # `dcmi module initialize failed. ret is -8005` (capture 035, vllm-ascend #2698).
    tm = simulated(tmp_path, "container-missing-nodes")
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "npu-smi failed with DCMI error -8005 because "
        "/dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc are missing"
    )
    assert "--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc" in finding.hint
    nodes = tm.run(device_nodes.CHECK)
    assert device_nodes.CHECK.id == "device-nodes"
    assert nodes.status is Status.FAIL
    assert "--device /dev/davinci_manager" in nodes.hint


def test_row_12_dcmi_8005_with_one_node_missing(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove("/dev/hisi_hdc")
    tm.scripted_npu_smi(stderr=capture_text("035"), exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "npu-smi failed with DCMI error -8005 because /dev/hisi_hdc is missing"
    assert finding.hint.startswith("start the container with --device /dev/hisi_hdc")


def test_row_13_dcmi_8020_device_used_by_another_container(tmp_path):
    # `dcmi model initialized failed, because the device is used. ret is -8020` (capture 034).
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.scripted_npu_smi(stderr=capture_text("034"), exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "npu-smi failed with DCMI error -8020: the device is held by another process or container"
    )
    assert "`fuser -v /dev/davinci*`" in finding.hint
    assert "`npu-smi info`" in finding.hint


def test_row_15_permission_denied_on_the_device_nodes(tmp_path, monkeypatch):
    # `Permission denied` on /dev/davinciN as a user outside HwHiAiUser (vllm-ascend #9490).
    tm = simulated(tmp_path)
    import os

    st = os.stat(tm.builder.path("/dev/davinci0"))
    tm.builder.write_file("/etc/group", f"HwHiAiUser:x:{st.st_gid}:\n")
    as_user(monkeypatch, st.st_uid + 1000, "alice", frozenset({st.st_gid + 1000}))
    finding = tm.run(device_permissions.CHECK)
    assert device_permissions.CHECK.id == "device-permissions"
    assert finding.status is Status.FAIL
    assert "cannot open 11 of 11 device nodes" in finding.summary
    assert "`sudo usermod -aG HwHiAiUser $USER`" in finding.hint
    assert "--install-for-all" in finding.hint


def test_row_18_device_hung_health_critical(tmp_path):
    # acl.rt.set_device → 507033 on a hung device: health is not OK; reset is recommended, not run.
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(health_table(6, "Critical"))
    finding = tm.run(chip_health.CHECK)
    assert chip_health.CHECK.id == "chip-health"
    assert finding.status is Status.FAIL
    assert finding.summary == "NPU 6 (chip 0, 0000:41:00.0) is in Critical state"
    assert "`npu-smi set -t reset -i 6 -c 0`" in finding.hint
    assert "kills every process" in finding.hint


def test_row_20_device_daemon_failure_error_code_from_health_query(tmp_path):
    # 507033 + E39009 (heartbeat): `npu-smi info -t health` names the fault (synthetic code/text,
    # in the layout of capture 013).
    tm = simulated(tmp_path)
    health = (
        "\tNPU ID                         : 3\n\tChip Count                     : 1\n\n"
        "\tHealth Status                  : Alarm\n\tError Code                     : 80CB8009\n"
        "\tError Information              : device heartbeat lost\n\tChip ID                        : 0\n"
    )
    npu_smi_by_command(tm, {"info": health_table(3, "Alarm"), "info -t health -i 3 -c 0": health})
    finding = tm.run(chip_health.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "NPU 3 (chip 0, 0000:82:00.0) is in Alarm state: error 80CB8009 device heartbeat lost"
        " (Huawei's handling: restart-request)"
    )
    assert "`npu-smi info -t health -i 3 -c 0`" in finding.hint
    # The device plugin classes 80CB8009 as restart-request: retry, the chip stays in service.
    assert finding.hint.startswith(
        "Huawei's handling of the code is restart-request: retry the failed request"
    )


def test_row_24_out_of_memory_because_other_users_hold_hbm(tmp_path, monkeypatch):
    # `NPU out of memory` / 207018: another user's job holds the chip's HBM.
    as_user(monkeypatch, 1000, "alice", frozenset({1000}))
    tm = simulated(tmp_path, "chip-alarm")
    tm.builder.write_file("/proc/48218/status", "Name:\tpython3\nUid:\t1001\t1001\t1001\t1001\n")
    tm.builder.write_file("/etc/passwd", "bob:x:1001:1001::/home/bob:/bin/bash\n")
    finding = tm.run(hbm_held.CHECK)
    assert hbm_held.CHECK.id == "hbm-held"
    assert finding.status is Status.WARN
    assert finding.summary == "NPU 1 in use by other users (bob; 50337 MiB held)"
    assert "ASCEND_RT_VISIBLE_DEVICES" in finding.hint


def test_row_24_out_of_memory_because_hbm_leaked(tmp_path):
    tm = simulated(tmp_path)
    row = "| 0000:C2:00.0  | 0           0    / 0          {} / 32768 "
    text = capture_text("022").replace(row.format("2654"), row.format("31000").replace(" /", "/"))
    tm.scripted_npu_smi(text)
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "NPU 1 holds 31000 MiB of HBM with no process"
    assert "`npu-smi set -t reset -i 1 -c 0`" in finding.hint


def test_row_28_npu_smi_refused_to_a_normal_user_warns(tmp_path, monkeypatch):
    # npu-smi fails for a normal user while training works (hw-native-sys/simpler #2043).
    as_user(monkeypatch, 1000, "alice", frozenset({1000}))
    tm = simulated(tmp_path)
    tm.builder.write_file("/etc/passwd", "alice:x:1000:1000::/home/alice:/bin/bash\n")  # the tree names her
    tm.scripted_npu_smi(stderr="dcmi module initialize failed. ret is -8002\n", exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.WARN
    assert (
        finding.summary == "npu-smi is refused to alice (DCMI can be restricted to root); jobs may still run"
    )
    assert "`sudo npu-smi info`" in finding.hint
    assert "`sudo usermod -aG HwHiAiUser $USER`" in finding.hint


def test_row_28_permission_denied_text_warns_too(tmp_path, monkeypatch):
    as_user(monkeypatch, 1000, "alice", frozenset({1000}))
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(stderr="open /dev/davinci_manager failed: Permission denied\n", exit_code=255)
    assert tm.run(npu_smi.CHECK).status is Status.WARN


def test_row_31_install_info_without_driver_path_and_driver_off_ld_path(tmp_path):
    # set_env.sh sourced, but /etc/ascend_install.info lacks Driver_Install_Path_Param (container).
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.builder.write_file("/etc/ascend_install.info", "UserName=HwHiAiUser\nDriver_Install_Status=complete\n")
    tm.environ["LD_LIBRARY_PATH"] = "/usr/local/Ascend/ascend-toolkit/latest/lib64"
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "/etc/ascend_install.info has no Driver_Install_Path_Param: CANN's set_env.sh cannot find the "
        "driver, and /usr/local/Ascend/driver/lib64/driver is not on LD_LIBRARY_PATH"
    )
    assert "`Driver_Install_Path_Param=/usr/local/Ascend`" in finding.hint


def test_row_31_install_info_not_mounted_in_a_container(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove("/etc/ascend_install.info")
    tm.environ["LD_LIBRARY_PATH"] = ""
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("/etc/ascend_install.info is missing")
    assert finding.hint == "-v /etc/ascend_install.info:/etc/ascend_install.info"


def test_row_31_driver_path_with_spaces(tmp_path):
    tm = simulated(tmp_path)
    tm.remove(DRIVER)
    tm.builder.install_driver("24.1.rc2", firmware="7.3.0.1.231", install_path="/opt/Ascend Driver")
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith(
        "the driver is installed under a path with spaces ('/opt/Ascend Driver')"
    )
    assert "--install-path=/usr/local/Ascend" in finding.hint
