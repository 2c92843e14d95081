"""The CANN checks on simulated machines: healthy layouts pass, each broken piece is named with its fix.

Machines are the simulator's (``tests/doctor/machines.simulated``): ``910b-training`` has CANN
8.0.RC2 in the toolkit layout (``ascend-toolkit/latest``), ``910b-wide`` CANN 8.5.0 in the cann
layout (``cann -> cann-8.5.0``).  Each test breaks one thing in the tree or the environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from npuwatch.doctor.checks import (
    cann_env,
    cann_install,
    cann_libraries,
    driver_cann_compat,
    op_kernels,
)
from npuwatch.doctor.facts import version_key, version_matches
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Status
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from tests.doctor.machines import TestMachine, simulated

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
CANN = "/usr/local/Ascend/cann"
SET_ENV_TOOLKIT = "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
SET_ENV_CANN = "source /usr/local/Ascend/cann/set_env.sh"
ASCEND_VARIABLES = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH")


@pytest.fixture
def toolkit(tmp_path) -> TestMachine:
    return simulated(tmp_path / "toolkit")  # CANN 8.0.RC2, toolkit layout, driver 24.1.rc2


@pytest.fixture
def wide(tmp_path) -> TestMachine:
    return simulated(tmp_path / "wide", "910b-wide")  # CANN 8.5.0, cann layout, driver 26.1.0


def unsource(machine: TestMachine) -> None:
    for name in (*ASCEND_VARIABLES, "LD_LIBRARY_PATH", "PYTHONPATH", "TOOLCHAIN_HOME"):
        machine.environ.pop(name, None)


def move_toolkit_home(machine: TestMachine, home: str = "/home/alice") -> None:
    """Reinstall the toolkit as a non-root user would have: under $HOME/Ascend."""
    target = machine.builder.path(f"{home}/Ascend/ascend-toolkit")
    target.parent.mkdir(parents=True)
    machine.builder.path("/usr/local/Ascend/ascend-toolkit").rename(target)
    unsource(machine)
    machine.environ["HOME"] = home


# ---------------------------------------------------------------- version helpers


def test_versions_sort_as_huawei_releases_them():
    ordered = ["8.0.RC1", "8.0.RC2", "8.0.0", "8.1.RC1", "8.5.0", "9.0.0"]
    assert sorted(ordered, key=version_key) == ordered
    assert version_key("25.0.rc1.1") < version_key("25.0.0") < version_key("25.2.0")
    assert version_matches("25.0.rc1.1", "25.0")
    assert version_matches("25.0.rc1.1", "25.0.RC1")
    assert not version_matches("25.2.0", "25.0")
    assert version_matches("9.1.0", "9.1")


# ---------------------------------------------------------------- cann-install


def test_install_passes_on_the_toolkit_layout(toolkit):
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == f"CANN 8.0.RC2 at {TOOLKIT}"
    assert f"CANN 8.0.RC2 at {TOOLKIT} → /usr/local/Ascend/ascend-toolkit/8.0.RC2" in finding.details


def test_install_passes_on_the_cann_layout(wide):
    finding = wide.run(cann_install.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == f"CANN 8.5.0 at {CANN}"
    assert f"CANN 8.5.0 at {CANN} → /usr/local/Ascend/cann-8.5.0" in finding.details


def test_no_install_fails_with_where_to_get_it(toolkit):
    toolkit.remove("/usr/local/Ascend/ascend-toolkit")
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary == "CANN toolkit not installed"
    assert "bash Ascend-cann-toolkit_<version>_linux-$(uname -m).run --install" in (finding.hint or "")
    assert "hiascend.com" in (finding.hint or "")
    assert "/usr/local/Ascend/cann" in finding.details[0]


def test_home_install_is_found(toolkit):
    move_toolkit_home(toolkit)
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == "CANN 8.0.RC2 at /home/alice/Ascend/ascend-toolkit/latest"


def test_several_installs_are_listed(toolkit):
    home = "/home/alice/Ascend/ascend-toolkit"
    toolkit.builder.write_file(
        f"{home}/8.1.RC1/version.cfg", "runtime_running_version=[7.7.0.1.231:8.1.RC1]\n"
    )
    toolkit.builder.symlink(f"{home}/latest", f"{home}/8.1.RC1")
    toolkit.environ["HOME"] = "/home/alice"
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == f"CANN 8.0.RC2 at {TOOLKIT} (2 installs found; this one is used)"
    assert any(line.startswith(f"CANN 8.1.RC1 at {home}/latest") for line in finding.details)


def test_older_versions_beside_latest_are_reported(toolkit):
    toolkit.builder.write_file("/usr/local/Ascend/ascend-toolkit/7.0.0/version.cfg", "x=[1:7.0.0]\n")
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.PASS
    assert "also installed (not in use): /usr/local/Ascend/ascend-toolkit/7.0.0" in finding.details


def test_unreadable_version_warns(toolkit):
    toolkit.remove("/usr/local/Ascend/ascend-toolkit/8.0.RC2/aarch64-linux")
    toolkit.remove("/usr/local/Ascend/ascend-toolkit/8.0.RC2/version.cfg")
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary == f"CANN found at {TOOLKIT} but its version could not be read"
    assert "reinstall it" in (finding.hint or "")


def test_mixed_component_versions_warn(toolkit):
    toolkit.builder.write_file(
        "/usr/local/Ascend/ascend-toolkit/8.0.RC2/version.cfg",
        "runtime_running_version=[7.3.0.1.231:8.0.RC2]\nopp_running_version=[7.2.0.1.100:8.0.RC1]\n"
        "opp_upgrade_version=[7.3.0.1.231:8.0.RC2]\n",
    )
    finding = toolkit.run(cann_install.CHECK)
    assert finding.status == Status.WARN
    assert (
        finding.summary == f"CANN 8.0.RC2 at {TOOLKIT} mixes component versions: runtime 8.0.RC2, opp 8.0.RC1"
    )
    assert "E30006 Failed to verify the OPP" in (finding.hint or "")
    assert "bash Ascend-cann-toolkit_8.0.RC2_linux-aarch64.run --full" in (finding.hint or "")
    assert "version.cfg: opp 8.0.RC1" in finding.details


def test_mixed_components_from_8_5_are_evidence_only(wide):
    wide.builder.write_file(
        "/usr/local/Ascend/cann-8.5.0/version.cfg",
        "runtime_running_version=[7.8.0:8.5.0]\nops_running_version=[7.8.0:8.5.2]\n",
    )
    finding = wide.run(cann_install.CHECK)
    assert finding.status == Status.PASS
    assert "CANN 8.5+ allows independently upgraded sub-packages" in finding.details


# ---------------------------------------------------------------- cann-env


def test_env_passes_when_sourced(toolkit, wide):
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.PASS
    assert (
        finding.summary == "CANN 8.0.RC2 environment is sourced (/usr/local/Ascend/ascend-toolkit/set_env.sh)"
    )
    finding = wide.run(cann_env.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == "CANN 8.5.0 environment is sourced (/usr/local/Ascend/cann/set_env.sh)"


@pytest.mark.parametrize(
    ("scenario", "line"), [("910b-training", SET_ENV_TOOLKIT), ("910b-wide", SET_ENV_CANN)]
)
def test_env_not_sourced_fails_with_the_source_line(tmp_path, scenario, line):
    machine = simulated(tmp_path, scenario)
    unsource(machine)
    finding = machine.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith("CANN environment not sourced: $ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME")
    assert f"`{line}` (add it to ~/.bashrc" in (finding.hint or "")
    assert "Dockerfile `ENV`" in (finding.hint or "")


def test_home_install_gets_its_own_source_line(toolkit):
    move_toolkit_home(toolkit)
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert "`source /home/alice/Ascend/ascend-toolkit/set_env.sh`" in (finding.hint or "")


def test_partly_set_and_missing_folders_fail(toolkit):
    del toolkit.environ["ASCEND_AICPU_PATH"]
    toolkit.environ["ASCEND_TOOLKIT_HOME"] = "/usr/local/Ascend/ascend-toolkit/7.0.0"
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary == "CANN environment partly set: $ASCEND_AICPU_PATH unset (and 2 more problems)"
    assert (
        "also: $ASCEND_TOOLKIT_HOME points at a missing folder: /usr/local/Ascend/ascend-toolkit/7.0.0"
        in (finding.details)
    )
    assert SET_ENV_TOOLKIT in (finding.hint or "")


def test_opp_path_without_built_in_fails(toolkit):
    toolkit.builder.path("/tmp/opp").mkdir(parents=True)
    toolkit.environ["ASCEND_OPP_PATH"] = "/tmp/opp"
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert "148049 ACL_ERROR_INVALID_OPP_PATH" in finding.summary
    assert SET_ENV_TOOLKIT in (finding.hint or "")


def test_toolkit_lib64_missing_from_ld_library_path_fails(toolkit):
    toolkit.environ["LD_LIBRARY_PATH"] = "/usr/local/Ascend/driver/lib64/driver"
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert (
        finding.summary
        == f"LD_LIBRARY_PATH lacks {TOOLKIT}/lib64: libascendcl.so/libhccl.so will not be found"
    )
    assert SET_ENV_TOOLKIT in (finding.hint or "")


def test_driver_folder_missing_with_its_install_info(toolkit):
    toolkit.environ["LD_LIBRARY_PATH"] = f"{TOOLKIT}/lib64"
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary == (
        "LD_LIBRARY_PATH lacks the driver folder /usr/local/Ascend/driver/lib64/driver: "
        "libascend_hal.so will not be found"
    )
    assert (
        "`export LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common:"
        "/usr/local/Ascend/driver/lib64/driver:$LD_LIBRARY_PATH`" in (finding.hint or "")
    )


def test_driver_folder_missing_because_install_info_is_not_mounted(toolkit):
    toolkit.environ["LD_LIBRARY_PATH"] = f"{TOOLKIT}/lib64"
    toolkit.remove("/etc/ascend_install.info")
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert "/etc/ascend_install.info is missing" in (finding.hint or "")
    assert "-v /etc/ascend_install.info:/etc/ascend_install.info" in (finding.hint or "")


def test_overwritten_pythonpath_fails_with_append_advice(toolkit):
    toolkit.environ["PYTHONPATH"] = "/home/alice/project"
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith(f"PYTHONPATH lacks {TOOLKIT}/python/site-packages: `import acl`")
    assert f"`export PYTHONPATH={TOOLKIT}/python/site-packages:$PYTHONPATH`" in (finding.hint or "")


def test_two_toolkits_on_the_paths_fail(toolkit):
    old = "/usr/local/Ascend/ascend-toolkit/7.0.0"
    toolkit.builder.write_file(f"{old}/version.cfg", "runtime_running_version=[6.0:7.0.0]\n")
    toolkit.builder.path(f"{old}/lib64").mkdir()
    toolkit.environ["LD_LIBRARY_PATH"] = f"{old}/lib64:" + toolkit.environ["LD_LIBRARY_PATH"]
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith("2 CANN installs mixed on the paths: expect `undefined symbol` errors")
    assert f"{old} (CANN 7.0.0) named by LD_LIBRARY_PATH: {old}/lib64" in finding.details
    assert "start from a clean environment" in (finding.hint or "")
    assert SET_ENV_TOOLKIT in (finding.hint or "")


def test_toolkit_and_cann_names_of_one_install_are_one_install(wide):
    # 8.5 links ascend-toolkit/latest -> ../cann: both spellings are the same install.
    wide.environ["PYTHONPATH"] += ":/usr/local/Ascend/ascend-toolkit/latest/python/site-packages"
    assert wide.run(cann_env.CHECK).status == Status.PASS


def test_stub_libraries_first_fail(toolkit):
    stub = f"{TOOLKIT}/runtime/lib64/stub"
    toolkit.environ["LD_LIBRARY_PATH"] = f"{stub}:" + toolkit.environ["LD_LIBRARY_PATH"]
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.FAIL
    assert "100039 ACL_ERROR_COMPILING_STUB_MODE" in finding.summary
    assert f"remove {stub} from LD_LIBRARY_PATH" in (finding.hint or "")


def test_stub_libraries_after_the_real_ones_warn(toolkit):
    stub = f"{TOOLKIT}/runtime/lib64/stub"
    toolkit.environ["LD_LIBRARY_PATH"] += f":{stub}"
    finding = toolkit.run(cann_env.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary == f"stub libraries on LD_LIBRARY_PATH ({stub}), after the real ones"


def test_cann_home_of_path_entries():
    assert str(cann_env.cann_home_of(f"{TOOLKIT}/lib64")) == TOOLKIT
    assert str(cann_env.cann_home_of("/usr/local/Ascend/cann-8.5.0/lib64")) == "/usr/local/Ascend/cann-8.5.0"
    assert str(cann_env.cann_home_of(f"{CANN}/python/site-packages")) == CANN
    assert cann_env.cann_home_of("/usr/local/Ascend/driver/lib64") is None
    assert cann_env.cann_home_of("/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib") is None


# ---------------------------------------------------------------- cann-libraries


def test_libraries_load_on_both_layouts(toolkit, wide):
    for machine, home in ((toolkit, TOOLKIT), (wide, CANN)):
        finding = machine.run(cann_libraries.CHECK)
        assert finding.status == Status.PASS, finding
        assert finding.summary == "libascendcl, libhccl, libopapi, libnnopbase load from LD_LIBRARY_PATH"
        assert f"libhccl.so: {home}/lib64/libhccl.so loads" in finding.details


def test_missing_library_fails_as_runtime_not_installed(toolkit):
    toolkit.remove("/usr/local/Ascend/ascend-toolkit/8.0.RC2/lib64/libascendcl.so")
    finding = toolkit.run(cann_libraries.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith(f"libascendcl.so not found in {TOOLKIT}/lib64 or on LD_LIBRARY_PATH")
    assert "`bash Ascend-cann-toolkit_8.0.RC2_linux-aarch64.run --full`" in (finding.hint or "")
    assert "libascendcl.so: not found" in finding.details


def test_libraries_off_the_library_path_fail_with_source_line(wide):
    wide.environ["LD_LIBRARY_PATH"] = "/usr/local/Ascend/driver/lib64/driver"
    finding = wide.run(cann_libraries.CHECK)
    assert finding.status == Status.FAIL
    names = "libascendcl.so, libhccl.so, libopapi.so, libnnopbase.so"
    assert finding.summary.startswith(f"{names} not on LD_LIBRARY_PATH (found in {CANN}/lib64)")
    assert "ERR00008" in finding.summary
    assert SET_ENV_CANN in (finding.hint or "")


def test_broken_library_fails_with_the_loaders_text(toolkit):
    toolkit.builder.install_library("/usr/local/Ascend/ascend-toolkit/8.0.RC2/lib64/libopapi.so", broken=True)
    finding = toolkit.run(cann_libraries.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith("libopapi.so does not load: ")
    assert any(word in finding.summary for word in ("invalid ELF header", "file too short"))
    assert f"ldd {TOOLKIT}/lib64/libopapi.so" in (finding.hint or "")
    line = next(d for d in finding.details if d.startswith("libopapi.so"))
    assert "does not load" in line


def test_atb_is_not_checked_without_nnal(toolkit):
    finding = toolkit.run(cann_libraries.CHECK)
    assert not any("libatb" in line for line in finding.details)


ATB_LIB = "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib"


def test_atb_off_the_library_path_warns(toolkit):
    toolkit.builder.install_library(f"{ATB_LIB}/libatb.so")
    finding = toolkit.run(cann_libraries.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary.startswith("libatb.so is not on LD_LIBRARY_PATH ($ATB_HOME_PATH unset)")
    assert "`source /usr/local/Ascend/nnal/atb/set_env.sh`" in (finding.hint or "")


def test_atb_sourced_passes(toolkit):
    toolkit.builder.install_library(f"{ATB_LIB}/libatb.so")
    toolkit.environ["ATB_HOME_PATH"] = ATB_LIB[: -len("/lib")]
    toolkit.environ["LD_LIBRARY_PATH"] += f":{ATB_LIB}"
    finding = toolkit.run(cann_libraries.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary.endswith("libnnopbase, libatb load from LD_LIBRARY_PATH")


def test_atb_broken_warns(toolkit):
    toolkit.builder.install_library(f"{ATB_LIB}/libatb.so", broken=True)
    toolkit.environ["LD_LIBRARY_PATH"] += f":{ATB_LIB}"
    finding = toolkit.run(cann_libraries.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary.startswith("libatb.so does not load: ")
    assert "reinstall NNAL" in (finding.hint or "")


def test_atb_home_set_but_nothing_installed_warns(toolkit):
    toolkit.environ["ATB_HOME_PATH"] = "/opt/atb"
    finding = toolkit.run(cann_libraries.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary.startswith("libatb.so is not installed")
    assert "Ascend-cann-nnal_<version>_linux-<arch>.run --install" in (finding.hint or "")


# ---------------------------------------------------------------- driver-cann-compat


def test_compat_passes_from_the_install_info(toolkit):
    finding = toolkit.run(driver_cann_compat.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == "driver 24.1.rc2 is listed as compatible by CANN 8.0.RC2's install info"


def test_compat_passes_from_the_release_notes(tmp_path):
    machine = simulated(tmp_path, "idle")  # CANN 8.1.RC1 with driver 25.0.rc1.1
    finding = machine.run(driver_cann_compat.CHECK)
    assert finding.status == Status.PASS
    # CANN 8.1.RC1's own compatible_version names the driver's V100R001C21: the install info speaks first.
    assert finding.summary == "driver 25.0.rc1.1 is listed as compatible by CANN 8.1.RC1's install info"
    assert any("release notes: CANN 8.1.RC1 supports HDK 25.0.RC1" in line for line in finding.details)


def test_compat_passes_on_the_cann_layout(wide):
    assert wide.run(driver_cann_compat.CHECK).status == Status.PASS


def test_driver_too_old_for_8_5_fails_with_the_hdk_to_install(wide):
    wide.builder.install_driver("24.1.rc1", inner_version="V100R001C15SPC006B220")
    finding = wide.run(driver_cann_compat.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith(
        "driver 24.1.rc1 is too old for CANN 8.5.0 (it needs HDK 25.0 or newer)"
    )
    assert "upgrade the NPU driver and firmware (Ascend HDK) to 25.5.x" in (finding.hint or "")
    assert "`bash Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --upgrade`" in (finding.hint or "")
    assert "; or use a CANN this driver supports (8.0.RC1)" in (finding.hint or "")


def test_cann_9_1_does_not_work_with_driver_25_0(wide):
    wide.builder.install_cann("9.1.0", "cann", sourced=True)
    wide.environ.update(wide.builder.environ)
    wide.builder.install_driver("25.0.rc1.1")
    finding = wide.run(driver_cann_compat.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith(
        "driver 25.0.rc1.1 is too old for CANN 9.1.0 (it needs HDK 25.2 or newer)"
    )
    assert "to 26.1.x" in (finding.hint or "")
    assert "or use a CANN this driver supports (8.5.2/9.0, 8.5.0, 8.2.RC1, 8.1.RC1)" in (finding.hint or "")
    assert any("not with 25.0.X" in line for line in finding.details)


def _driver_naming_no_cann(tm, version: str) -> None:
    """A driver whose own compatible_version names no installed CANN (the builder's names C21)."""
    info = tm.builder.install_driver(version, inner_version="V100R001C99SPC001B001")
    text = info.read_text().replace(
        "compatible_version=[V100R001C13],[V100R001C15],[V100R001C17],[V100R001C21]",
        "compatible_version=[V100R001C97],[V100R001C98]",
    )
    info.write_text(text)


def test_driver_not_listed_anywhere_warns_untested(toolkit):
    _driver_naming_no_cann(toolkit, "24.1.rc2")
    finding = toolkit.run(driver_cann_compat.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary == (
        "driver 24.1.rc2 with CANN 8.0.RC2 is untested: CANN's compatible_version does not list the "
        "driver's Innerversion V100R001C99"
    )
    assert "Ascend-hdk-<chip>-npu-driver_<version>_linux-<arch>.run --upgrade" in (finding.hint or "")


def test_driver_newer_than_the_table_and_unlisted_warns(wide):
    _driver_naming_no_cann(wide, "26.5.0")
    finding = wide.run(driver_cann_compat.CHECK)
    assert finding.status == Status.WARN
    assert "untested" in finding.summary
    assert "install an HDK CANN 8.5.0 lists" in (finding.hint or "")


def test_driver_list_without_the_cann_passes_on_canns_own_list(toolkit):
    # Issue 19: CANN's compatible_version names the driver; the driver's list is older than this CANN.
    toolkit.builder.install_cann("8.0.RC2", inner_version="V100R001C30SPC001B001", kernel_socs=["ascend910b"])
    finding = toolkit.run(driver_cann_compat.CHECK)
    assert finding.status == Status.PASS
    assert any(
        "the driver's compatible_version does not name CANN's innerversion V100R001C30" in line
        for line in finding.details
    )


def test_compat_skips_without_driver_version_info(toolkit):
    toolkit.remove("/usr/local/Ascend/driver/version.info")
    finding = toolkit.run(driver_cann_compat.CHECK)
    assert finding.status == Status.SKIP
    assert finding.summary == (
        "the driver's /usr/local/Ascend/driver/version.info is missing: nothing to compare CANN 8.0.RC2 "
        "with (see driver-install)"
    )


def test_hdk_table_rows():
    assert driver_cann_compat.hdk_row("9.1.0").drivers[-1] == "25.2"  # type: ignore[union-attr]
    assert driver_cann_compat.hdk_row("9.0.1").cann == ("8.5.2", "9.0")  # type: ignore[union-attr]
    assert driver_cann_compat.hdk_row("8.0.RC2") is None
    assert driver_cann_compat.inner_prefix("V100R001C21SPC002B220") == "V100R001C21"
    assert driver_cann_compat.inner_prefix(None) is None


# ---------------------------------------------------------------- op-kernels


def test_kernels_pass_on_both_layouts(toolkit, wide):
    for machine in (toolkit, wide):
        finding = machine.run(op_kernels.CHECK)
        assert finding.status == Status.PASS
        assert finding.summary == "operator kernels installed for ascend910b"
        assert "SoC: ascend910b" in finding.details


def test_missing_kernels_up_to_8_3_name_the_kernels_package(toolkit):
    toolkit.remove(f"{TOOLKIT}/opp/built-in/op_impl/ai_core/tbe/kernel/ascend910b")
    finding = toolkit.run(op_kernels.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith("no operator kernels for ascend910b in")
    assert "561003 `Op X does not has any binary`" in finding.summary
    assert "`bash Ascend-cann-kernels-910b_8.0.RC2_linux-aarch64.run --install`" in (finding.hint or "")


def test_missing_kernels_from_8_5_name_the_ops_package(wide):
    wide.remove(f"{CANN}/opp/built-in/op_impl/ai_core/tbe/kernel/ascend910b/config.ini")  # empty folder
    finding = wide.run(op_kernels.CHECK)
    assert finding.status == Status.FAIL
    assert "install the ops package for this chip, same version as CANN 8.5.0" in (finding.hint or "")
    assert "`bash Ascend-cann-910b-ops_8.5.0_linux-aarch64.run --install`" in (finding.hint or "")


def test_a3_kernels_package_has_its_own_name(tmp_path):
    machine = simulated(tmp_path, "a3")
    machine.remove(f"{TOOLKIT}/opp/built-in/op_impl/ai_core/tbe/kernel/ascend910_93")
    finding = machine.run(op_kernels.CHECK)
    assert finding.status == Status.FAIL
    assert "`bash Atlas-A3-cann-kernels_8.0.0_linux-aarch64.run --install`" in (finding.hint or "")


def test_kernels_for_another_soc_only_fail(toolkit):
    kernels = f"{TOOLKIT}/opp/built-in/op_impl/ai_core/tbe/kernel"
    toolkit.remove(f"{kernels}/ascend910b")
    toolkit.builder.write_file(f"{kernels}/ascend310p/config.ini", "[ascend310p]\n")
    finding = toolkit.run(op_kernels.CHECK)
    assert finding.status == Status.FAIL
    assert "(installed for ascend310p only)" in finding.summary


def test_home_install_kernels_go_to_its_install_path(toolkit):
    move_toolkit_home(toolkit)
    toolkit.remove("/home/alice/Ascend/ascend-toolkit/8.0.RC2/opp/built-in/op_impl/ai_core/tbe/kernel")
    finding = toolkit.run(op_kernels.CHECK)
    assert finding.status == Status.FAIL
    assert "--install --install-path=/home/alice/Ascend`" in (finding.hint or "")


def test_soc_from_npu_smi_when_there_is_no_pci_function(toolkit):
    toolkit.remove("/sys/bus/pci")
    finding = toolkit.run(op_kernels.CHECK)
    assert finding.status == Status.PASS
    assert "SoC: ascend910b" in finding.details


def test_unknown_soc_skips(toolkit):
    toolkit.remove("/sys/bus/pci")
    toolkit.scripted_npu_smi(stdout="", exit_code=1)
    finding = toolkit.run(op_kernels.CHECK)
    assert finding.status == Status.SKIP
    assert finding.summary.startswith("the NPU's SoC is unknown")


def test_no_hardware_skips(tmp_path):
    builder = SysrootBuilder(tmp_path / "root")
    builder.install_cann("8.0.RC2", sourced=True)
    machine = Machine(Sysroot(builder.root, environ=dict(builder.environ)), None)
    finding = op_kernels.CHECK.run(machine)
    assert finding.status == Status.SKIP
    assert finding.summary == "no Ascend NPU detected: which SoC's operator kernels are needed is unknown"


def test_package_chip_names():
    assert op_kernels.package_chip("ascend910b") == "910b"
    assert op_kernels.package_chip("ascend310p") == "310p"
    assert op_kernels.package_chip("ascend910_93") == "A3"


# ---------------------------------------------------------------- without CANN


@pytest.mark.parametrize(
    "check", [cann_env.CHECK, cann_libraries.CHECK, driver_cann_compat.CHECK, op_kernels.CHECK]
)
def test_checks_needing_cann_skip_without_it(tmp_path: Path, check):
    machine = simulated(tmp_path)
    machine.remove("/usr/local/Ascend/ascend-toolkit")
    finding = machine.run(check)
    assert finding.status == Status.SKIP
    assert "no CANN install found" in finding.summary
    assert check.requires == ("cann-install",)
