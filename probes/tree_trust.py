"""Provides whether npuwatch may run a machine tree's own code: its ``npu-smi``, its libraries.

A ``--root`` tree is files, and a tree from a bug report must be safe to open: by default
npuwatch reads its sysfs, ``/dev``, install files and saved outputs, and never executes one of
its programs or loads one of its libraries.  The user trusts a tree explicitly with
``--trust-root`` or ``NPUWATCH_TRUST_ROOT=1``; ``feeds.open_machine`` turns the option into that
variable in the machine's environment, so every place that would run tree code (the npu-smi
search, the DCMI library search in the worker, the doctor's library loads) asks one question
here: ``runs_tree_code(root, environ)``.  The live machine (``/``) is always the user's own.

A demo's tree is trusted by the process that built it, never by a file in it: the simulator
puts the variable in the environment it hands to ``open_machine`` (``Simulation.environ``), so a
tree copied from a demo (or one that imitates it) is as untrusted as any other.  An
``--npu-smi PATH`` or ``--dcmi-lib PATH`` the user names is the user's choice, not the tree's,
and runs as before.

A tree carries its captured ``npu-smi info`` output at ``SAVED_INFO`` (``TREE/npuwatch/
npu-smi-info.txt``); untrusted, the chips come from it (parsed as ``--replay`` parses a capture).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Mapping, Union

#: The environment variable that trusts a ``--root`` tree (``1``), and its option.
TRUST_VARIABLE = "NPUWATCH_TRUST_ROOT"
TRUST_OPTION = "--trust-root"
#: Where a tree keeps its captured ``npu-smi info`` output (a machine path inside the tree).
SAVED_INFO = PurePosixPath("/npuwatch/npu-smi-info.txt")
#: What to do to run a tree's code, for every message that says something was not run.
TRUST_HINT = (
    f"{TRUST_OPTION} (or {TRUST_VARIABLE}=1) runs the tree's code as the user running npuwatch: "
    "give it only for a tree you trust"
)


def runs_tree_code(root: Union[str, Path], environ: Mapping[str, str]) -> bool:
    """Whether the programs and libraries of the machine at ``root`` may run: always on the live
    machine (``/``), in a tree only when ``environ`` trusts it (``NPUWATCH_TRUST_ROOT=1``)."""
    if os.path.abspath(root) == "/":
        return True
    return environ.get(TRUST_VARIABLE, "").strip() == "1"


def trust_value(text: str) -> bool:
    """``NPUWATCH_TRUST_ROOT``'s meaning: ``1`` trusts, empty or ``0`` does not; ``ValueError``
    for anything else (the option's validation says which variable)."""
    value = text.strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"{TRUST_VARIABLE}={text!r}: expected 1 (trust the --root tree) or 0")
