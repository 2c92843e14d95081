"""Golden, discovery and property tests for ``npuwatch.probes.install_files``.

Captures 018-020 and 048 are real install files; the discovery tests build sysroot trees in
``tmp_path`` for both CANN layouts (runtime-and-doctor.md §6.2 and §6.3).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuwatch.model import Versions
from npuwatch.probes.install_files import (
    find_cann_homes,
    find_driver_dir,
    find_firmware_dir,
    parse_ascend_install_info,
    parse_driver_version_info,
    parse_firmware_version_info,
    parse_key_value_file,
    parse_toolkit_install_info,
    parse_version_cfg,
    read_cann_version,
    read_versions,
)
from npuwatch.probes.sysroot import Sysroot
from tests.conftest import capture_text as capture

INSTALL_INFO = (
    "UserName=HwHiAiUser\n"
    "UserGroup=HwHiAiUser\n"
    "Firmware_Install_Type=full\n"
    "Firmware_Install_Path_Param=/usr/local/Ascend\n"
    "Driver_Install_Type=full\n"
    "Driver_Install_Path_Param=/usr/local/Ascend\n"
    "Driver_Install_For_All=no\n"
    "Driver_Install_Mode=normal\n"
    "Driver_Install_Status=complete\n"
)
VERSION_CFG = (
    "runtime_running_version=[7.3.0.1.231:8.0.RC2]\n"
    "compiler_running_version=[7.3.0.1.231:8.0.RC2]\n"
    "toolkit_installed_version=[7.3.0.1.230:8.0.RC2.alpha]\n"
    "opp_kernel_upgrade_version=[7.3.0.1.231:8.0.RC2]\n"
)


# ---------------------------------------------------------------- parsers


def test_key_value_file():
    values = parse_key_value_file('# comment\n\na = 1\nb="two"\nnoequals\n=x\na=3\n')
    assert values == {"a": "3", "b": "two"}


def test_018_driver_version_info():
    info = parse_driver_version_info(capture("018_driver-version-info-24.1.rc1.txt"))
    assert info.version == "24.1.rc1"
    assert info.ascendhal_version == "7.35.19"
    assert info.inner_version == "V100R001C15SPC006B220"
    assert info.compatible_versions == ("V100R001C30", "V100R001C13", "V100R001C15", "V100R001C17")
    assert info.compatible_firmware_ranges == (("7.0.0", "7.2.99"),)
    assert info.package_version is None  # this driver prints no package_version
    assert info.fields["tsfw_version"] == "1.0"
    assert info.warnings == ()


def test_019_firmware_version_info():
    info = parse_firmware_version_info(capture("019"))
    assert info.version == "7.1.0.11.220"
    assert info.package_version == "23.0.7"
    assert info.compatible_driver_ranges == (("23.0.rc3", "23.0.rc3."), ("23.0.0", "23.0.0."))
    assert info.fields["firmware_version"] == "1.0"


def test_020_toolkit_install_info_new_layout():
    info = parse_toolkit_install_info(capture("020"))
    assert info.package_name == "Ascend-cann-toolkit"
    assert info.version == "8.5.0"
    assert info.inner_version == "V100R001C25SPC001B212"
    assert info.compatible_versions == (
        "V100R001C15",
        "V100R001C18",
        "V100R001C19",
        "V100R001C20",
        "V100R001C21",
        "V100R001C23",
    )
    assert (info.arch, info.os) == ("aarch64", "linux")
    assert info.path == "/usr/local/Ascend/cann-8.5.0/aarch64-linux"


def test_048_toolkit_install_info_old_layout():
    info = parse_toolkit_install_info(capture("048"))
    assert info.version == "8.1.RC1"
    assert info.inner_version == "V100R001C21SPC001B238"
    assert info.compatible_versions[-1] == "V100R001C21"
    assert len(info.compatible_versions) == 5
    assert info.path == "/usr/local/Ascend/ascend-toolkit/8.1.RC1/aarch64-linux"


def test_ascend_install_info():
    info = parse_ascend_install_info(INSTALL_INFO)
    assert (info.user_name, info.user_group) == ("HwHiAiUser", "HwHiAiUser")
    assert info.driver_install_path == "/usr/local/Ascend"
    assert info.driver_install_status == "complete"
    assert info.driver_install_mode == "normal"
    assert info.driver_install_for_all == "no"
    assert info.firmware_install_path == "/usr/local/Ascend"


def test_version_cfg():
    cfg = parse_version_cfg(VERSION_CFG + "garbage_line=oops\n")
    first = cfg.entries[0]
    assert (first.package, first.state, first.inner, first.public) == (
        "runtime",
        "running",
        "7.3.0.1.231",
        "8.0.RC2",
    )
    assert cfg.entries[3].package == "opp_kernel"
    assert cfg.entries[3].state == "upgrade"
    assert cfg.public_version("runtime") == "8.0.RC2"
    assert cfg.public_version("toolkit") is None  # only "installed", not running
    assert cfg.public_version("toolkit", "installed") == "8.0.RC2.alpha"
    assert len(cfg.warnings) == 1


def test_garbage_files_give_none():
    info = parse_driver_version_info("\x00\x01 not a file\n[[[")
    assert info.version is None
    assert info.compatible_firmware_ranges == ()
    assert info.warnings
    assert parse_toolkit_install_info("").version is None


# ---------------------------------------------------------------- sysroot trees


def write(root: Path, machine_path: str, text: str) -> None:
    path = root / machine_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_old_layout_tree(tmp_path):
    write(tmp_path, "/etc/ascend_install.info", INSTALL_INFO)
    write(tmp_path, "/usr/local/Ascend/driver/version.info", capture("018"))
    write(tmp_path, "/usr/local/Ascend/firmware/version.info", capture("019"))
    toolkit = "/usr/local/Ascend/ascend-toolkit/8.1.RC1"
    write(tmp_path, toolkit + "/aarch64-linux/ascend_toolkit_install.info", capture("048"))
    os.symlink("8.1.RC1", tmp_path / "usr/local/Ascend/ascend-toolkit/latest")
    sysroot = Sysroot(tmp_path, environ={})
    assert find_driver_dir(sysroot) == PurePosixPath("/usr/local/Ascend/driver")
    assert find_cann_homes(sysroot) == (PurePosixPath("/usr/local/Ascend/ascend-toolkit/latest"),)
    assert read_versions(sysroot) == Versions(
        npu_smi=None, driver="24.1.rc1", firmware="7.1.0.11.220", cann="8.1.RC1"
    )


def test_new_layout_tree_with_compat_symlink(tmp_path):
    write(tmp_path, "/usr/local/Ascend/driver/version.info", "Version=25.5.1\n")
    cann = "/usr/local/Ascend/cann-8.5.0"
    write(tmp_path, cann + "/aarch64-linux/ascend_toolkit_install.info", capture("020"))
    os.symlink("cann-8.5.0", tmp_path / "usr/local/Ascend/cann")
    (tmp_path / "usr/local/Ascend/ascend-toolkit").mkdir()
    os.symlink("../cann", tmp_path / "usr/local/Ascend/ascend-toolkit/latest")
    sysroot = Sysroot(tmp_path, environ={})
    # ascend-toolkit/latest is the same directory as cann: listed once, under the first name.
    assert find_cann_homes(sysroot) == (PurePosixPath("/usr/local/Ascend/cann"),)
    versions = read_versions(sysroot)
    assert versions.driver == "25.5.1"
    assert versions.firmware is None
    assert versions.cann == "8.5.0"


def test_version_cfg_and_runtime_fallbacks(tmp_path):
    write(tmp_path, "/usr/local/Ascend/ascend-toolkit/latest/version.cfg", VERSION_CFG)
    write(tmp_path, "/home/u/Ascend/cann/runtime/version.info", "Version=9.0.0\n")
    sysroot = Sysroot(tmp_path, environ={"HOME": "/home/u"})
    homes = find_cann_homes(sysroot)
    assert homes == (
        PurePosixPath("/usr/local/Ascend/ascend-toolkit/latest"),
        PurePosixPath("/home/u/Ascend/cann"),
    )
    assert read_cann_version(sysroot, homes[0]) == "8.0.RC2"
    assert read_cann_version(sysroot, homes[1]) == "9.0.0"


def test_env_var_points_into_the_tree_and_comes_first(tmp_path):
    write(tmp_path, "/opt/my-cann/runtime/version.info", "Version=8.3.RC1\n")
    write(tmp_path, "/usr/local/Ascend/cann/runtime/version.info", "Version=8.5.0\n")
    sysroot = Sysroot(
        tmp_path, environ={"ASCEND_HOME_PATH": "/opt/my-cann/", "ASCEND_TOOLKIT_HOME": "relative"}
    )
    assert find_cann_homes(sysroot) == (
        PurePosixPath("/opt/my-cann"),
        PurePosixPath("/usr/local/Ascend/cann"),
    )
    assert read_versions(sysroot).cann == "8.3.RC1"


def test_driver_install_path_param(tmp_path):
    write(tmp_path, "/etc/ascend_install.info", "Driver_Install_Path_Param=/opt/Ascend/\n")
    write(tmp_path, "/opt/Ascend/driver/version.info", "Version=23.0.0\n")
    sysroot = Sysroot(tmp_path, environ={})
    assert find_driver_dir(sysroot) == PurePosixPath("/opt/Ascend/driver")
    assert find_firmware_dir(sysroot) == PurePosixPath("/usr/local/Ascend/firmware")
    assert read_versions(sysroot).driver == "23.0.0"


def test_missing_install(tmp_path):
    sysroot = Sysroot(tmp_path, environ={"HOME": "/root"})
    assert find_driver_dir(sysroot) == PurePosixPath("/usr/local/Ascend/driver")
    assert find_cann_homes(sysroot) == ()
    assert read_versions(sysroot) == Versions()


def test_garbage_install_files(tmp_path):
    write(tmp_path, "/etc/ascend_install.info", "Driver_Install_Path_Param=\x00bad\n")
    write(tmp_path, "/usr/local/Ascend/driver/version.info", "\x7fELF\x00\x00garbage")
    write(tmp_path, "/usr/local/Ascend/cann/version.cfg", "runtime_running_version=oops\n")
    (tmp_path / "usr/local/Ascend/firmware").mkdir(parents=True)
    (tmp_path / "usr/local/Ascend/firmware/version.info").mkdir()  # a directory, unreadable
    sysroot = Sysroot(tmp_path, environ={"ASCEND_HOME_PATH": "/" + "x" * 5000})
    assert find_driver_dir(sysroot) == PurePosixPath("/usr/local/Ascend/driver")
    assert read_versions(sysroot) == Versions()


# ---------------------------------------------------------------- properties


@settings(deadline=None, max_examples=40, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "HOME"]), st.text()))
def test_discovery_never_raises_on_odd_environment(tmp_path_factory, environ):
    root = tmp_path_factory.mktemp("root")
    sysroot = Sysroot(root, environ=environ)
    find_cann_homes(sysroot)
    assert read_versions(sysroot) == Versions()


def test_every_firmware_range_is_read():
    # A real 310P driver 25.3.rc1 lists two firmware ranges; the second must not be dropped.
    text = "Version=25.3.rc1\ncompatible_version_fw=[6.4.0,6.4.99],[7.0.0,8.9.9]\n"
    info = parse_driver_version_info(text)
    assert info.compatible_firmware_ranges == (("6.4.0", "6.4.99"), ("7.0.0", "8.9.9"))
