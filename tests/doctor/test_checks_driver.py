"""Driver checks: driver-bound, device-nodes, device-permissions, driver-install, firmware-compat, npu-smi."""

from __future__ import annotations

import os

from npuwatch.doctor import facts
from npuwatch.doctor.checks import (
    device_nodes,
    device_permissions,
    driver_bound,
    driver_install,
    firmware_compat,
    npu_smi,
)
from npuwatch.doctor.result import Group, Status
from tests.conftest import capture_text
from tests.doctor.machines import TestMachine, simulated

DRIVER = "/usr/local/Ascend/driver"
HAL = f"{DRIVER}/lib64/driver/libascend_hal.so"


def as_user(monkeypatch, uid: int = 1000, name: str = "alice", gids: frozenset = frozenset()) -> None:
    identity = facts.UserIdentity(uid, name, gids or frozenset({uid}), process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


def driver_owned_nodes(tm: TestMachine, members: str = "") -> os.stat_result:
    """Name the tree's node owner HwHiAiUser (whatever UID the test runs as); returns the stat."""
    st = os.stat(tm.builder.path("/dev/davinci0"))
    tm.builder.write_file(
        "/etc/passwd",
        f"HwHiAiUser:x:{st.st_uid}:{st.st_gid}::/home/HwHiAiUser:/bin/bash\n"
        f"alice:x:{st.st_uid + 1000}:{st.st_gid + 1000}::/home/alice:/bin/bash\n",  # the tests' user
    )
    tm.builder.write_file("/etc/group", f"HwHiAiUser:x:{st.st_gid}:{members}\n")
    return st


# ---------------------------------------------------------------- driver-bound


def test_driver_bound_passes(tmp_path):
    finding = simulated(tmp_path).run(driver_bound.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "all 8 Ascend PCI functions are bound to devdrv_device_driver"
    assert driver_bound.CHECK.requires == ("pci-devices",)
    assert driver_bound.CHECK.needs_hardware
    assert driver_bound.CHECK.group is Group.DRIVER


def test_driver_bound_fails_when_the_driver_is_not_loaded(tmp_path):
    tm = simulated(tmp_path, "no-driver")
    tm.builder.write_file("/proc/modules", "ext4 1 0 - Live 0x0\n")
    finding = tm.run(driver_bound.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith(
        "the Ascend driver (devdrv_device_driver) is not loaded: 8 of 8 functions have no driver ("
    )
    assert "0000:c1:00.0" in finding.summary
    assert "`lsmod | grep drv_`" in finding.hint
    assert "reinstall the driver package" in finding.hint
    assert "kernel upgrade" in finding.hint
    assert "kernel modules loaded: no drv_* module" in finding.details


def test_driver_bound_lists_a_function_the_loaded_driver_did_not_take(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.unbind_driver("0000:82:00.0")
    finding = tm.run(driver_bound.CHECK)
    assert finding.status is Status.FAIL
    assert (
        finding.summary == "1 of 8 Ascend PCI functions are not bound to devdrv_device_driver: 0000:82:00.0"
    )
    assert "dmesg | grep -i -e devdrv -e 0000:82:00.0" in finding.hint


def test_driver_bound_warns_on_vfio_passthrough(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.bind_driver("0000:82:00.0", "vfio-pci")
    finding = tm.run(driver_bound.CHECK)
    assert finding.status is Status.WARN
    assert "bound to vfio-pci, not devdrv_device_driver: 0000:82:00.0" in finding.summary
    assert "driverctl unset-override 0000:82:00.0" in finding.hint


def test_driver_bound_skips_without_pci_functions(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")
    assert tm.run(driver_bound.CHECK).status is Status.SKIP


# ---------------------------------------------------------------- device-nodes


def test_device_nodes_pass(tmp_path):
    finding = simulated(tmp_path).run(device_nodes.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "8 /dev/davinciN (0-7) and davinci_manager, devmm_svm, hisi_hdc"


def test_device_nodes_a3_has_one_node_per_die(tmp_path):
    finding = simulated(tmp_path, "a3").run(device_nodes.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary.startswith("16 /dev/davinciN (0-15)")


def test_device_nodes_fail_on_a_host_without_driver(tmp_path):
    finding = simulated(tmp_path, "no-driver").run(device_nodes.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "missing on this host: every /dev/davinciN, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc"
    )
    assert "lsmod | grep drv_" in finding.hint
    assert "--full --install-for-all" in finding.hint


def test_device_nodes_container_missing_managers_gives_device_flags(tmp_path):
    finding = simulated(tmp_path, "container-missing-nodes").run(device_nodes.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "missing in this container: /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc"
    assert "--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc" in finding.hint


def test_device_nodes_container_without_any_chip_node(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    for n in range(8):
        tm.remove(f"/dev/davinci{n}")
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "missing in this container: every /dev/davinciN"
    assert finding.hint.startswith("start the container with --device /dev/davinci0")
    assert "this machine has 8: 0-7" in finding.hint


def test_device_nodes_node_that_docker_made_a_directory(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove("/dev/hisi_hdc")
    tm.builder.path("/dev/hisi_hdc").mkdir()
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "missing in this container: /dev/hisi_hdc"
    assert "--device /dev/hisi_hdc" in finding.hint
    assert "/dev/hisi_hdc is a directory, not a character device" in finding.details


def test_device_nodes_container_given_fewer_chips_passes(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    for n in range(4, 8):
        tm.remove(f"/dev/davinci{n}")
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "4 of 8 chips have a /dev/davinciN node: this container was given 0-3"
    added = [d for d in finding.details if d.startswith("to give it more")]
    assert "--device /dev/davinci4" in added[0] and "ASCEND_VISIBLE_DEVICES" in added[0]


def test_device_nodes_container_restricted_by_ascend_visible_devices_passes(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    for n in (0, 2, 4, 5, 6, 7):
        tm.remove(f"/dev/davinci{n}")
    tm.environ["ASCEND_VISIBLE_DEVICES"] = "1,3"
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.PASS
    assert "ASCEND_VISIBLE_DEVICES=1,3 gives this container exactly these chips" in finding.details


def test_device_nodes_host_with_a_missing_chip_node_fails(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/dev/davinci6")
    tm.remove("/dev/davinci7")
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "only 6 of 8 chips have a /dev/davinciN node: some chips did not come up"
    assert "dmesg | grep -i devdrv" in finding.hint


def test_device_nodes_soc_board_needs_no_devmm_svm(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")  # 310B: no PCIe endpoint
    tm.remove("/dev/devmm_svm")
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "8 /dev/davinciN (0-7) and davinci_manager, hisi_hdc"


def test_id_ranges():
    assert device_nodes.id_ranges((5, 0, 1, 2, 7, 8)) == "0-2, 5, 7-8"
    assert device_nodes.id_ranges(()) == ""


# ---------------------------------------------------------------- device-permissions


def test_device_permissions_root_always_passes(tmp_path, monkeypatch):
    as_user(monkeypatch, 0, "root")
    tm = simulated(tmp_path)
    tm.builder.add_dev_nodes(range(8), mode=0o600)
    finding = tm.run(device_permissions.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "running as root: every device node can be opened"
    assert device_permissions.CHECK.requires == ("device-nodes",)


def test_device_permissions_member_of_the_group_passes(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    st = driver_owned_nodes(tm)
    as_user(monkeypatch, st.st_uid + 1000, "alice", frozenset({st.st_uid + 1000, st.st_gid}))
    finding = tm.run(device_permissions.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == f"alice (uid {st.st_uid + 1000}) can open all 11 device nodes"
    assert "/dev/davinci0 HwHiAiUser:HwHiAiUser mode 660" in finding.details


def test_device_permissions_fails_outside_the_group(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    st = driver_owned_nodes(tm)
    as_user(monkeypatch, st.st_uid + 1000, "alice", frozenset({st.st_gid + 1000}))
    finding = tm.run(device_permissions.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith(
        f"alice (uid {st.st_uid + 1000}) cannot open 11 of 11 device nodes: /dev/"
    )
    assert "`sudo usermod -aG HwHiAiUser $USER`, then log out and in again" in finding.hint
    assert "--install-for-all" in finding.hint


def test_device_permissions_group_joined_after_login(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    st = driver_owned_nodes(tm, members="alice")
    as_user(monkeypatch, st.st_uid + 1000, "alice", frozenset({st.st_gid + 1000}))
    finding = tm.run(device_permissions.CHECK)
    assert finding.status is Status.FAIL
    assert "alice joined HwHiAiUser after this login" in finding.hint
    assert "`newgrp HwHiAiUser`" in finding.hint


def test_device_permissions_in_a_container_suggests_a_matching_user(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    st = driver_owned_nodes(tm)
    as_user(monkeypatch, st.st_uid + 1000, "alice", frozenset({st.st_gid + 1000}))
    finding = tm.run(device_permissions.CHECK)
    assert finding.status is Status.FAIL
    assert f"--group-add {st.st_gid}" in finding.hint
    assert "--user $(id -u):$(id -g)" in finding.hint


def test_device_permissions_nodes_for_all_users(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    tm.builder.add_dev_nodes(range(8), mode=0o666)
    as_user(monkeypatch, os.getuid() + 1000, "alice", frozenset({os.getgid() + 1000}))
    assert tm.run(device_permissions.CHECK).status is Status.PASS


def test_may_open_follows_owner_group_other_bits():
    from npuwatch.probes.devices import DevNode

    node = DevNode("davinci0", "/dev/davinci0", True, True, uid=10, gid=20, mode=0o640)
    user = facts.UserIdentity(10, "x", frozenset({99}), process=False)
    assert device_permissions.may_open(node, user)  # owner rw-
    member = facts.UserIdentity(11, "y", frozenset({20}), process=False)
    assert not device_permissions.may_open(node, member)  # group r-- only


# ---------------------------------------------------------------- driver-install


def test_driver_install_passes_and_loads_libascend_hal(tmp_path):
    finding = simulated(tmp_path).run(driver_install.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "driver 24.1.rc2 at /usr/local/Ascend/driver; libascend_hal.so loads"
    assert f"{HAL} loads" in finding.details
    assert not driver_install.CHECK.needs_hardware


def test_driver_install_fails_a_library_that_does_not_load(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_library(HAL, broken=True)
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith(f"libascend_hal.so does not load: {HAL}: ")
    assert (
        "file too short" in finding.summary or "invalid ELF header" in finding.summary
    )  # the loader's words
    assert "reinstall the driver" in finding.hint


def test_driver_install_fails_when_not_installed(tmp_path):
    tm = simulated(tmp_path)
    tm.remove(DRIVER)
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "the Ascend driver is not installed on this machine: no /usr/local/Ascend/driver/version.info, "
        "no libascend_hal.so"
    )
    assert "Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --full" in finding.hint


def test_driver_install_skips_without_npu_and_driver(tmp_path):
    tm = simulated(tmp_path)
    for path in ("/sys/bus/pci", "/dev", DRIVER, "/etc/ascend_install.info"):
        tm.remove(path)
    assert tm.run(driver_install.CHECK).status is Status.SKIP


def test_driver_install_checks_a_driver_mount_without_hardware(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")
    tm.remove("/dev")
    tm.builder.install_library(HAL, broken=True)
    assert tm.run(driver_install.CHECK).status is Status.FAIL


def test_driver_install_missing_version_info_warns(tmp_path):
    tm = simulated(tmp_path)
    tm.remove(f"{DRIVER}/version.info")
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == f"{DRIVER}/version.info is missing: the driver version cannot be checked"
    assert "reinstall the driver" in finding.hint


def test_driver_install_incomplete_installation_fails(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_driver("24.1.rc2", firmware="7.3.0.1.231", status="installing")
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "the driver installation did not complete (Driver_Install_Status=installing)"
    assert "/var/log/ascend_seclog/ascend_install.log" in finding.hint


def test_driver_install_missing_install_info_warns_while_ld_path_has_the_driver(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/etc/ascend_install.info")
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "/etc/ascend_install.info is missing: CANN's set_env.sh cannot find the driver"
    assert "Driver_Install_Path_Param=/usr/local/Ascend" in finding.hint


def test_driver_install_combines_problems(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/etc/ascend_install.info")
    tm.builder.install_library(HAL, broken=True)
    finding = tm.run(driver_install.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("libascend_hal.so does not load")
    assert finding.summary.endswith("(and 1 more problem)")
    assert "; then reinstall the driver (its installer writes the file)" in finding.hint
    assert (
        "also: /etc/ascend_install.info is missing: CANN's set_env.sh cannot find the driver"
        in finding.details
    )


# ---------------------------------------------------------------- firmware-compat


def test_firmware_compat_passes(tmp_path):
    finding = simulated(tmp_path).run(firmware_compat.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "firmware 7.3.0.1.231 is within driver 24.1.rc2's range [7.0.0, 7.8.99]"


def test_firmware_compat_too_old_firmware_fails(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_driver("24.1.rc2", firmware="6.4.12.1.241")
    finding = tm.run(firmware_compat.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "firmware 6.4.12.1.241 is outside driver 24.1.rc2's range [7.0.0, 7.7.99]: the firmware is too old"
    )
    assert "`./Ascend-hdk-<chip>-npu-firmware_<version>.run --full`" in finding.hint
    assert "driver then firmware on an upgrade" in finding.hint
    assert "reboot" in finding.hint


def test_firmware_compat_too_new_firmware_fails(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_driver("24.1.rc2", firmware="7.8.0.2.212")
    finding = tm.run(firmware_compat.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.endswith("the driver is too old for this firmware")
    assert "npu-driver_<version>_linux-<arch>.run --upgrade" in finding.hint


def test_firmware_compat_compares_over_the_bounds_parts():
    parts = firmware_compat.version_parts
    assert parts("7.3.0.1.231") == (7, 3, 0, 1, 231)
    assert parts("25.0.rc1.1") == (25, 0)
    assert parts("rc1") is None
    assert firmware_compat.compare((7, 7, 99, 1, 231), (7, 7, 99)) == 0
    assert firmware_compat.compare((7, 10, 0), (7, 7, 99)) == 1  # numbers, not text
    assert firmware_compat.compare((7,), (7, 0, 0)) == 0


def test_firmware_compat_upper_bound_includes_its_builds(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_driver("24.1.rc2", firmware="7.7.99.1.231")
    assert tm.run(firmware_compat.CHECK).status is Status.PASS


def test_firmware_compat_skips_in_a_container_without_firmware(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.remove("/usr/local/Ascend/firmware")
    finding = tm.run(firmware_compat.CHECK)
    assert finding.status is Status.SKIP
    assert "not mounted in this container" in finding.summary


def test_firmware_compat_warns_on_a_host_without_firmware_info(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/usr/local/Ascend/firmware")
    finding = tm.run(firmware_compat.CHECK)
    assert finding.status is Status.WARN
    assert "firmware version is unknown" in finding.summary
    assert "`npu-smi info -t board -i 0`" in finding.hint


def test_firmware_compat_skips_a_driver_without_a_range(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_driver("24.1.rc2", firmware="7.3.0.1.231", compatible_fw="")
    assert tm.run(firmware_compat.CHECK).status is Status.SKIP


# ---------------------------------------------------------------- npu-smi


def test_npu_smi_passes(tmp_path):
    finding = simulated(tmp_path).run(npu_smi.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary.startswith("npu-smi 24.1.rc2 answered in ")
    assert finding.summary.endswith(", 8 chips")
    assert npu_smi.CHECK.runs_npu_smi


def test_npu_smi_hang_fails_with_the_timeout(tmp_path):
    finding = simulated(tmp_path, "npu-smi-hang").run(npu_smi.CHECK, timeout_s=0.5)
    assert finding.status is Status.FAIL
    assert finding.summary == "npu-smi did not answer within 0.5 s"
    assert "dmesg" in finding.hint


def test_npu_smi_not_found_on_a_host(tmp_path):
    tm = simulated(tmp_path)
    tm.npu_smi = None
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "npu-smi was not found on this machine"
    assert "--npu-smi PATH" in finding.hint


def test_npu_smi_dcmi_8005_with_nodes_present_in_a_container(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.scripted_npu_smi(stderr=capture_text("035"), exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "npu-smi failed with DCMI error -8005 (the device nodes are present)"
    assert "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64" in finding.hint
    assert "another container" in finding.hint
    assert "npu-smi printed: dcmi module initialize failed. ret is -8005" in finding.details


def test_npu_smi_dcmi_8005_on_a_host(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(stderr=capture_text("035"), exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert "reinstall the driver and reboot" in finding.hint


def test_npu_smi_other_dcmi_codes_use_their_explanation(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(stderr="dcmi module initialize failed. ret is -8012\n", exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert "not ready" in finding.summary
    assert finding.hint == "wait a few seconds and retry"


def test_npu_smi_as_root_a_permission_error_fails(tmp_path, monkeypatch):
    as_user(monkeypatch, 0, "root")
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(stderr="dcmi module initialize failed. ret is -8002\n", exit_code=255)
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.FAIL
    assert "-8002" in finding.summary


def test_npu_smi_answers_without_chips_warns(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi("+----+\n| npu-smi 24.1.rc2    Version: 24.1.rc2 |\n+----+\n")
    finding = tm.run(npu_smi.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "npu-smi answered but listed no chip"
    assert "npuwatch snapshot --replay FILE --json" in finding.hint
