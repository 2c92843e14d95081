"""runtime-and-doctor.md §10, one test per failure mode the CANN and framework checks detect.

Each test builds a machine from scratch as a sysroot (``SysrootBuilder``: a 910B PCI function,
its device node, the driver, a CANN install, fake Python packages, an environment), breaks it
the way the row's users did, runs the doctor's CANN and framework checks through the engine, and
asserts which check catches it, its status, and the fix it gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from npuwatch.doctor.checks import (
    cann_env,
    cann_install,
    cann_libraries,
    cann_python_deps,
    driver_cann_compat,
    op_kernels,
    torch_npu_compat,
)
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import CheckResult, Status
from npuwatch.probes.python_env import PythonEnv
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder

CHECKS = tuple(
    module.CHECK
    for module in (
        cann_install,
        cann_env,
        cann_libraries,
        driver_cann_compat,
        torch_npu_compat,
        op_kernels,
        cann_python_deps,
    )
)
TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
SOURCE_TOOLKIT = "source /usr/local/Ascend/ascend-toolkit/set_env.sh"


def build(
    tmp_path: Path,
    *,
    cann: str = "8.0.RC2",
    layout: str = "toolkit",
    driver: str = "24.1.rc2",
    driver_inner: str = "V100R001C21SPC002B220",
    torch: Optional[Tuple[str, str]] = ("2.1.0", "2.1.0.post6"),
    deps: bool = True,
    socs: Sequence[str] = ("ascend910b",),
) -> SysrootBuilder:
    """A healthy single-910B machine with CANN sourced (each argument can break one thing)."""
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_pci_function("0000:c1:00.0", 0xD802)
    builder.add_dev_nodes([0])
    builder.install_driver(driver, firmware="7.3.0.1.231", inner_version=driver_inner)
    builder.install_cann(cann, layout, sourced=True, kernel_socs=socs)
    if deps:
        for dep in cann_python_deps.CANN_PYTHON_DEPS:
            builder.install_python_package(dep.pip_name, "1.0", modules=[dep.module])
    if torch is not None:
        builder.install_python_package("torch", torch[0], modules=["torch"])
        builder.install_python_package("torch_npu", torch[1], modules=["torch_npu"])
    return builder


def doctor(builder: SysrootBuilder, environ: Optional[Dict[str, str]] = None) -> Dict[str, CheckResult]:
    env = dict(builder.environ if environ is None else environ)
    env["NPUWATCH_TRUST_ROOT"] = "1"  # the tree's libraries are this test's: the checks load them
    machine = Machine(Sysroot(builder.root, environ=env), None)
    return {result.id: result for result in run_doctor(machine, CHECKS).results}


def test_the_healthy_machine_passes_every_check(tmp_path):
    results = doctor(build(tmp_path))
    assert {i: r.status for i, r in results.items()} == {check.id: Status.PASS for check in CHECKS}


def test_row_01_env_not_sourced_libhccl_cannot_open(tmp_path):
    builder = build(tmp_path)
    results = doctor(builder, environ={"PATH": "/usr/bin:/bin", "HOME": "/root"})
    env = results["cann-env"]
    assert env.status == Status.FAIL
    assert env.summary.startswith("CANN environment not sourced")
    assert f"`{SOURCE_TOOLKIT}` (add it to ~/.bashrc" in (env.hint or "")
    libraries = results["cann-libraries"]
    assert libraries.status == Status.FAIL
    assert "libhccl.so" in libraries.summary
    assert "not on LD_LIBRARY_PATH" in libraries.summary
    assert "ERR00008" in libraries.summary
    assert SOURCE_TOOLKIT in (libraries.hint or "")


def test_row_02_runtime_not_installed_libascendcl_cannot_open(tmp_path):
    builder = build(tmp_path)
    builder.path("/usr/local/Ascend/ascend-toolkit/8.0.RC2/lib64/libascendcl.so").unlink()
    result = doctor(builder)["cann-libraries"]
    assert result.status == Status.FAIL
    assert result.summary.startswith(f"libascendcl.so not found in {TOOLKIT}/lib64 or on LD_LIBRARY_PATH")
    assert "`bash Ascend-cann-toolkit_8.0.RC2_linux-aarch64.run --full`" in (result.hint or "")


def test_row_04_pythonpath_overwritten_no_module_named_acl(tmp_path):
    builder = build(tmp_path)
    environ = {**builder.environ, "PYTHONPATH": "/srv/app"}
    result = doctor(builder, environ)["cann-env"]
    assert result.status == Status.FAIL
    assert "`import acl` (and CANN's te/tbe) fail with ModuleNotFoundError" in result.summary
    assert f"`export PYTHONPATH={TOOLKIT}/python/site-packages:$PYTHONPATH`" in (result.hint or "")


def test_row_05_atb_not_sourced_libatb_cannot_open(tmp_path):
    builder = build(tmp_path)
    builder.install_library("/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_0/lib/libatb.so")
    builder.write_file("/usr/local/Ascend/nnal/atb/set_env.sh", "export ATB_HOME_PATH=...\n")
    result = doctor(builder)["cann-libraries"]
    assert result.status == Status.WARN
    assert result.summary.startswith("libatb.so is not on LD_LIBRARY_PATH ($ATB_HOME_PATH unset)")
    assert "`source /usr/local/Ascend/nnal/atb/set_env.sh`" in (result.hint or "")


def test_row_06_torch_and_torch_npu_differ_undefined_symbol(tmp_path):
    builder = build(tmp_path, cann="8.0.0", torch=("2.1.0", "2.3.1.post4"))
    result = doctor(builder)["torch-npu-compat"]
    assert result.status == Status.FAIL
    assert "`undefined symbol`" in result.summary
    assert result.hint == (
        "`pip install torch_npu==2.1.0.post10` (the build for torch 2.1.0 on CANN 8.0.0) or keep "
        "torch_npu and `pip install torch==2.3.1`"
    )


def test_row_07_torch_npu_built_for_another_cann(tmp_path):
    builder = build(tmp_path, cann="8.0.RC2", torch=("2.3.1", "2.3.1.post6"))  # the 8.1.RC1 build
    result = doctor(builder)["torch-npu-compat"]
    assert result.status == Status.WARN
    assert result.summary.startswith(
        "torch_npu 2.3.1.post6 is built for CANN 8.1.RC1, this machine has CANN 8.0.RC2"
    )
    assert (
        result.hint == "`pip install torch_npu==2.3.1` (the build for CANN 8.0.RC2), or install CANN 8.1.RC1"
    )


def test_row_08_compiler_python_deps_missing_eh9999(tmp_path):
    builder = build(tmp_path, deps=False)
    result = doctor(builder)["cann-python-deps"]
    assert result.status == Status.FAIL
    assert "`EH9999 … init env failed` / 500001" in result.summary
    assert result.hint == (
        "`python3.10 -m pip install decorator sympy cffi protobuf attrs pyyaml psutil numpy scipy "
        "requests absl-py` (in the Python your jobs run in)"
    )


def test_row_10_torch_npu_source_tree_in_the_current_directory(tmp_path, monkeypatch):
    builder = build(tmp_path)
    source = tmp_path / "pytorch"
    builder_env = PythonEnv.for_sysroot(builder.sysroot())
    (source / "torch_npu").mkdir(parents=True)
    (source / "torch_npu" / "__init__.py").write_text("")
    monkeypatch.setattr(Machine, "python", lambda self: builder_env)
    monkeypatch.chdir(source)
    machine = Machine(Sysroot("/", environ={"HOME": "/nonexistent"}), None)  # live: cwd is the user's
    (result,) = run_doctor(machine, [torch_npu_compat.CHECK]).results
    assert result.id == "torch-npu-compat"
    assert result.status == Status.WARN
    assert "`No module named 'torch_npu._C'`" in result.summary
    assert (
        result.hint
        == "run Python from another directory (`cd ~`), or build it in place with `python setup.py develop`"
    )


def test_row_19_mixed_component_versions_e30006(tmp_path):
    builder = build(tmp_path)
    builder.write_file(
        "/usr/local/Ascend/ascend-toolkit/8.0.RC2/version.cfg",
        "runtime_running_version=[7.3.0.1.231:8.0.RC2]\ncompiler_running_version=[7.3.0.1.231:8.0.RC2]\n"
        "opp_running_version=[7.1.0.5.220:8.0.RC1]\n",
    )
    result = doctor(builder)["cann-install"]
    assert result.status == Status.WARN
    assert result.summary.endswith("mixes component versions: runtime 8.0.RC2, compiler 8.0.RC2, opp 8.0.RC1")
    assert "`E30006 Failed to verify the OPP`" in (result.hint or "")
    assert "`bash Ascend-cann-toolkit_8.0.RC2_linux-aarch64.run --full`" in (result.hint or "")


def test_row_21_two_toolkits_on_ld_library_path(tmp_path):
    builder = build(tmp_path)
    builder.install_cann("7.0.0")  # an older toolkit, now `latest`…
    builder.symlink(TOOLKIT, "/usr/local/Ascend/ascend-toolkit/8.0.RC2")  # …pointed back at 8.0.RC2
    stale = "/usr/local/Ascend/ascend-toolkit/7.0.0"
    environ = {**builder.environ, "LD_LIBRARY_PATH": builder.environ["LD_LIBRARY_PATH"] + f":{stale}/lib64"}
    result = doctor(builder, environ)["cann-env"]
    assert result.status == Status.FAIL
    assert result.summary.startswith("2 CANN installs mixed on the paths: expect `undefined symbol` errors")
    assert f"{stale} (CANN 7.0.0) named by LD_LIBRARY_PATH: {stale}/lib64" in result.details
    assert f"then only `{SOURCE_TOOLKIT}`" in (result.hint or "")


def test_row_22_driver_too_old_for_cann(tmp_path):
    builder = build(tmp_path, cann="8.5.0", layout="cann", driver="24.1.rc1", torch=("2.8.0", "2.8.0.post2"))
    result = doctor(builder)["driver-cann-compat"]
    assert result.status == Status.FAIL
    assert result.summary.startswith("driver 24.1.rc1 is too old for CANN 8.5.0 (it needs HDK 25.0 or newer)")
    assert "207019/207000 `feature not support`" in result.summary
    assert "upgrade the NPU driver and firmware (Ascend HDK) to 25.5.x" in (result.hint or "")


def test_row_23_kernels_missing_for_this_soc_561003(tmp_path):
    builder = build(tmp_path, socs=("ascend310p",))  # kernels for another SoC only
    result = doctor(builder)["op-kernels"]
    assert result.status == Status.FAIL
    assert "(installed for ascend310p only)" in result.summary
    assert "561003 `Op X does not has any binary`" in result.summary
    assert "`bash Ascend-cann-kernels-910b_8.0.RC2_linux-aarch64.run --install`" in (result.hint or "")


def test_row_30_cuda_torch_beside_torch_npu_err00007(tmp_path):
    builder = build(tmp_path, torch=("2.1.0+cu121", "2.1.0.post6"))
    result = doctor(builder)["torch-npu-compat"]
    assert result.status == Status.FAIL
    assert "ERR00007" in result.summary
    assert result.hint == (
        "install the CPU build of the same torch: `pip uninstall -y torch && pip install torch==2.1.0 "
        "--index-url https://download.pytorch.org/whl/cpu`"
    )


def test_row_31_driver_missing_from_ld_library_path_without_install_info(tmp_path):
    builder = build(tmp_path)
    builder.path("/etc/ascend_install.info").unlink()
    driver = "/usr/local/Ascend/driver"
    kept = [e for e in builder.environ["LD_LIBRARY_PATH"].split(":") if not e.startswith(driver)]
    result = doctor(builder, {**builder.environ, "LD_LIBRARY_PATH": ":".join(kept)})["cann-env"]
    assert result.status == Status.FAIL
    assert result.summary.startswith(f"LD_LIBRARY_PATH lacks the driver folder {driver}/lib64/driver")
    assert "mount it from the host (`-v /etc/ascend_install.info:/etc/ascend_install.info`)" in (
        result.hint or ""
    )


def test_row_32_autoloading_torch_breaks_import_torch(tmp_path):
    builder = build(tmp_path, cann="8.1.RC1", torch=("2.5.1", "2.4.0.post4"))
    result = doctor(builder)["torch-npu-compat"]
    assert result.status == Status.FAIL
    assert "`pip install torch_npu==2.5.1` (the build for torch 2.5.1 on CANN 8.1.RC1)" in (result.hint or "")
    assert (result.hint or "").endswith(
        "until then `import torch` fails too (torch ≥ 2.5.1 loads torch_npu itself): "
        "`export TORCH_DEVICE_BACKEND_AUTOLOAD=0` to use torch without it meanwhile"
    )


def test_checks_after_a_missing_cann_are_skipped_naming_it(tmp_path):
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_pci_function("0000:c1:00.0", 0xD802)
    results = doctor(builder, {"HOME": "/root"})
    assert results["cann-install"].status == Status.FAIL
    for check in ("cann-env", "cann-libraries", "driver-cann-compat", "op-kernels", "cann-python-deps"):
        assert results[check].status == Status.SKIP, check
        assert results[check].summary == "needs cann-install: CANN toolkit not installed"
    assert results["torch-npu-compat"].status == Status.SKIP  # no torch either
