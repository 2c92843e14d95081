"""Tests for npuwatch.probes.sysroot_builder; run as a script to rewrite tests/data/sysroot/910b-x2.

.venv/bin/python tests/probes/test_sysroot_builder.py    # regenerates the committed tree
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from npuwatch.probes.container import detect_container
from npuwatch.probes.devices import scan_dev
from npuwatch.probes.pci import ASCEND_DRIVER, scan_pci
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder

DATA = Path(__file__).resolve().parents[1] / "data"
STATIC_TREE = DATA / "sysroot" / "910b-x2"


def build_910b_x2(builder: SysrootBuilder) -> None:
    """The committed tree: two 910B on a host, NPU 1 (0000:01:00.0) trained at x8 of x16."""
    builder.add_pci_function("0000:c1:00.0", 0xD802, numa_node=3)
    builder.add_pci_function("0000:01:00.0", 0xD802, current_width=8, aer=(2, 0, 0))
    builder.add_dev_nodes([0, 1])
    builder.set_host_pid_namespace(True)
    builder.install_driver("24.1.rc1", firmware="7.1.0.11.220", userland=False)  # no binaries in git


def _snapshot(root: Path) -> dict:
    """Every file's bytes and every link's text under ``root`` (modes are not kept by git)."""
    entries = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                entries[key] = ("link", os.readlink(path))
            elif path.is_file():
                entries[key] = ("file", path.read_bytes())
            else:
                entries[key] = ("dir", None)
    return entries


@pytest.fixture
def builder(tmp_path: Path) -> SysrootBuilder:
    return SysrootBuilder(tmp_path / "root")


def test_committed_tree_matches_the_builder(tmp_path):
    build_910b_x2(SysrootBuilder(tmp_path))
    assert _snapshot(STATIC_TREE) == _snapshot(tmp_path), (
        "tests/data/sysroot/910b-x2 is stale: run `.venv/bin/python tests/probes/test_sysroot_builder.py`"
    )


def test_every_link_is_relative_and_the_tree_copies(builder, tmp_path):
    build_910b_x2(builder)
    builder.install_cann("8.1.RC1", libraries=False)
    builder.mark_container("docker")
    links = [p for p in builder.root.rglob("*") if p.is_symlink()]
    assert links
    assert not [p for p in links if os.path.isabs(os.readlink(p))]
    copy = tmp_path / "copy"
    shutil.copytree(builder.root, copy, symlinks=True)
    shutil.rmtree(builder.root)
    inventory = scan_pci(Sysroot(copy))
    assert inventory.chip_count == 2
    assert inventory.functions[0].upstream_bdf == "0000:00:01.0"
    assert scan_dev(Sysroot(copy)).davinci_ids == (0, 1)


def test_pci_layout(builder):
    folder = builder.add_pci_function("0000:c1:00.0", 0xD802)
    assert folder == builder.path("/sys/devices/pci0000:c0/0000:c0:01.0/0000:c1:00.0")
    link = builder.path("/sys/bus/pci/devices/0000:c1:00.0")
    assert os.readlink(link) == "../../../devices/pci0000:c0/0000:c0:01.0/0000:c1:00.0"
    assert os.readlink(folder / "driver") == "../../../../bus/pci/drivers/devdrv_device_driver"
    back = builder.path(f"/sys/bus/pci/drivers/{ASCEND_DRIVER}/0000:c1:00.0")
    assert Path(os.path.realpath(back)) == Path(os.path.realpath(folder))
    assert (folder / "current_link_width").read_text() == "16\n"
    assert (folder / "vendor").read_text() == "0x19e5\n"
    port = folder.parent
    assert (port / "max_link_speed").read_text() == "16.0 GT/s PCIe\n"
    assert (port / "class").read_text() == "0x060400\n"


def test_adjacent_buses_get_their_own_root_ports(builder):
    a = builder.add_pci_function("0000:c1:00.0", 0xD802)
    b = builder.add_pci_function("0000:c2:00.0", 0xD802)
    c = builder.add_pci_function("0000:05:00.0", 0xD802, root_port="0000:00:1c.0")
    assert (a.parent.name, b.parent.name, c.parent.name) == (
        "0000:c0:01.0",
        "0000:c0:02.0",
        "0000:00:1c.0",
    )


def test_config_space(builder):
    folder = builder.add_pci_function(
        "0000:c1:00.0", 0xD500, subsystem_vendor_id=0x0200, subsystem_device_id=0x0110
    )
    config = (folder / "config").read_bytes()
    assert len(config) == 64
    assert config[:4] == bytes([0xE5, 0x19, 0x00, 0xD5])
    assert config[8] == 0x20
    assert config[9:12] == bytes([0x00, 0x00, 0x12])
    assert config[0x2C:0x30] == bytes([0x00, 0x02, 0x10, 0x01])
    dropped = builder.add_pci_function("0000:c2:00.0", 0xD802, present=False)
    assert (dropped / "config").read_bytes() == b"\xff" * 64


def test_unbind_and_rebind(builder):
    builder.add_pci_function("0000:c1:00.0", 0xD802)
    builder.unbind_driver("0000:c1:00.0")
    assert not scan_pci(builder.sysroot()).functions[0].bound
    assert not builder.path(f"/sys/bus/pci/drivers/{ASCEND_DRIVER}/0000:c1:00.0").is_symlink()
    builder.bind_driver("0000:c1:00.0")
    assert scan_pci(builder.sysroot()).functions[0].bound


def test_rewriting_a_function_replaces_it(builder):
    builder.add_pci_function("0000:c1:00.0", 0xD802)
    builder.add_pci_function("0000:c1:00.0", 0xD802, current_width=4, bound=False, aer=None)
    (function,) = scan_pci(builder.sysroot()).functions
    assert function.link.current_width == 4
    assert function.link.aer_correctable_total is None  # no stale file left behind
    assert not function.bound
    assert not builder.path(f"/sys/bus/pci/drivers/{ASCEND_DRIVER}/0000:c1:00.0").is_symlink()


def test_virtual_function_links_to_its_pf(builder):
    builder.add_pci_function("0000:c1:00.0", 0xD802)
    vf = builder.add_pci_function("0000:c1:00.1", 0xD805, virtual_function=True)
    assert os.readlink(vf / "physfn") == "../0000:c1:00.0"
    with pytest.raises(ValueError, match="own physfn"):
        builder.add_pci_function("0000:c1:00.0", 0xD805, virtual_function=True)


@pytest.mark.parametrize("bdf", ["c1:00.0", "0000:C1:00.0", "0000:c1:00.9", ""])
def test_bad_bdf_is_a_programming_error(builder, bdf):
    with pytest.raises(ValueError, match="BDF"):
        builder.add_pci_function(bdf, 0xD802)


def test_bad_aer_style_is_a_programming_error(builder):
    with pytest.raises(ValueError, match="AER style"):
        builder.add_pci_function("0000:c1:00.0", 0xD802, aer_style="weird")


def _keys(text: str) -> set:
    return {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}


def test_install_driver_matches_the_captured_format(builder):
    info = builder.install_driver("25.0.rc1.1", firmware="7.7.0.6.236", compatible_fw="[7.0.0,7.7.99]")
    assert info == builder.path("/usr/local/Ascend/driver/version.info")
    text = info.read_text()
    assert "Version=25.0.rc1.1\n" in text
    assert "compatible_version_fw=[7.0.0,7.7.99]\n" in text
    captured = (DATA / "npu_smi/018_driver-version-info-24.1.rc1.txt").read_text()
    assert _keys(captured) <= _keys(text)
    firmware = builder.path("/usr/local/Ascend/firmware/version.info").read_text()
    assert "Version=7.7.0.6.236\n" in firmware
    captured = (DATA / "npu_smi/019_firmware-version-info-7.1.0.11.220.txt").read_text()
    assert _keys(captured) <= _keys(firmware)
    install = builder.path("/etc/ascend_install.info").read_text()
    assert "Driver_Install_Path_Param=/usr/local/Ascend\n" in install
    assert "Driver_Install_Status=complete\n" in install


def test_install_driver_without_firmware(builder):
    builder.install_driver("24.1.rc1", status="failed")
    assert not builder.path("/usr/local/Ascend/firmware/version.info").exists()
    assert "Driver_Install_Status=failed" in builder.path("/etc/ascend_install.info").read_text()


def test_install_cann_toolkit_layout(builder):
    home = builder.install_cann("8.1.RC1")
    assert str(home) == "/usr/local/Ascend/ascend-toolkit/latest"
    assert os.readlink(builder.path(home)) == "8.1.RC1"
    info = builder.path(home) / "aarch64-linux/ascend_toolkit_install.info"
    text = info.read_text()
    assert "version=8.1.RC1\n" in text
    assert "path=/usr/local/Ascend/ascend-toolkit/8.1.RC1/aarch64-linux\n" in text
    captured = (DATA / "npu_smi/048_ascend-toolkit-install-info-8.1.RC1-aarch64.txt").read_text()
    assert _keys(captured) == _keys(text)
    set_env = builder.path("/usr/local/Ascend/ascend-toolkit/set_env.sh")
    assert os.access(set_env, os.X_OK)
    assert 'export ASCEND_HOME_PATH="/usr/local/Ascend/ascend-toolkit/latest"' in set_env.read_text()
    assert "ASCEND_HOME_PATH" not in builder.environ


def test_install_cann_new_layout_and_sourced_environment(builder):
    builder.environ["LD_LIBRARY_PATH"] = "/opt/lib"
    home = builder.install_cann("8.5.0", layout="cann", arch="x86_64", sourced=True)
    assert str(home) == "/usr/local/Ascend/cann"
    latest = builder.path("/usr/local/Ascend/ascend-toolkit/latest")
    assert os.path.realpath(latest) == os.path.realpath(builder.path("/usr/local/Ascend/cann-8.5.0"))
    text = (builder.path(home) / "x86_64-linux/ascend_toolkit_install.info").read_text()
    assert "path=/usr/local/Ascend/cann-8.5.0/x86_64-linux\n" in text
    captured = (DATA / "npu_smi/020_ascend-toolkit-install-info-8.5.0-aarch64.txt").read_text()
    assert _keys(captured) == _keys(text)
    assert builder.path(home / "set_env.sh").exists()
    assert builder.path(home / "runtime/version.info").read_text() == "Version=8.5.0\n"
    sysroot = builder.sysroot()
    assert sysroot.getenv("ASCEND_HOME_PATH") == "/usr/local/Ascend/cann"
    assert sysroot.getenv("LD_LIBRARY_PATH").endswith(":/opt/lib")
    assert "$" not in sysroot.getenv("PATH")
    assert all(p.exists() for p in sysroot.env_paths("PYTHONPATH")[:1])


def test_install_cann_bad_layout(builder):
    with pytest.raises(ValueError, match="layout"):
        builder.install_cann("8.5.0", layout="opt")


def test_install_executable_runs(builder):
    script = builder.install_executable("/usr/local/bin/npu-smi", "#!/bin/sh\necho fake npu-smi\n")
    assert script.stat().st_mode & 0o777 == 0o755
    done = subprocess.run([str(script)], capture_output=True, text=True, check=True)
    assert done.stdout == "fake npu-smi\n"


def test_write_file_text_bytes_and_read_only_replacement(builder):
    builder.write_file("/etc/x", "one")
    builder.write_file("/etc/x", b"\x00\x01", mode=0o444)
    builder.write_file("/etc/x", "three")
    assert builder.path("/etc/x").read_text() == "three"


def test_write_file_replaces_a_link_not_its_target_and_keeps_modes_whatever_the_umask(builder, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    builder.path("/etc").mkdir(parents=True, exist_ok=True)
    os.symlink(outside, builder.path("/etc/link"))
    builder.write_file("/etc/link", "new")
    assert outside.read_text() == "keep me"
    assert not builder.path("/etc/link").is_symlink() and builder.path("/etc/link").read_text() == "new"
    before = os.umask(0o077)
    try:
        made = builder.write_file("/a/b/c/deep", "x", mode=0o644)
    finally:
        os.umask(before)
    assert made == builder.path("/a/b/c/deep")
    assert made.stat().st_mode & 0o777 == 0o644
    builder.path("/etc/folder").mkdir()
    with pytest.raises((IsADirectoryError, PermissionError)):  # Linux: EISDIR from unlink
        builder.write_file("/etc/folder", "not into a folder")


def test_sysroot_gets_a_copy_of_the_environment(builder):
    builder.mark_container("kubernetes")
    sysroot = builder.sysroot()
    builder.environ.clear()
    assert sysroot.getenv("KUBERNETES_SERVICE_HOST") == "10.96.0.1"
    assert detect_container(sysroot).runtime == "kubernetes"


def test_dev_nodes_and_proc_devices(builder):
    builder.add_dev_nodes([0, 1], mode=0o666)
    assert (builder.path("/dev/davinci1").stat().st_mode & 0o777) == 0o666
    assert "devdrv-cdev" in builder.path("/proc/devices").read_text()
    builder.add_dev_nodes([], managers=False)  # an empty /dev is still a /dev
    assert scan_dev(builder.sysroot()).reason is None


if __name__ == "__main__":
    shutil.rmtree(STATIC_TREE, ignore_errors=True)
    build_910b_x2(SysrootBuilder(STATIC_TREE))
    print(f"wrote {STATIC_TREE}", file=sys.stderr)
