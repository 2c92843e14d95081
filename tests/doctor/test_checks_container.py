"""The visible-devices and container-mounts checks on simulated machines, one test per finding."""

from __future__ import annotations

import os

import pytest

from npuwatch.doctor.checks import container_mounts, device_nodes, visible_devices
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Group, Status
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.probes.visible_devices import parse_docker_visible, parse_rt_visible
from tests.conftest import capture_text
from tests.doctor.machines import TestMachine, simulated

VISIBLE = visible_devices.CHECK
MOUNTS = container_mounts.CHECK
RT = "ASCEND_RT_VISIBLE_DEVICES"
DOCKER = "ASCEND_VISIBLE_DEVICES"


def keep_nodes(sim: TestMachine, *kept: int) -> None:
    """Leave only ``/dev/davinciN`` for the IDs in ``kept`` (what ``--device`` gives a container)."""
    for number in range(8):
        if number not in kept:
            sim.remove(f"/dev/davinci{number}")


@pytest.fixture
def host(tmp_path):
    return simulated(tmp_path)


@pytest.fixture
def container(tmp_path):
    """A docker container given all eight chips, with no process on them (scenario ``idle``)."""
    sim = simulated(tmp_path, "idle")
    sim.builder.mark_container("docker")
    return sim


# ---------------------------------------------------------------- parsing


def test_parse_rt_visible_stops_at_the_first_other_character():
    # envref_07_0028: "1, 2,3" reads only 1 (the space before 2 stops it).
    parsed = parse_rt_visible("1, 2,3")
    assert parsed.read == (1,)
    assert parsed.intended == (1, 2, 3)
    assert parsed.stop == " "
    assert parsed.drops_devices


@pytest.mark.parametrize(
    ("value", "read", "drops"),
    [
        ("0,1,2", (0, 1, 2), False),
        ("0,1,", (0, 1), False),
        ("0,1a,2", (0, 1), True),
        ("-1", (), True),
        ("", (), False),
    ],
)
def test_parse_rt_visible(value, read, drops):
    parsed = parse_rt_visible(value)
    assert parsed.read == read
    assert parsed.drops_devices is drops


def test_parse_rt_visible_keeps_what_a_range_meant():
    parsed = parse_rt_visible("0-3")
    assert parsed.read == (0,)
    assert parsed.intended == (0, 1, 2, 3)
    assert parse_rt_visible("-1").intended == ()


def test_parse_docker_visible_reads_ranges_and_plugin_names():
    assert parse_docker_visible("0-2,4") == ((0, 1, 2, 4), ())
    assert parse_docker_visible("Ascend910-3, 5") == ((3, 5), ())
    assert parse_docker_visible("2-1,x,0-99999") == ((), ("2-1", "x", "0-99999"))


# ---------------------------------------------------------------- visible-devices


def test_visible_devices_is_a_frameworks_check_that_needs_hardware():
    assert VISIBLE.id == "visible-devices"
    assert VISIBLE.group is Group.FRAMEWORKS
    assert VISIBLE.needs_hardware


def test_unset_passes_with_all_devices_visible(host):
    found = host.run(VISIBLE)
    assert found.status is Status.PASS
    assert found.summary == "all 8 devices visible (ASCEND_RT_VISIBLE_DEVICES unset)"
    assert "logical 7 → /dev/davinci7" in found.details


def test_a_valid_selection_passes(host):
    host.environ[RT] = "2,3"
    host.environ["ASCEND_DEVICE_ID"] = "1"
    found = host.run(VISIBLE)
    assert found.status is Status.PASS
    assert found.summary == "ASCEND_RT_VISIBLE_DEVICES=2,3: 2 of 8 devices visible, ASCEND_DEVICE_ID=1"
    assert "logical 1 → /dev/davinci3" in found.details


def test_empty_value_hides_every_device(host):
    host.environ[RT] = ""
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary.startswith("ASCEND_RT_VISIBLE_DEVICES is set but empty: every device is hidden")
    assert "`unset ASCEND_RT_VISIBLE_DEVICES`" in found.hint
    assert "`export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7`" in found.hint


def test_a_space_silently_drops_the_devices_after_it(host):
    host.environ[RT] = "1, 2,3"
    found = host.run(VISIBLE)
    assert found.status is Status.WARN
    assert found.summary == (
        "ASCEND_RT_VISIBLE_DEVICES=\"1, 2,3\": the runtime stops reading at ' ', "
        "so 2,3 are silently dropped (it reads only 1)"
    )
    assert found.hint.startswith("`export ASCEND_RT_VISIBLE_DEVICES=1,2,3`")


def test_nothing_before_the_first_invalid_character_hides_every_device(host):
    host.environ[RT] = "-1"
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert "has no device ID before its first invalid character" in found.summary
    assert found.hint == "`export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7`"


def test_out_of_range_on_the_host(host):
    host.environ[RT] = "6,8"
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary.startswith("ASCEND_RT_VISIBLE_DEVICES=6,8 names device 8, but only 8 devices")
    assert "EE1001 'input data rang[0-8)' / 207004" in found.summary
    assert found.hint == "`export ASCEND_RT_VISIBLE_DEVICES=6`"


def test_descending_ids_are_read_only_up_to_the_first_step_down(host):
    host.environ[RT] = "3,1"
    found = host.run(VISIBLE)
    assert found.status is Status.WARN
    assert (
        found.summary == "ASCEND_RT_VISIBLE_DEVICES=3,1 is not ascending and unique: the runtime reads only 3"
    )
    assert found.hint == "`export ASCEND_RT_VISIBLE_DEVICES=1,3`"


def test_duplicates_warn(host):
    host.environ[RT] = "1,1"
    found = host.run(VISIBLE)
    assert found.status is Status.WARN
    assert found.hint == "`export ASCEND_RT_VISIBLE_DEVICES=1`"


def test_a_physical_id_inside_a_container_is_out_of_range(container):
    keep_nodes(container, 3)
    container.environ[RT] = "3"
    found = container.run(VISIBLE)
    assert found.status is Status.FAIL
    assert "/dev/davinci3 is logical device 0 in this container" in found.summary
    assert found.hint == "`export ASCEND_RT_VISIBLE_DEVICES=0`"
    assert "in a container, logical IDs count from 0 over the /dev/davinciN nodes present" in found.details


def test_docker_visible_devices_matching_the_nodes_passes(container):
    keep_nodes(container, 4, 5)
    container.environ[DOCKER] = "4-5"
    found = container.run(VISIBLE)
    assert found.status is Status.PASS
    assert found.summary == "all 2 devices visible (ASCEND_RT_VISIBLE_DEVICES unset)"
    assert "logical 0 → /dev/davinci4" in found.details


def test_docker_visible_devices_naming_absent_nodes_fails(container):
    keep_nodes(container, 4)
    container.environ[DOCKER] = "4,5"
    found = container.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary.startswith(
        "ASCEND_VISIBLE_DEVICES=4,5 names /dev/davinci5, which is not in this container"
    )
    assert "`docker run --runtime ascend -e ASCEND_VISIBLE_DEVICES=4,5 …`" in found.hint
    assert "`--device /dev/davinci5`" in found.hint


def test_docker_visible_devices_on_the_host_limits_nothing(host):
    host.environ[DOCKER] = "2-3"
    found = host.run(VISIBLE)
    assert found.status is Status.WARN
    assert found.summary.startswith("ASCEND_VISIBLE_DEVICES=2-3 does not limit this process")
    assert found.hint.startswith("`export ASCEND_RT_VISIBLE_DEVICES=2,3`")


def test_docker_visible_devices_on_the_host_next_to_rt_visible_is_fine(host):
    host.environ[DOCKER] = "2-3"
    host.environ[RT] = "2,3"
    assert host.run(VISIBLE).status is Status.PASS


def test_unreadable_docker_visible_devices_warns(container):
    container.environ[DOCKER] = "0,one"
    found = container.run(VISIBLE)
    assert found.status is Status.WARN
    assert "has items the Ascend Docker Runtime cannot read: 'one'" in found.summary
    assert "`-e ASCEND_VISIBLE_DEVICES=0-2,4`" in found.hint


def test_device_id_that_is_not_a_number_fails(host):
    host.environ["ASCEND_DEVICE_ID"] = "npu:1"
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary == 'ASCEND_DEVICE_ID="npu:1" is not a device ID'
    assert found.hint == "`export ASCEND_DEVICE_ID=0`"


def test_device_id_is_an_index_into_rt_visible_devices(host):
    host.environ[RT] = "4,5"
    host.environ["ASCEND_DEVICE_ID"] = "5"
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary.startswith("ASCEND_DEVICE_ID=5 is out of range: it is an index into the 2 devices")
    assert found.hint == "`export ASCEND_DEVICE_ID=1`"


def test_device_id_beyond_the_devices_fails(host):
    host.environ["ASCEND_DEVICE_ID"] = "9"
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary == "ASCEND_DEVICE_ID=9 is out of range: it is an index into 8 devices here (0-7)"
    assert found.hint == "`export ASCEND_DEVICE_ID=0`"


def test_every_problem_is_in_the_details_and_the_worst_sets_the_verdict(host):
    host.environ[RT] = "3,1"
    host.environ["ASCEND_DEVICE_ID"] = "x"
    found = host.run(VISIBLE)
    assert found.status is Status.FAIL
    assert found.summary == 'ASCEND_DEVICE_ID="x" is not a device ID (and 1 more problem)'
    assert found.hint == "`export ASCEND_DEVICE_ID=0`; then `export ASCEND_RT_VISIBLE_DEVICES=1,3`"
    assert any(d.startswith("also: ASCEND_RT_VISIBLE_DEVICES=3,1 is not ascending") for d in found.details)


def test_no_chip_node_skips(host):
    keep_nodes(host)
    found = host.run(VISIBLE)
    assert found.status is Status.SKIP
    assert found.summary == "no /dev/davinciN node: there is no device to select"


def test_a_machine_without_npu_skips_in_the_engine(tmp_path):
    builder = SysrootBuilder(tmp_path / "root")
    builder.write_file("/etc/hostname", "cpu-only\n")
    machine = Machine(Sysroot(builder.root, environ={RT: "0"}), None)
    (result,) = run_doctor(machine, [VISIBLE]).results
    assert result.status is Status.SKIP
    assert result.summary == "no Ascend NPU on this machine"


# ---------------------------------------------------------------- container-mounts


def test_container_mounts_is_a_container_check_that_runs_npu_smi():
    assert MOUNTS.id == "container-mounts"
    assert MOUNTS.group is Group.CONTAINER
    assert MOUNTS.runs_npu_smi
    # A container without any node still has hardware: PCI sysfs shows the host's functions
    # (container-missing-nodes); with no NPU anywhere there is nothing to mount.
    assert MOUNTS.needs_hardware


def test_skipped_outside_a_container(host):
    found = host.run(MOUNTS)
    assert found.status is Status.SKIP
    assert found.summary == "not in a container"


def test_a_complete_container_passes(container):
    found = container.run(MOUNTS)
    assert found.status is Status.PASS
    assert (
        found.summary == "docker container has the driver userland, npu-smi, DCMI and device nodes (8 chips)"
    )
    assert "container: /.dockerenv exists" in found.details


def test_a_container_limited_by_ascend_visible_devices_passes_with_busy_chips(tmp_path):
    sim = simulated(tmp_path)  # processes on every chip
    sim.builder.mark_container("docker")
    sim.environ[DOCKER] = "0-7"
    assert sim.run(MOUNTS).status is Status.PASS


def test_missing_manager_nodes_name_the_device_flags(tmp_path):
    sim = simulated(tmp_path, "container-missing-nodes")
    found = sim.run(MOUNTS)
    assert found.status is Status.FAIL
    assert found.summary == "docker container lacks /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc"
    assert "--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc" in found.hint
    assert found.hint.startswith("recreate the container with `docker run ")
    assert any(line.startswith("Kubernetes: the Ascend device plugin") for line in found.details)
    assert any("ASCEND_VISIBLE_DEVICES" in line for line in found.details)


def test_no_chip_node_asks_for_the_chips_ascend_visible_devices_names(container):
    keep_nodes(container)
    container.environ[DOCKER] = "2,3"
    found = container.run(MOUNTS)
    assert found.status is Status.FAIL
    assert found.summary == "docker container lacks /dev/davinci2, /dev/davinci3"
    assert "`docker run --device /dev/davinci2 --device /dev/davinci3 …`" in found.hint


def test_a_node_docker_made_a_directory_is_missing(container):
    container.remove("/dev/hisi_hdc")
    container.builder.path("/dev/hisi_hdc").mkdir()
    found = container.run(MOUNTS)
    assert found.status is Status.FAIL
    assert "--device /dev/hisi_hdc" in found.hint
    assert (
        "missing: /dev/hisi_hdc is a directory, not a character device: the host–device channel"
        in found.details
    )


@pytest.mark.parametrize(
    ("removed", "name", "flag"),
    [
        ("/usr/local/dcmi", "/usr/local/dcmi", "-v /usr/local/dcmi:/usr/local/dcmi"),
        (
            "/usr/local/bin/npu-smi",
            "/usr/local/bin/npu-smi",
            "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi",
        ),
        (
            "/usr/local/Ascend/driver/lib64",
            "/usr/local/Ascend/driver/lib64",
            "-v /usr/local/Ascend/driver/lib64/:/usr/local/Ascend/driver/lib64/",
        ),
        (
            "/usr/local/Ascend/driver/version.info",
            "/usr/local/Ascend/driver/version.info",
            "-v /usr/local/Ascend/driver/version.info:/usr/local/Ascend/driver/version.info",
        ),
        (
            "/etc/ascend_install.info",
            "/etc/ascend_install.info",
            "-v /etc/ascend_install.info:/etc/ascend_install.info",
        ),
    ],
)
def test_each_missing_mount_names_its_volume_flag(container, removed, name, flag):
    container.remove(removed)
    found = container.run(MOUNTS)
    assert found.status is Status.FAIL
    assert found.summary == f"docker container lacks {name}"
    assert found.hint == f"recreate the container with `docker run {flag} …`"


def test_npu_smi_in_sbin_is_enough(container):
    container.remove("/usr/local/bin/npu-smi")
    container.builder.install_executable("/usr/local/sbin/npu-smi", "#!/bin/sh\n")
    container.npu_smi = None
    assert container.run(MOUNTS).status is Status.PASS


def test_npu_smi_mounted_as_a_directory_is_missing(container):
    container.remove("/usr/local/bin/npu-smi")
    container.builder.path("/usr/local/bin/npu-smi").mkdir()
    found = container.run(MOUNTS)
    assert found.status is Status.FAIL
    assert any("/usr/local/bin/npu-smi is a directory" in line for line in found.details)


def test_install_info_without_driver_path_fails(container):
    container.builder.write_file(
        "/etc/ascend_install.info", "UserName=HwHiAiUser\nDriver_Install_Status=complete\n"
    )
    found = container.run(MOUNTS)
    assert found.status is Status.FAIL
    assert found.summary == "docker container lacks /etc/ascend_install.info"
    assert "-v /etc/ascend_install.info:/etc/ascend_install.info" in found.hint
    assert any("lacks Driver_Install_Path_Param" in line for line in found.details)


def test_the_driver_mounts_follow_the_install_path(tmp_path):
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes([0])
    builder.mark_container("docker")
    builder.install_driver("24.1.rc1", install_path="/opt/Ascend")
    os.remove(builder.path("/opt/Ascend/driver/lib64/driver/libascend_hal.so"))
    builder.install_executable("/usr/local/bin/npu-smi", "#!/bin/sh\n")
    found = MOUNTS.run(Machine(builder.sysroot(), None))
    assert found.status is Status.FAIL
    assert (
        found.hint
        == "recreate the container with `docker run -v /opt/Ascend/driver/lib64/:/opt/Ascend/driver/lib64/ …`"
    )


def test_podman_gets_podman_flags(tmp_path):
    sim = simulated(tmp_path, "idle")
    sim.builder.mark_container("podman")
    sim.environ.update(sim.builder.environ)
    sim.remove("/usr/local/dcmi")
    found = sim.run(MOUNTS)
    assert found.summary == "podman container lacks /usr/local/dcmi"
    assert found.hint == "recreate the container with `podman run -v /usr/local/dcmi:/usr/local/dcmi …`"


def test_nodrv_is_named_when_the_driver_is_missing(container):
    container.remove("/usr/local/Ascend/driver/lib64")
    container.environ["ASCEND_RUNTIME_OPTIONS"] = "NODRV"
    found = container.run(MOUNTS)
    assert (
        "ASCEND_RUNTIME_OPTIONS has NODRV: the Ascend Docker Runtime did not mount the driver"
        in found.details
    )


def test_other_tenants_processes_on_every_chip_warn(container):
    container.scripted_npu_smi(capture_text("001"))  # vLLM workers on all eight chips
    found = container.run(MOUNTS)
    assert found.status is Status.WARN
    assert found.summary == (
        "this container sees all 8 NPUs of the host and npu-smi lists 15 processes on them "
        "that are not in this container"
    )
    assert "`docker run --runtime ascend -e ASCEND_VISIBLE_DEVICES=<your chips' IDs> …`" in found.hint
    assert "NPU 0 chip 0: PID 314487 VLLMWorker_TP (129 MiB)" in found.details
    assert (
        "npu-smi prints host PIDs: if these are this container's own jobs, ignore this warning"
        in found.details
    )


def test_the_simulated_training_node_warns_in_a_container(tmp_path):
    sim = simulated(tmp_path)  # the demo's training jobs come and go: count them loosely
    sim.builder.mark_container("docker")
    found = sim.run(MOUNTS)
    assert found.status is Status.WARN
    assert found.summary.startswith("this container sees all 8 NPUs of the host and npu-smi lists ")


def test_the_warning_names_the_free_chips(container):
    container.scripted_npu_smi(capture_text("008"))  # one process, on NPU 0
    found = container.run(MOUNTS)
    assert found.status is Status.WARN
    assert "`docker run --runtime ascend -e ASCEND_VISIBLE_DEVICES=1,2,3,4,5,6,7 …`" in found.hint
    assert "`export ASCEND_RT_VISIBLE_DEVICES=1,2,3,4,5,6,7`" in found.hint
    assert "NPU 0 chip 0: PID 485946 pytest (5175 MiB)" in found.details


def test_privileged_capabilities_count_with_fewer_nodes(container):
    keep_nodes(container, 0, 1, 2, 3)
    container.scripted_npu_smi(
        capture_text("008").replace(
            "| 0       0                 | 485946", "| 2       0                 | 485946"
        )
    )
    container.builder.write_file("/proc/self/status", "Name:\tpython3\nCapEff:\t000001ffffffffff\n")
    found = container.run(MOUNTS)
    assert found.status is Status.WARN
    assert found.summary.startswith(
        "this privileged container sees 4 NPUs and npu-smi lists 1 process on them"
    )
    assert "CapEff holds CAP_SYS_ADMIN: the container runs with --privileged" in found.details


def test_fewer_nodes_without_privileges_is_not_shared(container):
    keep_nodes(container, 0, 1)
    container.scripted_npu_smi(capture_text("008"))
    container.builder.write_file("/proc/self/status", "CapEff:\t00000000a80425fb\n")  # docker's default
    assert container.run(MOUNTS).status is Status.PASS


def test_own_process_by_its_container_pid_is_not_foreign(container):
    text = capture_text("008").replace("| 5175                  | NA ", "| 5175                  | 57 ")
    container.scripted_npu_smi(text)
    container.builder.write_file("/proc/57/comm", "pytest\n")
    assert container.run(MOUNTS).status is Status.PASS


def test_with_host_pids_the_mount_namespace_tells_own_processes(tmp_path):
    sim = simulated(tmp_path, "idle")
    sim.builder.mark_container("docker", host_pid=True)
    sim.scripted_npu_smi(capture_text("008"))
    for link, text in (
        ("/proc/self/ns/mnt", "mnt:[4026532600]"),
        ("/proc/485946/ns/mnt", "mnt:[4026532600]"),
    ):
        sim.builder.path(link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(text, sim.builder.path(link))
    assert sim.run(MOUNTS).status is Status.PASS
    os.remove(sim.builder.path("/proc/485946/ns/mnt"))
    os.symlink("mnt:[4026531840]", sim.builder.path("/proc/485946/ns/mnt"))
    assert sim.run(MOUNTS).status is Status.WARN


def test_npu_smi_failing_leaves_the_container_verdict_alone(container):
    container.scripted_npu_smi(stderr="dcmi module initialize failed. ret is -8020\n", exit_code=1)
    assert container.run(MOUNTS).status is Status.PASS


def test_a_310b_soc_board_needs_no_devmm_svm(tmp_path):
    builder = SysrootBuilder(tmp_path / "root")  # Atlas 200I DK A2: no PCI function, no devmm_svm
    builder.add_dev_nodes([0], managers=False, extra=["davinci_manager", "hisi_hdc"])
    builder.mark_container("docker")
    builder.install_driver("23.0.rc3")
    builder.install_executable("/usr/local/bin/npu-smi", "#!/bin/sh\n")
    found = MOUNTS.run(Machine(builder.sysroot(), None))
    assert found.status is Status.PASS
    builder.add_pci_function("0000:01:00.0", 0xD500)  # a 310P card does need it
    found = MOUNTS.run(Machine(builder.sysroot(), None))
    assert found.summary == "docker container lacks /dev/devmm_svm"


@pytest.mark.parametrize("device_id", [0xD806, 0xD808])  # Ascend 950, Atlas 350
def test_a_950_container_needs_no_devmm_svm(tmp_path, device_id):
    # MindCluster's device list does not mount it for the 950 (docs/reference/driver-interfaces.md §1).
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes([0, 1], managers=False, extra=["davinci_manager", "hisi_hdc"])
    builder.mark_container("docker")
    builder.install_driver("25.5.0")
    builder.install_executable("/usr/local/bin/npu-smi", "#!/bin/sh\n")
    builder.add_pci_function("0000:01:00.0", device_id)
    builder.add_pci_function("0000:02:00.0", device_id)
    machine = Machine(builder.sysroot(), None)
    assert MOUNTS.run(machine).status is Status.PASS
    nodes = device_nodes.CHECK.run(machine)
    assert nodes.status is Status.PASS
    assert nodes.summary == "2 /dev/davinciN (0-1) and davinci_manager, hisi_hdc"
    builder.add_pci_function("0000:03:00.0", 0xD802)  # beside a 910B it is needed again
    assert MOUNTS.run(Machine(builder.sysroot(), None)).summary == "docker container lacks /dev/devmm_svm"
