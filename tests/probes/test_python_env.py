"""Tests for ``npuwatch.probes.python_env``: versions, modules and files found without importing.

Live tests read this interpreter's own environment; tree tests build ``site-packages`` folders
with ``SysrootBuilder.install_python_package`` and resolve ``PYTHONPATH`` under the root.
"""

from __future__ import annotations

import sys
from pathlib import Path

from npuwatch.probes.python_env import PythonEnv, normalize_name
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import PYTHON_SITE, SysrootBuilder


def tree(tmp_path: Path) -> SysrootBuilder:
    return SysrootBuilder(tmp_path / "root")


def env_of(builder: SysrootBuilder, **environ: str) -> PythonEnv:
    builder.environ.update(environ)
    return PythonEnv.for_sysroot(builder.sysroot())


# ---------------------------------------------------------------- live machine


def test_live_root_is_this_interpreter():
    env = PythonEnv.for_sysroot(Sysroot("/"))
    assert env.version == sys.version_info[:2]
    assert env.version_source == "this interpreter"
    assert env.root is None
    assert env.distribution_version("psutil") is not None  # a dependency of npuwatch
    assert env.find_module("psutil") is not None
    assert env.find_module("importlib.metadata") is not None  # dotted, in the stdlib
    assert env.find_module("no_such_module_npuwatch") is None


def test_live_root_adds_the_machine_pythonpath(tmp_path):
    (tmp_path / "extra_mod_npuwatch.py").write_text("x = 1\n")
    env = PythonEnv.for_sysroot(Sysroot("/", environ={"PYTHONPATH": str(tmp_path)}))
    assert env.paths[0] == tmp_path
    assert env.find_module("extra_mod_npuwatch") == tmp_path / "extra_mod_npuwatch.py"


# ---------------------------------------------------------------- tree


def test_tree_version_comes_from_the_site_folder(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("numpy", "1.26.4", site="/usr/local/lib/python3.9/site-packages")
    env = env_of(builder)
    assert env.version == (3, 9)
    assert env.version_text == "3.9"
    assert env.version_source == "/usr/local/lib/python3.9"
    assert env.root == builder.root
    assert env.distribution_version("numpy") == "1.26.4"


def test_tree_without_a_python_folder_uses_this_interpreters_version(tmp_path):
    env = env_of(tree(tmp_path))
    assert env.version == sys.version_info[:2]
    assert env.version_source == "assumed: no python3.N folder in the tree"
    assert env.distribution_version("torch") is None
    assert env.find_module("torch") is None


def test_names_are_compared_normalised(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("torch_npu", "2.1.0.post6", modules=["torch_npu"])
    builder.install_python_package("PyYAML", "6.0.1", modules=["yaml"])
    env = env_of(builder)
    for name in ("torch_npu", "torch-npu", "Torch.NPU", "TORCH_NPU"):
        assert env.distribution_version(name) == "2.1.0.post6", name
    assert env.distribution_version("pyyaml") == "6.0.1"
    assert normalize_name("absl_py") == normalize_name("absl-py") == "absl-py"


def test_pythonpath_is_resolved_under_the_root_and_searched_first(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("decorator", "4.0.0", site="/opt/mine", modules=["decorator"])
    builder.install_python_package("decorator", "5.1.1", modules=["decorator"])
    env = env_of(builder, PYTHONPATH="/opt/mine:/opt/missing")
    assert env.paths[0] == builder.path("/opt/mine")
    assert env.distribution_version("decorator") == "4.0.0"
    assert env.find_module("decorator") == builder.path("/opt/mine/decorator/__init__.py")
    assert env.display(env.paths[0]) == "/opt/mine"
    assert env.distribution_location("decorator") == builder.path("/opt/mine")


def test_virtual_env_comes_before_the_system_site(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("sympy", "1.12", site="/venv/lib/python3.11/site-packages")
    builder.install_python_package("sympy", "1.9")
    env = env_of(builder, VIRTUAL_ENV="/venv")
    assert env.distribution_version("sympy") == "1.12"
    assert env.version == (3, 11)


def test_debian_dist_packages_are_searched(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package(
        "psutil", "5.9.0", site="/usr/lib/python3/dist-packages", modules=["psutil"]
    )
    env = env_of(builder)
    assert env.distribution_version("psutil") == "5.9.0"
    assert env.find_module("psutil") == builder.path("/usr/lib/python3/dist-packages/psutil/__init__.py")


def test_dotted_names_through_a_namespace_package(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("protobuf", "4.25.3", modules=["google.protobuf"])
    assert not builder.path(PYTHON_SITE / "google" / "__init__.py").exists()  # as in real installs
    env = env_of(builder)
    assert env.find_module("google.protobuf") == builder.path(PYTHON_SITE / "google/protobuf/__init__.py")
    assert env.find_module("google") == builder.path(PYTHON_SITE / "google")
    assert env.find_module("google.nothing") is None


def test_extension_modules_and_plain_files_are_found(tmp_path):
    builder = tree(tmp_path)
    builder.install_library("/usr/local/Ascend/cann/python/site-packages/acl.so")
    builder.write_file(PYTHON_SITE / "single.py", "VALUE = 1\n")
    env = env_of(builder, PYTHONPATH="/usr/local/Ascend/cann/python/site-packages")
    assert env.find_module("acl") == builder.path("/usr/local/Ascend/cann/python/site-packages/acl.so")
    assert env.find_module("single") == builder.path(PYTHON_SITE / "single.py")


def test_read_text_finds_the_first_file_on_the_path(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package(
        "torch",
        "2.1.0+cu121",
        modules=["torch"],
        files={"torch/version.py": "cuda: Optional[str] = '12.1'\n"},
    )
    env = env_of(builder)
    assert env.read_text("torch/version.py") == "cuda: Optional[str] = '12.1'\n"
    assert env.read_text("torch/missing.py") is None


def test_nothing_is_imported(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package(
        "boom_npuwatch", "1.0", files={"boom_npuwatch/__init__.py": "raise SystemExit('imported!')\n"}
    )
    env = env_of(builder)
    assert env.find_module("boom_npuwatch") is not None
    assert env.find_module("boom_npuwatch.sub") is None
    assert env.distribution_version("boom-npuwatch") == "1.0"
    assert "boom_npuwatch" not in sys.modules


def test_damaged_metadata_hides_nothing_else(tmp_path):
    builder = tree(tmp_path)
    builder.write_file(PYTHON_SITE / "broken-1.0.dist-info" / "METADATA", "\x00\x01 not metadata\n")
    builder.install_python_package("cffi", "1.16.0")
    env = env_of(builder)
    assert env.distribution_version("cffi") == "1.16.0"
    assert env.distribution_version("broken") is None


def test_the_record_is_frozen_and_comparable(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("numpy", "1.26.4")
    first, second = env_of(builder), env_of(builder)
    first.distribution_version("numpy")  # fills the cache of one only
    assert first == second


def test_venv_that_excludes_system_packages_hides_them(tmp_path):
    builder = tree(tmp_path)
    builder.install_python_package("sympy", "1.9")  # system-wide
    builder.write_file(
        "/venv/pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.4\n"
    )
    builder.path("/venv/lib/python3.11/site-packages").mkdir(parents=True)
    env = env_of(builder, VIRTUAL_ENV="/venv")
    assert env.distribution_version("sympy") is None
    assert env.version == (3, 11)
    assert env.python == "/venv/bin/python"
    assert "/venv/pyvenv.cfg: include-system-site-packages = false" in env.notes
