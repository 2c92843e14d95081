"""The fake torch_npu's process state, shared by ``torch`` tensors and ``torch.npu``."""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from fakeruntime import MIB, Ledger, Timeline, env

LEDGER = Ledger("torch")


class NpuState:
    def __init__(self) -> None:
        self.current = 0
        self.initialized = False
        self.allocated = 0
        self.stream = Timeline()
        self.npu_module: Optional[Any] = None
        self._next_handle = 0x9000

    def handle(self) -> int:
        self._next_handle += 0x10
        return self._next_handle

    @staticmethod
    def device_count() -> int:
        count = int(env("NPUWATCH_FAKE_DEVICE_COUNT", "2"))
        visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        if visible is None:
            return count
        ids = [int(part) for part in visible.split(",") if part.strip().isdigit()]
        return len([i for i in ids if i < count])

    @staticmethod
    def total_bytes() -> int:
        return int(env("NPUWATCH_FAKE_HBM_MIB", "65536")) * MIB

    def free_bytes(self) -> int:
        used = int(env("NPUWATCH_FAKE_USED_MIB", "3072")) * MIB + self.allocated
        return max(0, self.total_bytes() - used)


STATE = NpuState()


def npu_error(call: str, code: int, where: str) -> RuntimeError:
    """A RuntimeError worded as torch_npu words them (Ascend/pytorch #67, vllm-ascend #116)."""
    stamp = time.strftime("%Y-%m-%d-%H:%M:%S")
    LEDGER.call(where, code)
    return RuntimeError(
        f"{where}:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:217 NPU function error: {call}, "
        f"error code is {code}\n"
        f"[ERROR] {stamp} (PID:{os.getpid()}, Device:{STATE.current}, RankID:-1) "
        "ERR00100 PTA call acl api failed\n"
        f"EE9999: Inner Error! (fake)"
    )
