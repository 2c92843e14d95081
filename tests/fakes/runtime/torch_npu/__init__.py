"""A fake ``torch_npu``: importing it gives ``torch.npu`` (the calls npuwatch's torch backend makes).

``NPUWATCH_FAKE_TORCH_NPU_IMPORT_ERROR`` makes the import fail with that text (as when CANN's
libraries are not on LD_LIBRARY_PATH); ``NPUWATCH_FAKE_HIDE=torch_npu`` makes it absent.
"""

from __future__ import annotations

import torch
from fakeruntime import env, hidden

if hidden("torch_npu"):
    raise ModuleNotFoundError("No module named 'torch_npu'", name="torch_npu")
if env("NPUWATCH_FAKE_TORCH_NPU_IMPORT_ERROR"):
    raise ImportError(env("NPUWATCH_FAKE_TORCH_NPU_IMPORT_ERROR"))

from torch.npu_state import STATE

from torch_npu import npu

__version__ = "2.5.1.post1"

torch.npu = npu  # type: ignore[attr-defined]
STATE.npu_module = npu
