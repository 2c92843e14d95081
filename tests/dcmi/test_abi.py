"""Our DCMI declarations (abi.py) against the reference's table and against a C compiler's layout.

Every structure npuwatch marshals is laid out three times: by ctypes (``abi.STRUCTS``), by the
reference (``abi.REFERENCE_LAYOUT``, driver-interfaces.md §6.5) and by the C compiler (the fake
library's ``npuwatch_fake_sizeof``/``npuwatch_fake_offsetof`` exports, compiled from the C
declarations of ``fake_dcmi.c``).  All three must agree, field by field.
"""

from __future__ import annotations

import ctypes

import pytest

from npuwatch.probes.dcmi import abi
from npuwatch.probes.simulator.dcmi_fake import build
from tests.conftest import need

NAMES = sorted(abi.STRUCTS)


@pytest.fixture(scope="module")
def compiled() -> ctypes.CDLL:
    """The fake library as the C compiler built it (skipped, with the reason, without a compiler)."""
    built = build.build()
    need(built.path is not None, f"the C half of the ABI check needs a C compiler: {built.reason}")
    assert built.path is not None
    library = ctypes.CDLL(str(built.path))
    library.npuwatch_fake_sizeof.restype = ctypes.c_long
    library.npuwatch_fake_sizeof.argtypes = [ctypes.c_char_p]
    library.npuwatch_fake_offsetof.restype = ctypes.c_long
    library.npuwatch_fake_offsetof.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return library


@pytest.mark.parametrize("name", NAMES)
def test_ctypes_lays_out_each_structure_as_the_reference(name: str) -> None:
    size, offsets = abi.REFERENCE_LAYOUT[name]
    assert abi.layout_of(abi.STRUCTS[name]) == (size, dict(offsets))


def test_the_reference_table_names_every_structure_we_marshal() -> None:
    assert set(abi.REFERENCE_LAYOUT) == set(abi.STRUCTS)


@pytest.mark.parametrize("name", NAMES)
def test_the_c_compiler_lays_out_each_structure_as_ctypes(name: str, compiled: ctypes.CDLL) -> None:
    kind = abi.STRUCTS[name]
    c_size = compiled.npuwatch_fake_sizeof(name.encode())
    c_offsets = {
        field: compiled.npuwatch_fake_offsetof(name.encode(), field.encode()) for field, *_ in kind._fields_
    }
    assert (c_size, c_offsets) == abi.layout_of(kind)
    assert (c_size, c_offsets) == (abi.REFERENCE_LAYOUT[name][0], dict(abi.REFERENCE_LAYOUT[name][1]))


def test_the_c_self_check_refuses_unknown_names(compiled: ctypes.CDLL) -> None:
    assert compiled.npuwatch_fake_sizeof(b"dcmi_no_such_struct") == -1
    assert compiled.npuwatch_fake_offsetof(b"dcmi_hbm_info", b"no_such_field") == -1


def test_the_c_library_exports_every_prototype_we_declare(compiled: ctypes.CDLL) -> None:
    missing = []
    for name in abi.PROTOTYPES:
        try:
            getattr(compiled, name)
        except AttributeError:
            missing.append(name)
    assert missing == []
