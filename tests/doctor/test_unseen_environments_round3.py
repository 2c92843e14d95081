"""Whole-doctor runs on the third set of unseen environments (issue 29).

Each test builds the machine as a sysroot tree (dist-info metadata, version files, /etc files,
device nodes), runs the doctor through the engine or the CLI with ``--root``, and asserts the
check, its verdict and the fix it prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Dict, Iterable, Optional

import pytest

from npuwatch.doctor import facts, registry
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import CheckResult, Status
from npuwatch.probes.sysroot_builder import PYTHON_SITE
from tests.conftest import capture_text
from tests.doctor.machines import TestMachine, simulated
from tests.hostile.test_verdicts import _shared_machine, as_nobody, shared_tree  # noqa: F401 (a fixture)

SITE = str(PYTHON_SITE)


def act_as(monkeypatch, uid: int, name: str, gids: Iterable[int]) -> None:
    identity = facts.UserIdentity(uid, name, frozenset(gids), process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


@pytest.fixture(autouse=True)
def _as_root(monkeypatch):
    act_as(monkeypatch, 0, "root", {0})


def doctor(tm: TestMachine, machine: Optional[Machine] = None) -> Dict[str, CheckResult]:
    report = run_doctor(machine or tm.machine(), registry.all_checks())
    return {result.id: result for result in report.results}


def cli(tm: TestMachine, *args: str) -> Dict[str, dict]:
    """``npuwatch doctor --root TREE --json`` as a user runs it, with the machine's environment."""
    done = subprocess.run(
        [sys.executable, "-m", "npuwatch", "doctor", "--root", str(tm.root), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **tm.environ, "NO_COLOR": "1"},
    )
    assert done.returncode in (0, 1, 2), done.stderr
    return {check["id"]: check for check in json.loads(done.stdout)["results"]}


def swap(tm: TestMachine, name: str, version: str, site: str = SITE) -> None:
    """Uninstall ``name`` wherever the simulator put it and install ``version`` in ``site``."""
    for info in tm.builder.path(SITE).glob(f"{name}-*.dist-info"):
        shutil.rmtree(info)
    tm.builder.install_python_package(name, version, site=site, modules=[name])


# ---------------------------------------------------------------- 2. torch_npu dev and rc builds


@pytest.mark.parametrize(
    ("torch", "npu", "summary"),
    [
        (  # the vllm-ascend v0.10 images
            "2.7.1+cpu",
            "2.7.1.dev20250724",
            "torch_npu 2.7.1.dev20250724 is a development build of 2.7.1; CANN 8.5.0 lists torch 2.7.1 "
            "with torch_npu 2.7.1.post2: untested",
        ),
        (
            "2.6.0",
            "2.6.0rc1",
            "torch_npu 2.6.0rc1 is a development build of 2.6.0; CANN 8.5.0 lists torch 2.6.0 "
            "with torch_npu 2.6.0.post5: untested",
        ),
        (
            "2.8.0rc3+cpu",
            "2.8.0.post2",
            "torch 2.8.0rc3+cpu is a development build of 2.8.0; CANN 8.5.0 lists torch 2.8.0 "
            "with torch_npu 2.8.0.post2: untested",
        ),
    ],
)
def test_dev_or_rc_build_of_the_same_release_is_untested_not_a_mismatch(tmp_path, torch, npu, summary):
    tm = simulated(tmp_path, "910b-wide")  # CANN 8.5.0
    swap(tm, "torch", torch)
    swap(tm, "torch_npu", npu)
    result = doctor(tm)["torch-npu-compat"]
    assert result.status is Status.WARN, result.summary
    assert result.summary == summary
    assert "==2.7.1.dev" not in (result.hint or "")


def test_dev_build_of_another_release_asks_for_the_torch_release(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    swap(tm, "torch", "2.6.0+cpu")
    swap(tm, "torch_npu", "2.7.1.dev20250724")
    result = doctor(tm)["torch-npu-compat"]
    assert result.status is Status.FAIL
    assert "keep torch_npu and `pip install torch==2.7.1`" in (result.hint or "")
    assert "torch==2.7.1.dev" not in (result.hint or "")


# ---------------------------------------------------------------- 3. the job's Python in a tree


def _move_site(tm: TestMachine, site: str, names: Iterable[str] = ()) -> None:
    """Move the simulator's packages (all, or ``names``) from its site folder to ``site``."""
    old, new = tm.builder.path(SITE), tm.builder.path(site)
    new.mkdir(parents=True, exist_ok=True)
    for entry in list(old.iterdir()):
        stem = entry.name.split("-", 1)[0].lower()
        if not names or stem in names:
            shutil.move(str(entry), str(new / entry.name))


def _ascend_built_python(tm: TestMachine, prefix: str, version: str) -> None:
    """Python built into ``prefix`` as Ascend's images do: ``bin/python3 -> python3.X``."""
    tm.builder.install_executable(f"{prefix}/bin/python{version}", "#!/bin/sh\n")
    tm.builder.symlink(f"{prefix}/bin/python3", f"{prefix}/bin/python{version}")


def test_ascend_image_python_on_path_is_the_jobs_python(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    prefix = "/usr/local/python3.11.6"
    _ascend_built_python(tm, prefix, "3.11")
    _move_site(tm, f"{prefix}/lib/python3.11/site-packages")
    tm.environ["PATH"] = f"{prefix}/bin:{tm.environ['PATH']}:/usr/local/bin:/usr/bin"
    results = doctor(tm)
    deps = results["cann-python-deps"]
    assert deps.status is Status.PASS, deps.summary
    assert f"Python 3.11 ({prefix}/bin/python3)" in deps.details
    compat = results["torch-npu-compat"]
    assert compat.status is Status.PASS, compat.summary
    assert compat.summary.endswith("Python 3.11: tested together")


def test_ascend_built_python_off_path_is_still_found(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    prefix = "/usr/local/python3.10.14"
    _ascend_built_python(tm, prefix, "3.10")
    _move_site(tm, f"{prefix}/lib/python3.10/site-packages", {"numpy"})
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.FAIL, result.summary  # only numpy is in its site-packages
    assert (result.hint or "").startswith(f"`{prefix}/bin/python3 -m pip install decorator sympy")


def test_openeuler_lib64_site_packages_are_searched(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    compiled = {"numpy", "scipy", "psutil", "cffi", "pyyaml", "torch", "torch_npu"}
    _move_site(tm, "/usr/local/lib64/python3.10/site-packages", compiled)
    tm.builder.install_executable("/usr/bin/python3.10", "#!/bin/sh\n")
    tm.builder.symlink("/usr/bin/python3", "/usr/bin/python3.10")
    tm.environ["PATH"] = f"{tm.environ['PATH']}:/usr/bin"
    results = cli(tm, "--only", "cann-python-deps,torch-npu-compat")
    assert results["cann-python-deps"]["status"] == "pass", results["cann-python-deps"]["summary"]
    assert results["torch-npu-compat"]["status"] == "pass", results["torch-npu-compat"]["summary"]


def test_system_python_on_path_judges_its_own_version_only(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    tm.builder.path("/usr/local/lib/python3.12/site-packages").mkdir(parents=True)  # a stray folder
    tm.builder.install_executable("/usr/bin/python3.10", "#!/bin/sh\n")
    os.symlink("/usr/bin/python3.10", tm.builder.path("/usr/bin/python3"))  # absolute: read inside the tree
    tm.environ["PATH"] = "/usr/bin"
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.PASS, result.summary
    assert "Python 3.10 (/usr/bin/python3)" in result.details


# ---------------------------------------------------------------- 4. ASCEND_VISIBLE_DEVICES on runc


@pytest.mark.parametrize(("removed", "logical"), [((), "2,3"), ((0,), "1,2")])
def test_ascend_visible_devices_nothing_applied_in_a_runc_container(tmp_path, removed, logical):
    tm = simulated(tmp_path)  # 8 chips
    tm.builder.mark_container("docker")
    for chip in removed:
        tm.remove(f"/dev/davinci{chip}")
    tm.environ["ASCEND_VISIBLE_DEVICES"] = "2,3"
    result = doctor(tm)["visible-devices"]
    assert result.status is Status.WARN, result.summary
    assert result.summary.startswith(f"ASCEND_VISIBLE_DEVICES=2,3 names 2 of the {8 - len(removed)} chips")
    assert "did not start this container" in result.summary
    assert (result.hint or "").startswith(f"`export ASCEND_RT_VISIBLE_DEVICES={logical}`")


def test_ascend_visible_devices_applied_by_the_runtime_passes(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    for chip in (0, 1, 4, 5, 6, 7):
        tm.remove(f"/dev/davinci{chip}")
    tm.environ["ASCEND_VISIBLE_DEVICES"] = "2,3"
    result = doctor(tm)["visible-devices"]
    assert result.status is Status.PASS, result.summary


def test_ascend_visible_devices_with_rt_visible_set_is_limited(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.environ["ASCEND_VISIBLE_DEVICES"] = "2,3"
    tm.environ["ASCEND_RT_VISIBLE_DEVICES"] = "2,3"
    assert doctor(tm)["visible-devices"].status is Status.PASS


# ---------------------------------------------------------------- 5. the container's users


def test_container_user_without_passwd_entry_warns(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.builder.add_dev_nodes(range(8), mode=0o666)
    tm.builder.write_file("/etc/passwd", "root:x:0:0:root:/root:/bin/bash\n")
    tm.builder.write_file("/etc/group", "root:x:0:\nHwHiAiUser:x:1000:\n")
    act_as(monkeypatch, 1000, "hostuser", {1000})  # this host names uid 1000; the image does not
    result = doctor(tm)["device-permissions"]
    assert result.status is Status.WARN, result.summary
    assert result.summary.startswith("uid 1000 has no entry in this container's /etc/passwd")
    assert "HCCL" in result.summary
    assert "`RUN useradd -u 1000 -g HwHiAiUser -m npuuser`" in (result.hint or "")
    assert "hostuser" not in result.summary + (result.hint or "") + " ".join(result.details)


def test_container_user_in_passwd_passes(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.builder.add_dev_nodes(range(8), mode=0o666)
    tm.builder.write_file(
        "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\nmlops:x:1000:1000::/home/mlops:/bin/sh\n"
    )
    act_as(monkeypatch, 1000, "hostuser", {1000})
    result = doctor(tm)["device-permissions"]
    assert result.status is Status.PASS, result.summary
    assert result.summary == "mlops (uid 1000) can open all 11 device nodes"


def test_image_driver_group_other_than_the_nodes_owner(tmp_path, monkeypatch):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.builder.add_dev_nodes(range(8), mode=0o660)
    node_gid = os.stat(tm.builder.path("/dev/davinci0")).st_gid
    image_gid = node_gid + 1000  # the image made its own HwHiAiUser, not the host's
    tm.builder.write_file(
        "/etc/passwd",
        f"root:x:0:0:root:/root:/bin/bash\nHwHiAiUser:x:{image_gid}:{image_gid}::/home/HwHiAiUser:/bin/bash\n",
    )
    tm.builder.write_file("/etc/group", f"HwHiAiUser:x:{image_gid}:\n")
    act_as(monkeypatch, image_gid, "HwHiAiUser", {image_gid})
    result = doctor(tm)["device-permissions"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary.startswith(f"HwHiAiUser (uid {image_gid}) cannot open 11 of 11 device nodes")
    assert result.summary.endswith(
        f"(this image's HwHiAiUser is gid {image_gid}, but the nodes belong to gid {node_gid}, "
        "the host's driver group)"
    )
    hint = result.hint or ""
    assert hint.startswith(f"the nodes belong to gid {node_gid} and mode 0660")
    assert f"--group-add {node_gid}" in hint


# ---------------------------------------------------------------- 6. the image's own driver userland


def test_image_driver_userland_older_than_the_hosts_driver(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.scripted_npu_smi(capture_text("022"))  # the host's npu-smi, mounted: Version: 25.0.rc1.1
    tm.builder.install_driver("24.1.0", userland=False)  # the image's own version.info
    result = doctor(tm)["driver-install"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary.startswith(
        "this container's driver userland (/usr/local/Ascend/driver/version.info: 24.1.0) is older than "
        "the host's driver 25.0.rc1.1 (npu-smi)"
    )
    assert (result.hint or "").startswith(
        "use the host's driver libraries instead of the image's: -v /usr/local/"
    )


@pytest.mark.parametrize("scenario", ["910b-training", "a3", "310p-duo", "950"])
def test_container_with_the_hosts_driver_passes(tmp_path, scenario):
    tm = simulated(tmp_path, scenario)
    tm.builder.mark_container("docker")
    result = doctor(tm)["driver-install"]
    assert result.status is Status.PASS, result.summary
    assert any(line.startswith("the host's driver (npu-smi's Version:): ") for line in result.details)


# ---------------------------------------------------------------- 7. numpy against CANN's own requirement


def _cann_wheel(tm: TestMachine, requires: str) -> str:
    """CANN's te package in ``<home>/python/site-packages`` (on PYTHONPATH), stating ``requires``."""
    site = f"{tm.environ['ASCEND_HOME_PATH']}/python/site-packages"
    tm.builder.write_file(
        f"{site}/te-0.4.0.dist-info/METADATA",
        f"Metadata-Version: 2.1\nName: te\nVersion: 0.4.0\nRequires-Dist: {requires}\nRequires-Dist: sympy\n",
    )
    tm.builder.write_file(f"{site}/te/__init__.py", "")
    return site


def test_numpy_2_under_cann_8_0_fails(tmp_path):
    tm = simulated(tmp_path)  # CANN 8.0.RC2
    swap(tm, "numpy", "2.0.2")
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary.startswith("numpy 2.0.2 does not meet numpy<2, which CANN 8.0.RC2 needs")
    assert "500001" in result.summary
    assert (result.hint or "").startswith("`python3.10 -m pip install 'numpy<2'`")


def test_numpy_2_under_cann_8_5_passes(tmp_path):
    tm = simulated(tmp_path, "910b-wide")  # CANN 8.5.0
    swap(tm, "numpy", "2.1.3")
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.PASS, result.summary


def test_numpy_against_what_canns_own_package_states(tmp_path):
    tm = simulated(tmp_path, "910b-wide")  # CANN 8.5.0: no rule of its own, but its te says numpy < 2
    _cann_wheel(tm, "numpy (<2.0,>=1.19)")
    swap(tm, "numpy", "2.1.3")
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary.startswith(
        "numpy 2.1.3 does not meet numpy<2.0,>=1.19, which CANN's te 0.4.0 needs"
    )
    assert (result.hint or "").startswith("`python3.10 -m pip install 'numpy<2.0,>=1.19'`")


def test_canns_own_statement_wins_over_the_release_rule(tmp_path):
    tm = simulated(tmp_path)  # CANN 8.0.RC2, whose te here allows numpy 2
    _cann_wheel(tm, "numpy>=1.19")
    swap(tm, "numpy", "2.0.2")
    result = doctor(tm)["cann-python-deps"]
    assert result.status is Status.PASS, result.summary
    assert any("Requires-Dist: numpy>=1.19" in line for line in result.details)


def test_requirement_clauses():
    from npuwatch.probes.requirements import parse_requirement

    req = parse_requirement('numpy (<2.0,>=1.19) ; python_version >= "3.8"')
    assert req is not None and req.name == "numpy" and req.specifier == "<2.0,>=1.19"
    assert req.allows("1.26.4") and not req.allows("2.0.2") and not req.allows("1.18.5")
    assert parse_requirement("numpy==1.26.*").allows("1.26.4")  # type: ignore[union-attr]
    assert parse_requirement("torch-npu~=2.7.1").allows("2.7.1.post2")  # type: ignore[union-attr]
    assert parse_requirement("numpy<2").allows("garbage") is None  # type: ignore[union-attr]
    assert parse_requirement("numpy <<2") is None
    dev = parse_requirement("torch-npu==2.7.1.dev20250724")
    assert dev is not None and dev.allows("2.7.1.dev20250724") and not dev.allows("2.7.1.post2")


# ---------------------------------------------------------------- 8. NNAL/ATB

NNAL = "/usr/local/Ascend/nnal/atb"
ATB_LIB = f"{NNAL}/latest/atb/cxx_abi_1/lib"


def _nnal(tm: TestMachine, version: str) -> None:
    """NNAL ``version`` installed and sourced (set_env.sh's ATB_HOME_PATH and LD_LIBRARY_PATH)."""
    tm.builder.write_file(f"{NNAL}/latest/version.info", f"Version={version}\nversion_dir={version}\n")
    tm.builder.write_file(f"{NNAL}/set_env.sh", "# NNAL (simulated)\n")
    tm.builder.install_library(f"{ATB_LIB}/libatb.so")
    tm.environ["ATB_HOME_PATH"] = ATB_LIB[: -len("/lib")]
    tm.environ["LD_LIBRARY_PATH"] += f":{ATB_LIB}"


@pytest.mark.parametrize(
    ("scenario", "cann", "nnal"), [("idle", "8.1.RC1", "8.0.0"), ("910b-wide", "8.5.0", "8.3.RC1")]
)
def test_nnal_of_another_cann_release_warns(tmp_path, scenario, cann, nnal):
    tm = simulated(tmp_path, scenario)
    _nnal(tm, nnal)
    result = doctor(tm)["cann-libraries"]
    assert result.status is Status.WARN, result.summary
    assert result.summary.startswith(f"NNAL {nnal} ({NNAL}/latest/version.info) is not for CANN {cann}")
    assert (result.hint or "").startswith(f"install NNAL {cann} (`bash Ascend-cann-nnal_{cann}_linux-")


def test_nnal_of_the_cann_release_passes(tmp_path):
    tm = simulated(tmp_path, "idle")
    _nnal(tm, "8.1.RC1")
    result = doctor(tm)["cann-libraries"]
    assert result.status is Status.PASS, result.summary
    assert result.summary.endswith("libatb load from LD_LIBRARY_PATH")


@pytest.mark.parametrize(
    ("install", "user"),
    [
        (
            lambda tm: tm.builder.install_python_package("vllm-ascend", "0.9.1", site=SITE),
            "vllm-ascend 0.9.1",
        ),
        (lambda tm: swap(tm, "torch_npu", "2.8.0.dev20250901"), "torch_npu 2.8.0.dev20250901 (a dev build)"),
        (
            lambda tm: tm.builder.write_file(
                "/usr/local/Ascend/mindie/latest/version.info", "Version=2.1.RC1\n"
            ),
            "MindIE",
        ),
    ],
)
def test_something_needing_atb_without_nnal_fails(tmp_path, install, user):
    tm = simulated(tmp_path, "910b-wide")  # CANN 8.5.0, no NNAL
    install(tm)
    result = doctor(tm)["cann-libraries"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary.startswith(f"libatb.so will not be found: install NNAL 8.5.0 (no {NNAL}; {user}")
    assert "Ascend-cann-nnal_8.5.0_linux-" in (result.hint or "")


def test_nnal_verdict_in_an_untrusted_tree_through_the_cli(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    tm.builder.install_python_package("vllm-ascend", "0.10.0rc1", site=SITE)
    tm.environ.pop("NPUWATCH_TRUST_ROOT", None)  # a tree as users bring it: nothing of it is run
    found = cli(tm, "--only", "cann-libraries")["cann-libraries"]
    assert found["status"] == "fail", found["summary"]
    assert found["summary"].startswith("libatb.so will not be found: install NNAL 8.5.0")
    assert any("not trusted" in line for line in found["details"])


# ---------------------------------------------------------------- weak reasons


def _vllm_ascend(tm: TestMachine, version: str, *requires: str) -> None:
    lines = "".join(f"Requires-Dist: {line}\n" for line in requires)
    tm.builder.write_file(
        f"{SITE}/vllm_ascend-{version}.dist-info/METADATA",
        f"Metadata-Version: 2.1\nName: vllm-ascend\nVersion: {version}\n{lines}",
    )


def test_vllm_ascend_pin_on_torch_npu_is_named(tmp_path):
    tm = simulated(tmp_path, "910b-wide")  # torch_npu 2.8.0.post2 stays; pip brought torch 2.7.1
    swap(tm, "torch", "2.7.1+cpu")
    _vllm_ascend(tm, "0.10.0rc1", "torch==2.7.1", "torch-npu==2.7.1.dev20250724", "pytest; extra == 'test'")
    result = doctor(tm)["torch-npu-compat"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary.startswith(
        "vllm-ascend 0.10.0rc1 requires torch-npu==2.7.1.dev20250724, but torch-npu 2.8.0.post2 is installed"
    )
    assert "do not match" not in result.summary + " ".join(result.details)
    assert (result.hint or "").startswith("`pip install 'torch-npu==2.7.1.dev20250724'`")


def test_vllm_ascend_pin_met_says_nothing(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    _vllm_ascend(tm, "0.11.0", "torch==2.8.0", "torch-npu==2.8.0.post2")
    assert doctor(tm)["torch-npu-compat"].status is Status.PASS


def test_toolkit_closed_to_the_user_is_installed_not_readable(shared_tree):  # noqa: F811 (the fixture)
    # Real permissions, judged as uid 65534 in a forked child (tests/hostile's helper).
    builder, npu_smi = _shared_machine(shared_tree)
    builder.install_cann("8.0.RC2")
    for folder in builder.path("/usr/local/Ascend").rglob("*"):
        if folder.is_dir() and not folder.is_symlink():
            folder.chmod(0o755)
    builder.path("/usr/local/Ascend/ascend-toolkit").chmod(0o750)  # root:root, no --install-for-all
    finding = as_nobody(builder.root, npu_smi, "cann-install")["cann-install"]
    assert finding["status"] == "fail", finding
    assert finding["summary"].startswith(
        "CANN is installed at /usr/local/Ascend/ascend-toolkit/latest, but not readable by uid 65534"
    ), finding
    assert "not installed" not in finding["summary"]
    assert "--install-for-all" in finding["hint"], finding


def test_dcmi_summary_names_machine_paths_not_the_trees(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_library("/usr/local/dcmi/libdcmi.so", broken=True)
    result = doctor(tm)["dcmi"]
    assert result.status in (Status.WARN, Status.FAIL), result.summary
    assert result.summary.startswith("/usr/local/dcmi/libdcmi.so does not load: "), result.summary
    text = " ".join([result.summary, result.hint or "", *result.details])
    assert str(tm.root) not in text, text


ROOT_ONLY_TEXT = "DrvMngGetConsoleLogLevel failed. (ret=4)\ndcmi module initialize failed. ret is -8005\n"
BOOTED_AT = 1_764_300_000


@pytest.mark.parametrize(("installed_after_s", "reboot"), [(3600, True), (-3600, False)])
def test_dcmi_8005_after_a_driver_install_since_boot_asks_for_a_reboot(tmp_path, installed_after_s, reboot):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(stderr=ROOT_ONLY_TEXT, exit_code=187)
    tm.builder.write_file("/proc/stat", f"cpu  1 2 3 4\nbtime {BOOTED_AT}\nprocesses 42\n")
    log = tm.builder.write_file("/var/log/ascend_seclog/ascend_install.log", "[Driver] [install] success\n")
    os.utime(log, (BOOTED_AT + installed_after_s, BOOTED_AT + installed_after_s))
    result = doctor(tm)["npu-smi"]
    assert result.status is Status.FAIL, result.summary
    assert result.summary == "npu-smi failed with DCMI error -8005 (DCMI internal error)"
    hint = result.hint or ""
    assert hint.startswith("reboot: the driver was installed after this boot") is reboot, hint
    assert any("ascend_install.log was written at" in line for line in result.details) is reboot


def test_newer_driver_naming_the_older_cann_in_its_own_list_passes(tmp_path):
    tm = simulated(tmp_path, "idle")  # CANN 8.1.RC1, innerversion V100R001C21…
    tm.builder.install_driver("25.5.0", firmware="7.7.0.5.201", inner_version="V100R001C25SPC001B100")
    result = doctor(tm)["driver-cann-compat"]
    assert result.status is Status.PASS, result.summary
    assert result.summary == (
        "driver 25.5.0 lists CANN 8.1.RC1 (innerversion V100R001C21) as compatible in its version.info"
    )


def test_cann_the_torch_npu_table_lacks_names_the_missing_fact(tmp_path):
    tm = simulated(tmp_path, "910b-wide")
    tm.builder.install_cann("9.1.1", "cann", sourced=True)
    tm.environ.update(tm.builder.environ)
    swap(tm, "torch", "2.12.0+cpu")
    swap(tm, "torch_npu", "2.12.0")
    result = doctor(tm)["torch-npu-compat"]
    assert result.status is Status.WARN, result.summary
    assert result.summary == (
        "npuwatch's torch_npu table has no row for CANN 9.1.1 (its newest row is CANN 9.1.0): whether "
        "torch_npu 2.12.0 was tested on it is not known here (torch_npu 2.12.0 is listed for CANN 9.1.0)"
    )
    assert "untested" not in result.summary


# ---------------------------------------------------------------- healthy machines stay quiet

QUIET = (
    "driver-install", "device-permissions", "driver-cann-compat", "firmware-compat", "cann-install",
    "cann-libraries", "cann-python-deps", "torch-npu-compat", "visible-devices",
)  # fmt: skip


@pytest.mark.parametrize("scenario", ["910b-training", "910b-wide", "a3", "310p-duo", "950"])
@pytest.mark.parametrize("container", [False, True])
def test_healthy_machines_raise_nothing_from_the_compatibility_and_python_checks(
    tmp_path, scenario, container
):
    tm = simulated(tmp_path, scenario)
    if container:
        tm.builder.mark_container("docker")
    results = doctor(tm)
    loud = {
        i: (results[i].status, results[i].summary)
        for i in QUIET
        if results[i].status not in (Status.PASS, Status.SKIP)
    }
    assert loud == {}
