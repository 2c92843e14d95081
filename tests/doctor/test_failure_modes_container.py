"""Failure modes of runtime-and-doctor.md §10 seen from a container, each a sysroot tree plus environment.

Each test builds the machine a user reported (tree + environment), runs the check through the
engine, and asserts the check ID, the verdict and the fix the report prints.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Dict, Iterable, Optional

from npuwatch.doctor.checks import container_mounts, visible_devices
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, CheckResult, Status
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from tests.conftest import capture_text

#: An Atlas 800T A2's Bus-Ids, NPU 0-7 (capture 001).
BUSES = ("c1", "c2", "81", "82", "01", "02", "41", "42")
DRIVER = "/usr/local/Ascend/driver"
LD_LIBRARY_PATH = f"{DRIVER}/lib64:{DRIVER}/lib64/common:{DRIVER}/lib64/driver"


class Tree:
    """A container (or host) as a sysroot: 8 × 910B on PCI, the nodes given, the host's driver."""

    def __init__(
        self,
        root: Path,
        davinci: Iterable[int] = range(8),
        *,
        managers: bool = True,
        container: Optional[str] = "docker",
        npu_smi: str = "",
    ) -> None:
        self.builder = SysrootBuilder(root)
        for bus in BUSES:
            self.builder.add_pci_function(f"0000:{bus}:00.0", 0xD802)
        self.builder.add_dev_nodes(davinci, managers=managers)
        if container is not None:
            self.builder.mark_container(container)
        self.builder.install_driver("24.1.rc1")
        self.npu_smi = self.builder.install_executable(
            "/usr/local/bin/npu-smi", f"#!/bin/sh\nprintf '%s' {shlex.quote(npu_smi)}\n"
        )
        self.environ: Dict[str, str] = {**self.builder.environ, "LD_LIBRARY_PATH": LD_LIBRARY_PATH}

    def remove(self, machine_path: str) -> None:
        import shutil

        target = self.builder.path(machine_path)
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()

    def run(self, check: Check) -> CheckResult:
        machine = Machine(Sysroot(self.builder.root, environ=self.environ), self.npu_smi, timeout_s=5.0)
        (result,) = run_doctor(machine, [check]).results
        return result


def test_row_03_driver_userland_not_mounted(tmp_path):
    # vllm-ascend #1440: `libascend_hal.so: cannot open shared object file` in a container.
    tree = Tree(tmp_path / "root")
    tree.remove(f"{DRIVER}/lib64")
    result = tree.run(container_mounts.CHECK)
    assert result.id == "container-mounts"
    assert result.status is Status.FAIL
    assert result.summary == f"docker container lacks {DRIVER}/lib64"
    assert result.hint == f"recreate the container with `docker run -v {DRIVER}/lib64/:{DRIVER}/lib64/ …`"
    assert any("libascend_hal.so: cannot open shared object file" in line for line in result.details)


def test_row_11_npu_smi_and_dcmi_not_mounted(tmp_path):
    # HAMi #615 / PaddleX #4542: `npu-smi: command not found` inside the container.
    tree = Tree(tmp_path / "root")
    tree.remove("/usr/local/bin/npu-smi")
    tree.remove("/usr/local/dcmi")
    result = tree.run(container_mounts.CHECK)
    assert result.id == "container-mounts"
    assert result.status is Status.FAIL
    assert result.summary == "docker container lacks /usr/local/dcmi, /usr/local/bin/npu-smi"
    assert result.hint == (
        "recreate the container with `docker run -v /usr/local/dcmi:/usr/local/dcmi "
        "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi …`"
    )


def test_row_12_dcmi_8005_container_without_manager_nodes(tmp_path):
    # vllm-ascend #2698: `dcmi module initialize failed. ret is -8005` (capture 035).
    tree = Tree(tmp_path / "root", managers=False, npu_smi=capture_text("035"))
    result = tree.run(container_mounts.CHECK)
    assert result.id == "container-mounts"
    assert result.status is Status.FAIL
    assert "--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc" in result.hint
    assert any("without it npu-smi fails with -8005" in line for line in result.details)


def test_row_14_privileged_container_sees_other_tenants_chips(tmp_path):
    # vllm-ascend #6942: --privileged exposes every chip; NPUs 6 and 7 are the free ones here.
    busy_on_0_to_5 = "\n".join(
        line for line in capture_text("001").splitlines() if not re.match(r"^\| [67]       0 ", line)
    )
    tree = Tree(tmp_path / "root", npu_smi=busy_on_0_to_5 + "\n")
    tree.builder.write_file("/proc/self/status", "Name:\tpython3\nCapEff:\t000001ffffffffff\n")
    result = tree.run(container_mounts.CHECK)
    assert result.id == "container-mounts"
    assert result.status is Status.WARN
    assert result.summary == (
        "this privileged container sees all 8 NPUs of the host and npu-smi lists 13 processes on them "
        "that are not in this container"
    )
    assert "`docker run --runtime ascend -e ASCEND_VISIBLE_DEVICES=6,7 …`" in result.hint
    assert "`export ASCEND_RT_VISIBLE_DEVICES=6,7`" in result.hint


def test_row_16_physical_ids_used_as_logical_in_a_container(tmp_path):
    # gpustack #3352: `set ASCEND_RT_VISIBLE_DEVICES:4 error, input data rang[0-2)`, 207004.
    tree = Tree(tmp_path / "root", davinci=(4, 5))
    tree.environ["ASCEND_RT_VISIBLE_DEVICES"] = "4"
    result = tree.run(visible_devices.CHECK)
    assert result.id == "visible-devices"
    assert result.status is Status.FAIL
    assert "EE1001 'input data rang[0-2)' / 207004" in result.summary
    assert "/dev/davinci4 is logical device 0 in this container" in result.summary
    assert result.hint == "`export ASCEND_RT_VISIBLE_DEVICES=0`"


def test_row_17_single_device_container_with_id_1(tmp_path):
    # Ascend/pytorch #67: 507033 with ASCEND_RT_VISIBLE_DEVICES=1 and only /dev/davinci1 given.
    tree = Tree(tmp_path / "root", davinci=(1,))
    tree.environ["ASCEND_RT_VISIBLE_DEVICES"] = "1"
    result = tree.run(visible_devices.CHECK)
    assert result.id == "visible-devices"
    assert result.status is Status.FAIL
    assert result.summary.startswith(
        "ASCEND_RT_VISIBLE_DEVICES=1 names device 1, but only 1 device is visible here"
    )
    assert result.hint == "`export ASCEND_RT_VISIBLE_DEVICES=0`"


def test_row_29_launcher_sets_rt_visible_devices_empty(tmp_path):
    # ray #59063 / sglang #14137: torch.npu.is_available() is False in a Ray worker.
    tree = Tree(tmp_path / "root", davinci=(0, 1), container="kubernetes")
    tree.environ["ASCEND_RT_VISIBLE_DEVICES"] = ""
    result = tree.run(visible_devices.CHECK)
    assert result.id == "visible-devices"
    assert result.status is Status.FAIL
    assert result.summary.startswith("ASCEND_RT_VISIBLE_DEVICES is set but empty: every device is hidden")
    assert result.hint.startswith("`unset ASCEND_RT_VISIBLE_DEVICES` to see all 2 devices")
    assert 'Ray: `resources={"NPU": 1}`' in result.hint


def test_row_31_install_info_not_mounted(tmp_path):
    # set_env.sh finds the driver through /etc/ascend_install.info; without it LD_LIBRARY_PATH lacks it.
    tree = Tree(tmp_path / "root")
    tree.remove("/etc/ascend_install.info")
    tree.environ["LD_LIBRARY_PATH"] = "/usr/local/Ascend/ascend-toolkit/latest/lib64"
    result = tree.run(container_mounts.CHECK)
    assert result.id == "container-mounts"
    assert result.status is Status.FAIL
    assert result.summary == "docker container lacks /etc/ascend_install.info"
    assert (
        result.hint
        == "recreate the container with `docker run -v /etc/ascend_install.info:/etc/ascend_install.info …`"
    )
    assert any(f"here it lacks {DRIVER}/lib64/driver" in line for line in result.details)


def test_row_31_install_info_without_driver_path(tmp_path):
    tree = Tree(tmp_path / "root")
    tree.builder.write_file(
        "/etc/ascend_install.info", "UserName=HwHiAiUser\nDriver_Install_Status=complete\n"
    )
    result = tree.run(container_mounts.CHECK)
    assert result.id == "container-mounts"
    assert result.status is Status.FAIL
    assert (
        result.hint
        == "recreate the container with `docker run -v /etc/ascend_install.info:/etc/ascend_install.info …`"
    )
    assert any("/etc/ascend_install.info lacks Driver_Install_Path_Param" in line for line in result.details)


def test_the_healthy_container_tree_passes_both_checks(tmp_path):
    tree = Tree(tmp_path / "root", davinci=(6, 7), npu_smi=capture_text("001"))
    assert tree.run(container_mounts.CHECK).status is Status.PASS
    assert tree.run(visible_devices.CHECK).status is Status.PASS
