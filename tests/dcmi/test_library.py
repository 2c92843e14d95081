"""Finding and loading libdcmi.so: search order, each symbol alone, clear failures (built with cc)."""

from __future__ import annotations

import ctypes
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from npuwatch.probes.dcmi import library
from npuwatch.probes.dcmi.library import KIND_PYTHON, KIND_SHARED, LibraryError, candidates, load_library
from npuwatch.probes.dcmi.records import SYMBOL_MISSING
from tests.conftest import REPO, need

#: A library with two of the functions npuwatch calls (the rest are "missing symbols").
TWO_FUNCTIONS = r"""
int dcmi_init(void) { return 0; }
int dcmi_get_card_list(int *card_num, int *card_list, int list_len) {
    if (list_len < 2) return -8001;
    card_list[0] = 2; card_list[1] = 5; *card_num = 2;
    return 0;
}
"""
NEEDS_HOST = "int drvdsmi_probe(void);\nint dcmi_init(void) { return drvdsmi_probe(); }\n"
HOST = "int drvdsmi_probe(void) { return 0; }\n"


def _cc(tmp: Path, name: str, source: str, *flags: str) -> Path:
    compiler = shutil.which("cc")
    need(compiler is not None, "a C compiler (cc) builds the test libraries")
    assert compiler is not None
    tmp.mkdir(parents=True, exist_ok=True)
    c_file = tmp / (name + ".c")
    c_file.write_text(source)
    out = tmp / name
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(out), str(c_file), *flags], check=True, timeout=120
    )
    return out


@pytest.fixture(scope="module")
def two_functions(tmp_path_factory) -> Path:
    return _cc(tmp_path_factory.mktemp("two"), "libdcmi.so", TWO_FUNCTIONS)


def _install(root: Path, relative: str, built: Path) -> Path:
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(built, target)
    return target


@pytest.fixture(autouse=True)
def trusted_trees(monkeypatch):
    """These trees hold libraries the tests mean to load: trust them (NPUWATCH_TRUST_ROOT=1)."""
    monkeypatch.setenv("NPUWATCH_TRUST_ROOT", "1")


# --- where to look -------------------------------------------------------------------------------


def test_search_order_is_loader_path_then_the_driver_then_usr_local_dcmi():
    assert candidates() == (
        "libdcmi.so",
        "/usr/local/Ascend/driver/lib64/driver/libdcmi.so",
        "/usr/local/dcmi/libdcmi.so",
    )


def test_another_root_is_searched_without_this_machines_loader_path(tmp_path):
    assert candidates(root=str(tmp_path)) == (
        str(tmp_path / "usr/local/Ascend/driver/lib64/driver/libdcmi.so"),
        str(tmp_path / "usr/local/dcmi/libdcmi.so"),
    )


def test_an_untrusted_tree_gives_no_candidate_and_its_library_is_not_loaded(
    tmp_path, two_functions, monkeypatch
):
    monkeypatch.delenv("NPUWATCH_TRUST_ROOT")
    planted = _install(tmp_path, "usr/local/dcmi/libdcmi.so", two_functions)
    assert candidates(root=str(tmp_path)) == ()
    with pytest.raises(LibraryError) as caught:
        load_library(root=str(tmp_path))
    assert caught.value.failure.tried == ()
    assert "libdcmi.so (/usr/local/dcmi/libdcmi.so) was not loaded" in caught.value.failure.message
    assert "--trust-root" in caught.value.failure.hint
    assert str(planted) not in Path("/proc/self/maps").read_text()  # never mapped into this process


def test_an_explicit_path_is_the_only_candidate(tmp_path):
    assert candidates("/opt/x/libdcmi.so", root=str(tmp_path)) == ("/opt/x/libdcmi.so",)


# --- loading a real shared library ---------------------------------------------------------------


def test_each_symbol_is_resolved_alone_and_a_missing_one_is_a_capability_off(tmp_path, two_functions):
    root = tmp_path / "root"
    installed = _install(root, "usr/local/dcmi/libdcmi.so", two_functions)
    loaded = load_library(root=str(root))
    assert (loaded.path, loaded.kind) == (str(installed), KIND_SHARED)
    assert loaded.has("dcmi_init")
    assert loaded.has("dcmi_get_card_list")
    assert not loaded.has("dcmi_get_device_temperature")
    assert "dcmi_get_device_temperature" in loaded.missing
    assert "dcmi_init" not in loaded.missing
    assert loaded.call("dcmi_init") == 0
    count, cards = ctypes.c_int(0), (ctypes.c_int * 64)()
    assert loaded.call("dcmi_get_card_list", ctypes.pointer(count), cards, 64) == 0
    assert (count.value, cards[0], cards[1]) == (2, 2, 5)
    temperature = ctypes.c_int(0)
    assert loaded.call("dcmi_get_device_temperature", 0, 0, ctypes.pointer(temperature)) == SYMBOL_MISSING


def test_the_driver_copy_comes_before_usr_local_dcmi(tmp_path, two_functions):
    root = tmp_path / "root"
    _install(root, "usr/local/dcmi/libdcmi.so", two_functions)
    driver = _install(root, "usr/local/Ascend/driver/lib64/driver/libdcmi.so", two_functions)
    assert load_library(root=str(root)).path == str(driver)


def test_an_explicit_path_is_loaded_even_when_installed_copies_exist(tmp_path, two_functions):
    root = tmp_path / "root"
    _install(root, "usr/local/dcmi/libdcmi.so", two_functions)
    mine = _install(tmp_path, "mine/libdcmi-test.so", two_functions)
    assert load_library(str(mine), root=str(root)).path == str(mine)


def test_argtypes_are_set_from_the_prototypes(tmp_path, two_functions):
    handle = ctypes.CDLL(str(two_functions))
    loaded = library.DcmiLibrary(handle, str(two_functions), KIND_SHARED)
    assert loaded.call("dcmi_init") == 0
    assert handle.dcmi_get_card_list.restype is ctypes.c_int
    assert len(handle.dcmi_get_card_list.argtypes) == 3
    with pytest.raises(ctypes.ArgumentError):  # a wrong argument is refused, not passed to C
        loaded.call("dcmi_get_card_list", "two", None, 64)


def test_the_loader_path_reports_the_file_it_really_opened(tmp_path, two_functions):
    folder = tmp_path / "lib"
    folder.mkdir()
    shutil.copy(two_functions, folder / "libdcmi.so")
    code = "from npuwatch.probes.dcmi.library import load_library; print(load_library().path)"
    env = {**os.environ, "LD_LIBRARY_PATH": str(folder)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == os.path.realpath(folder / "libdcmi.so")


# --- failures: the loader's words and a hint, never a traceback ----------------------------------


def test_nothing_found_lists_every_place_tried(tmp_path):
    with pytest.raises(LibraryError) as caught:
        load_library(root=str(tmp_path))
    failure = caught.value.failure
    assert failure.not_found
    assert failure.tried == candidates(root=str(tmp_path))
    assert str(tmp_path / "usr/local/dcmi/libdcmi.so") in failure.message
    assert "mount /usr/local/dcmi" in failure.hint
    assert pickle.loads(pickle.dumps(failure)) == failure  # it crosses the worker's pipe


def test_a_missing_explicit_path_is_not_found_and_nothing_else_is_tried(tmp_path, two_functions):
    root = tmp_path / "root"
    _install(root, "usr/local/dcmi/libdcmi.so", two_functions)
    with pytest.raises(LibraryError) as caught:
        load_library(str(tmp_path / "nope.so"), root=str(root))
    assert caught.value.failure.message == f"{tmp_path / 'nope.so'} not found"
    assert caught.value.failure.tried == (str(tmp_path / "nope.so"),)


def test_a_missing_dependency_names_it_and_points_at_ld_library_path(tmp_path):
    host = _cc(tmp_path / "host", "libdrvdsmi_host.so", HOST)
    dcmi = _cc(tmp_path / "dcmi", "libdcmi.so", NEEDS_HOST, f"-L{host.parent}", "-ldrvdsmi_host")
    host.unlink()  # as in a container that mounts /usr/local/dcmi but not the driver's lib64
    with pytest.raises(LibraryError) as caught:
        load_library(str(dcmi))
    failure = caught.value.failure
    assert not failure.not_found
    assert failure.message.startswith(f"{dcmi}: libdrvdsmi_host.so: cannot open shared object file")
    assert "LD_LIBRARY_PATH" in failure.hint
    assert "/usr/local/Ascend/driver/lib64" in failure.hint


def test_a_library_for_another_machine_says_so(tmp_path, two_functions):
    foreign = tmp_path / "libdcmi.so"
    data = bytearray(two_functions.read_bytes())
    data[18:20] = (183 if data[18] != 183 else 62).to_bytes(2, "little")  # aarch64 ↔ x86-64
    foreign.write_bytes(bytes(data))
    with pytest.raises(LibraryError) as caught:
        load_library(str(foreign))
    failure = caught.value.failure
    assert not failure.not_found
    assert "wrong architecture" in failure.message
    assert "architecture" in failure.hint


def test_a_file_that_is_not_a_library_says_so(tmp_path):
    junk = tmp_path / "libdcmi.so"
    junk.write_text("not an ELF file, just text long enough to be read as a header\n" * 4)
    with pytest.raises(LibraryError) as caught:
        load_library(str(junk))
    assert str(junk) in caught.value.failure.message
    assert "architecture or is not a library" in caught.value.failure.hint


# --- the pure-Python stand-in --------------------------------------------------------------------


STANDIN = """
class _Library:
    def dcmi_init(self):
        return 0

    def dcmi_get_device_temperature(self, card, device, out):
        out[0] = 40 + card
        return 0


def load():
    return _Library()
"""


def test_python_module_load_gives_a_library_with_the_same_call_surface(tmp_path, monkeypatch):
    (tmp_path / "npuwatch_test_standin.py").write_text(textwrap.dedent(STANDIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = load_library("python:npuwatch_test_standin", root="/nonexistent")
    assert (loaded.path, loaded.kind) == ("python:npuwatch_test_standin", KIND_PYTHON)
    assert loaded.has("dcmi_init")
    assert not loaded.has("dcmi_get_card_list")
    out = ctypes.c_int(0)
    assert loaded.call("dcmi_get_device_temperature", 3, 0, ctypes.pointer(out)) == 0
    assert out.value == 43
    assert loaded.call("dcmi_get_card_list", None, None, 64) == SYMBOL_MISSING


@pytest.mark.parametrize(
    ("source", "words"),
    [(None, "ModuleNotFoundError"), ("def load():\n    raise OSError('no state file')\n", "no state file")],
)
def test_a_stand_in_that_cannot_load_is_a_library_error(tmp_path, monkeypatch, source, words):
    name = "npuwatch_test_broken_standin"
    if source is not None:
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(LibraryError) as caught:
        load_library(f"python:{name}")
    assert caught.value.failure.message.startswith(f"python:{name}: ")
    assert words in caught.value.failure.message
    assert caught.value.failure.tried == (f"python:{name}",)
