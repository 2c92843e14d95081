"""op-kernels on third-party op packages built for one chip (issue 29 item 9).

vllm-ascend and LMCache-Ascend record the SoC their operators were compiled for in
``_build_info.py``; on another chip those operators fail at run time.  Each test builds the
machine as a tree and runs ``npuwatch doctor --root TREE --json`` as a user does.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

import pytest

from npuwatch.probes.build_info import MAX_BYTES
from npuwatch.probes.sysroot_builder import PYTHON_SITE
from tests.doctor.machines import TestMachine, simulated
from tests.doctor.test_unseen_environments_round3 import cli

SITE = str(PYTHON_SITE)
BUILD_INFO = f"{SITE}/vllm_ascend/_build_info.py"
RUN_TIME_ERROR = "`the socversion … of bin package does not match`"


def _install(tm: TestMachine, build_info: Optional[str], package: str = "vllm-ascend") -> None:
    module = package.replace("-", "_")
    files = {} if build_info is None else {f"{module}/_build_info.py": build_info}
    tm.builder.install_python_package(package, "0.10.0rc1", site=SITE, modules=[module], files=files)


def _op_kernels(tm: TestMachine) -> Dict[str, object]:
    return cli(tm, "--only", "cann-install,op-kernels")["op-kernels"]


def test_vllm_ascend_built_for_910b_on_a_310p_duo_fails_with_the_image_and_soc_version(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    _install(tm, "# Auto-generated file\n__soc_version__ = 'ascend910b1'\n__sleep_mode_enabled__ = True\n")
    found = _op_kernels(tm)
    assert found["status"] == "fail", found["summary"]
    assert found["summary"] == (
        "vllm-ascend was built for ascend910b1, but this machine's chips are ascend310p: its operators "
        f"fail with {RUN_TIME_ERROR}"
    )
    hint = str(found["hint"])
    assert "`quay.io/ascend/vllm-ascend:v0.10.0rc1-310p`" in hint, hint
    assert "`SOC_VERSION=Ascend310P3 pip install .`" in hint, hint
    built = f"{BUILD_INFO}: vllm-ascend built for ascend910b1 (Ascend 910B (910B1-B4)), not this machine's"
    assert built in found["details"]
    assert str(tm.root) not in " ".join(found["details"])  # the machine's paths, not the tree's


@pytest.mark.parametrize(
    ("scenario", "build_info"),
    [
        ("910b-wide", "__soc_version__ = 'ascend910b1'\n"),
        ("910b-wide", '__soc_version__ = "Ascend910B3"  # from SOC_VERSION\n'),
        ("310p-duo", "__soc_version__ = 'ASCEND310P3'\n"),
        ("310p-duo", "# Auto-generated file\n__device_type__ = '_310P'\n"),
        ("a3", "__soc_version__ = 'Ascend910_9391'\n"),
        ("a3", "__device_type__ = 'A3'\n"),
    ],
)
def test_a_build_for_this_machine_s_chip_passes(tmp_path, scenario, build_info):
    tm = simulated(tmp_path, scenario)
    _install(tm, build_info)
    found = _op_kernels(tm)
    assert found["status"] == "pass", found["summary"]
    assert any(line.startswith(f"{BUILD_INFO}: vllm-ascend built for ") for line in found["details"])


def test_no_build_info_says_nothing(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    _install(tm, None)  # installed without the generated file
    found = _op_kernels(tm)
    assert found["status"] == "pass", found["summary"]
    assert not any("_build_info" in line or "vllm-ascend" in line for line in found["details"])


@pytest.mark.parametrize(
    ("scenario", "build_info", "built_for", "image", "soc_version"),
    [  # newer vllm-ascend writes the device type; an A3 die's name does not give its SoC version
        ("310p-duo", "__device_type__ = 'A2'\n", "device type A2", "v0.10.0rc1-310p", "Ascend310P3"),
        ("a3", "__soc_version__ = 'ascend910b3'\n", "ascend910b3", "v0.10.0rc1-a3", "<this chip's SoC"),
        ("910b-wide", "__soc_version__ = 'Ascend310P3'\n", "Ascend310P3", "v0.10.0rc1`", "Ascend910B"),
    ],
)
def test_a_build_for_another_chip_fails(tmp_path, scenario, build_info, built_for, image, soc_version):
    tm = simulated(tmp_path, scenario)
    _install(tm, build_info)
    found = _op_kernels(tm)
    assert found["status"] == "fail", found["summary"]
    summary = str(found["summary"])
    assert summary.startswith(f"vllm-ascend was built for {built_for}, but this machine's chips"), summary
    assert f"quay.io/ascend/vllm-ascend:{image}" in str(found["hint"]), found["hint"]
    assert f"`SOC_VERSION={soc_version}" in str(found["hint"]), found["hint"]


def test_lmcache_ascend_built_for_another_chip_fails(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    _install(tm, "__soc_version__ = 'ascend910b3'\n__framework_name__ = 'pytorch'\n", "lmcache-ascend")
    found = _op_kernels(tm)
    assert found["status"] == "fail", found["summary"]
    assert str(found["summary"]).startswith("lmcache-ascend was built for ascend910b3")
    assert "`SOC_VERSION=Ascend310P3 pip install .`" in str(found["hint"])


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("binary", "no __soc_version__ or __device_type__ in it"),
        ("huge", f"larger than {MAX_BYTES // 1024} KiB"),
        ("fifo", "not a readable regular file"),
        ("code", "no __soc_version__ or __device_type__ in it"),
    ],
)
def test_a_garbage_build_info_is_a_could_not_read_note(tmp_path, kind, reason):
    tm = simulated(tmp_path, "310p-duo")
    _install(tm, "")
    path = tm.builder.path(BUILD_INFO)
    if kind == "binary":
        path.write_bytes(b"\x00\xff\xfe__soc_version__\x00 = \x80'ascend910b1\n" * 50)
    elif kind == "huge":  # a valid line inside, but no build info is this large: not read
        path.write_text("__soc_version__ = 'ascend910b1'\n" + "#" * (MAX_BYTES * 4) + "\n")
    elif kind == "fifo":  # would block a plain read forever
        path.unlink()
        os.mkfifo(path)
    else:  # computed, not a literal: never run, so not known
        path.write_text("import os\n__soc_version__ = os.environ['SOC_VERSION']\n")
    found = _op_kernels(tm)
    assert found["status"] == "pass", found["summary"]
    assert f"{BUILD_INFO}: could not read which chip vllm-ascend was built for ({reason})" in found["details"]


def test_missing_kernels_and_a_build_for_another_chip_are_both_named(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    tm.remove("/usr/local/Ascend/ascend-toolkit/latest/opp/built-in/op_impl/ai_core/tbe/kernel/ascend310p")
    _install(tm, "__soc_version__ = 'ascend910b1'\n")
    found = _op_kernels(tm)
    assert found["status"] == "fail", found["summary"]
    summary, hint = str(found["summary"]), str(found["hint"])
    assert summary.startswith("no operator kernels for ascend310p in "), summary
    assert summary.endswith(
        f"; and vllm-ascend was built for ascend910b1, but this machine's chips are "
        f"ascend310p: its operators fail with {RUN_TIME_ERROR}"
    ), summary
    assert hint.startswith("install the kernels package for this chip"), hint
    assert "; then vllm-ascend: use the image built for this chip" in hint, hint
