"""``%load_ext npuwatch`` and ``%npuwatch --demo`` in a real kernel of the venv's own Python.

nbclient runs here, in the test process; the kernel is the venv's ``python -m ipykernel_launcher``,
found through a kernelspec written to a temporary ``JUPYTER_PATH`` folder.  The cells are the
notebook tier's (tests/notebook/test_kernel.py), plus one that says where npuwatch came from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import need
from tests.installed.product import Installed
from tests.notebook.helpers import cell_stream
from tests.notebook.test_kernel import CELLS

pytestmark = pytest.mark.slow

KERNEL = "npuwatch-installed"
WHERE = (
    'import sys, npuwatch\nprint("WHERE " + __import__("json").dumps([sys.executable, npuwatch.__file__]))'
)


def write_kernelspec(folder: Path, installed: Installed, ipython_dir: Path) -> None:
    spec = folder / "kernels" / KERNEL
    spec.mkdir(parents=True)
    kernel = {
        "argv": [str(installed.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"npuwatch installed ({installed.name})",
        "language": "python",
        "env": {
            "PATH": installed.environ()["PATH"],
            "VIRTUAL_ENV": str(installed.venv),
            "IPYTHONDIR": str(ipython_dir),  # no profile or startup file of the user's
        },
    }
    (spec / "kernel.json").write_text(json.dumps(kernel), encoding="utf-8")


@pytest.fixture
def executed(installed: Installed, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    need(
        all(importlib.util.find_spec(m) for m in ("nbclient", "nbformat")),
        "nbclient and nbformat are needed to run a kernel",
    )
    import nbformat
    from nbclient import NotebookClient

    write_kernelspec(tmp_path / "jupyter", installed, tmp_path / "ipython")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    for key in [k for k in os.environ if k == "PYTHONPATH" or k.startswith("NPUWATCH_")]:
        monkeypatch.delenv(key)  # the kernel inherits this process's environment
    sources = [WHERE, *CELLS]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    notebook.metadata["kernelspec"] = {"name": KERNEL, "display_name": KERNEL, "language": "python"}
    client = NotebookClient(
        notebook, timeout=180, kernel_name=KERNEL, resources={"metadata": {"path": str(workdir)}}
    )
    client.execute()
    return notebook


def test_live_view_in_a_kernel_of_the_venv(executed, installed: Installed):
    where = next(x for x in cell_stream(executed.cells[0]).splitlines() if x.startswith("WHERE "))
    python, package = json.loads(where[len("WHERE ") :])
    assert Path(python).parent == installed.venv / "bin"
    assert Path(package).parent == installed.site_packages / "npuwatch"

    results = [o for o in executed.cells[2].outputs if o.output_type == "execute_result"]
    assert len(results) == 1, executed.cells[2].outputs
    data = results[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert 'class="npuwatch-live"' in data["text/html"]

    line = next(x for x in cell_stream(executed.cells[3]).splitlines() if x.startswith("STATE "))
    state = json.loads(line[len("STATE ") :])
    assert state["status"] == "live"
    assert state["root_classes"] == ["npuwatch-live"]
    assert re.fullmatch(r"\d\d:\d\d:\d\d", state["updated"])
    assert state["updated"] != state["first_updated"]  # it sampled again: the view is live
    assert [(c["npu_id"], c["chip_id"]) for c in state["chips"]] == [(n, 0) for n in range(8)]
    assert "STOPPED False stopped" in cell_stream(executed.cells[4])
