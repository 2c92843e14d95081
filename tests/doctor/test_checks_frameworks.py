"""The framework checks (torch-npu-compat, cann-python-deps) on simulated machines.

The simulator's Python is ``/usr/local/lib/python3.10/site-packages`` with CANN's compiler
dependencies and a tested torch/torch_npu pair; tests swap packages there.  Nothing is imported:
the checks read package metadata and ``torch/version.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from npuwatch.doctor.checks import cann_python_deps, torch_npu_compat
from npuwatch.doctor.checks.torch_npu_compat import CPU_INDEX, torch_base, torch_npu_base
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Status
from npuwatch.probes.python_env import PythonEnv, normalize_name
from npuwatch.probes.simulator.machine import CANN_PYTHON_DEPS
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import PYTHON_SITE
from tests.doctor.machines import TestMachine, simulated


def installed(machine: TestMachine, name: str) -> Optional[str]:
    return machine.machine().python().distribution_version(name)


def replace(
    machine: TestMachine,
    name: str,
    version: str,
    *,
    site: str = str(PYTHON_SITE),
    files: Optional[dict] = None,
) -> None:
    """Uninstall ``name`` (its dist-info) and install ``version`` in its place, as pip would."""
    for info in machine.builder.path(PYTHON_SITE).glob(f"{name}-*.dist-info"):
        machine.remove("/" + info.relative_to(machine.root).as_posix())
    machine.builder.install_python_package(name, version, site=site, modules=[name], files=files)


def uninstall(machine: TestMachine, name: str, module: str) -> None:
    folder = name.replace("-", "_")
    for info in machine.builder.path(PYTHON_SITE).glob(f"{folder}-*.dist-info"):
        machine.remove("/" + info.relative_to(machine.root).as_posix())
    machine.remove(str(PYTHON_SITE / module.split(".")[0]))


# ---------------------------------------------------------------- torch-npu-compat


@pytest.mark.parametrize(
    ("scenario", "summary"),
    [
        (
            "910b-training",
            "torch 2.1.0 + torch_npu 2.1.0.post6 on CANN 8.0.RC2, Python 3.10: tested together",
        ),
        ("910b-wide", "torch 2.8.0 + torch_npu 2.8.0.post2 on CANN 8.5.0, Python 3.10: tested together"),
        ("idle", "torch 2.5.1 + torch_npu 2.5.1 on CANN 8.1.RC1, Python 3.10: tested together"),
        ("a3", "torch 2.1.0 + torch_npu 2.1.0.post10 on CANN 8.0.0, Python 3.10: tested together"),
    ],
)
def test_tested_combinations_pass(tmp_path, scenario, summary):
    finding = simulated(tmp_path, scenario).run(torch_npu_compat.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == summary
    assert "torch_npu 2" in finding.details[1]


@pytest.mark.parametrize(("name", "module"), [("torch_npu", "torch_npu"), ("torch", "torch")])
def test_missing_framework_skips_with_the_reason(tmp_path, name, module):
    machine = simulated(tmp_path)
    uninstall(machine, name, module)
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.SKIP
    assert finding.summary == f"{name} not installed in this Python (3.10, /usr/local/lib/python3.10)"
    assert "/usr/local/lib/python3.10/site-packages" in finding.details[0]


def test_torch_and_torch_npu_mismatch_fails_predicting_undefined_symbol(tmp_path):
    machine = simulated(tmp_path)
    replace(machine, "torch_npu", "2.3.1")
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary == (
        "torch 2.1.0 and torch_npu 2.3.1 do not match: `import torch_npu` fails with `undefined symbol`"
    )
    assert finding.hint == (
        "`pip install torch_npu==2.1.0.post6` (the build for torch 2.1.0 on CANN 8.0.RC2) or keep "
        "torch_npu and `pip install torch==2.3.1`"
    )


def test_mismatch_with_autoloading_torch_warns_that_import_torch_breaks(tmp_path):
    machine = simulated(tmp_path, "910b-wide")  # torch 2.8.0 autoloads torch_npu
    replace(machine, "torch_npu", "2.7.1.post2")
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.FAIL
    assert "`pip install torch_npu==2.8.0.post2`" in (finding.hint or "")
    assert "`export TORCH_DEVICE_BACKEND_AUTOLOAD=0`" in (finding.hint or "")
    machine.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    assert "AUTOLOAD" not in (machine.run(torch_npu_compat.CHECK).hint or "")


@pytest.mark.parametrize(
    ("version", "files", "why"),
    [
        ("2.1.0+cu121", None, "its version is 2.1.0+cu121"),
        (
            "2.1.0",
            {"torch/version.py": "__version__ = '2.1.0'\ncuda: Optional[str] = '12.1'\n"},
            "cuda = '12.1'",
        ),
    ],
)
def test_cuda_torch_beside_torch_npu_fails_with_the_cpu_wheel(tmp_path, version, files, why):
    machine = simulated(tmp_path)
    replace(machine, "torch", version, files=files)
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary.startswith(f"torch {version} is a CUDA build (")
    assert why in finding.summary
    assert (
        "ERR00007 `Two accelerators cannot be used at the same time in PyTorch: npu and cuda`"
        in finding.summary
    )
    command = f"pip uninstall -y torch && pip install torch==2.1.0 --index-url {CPU_INDEX}"
    assert finding.hint == f"install the CPU build of the same torch: `{command}`"


def test_cpu_local_tag_is_not_cuda(tmp_path):
    machine = simulated(tmp_path)
    replace(machine, "torch", "2.1.0+cpu")
    assert machine.run(torch_npu_compat.CHECK).status == Status.PASS


def test_torch_npu_built_for_another_cann_warns_untested(tmp_path):
    machine = simulated(tmp_path)  # CANN 8.0.RC2
    replace(machine, "torch_npu", "2.1.0.post12")  # the build for CANN 8.1.RC1
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary.startswith(
        "torch_npu 2.1.0.post12 is built for CANN 8.1.RC1, this machine has CANN 8.0.RC2: untested"
    )
    assert finding.hint == (
        "`pip install torch_npu==2.1.0.post6` (the build for CANN 8.0.RC2), or install CANN 8.1.RC1"
    )


def test_pair_the_cann_does_not_list_warns_with_a_listed_pair(tmp_path):
    machine = simulated(tmp_path, "910b-wide")  # CANN 8.5.0 lists no torch 2.5.1
    replace(machine, "torch", "2.5.1")
    replace(machine, "torch_npu", "2.5.1.post1")
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.WARN
    assert "is built for CANN 8.2.RC1, this machine has CANN 8.5.0" in finding.summary
    assert "e.g. `pip install torch==2.9.0 torch_npu==2.9.0`" in (finding.hint or "")


def test_cann_outside_the_matrix_warns(tmp_path):
    machine = simulated(tmp_path)
    machine.builder.install_cann("9.2.0", "cann", sourced=True)
    machine.environ.update(machine.builder.environ)
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary == (
        "npuwatch's torch_npu table has no row for CANN 9.2.0 (its newest row is CANN 9.1.0): whether "
        "torch_npu 2.1.0.post6 was tested on it is not known here (torch_npu 2.1.0.post6 is listed for "
        "CANN 8.0.RC2)"
    )
    assert "or use a CANN it is listed for (8.0.RC2)" in (finding.hint or "")


def test_python_outside_torchs_range_warns(tmp_path):
    machine = simulated(tmp_path)
    site = "/usr/local/lib/python3.12/site-packages"
    machine.builder.install_python_package("torch", "2.1.0", site=site, modules=["torch"])
    machine.builder.install_python_package("torch_npu", "2.1.0.post6", site=site, modules=["torch_npu"])
    finding = machine.run(torch_npu_compat.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary.startswith("Python 3.12 is outside torch 2.1.0's supported 3.8–3.11")
    assert "use Python 3.8–3.11 (e.g. `conda create -n npu python=3.11`)" in (finding.hint or "")


def test_versions_strip_local_tags_and_post_releases():
    assert torch_base("2.1.0+cu121") == "2.1.0"
    assert torch_npu_base("2.1.0.post6") == "2.1.0"
    assert torch_npu_base("2.5.1") == "2.5.1"
    assert torch_npu_compat.cann_pairs("8.0.RC2") is not None
    assert torch_npu_compat.cann_pairs("6.3.RC1") is None
    assert torch_npu_compat.canns_for("2.1.0.post10") == ["8.0.0"]


def test_torch_npu_source_tree_in_the_current_directory_warns(tmp_path, monkeypatch):
    # A live machine only: the doctor's own current directory is the user's.
    site = tmp_path / "site"
    for name, version in (("torch", "2.1.0"), ("torch_npu", "2.1.0.post6")):
        (site / f"{name}-{version}.dist-info").mkdir(parents=True)
        (site / f"{name}-{version}.dist-info" / "METADATA").write_text(f"Name: {name}\nVersion: {version}\n")
    source = tmp_path / "pytorch"
    (source / "torch_npu").mkdir(parents=True)
    (source / "torch_npu" / "__init__.py").write_text("")
    env = PythonEnv((site,), (3, 10), "test")
    monkeypatch.setattr(Machine, "python", lambda self: env)
    monkeypatch.chdir(source)
    machine = Machine(Sysroot("/", environ={"HOME": "/nonexistent"}), None)
    finding = torch_npu_compat.CHECK.run(machine)
    assert finding.status == Status.WARN
    assert finding.summary == (
        f"the current directory {source} holds a torch_npu source tree: Python started here imports it "
        "and fails with `No module named 'torch_npu._C'`"
    )
    assert "`cd ~`" in (finding.hint or "")
    (source / "torch_npu" / "_C.cpython-310-x86_64-linux-gnu.so").write_text("")  # built in place
    assert torch_npu_compat.CHECK.run(machine).status == Status.PASS


# ---------------------------------------------------------------- cann-python-deps


@pytest.mark.parametrize("scenario", ["910b-training", "910b-wide"])
def test_python_deps_pass(tmp_path, scenario):
    finding = simulated(tmp_path, scenario).run(cann_python_deps.CHECK)
    assert finding.status == Status.PASS
    assert finding.summary == "all 11 Python packages CANN's compiler uses are installed"
    assert any(line.startswith("found: decorator 5.1.1, sympy 1.12") for line in finding.details)


def test_missing_compiler_deps_fail_naming_only_the_missing(tmp_path):
    machine = simulated(tmp_path)
    uninstall(machine, "sympy", "sympy")
    uninstall(machine, "attrs", "attr")
    uninstall(machine, "absl-py", "absl")
    finding = machine.run(cann_python_deps.CHECK)
    assert finding.status == Status.FAIL
    assert finding.summary == (
        "Python packages CANN's operator compiler imports are missing: sympy, attrs; the first operator "
        "fails with `EH9999 … init env failed` / 500001"
    )
    assert finding.hint == "`python3.10 -m pip install sympy attrs absl-py` (in the Python your jobs run in)"


def test_missing_tool_deps_only_warn(tmp_path):
    machine = simulated(tmp_path)
    uninstall(machine, "requests", "requests")
    finding = machine.run(cann_python_deps.CHECK)
    assert finding.status == Status.WARN
    assert finding.summary == "Python packages CANN's tools use are missing: requests"
    assert finding.hint == "`python3.10 -m pip install requests` (in the Python your jobs run in)"


def test_a_module_without_metadata_counts(tmp_path):
    machine = simulated(tmp_path)
    for info in machine.builder.path(PYTHON_SITE).glob("protobuf-*.dist-info"):
        machine.remove("/" + info.relative_to(machine.root).as_posix())
    finding = machine.run(cann_python_deps.CHECK)
    assert finding.status == Status.PASS
    assert any("protobuf (module google.protobuf, no package metadata)" in line for line in finding.details)


def test_deps_found_on_pythonpath(tmp_path):
    machine = simulated(tmp_path)
    uninstall(machine, "scipy", "scipy")
    machine.builder.install_python_package("scipy", "1.13.0", site="/opt/libs", modules=["scipy"])
    machine.environ["PYTHONPATH"] += ":/opt/libs"
    assert machine.run(cann_python_deps.CHECK).status == Status.PASS


def test_the_list_matches_what_the_simulator_installs():
    ours = {normalize_name(dep.pip_name): dep.module for dep in cann_python_deps.CANN_PYTHON_DEPS}
    simulator = {normalize_name(name): module for name, _, module in CANN_PYTHON_DEPS}
    assert ours == simulator


def test_frameworks_group(tmp_path: Path):
    assert torch_npu_compat.CHECK.group.value == cann_python_deps.CHECK.group.value == "frameworks"
    assert installed(simulated(tmp_path), "torch") == "2.1.0"
