"""Provides load_library(): find ``libdcmi.so`` (or the pure-Python stand-in) and resolve each symbol alone.

The candidates, in order, are ``search.candidates`` (the path the user named, else ``libdcmi.so``
on the loader path, then the driver package's two copies under the machine's root).
``python:<module>`` imports ``<module>`` and calls its ``load()``: an object with a CDLL's call
surface (the demos' stand-in).  Nothing is loaded at import time.

Each function of ``abi.PROTOTYPES`` is looked up on its own: a library without one still loads,
``has(name)`` says no and ``call(name, …)`` answers ``records.SYMBOL_MISSING`` without calling.
A load failure raises ``LibraryError`` carrying a ``records.LibraryFailure`` (the loader's message
and a hint), never a traceback.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from _ctypes import CFuncPtr
from typing import Callable, Dict, Optional, Sequence, Tuple

from npuwatch.probes.dcmi import abi
from npuwatch.probes.dcmi.records import SYMBOL_MISSING, LibraryFailure
from npuwatch.probes.dcmi.search import INSTALLED_PATHS, LOADER_NAME, PYTHON_PREFIX, candidates, withheld
from npuwatch.probes.tree_trust import TRUST_HINT

KIND_SHARED = "shared library"
KIND_PYTHON = "python stand-in"

_DEPENDENCY_HINT = (
    "libdcmi.so needs the driver's own libraries (libdrvdsmi_host.so, libascend_hal.so): add "
    "/usr/local/Ascend/driver/lib64/driver and /usr/local/Ascend/driver/lib64/common to "
    "LD_LIBRARY_PATH; in a container mount /usr/local/Ascend/driver/lib64 and /usr/local/dcmi "
    "from the host (run `npuwatch doctor`)"
)
_NOT_FOUND_HINT = (
    "install the Ascend driver package, or in a container mount /usr/local/dcmi and "
    "/usr/local/Ascend/driver/lib64 from the host; name another copy with --dcmi-lib PATH or "
    "NPUWATCH_DCMI_LIB (npuwatch falls back to npu-smi meanwhile)"
)
_ARCH_HINT = (
    "this libdcmi.so is built for another architecture or is not a library: use the driver "
    "package made for this machine (`uname -m`)"
)
_SYMBOL_HINT = (
    "libdcmi.so does not match the driver libraries it loaded (an undefined symbol): the "
    "driver's userland is mixed from two versions; reinstall the driver package"
)
_NOT_FOUND = "not found"
_WRONG_ARCH = "wrong architecture"
_PYTHON_HINT = "the stand-in module must be importable and have a load() returning the library"


class LibraryError(Exception):
    """The library could not be loaded; ``failure`` says why and what to do."""

    def __init__(self, failure: LibraryFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class DcmiLibrary:
    """A loaded DCMI library (or stand-in): each known function resolved on its own."""

    def __init__(self, handle: object, path: str, kind: str) -> None:
        self.path = path  # the file loaded, or "python:<module>"
        self.kind = kind  # KIND_SHARED or KIND_PYTHON
        self._functions: Dict[str, Callable[..., object]] = _resolve(handle)

    def has(self, name: str) -> bool:
        """Whether the library has the function ``name`` (a capability on or off)."""
        return name in self._functions

    @property
    def missing(self) -> Tuple[str, ...]:
        """The functions of ``abi.PROTOTYPES`` the library lacks, in declaration order."""
        return tuple(name for name in abi.PROTOTYPES if name not in self._functions)

    def function(self, name: str) -> Optional[Callable[..., object]]:
        """The function ``name`` itself (``None`` when absent), for a caller that calls it often."""
        return self._functions.get(name)

    def call(self, name: str, *args: object) -> int:
        """Call ``name`` with ``args``; its return code, or ``SYMBOL_MISSING`` when it is absent."""
        function = self._functions.get(name)
        if function is None:
            return SYMBOL_MISSING
        return int(function(*args))  # type: ignore[call-overload]


def load_library(explicit: Optional[str] = None, root: str = "/") -> DcmiLibrary:
    """Load the first candidate that loads; ``LibraryError`` (with every attempt's words) otherwise.

    Under an untrusted ``--root`` tree nothing of the tree is a candidate (``search.candidates``
    asks this process's environment, which the worker inherits from the machine's).
    """
    tried = candidates(explicit, root)
    if not tried:
        held = withheld(explicit, root)
        if held is not None:
            raise LibraryError(LibraryFailure(held, TRUST_HINT, (), not_found=True))
        looked = ", ".join(f"/{path}" for path in INSTALLED_PATHS)
        raise LibraryError(
            LibraryFailure(f"libdcmi.so not found (looked in {looked})", _NOT_FOUND_HINT, (), not_found=True)
        )
    errors: Dict[str, str] = {}
    for where in tried:
        if where.startswith(PYTHON_PREFIX):
            return _load_python(where)
        if where != LOADER_NAME and not os.path.exists(where):
            errors[where] = _NOT_FOUND
            continue
        try:
            handle = ctypes.CDLL(where)
        except OSError as exc:
            errors[where] = _absent_or(where, str(exc) or repr(exc))
            continue
        return DcmiLibrary(handle, _loaded_path(handle, where), KIND_SHARED)
    raise LibraryError(_failure(tried, errors))


def _load_python(where: str) -> DcmiLibrary:
    module_name = where[len(PYTHON_PREFIX) :]
    try:
        handle = importlib.import_module(module_name).load()
    except Exception as exc:  # any import or load() failure is the stand-in's, reported as such
        message = f"{where}: {type(exc).__name__}: {exc}"
        raise LibraryError(LibraryFailure(message, _PYTHON_HINT, (where,))) from None
    return DcmiLibrary(handle, where, KIND_PYTHON)


def _resolve(handle: object) -> Dict[str, Callable[..., object]]:
    functions: Dict[str, Callable[..., object]] = {}
    for name, argtypes in abi.PROTOTYPES.items():
        try:
            function = getattr(handle, name)
        except AttributeError:  # dlsym found nothing: this capability is off
            continue
        if function is None or not callable(function):
            continue
        if isinstance(function, CFuncPtr):  # a stand-in's Python functions take no argtypes
            function.restype = ctypes.c_int
            function.argtypes = list(argtypes)
        functions[name] = function
    return functions


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _loaded_path(handle: ctypes.CDLL, where: str) -> str:
    """The file ``dlopen`` really opened (``where`` may be a bare name found on the loader path)."""
    if os.path.isabs(where):
        return where
    for name in abi.PROTOTYPES:
        try:
            address = ctypes.cast(getattr(handle, name), ctypes.c_void_p).value
        except AttributeError:
            continue
        return _dladdr_file(address) or where
    return where


def _dladdr_file(address: Optional[int]) -> Optional[str]:
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except (AttributeError, OSError):  # glibc < 2.34 keeps dladdr in libdl only
        return None
    info = _DlInfo()
    if not address or not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(os.fsdecode(info.dli_fname))


def _absent_or(where: str, text: str) -> str:
    """``_NOT_FOUND`` when the loader's words say ``where`` itself is absent, else the words."""
    named = text.split(":", 1)[0].strip()
    if "cannot open shared object file" not in text or os.path.basename(named) != os.path.basename(where):
        return text
    if not os.path.exists(where):
        return _NOT_FOUND
    # glibc says "cannot open shared object file" for an existing ELF file of another machine.
    theirs, ours = _elf_machine(where), _elf_machine(sys.executable)
    if theirs is not None and ours is not None and theirs != ours:
        return f"{text} (an ELF file for machine {theirs}, this Python is machine {ours}: {_WRONG_ARCH})"
    return text


def _elf_machine(path: str) -> Optional[int]:
    """The ``e_machine`` of an ELF file (62 x86-64, 183 aarch64), ``None`` if it is not one."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return None
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return None
    return int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")


def _failure(tried: Sequence[str], errors: Dict[str, str]) -> LibraryFailure:
    """One failure for all attempts: the most telling loader message first."""
    loaded_but_failed = [(where, text) for where, text in errors.items() if text != _NOT_FOUND]
    if not loaded_but_failed:
        what = (
            f"{tried[0]} not found" if len(tried) == 1 else f"libdcmi.so not found (tried {', '.join(tried)})"
        )
        return LibraryFailure(what, _NOT_FOUND_HINT, tuple(tried), not_found=True)
    where, text = loaded_but_failed[0]
    return LibraryFailure(_message(where, text), _hint(where, text), tuple(tried))


def _message(where: str, text: str) -> str:
    return text if where in text else f"{where}: {text}"


def _hint(where: str, text: str) -> str:
    if "undefined symbol" in text:
        return _SYMBOL_HINT
    if (
        _WRONG_ARCH in text
        or "wrong ELF class" in text
        or "invalid ELF header" in text
        or "file too short" in text
    ):
        return _ARCH_HINT
    return _DEPENDENCY_HINT  # found, but a library it links (or the loader) failed
