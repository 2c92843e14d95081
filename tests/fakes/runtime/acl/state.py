"""The fake pyACL's process state: devices, contexts, streams, events, and memory backed by bytearrays."""

from __future__ import annotations

import ctypes
import os
from typing import Dict, Optional, Tuple

from fakeruntime import MIB, Ledger, Timeline, env

LEDGER = Ledger("acl")

#: Messages get_recent_err_msg returns after a failing call, in the runtime's own style.
MESSAGES = {
    507033: "EE8888: [PID: {pid}] Failed to start the device.\n"
    "        E39009: Device status abnormal (fake).",
    561003: "EZ9999: Inner Error!\n        Op Add does not has any binary for this SoC (fake).",
    207001: "EL0004: [PID: {pid}] Failed to allocate memory.",
    507001: "EZ9999: Inner Error!\n        SDMA copy task failed (fake).",
}


class Runtime:
    """Everything one process's runtime knows."""

    def __init__(self) -> None:
        self.initialized = False
        self.recent = ""
        self.devices_set: Dict[int, int] = {}
        self.current_device: Optional[int] = None
        self.contexts: Dict[int, int] = {}
        self.current_context: Optional[int] = None
        self.streams: Dict[int, Timeline] = {}
        self.default_stream = Timeline()
        self.events: Dict[int, Optional[float]] = {}
        self.device_mem: Dict[int, bytearray] = {}
        self.host_mem: Dict[int, ctypes.Array] = {}  # type: ignore[type-arg]
        self._next_handle = 0x5000
        self._next_device_address = 0x12C0_0000_0000

    # -- identity ---------------------------------------------------------------------------

    @staticmethod
    def device_count() -> int:
        count = int(env("NPUWATCH_FAKE_DEVICE_COUNT", "2"))
        visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        if visible is None:
            return count
        ids = [int(part) for part in visible.split(",") if part.strip().isdigit()]
        return len([i for i in ids if i < count])

    def handle(self) -> int:
        self._next_handle += 0x10
        return self._next_handle

    def fail(self, code: int, call: str) -> int:
        template = MESSAGES.get(code, "EE9999: Inner Error!\n        {call} failed with {code} (fake).")
        self.recent = template.format(pid=os.getpid(), call=call, code=code)
        return LEDGER.call(call, code)

    # -- memory -----------------------------------------------------------------------------

    def total_bytes(self) -> int:
        return int(env("NPUWATCH_FAKE_HBM_MIB", "65536")) * MIB

    def free_bytes(self) -> int:
        used = int(env("NPUWATCH_FAKE_USED_MIB", "3072")) * MIB
        used += sum(len(buf) for buf in self.device_mem.values())
        return max(0, self.total_bytes() - used)

    def device_alloc(self, size: int) -> int:
        address = self._next_device_address
        self._next_device_address += ((size + 2 * MIB - 1) // (2 * MIB) + 1) * 2 * MIB
        self.device_mem[address] = bytearray(size)
        return address

    def host_alloc(self, size: int) -> int:
        buffer = ctypes.create_string_buffer(size)
        address = ctypes.addressof(buffer)
        self.host_mem[address] = buffer
        return address

    def device_span(self, address: Optional[int], count: int) -> Optional[Tuple[bytearray, int]]:
        """(buffer, offset) when [address, address+count) lies in one device allocation."""
        if not address:
            return None
        for base, buffer in self.device_mem.items():
            if base <= address and address + count <= base + len(buffer):
                return buffer, address - base
        return None

    def pinned(self, address: Optional[int], count: int) -> bool:
        if not address:
            return False
        return any(
            base <= address and address + count <= base + len(buf) for base, buf in self.host_mem.items()
        )

    def real_address(self, address: int, count: int) -> Optional[int]:
        """A host-usable address for a device or host pointer (device memory lives in bytearrays)."""
        span = self.device_span(address, count)
        if span is None:
            return None if self.is_device_address(address) else address
        buffer, offset = span
        if count == 0:
            return address
        return ctypes.addressof((ctypes.c_char * count).from_buffer(buffer, offset))

    @staticmethod
    def is_device_address(address: int) -> bool:
        return 0x12C0_0000_0000 <= address < 0x2000_0000_0000

    def timeline(self, stream: Optional[int]) -> Optional[Timeline]:
        if not stream:
            return self.default_stream
        return self.streams.get(stream)


STATE = Runtime()
