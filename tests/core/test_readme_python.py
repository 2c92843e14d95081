"""Every Python snippet of the README runs as written on a machine without an NPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

BLOCKS = re.findall(r"^```python\n(.*?)^```$", (REPO / "README.md").read_text(encoding="utf-8"), re.M | re.S)
CODE_BLOCKS = [block for block in BLOCKS if not block.lstrip().startswith("%")]  # magics need a kernel


def test_the_readme_has_python_snippets():
    assert len(CODE_BLOCKS) >= 2


@pytest.mark.parametrize("block", CODE_BLOCKS, ids=lambda b: b.splitlines()[0][:40])
def test_a_readme_python_snippet_runs_anywhere(block, tmp_path):
    empty = tmp_path / "machine-without-npu"
    empty.mkdir()
    env = {**os.environ, "NPUWATCH_ROOT": str(empty), "XDG_STATE_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
