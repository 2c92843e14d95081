"""The fake ``acl.util``: host buffers ↔ pointers, as pyACL's ``bytes_to_ptr``/``ptr_to_bytes``."""

from __future__ import annotations

import ctypes


def bytes_to_ptr(data: bytes) -> int:
    return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0


def ptr_to_bytes(ptr: int, size: int) -> bytes:
    return ctypes.string_at(ptr, size)
