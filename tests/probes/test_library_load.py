"""load_libraries(): dlopen in a child, the loader's error text kept, crashes and hangs pinned."""

from __future__ import annotations

import shutil

from npuwatch.probes import library_load
from npuwatch.probes.library_load import load_libraries
from npuwatch.probes.sysroot_builder import loadable_library

# A child that crashes or hangs on request, to pin the failure on one library without building one.
_MISBEHAVING_CHILD = """\
import ctypes, json, os, signal, sys, time
for path in sys.argv[1:]:
    if path.endswith("crash.so"):
        os.kill(os.getpid(), signal.SIGSEGV)
    if path.endswith("hang.so"):
        time.sleep(60)
    sys.stdout.write(json.dumps({"path": path, "error": None}) + "\\n")
    sys.stdout.flush()
"""


def test_a_real_library_loads(tmp_path):
    library = tmp_path / "libgood.so"
    shutil.copyfile(loadable_library(), library)
    assert load_libraries([library]) == {str(library): None}


def test_errors_are_the_loaders_own_words(tmp_path):
    broken = tmp_path / "libbroken.so"
    broken.write_text("not a shared library\n")
    missing = tmp_path / "libmissing.so"
    found = load_libraries([broken, missing], timeout_s=5)
    assert list(found) == [str(broken), str(missing)]
    assert found[str(broken)] is not None
    assert found[str(broken)].startswith(str(broken) + ": ")
    assert found[str(missing)] == f"{missing}: cannot open shared object file: No such file or directory"


def test_a_crash_is_pinned_on_its_library_and_the_rest_still_load(tmp_path, monkeypatch):
    monkeypatch.setattr(library_load, "_CHILD", _MISBEHAVING_CHILD)
    found = load_libraries(["/a/one.so", "/a/crash.so", "/a/two.so"], timeout_s=5)
    assert found["/a/one.so"] is None
    assert (
        found["/a/crash.so"]
        == "the process loading it was killed by SIGSEGV (the library crashed while loading)"
    )
    assert found["/a/two.so"] is None


def test_a_hang_is_killed_at_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setattr(library_load, "_CHILD", _MISBEHAVING_CHILD)
    found = load_libraries(["/a/one.so", "/a/hang.so", "/a/two.so"], timeout_s=0.5)
    assert found["/a/one.so"] is None
    assert found["/a/hang.so"].startswith("loading did not finish within 0.5 s")
    assert found["/a/two.so"].startswith("not tried: the 0.5 s allowed")


def test_ld_library_path_is_exactly_what_is_given(monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/elsewhere")
    assert (
        library_load._child_env(["/d/lib64", "/d/lib64/driver"])["LD_LIBRARY_PATH"]
        == "/d/lib64:/d/lib64/driver"
    )
    assert library_load._child_env("/x:/y")["LD_LIBRARY_PATH"] == "/x:/y"
    assert "LD_LIBRARY_PATH" not in library_load._child_env(())


def test_duplicates_are_loaded_once_and_reported_for_each(tmp_path):
    library = tmp_path / "libgood.so"
    shutil.copyfile(loadable_library(), library)
    assert load_libraries([str(library), library]) == {str(library): None}
