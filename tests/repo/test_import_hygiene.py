"""Headless paths import no UI library (docs/design.md §1 import rules); nothing imports folder names."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import REPO

UI_MODULES = ("textual", "rich", "ipywidgets", "IPython")


@pytest.mark.parametrize(
    "statement",
    [
        "import npuwatch",
        "import npuwatch.model, npuwatch.sampler, npuwatch.history, npuwatch.snapshot_json",
        "import npuwatch.probes.npu_smi, npuwatch.probes.npu_smi.table, npuwatch.probes.pci",
        "import npuwatch.probes.host, npuwatch.probes.sysroot, npuwatch.probes.runner",
        "import npuwatch.feeds, npuwatch.errors, npuwatch.availability",
        "import npuwatch.widgets.text, npuwatch.widgets.format",
        "import npuwatch.cli",
        "import npuwatch.doctor.command, npuwatch.doctor.report_json, npuwatch.widgets.doctor_text",
        "from npuwatch.doctor.registry import all_checks; all_checks()",
        "import npuwatch.selftest, npuwatch.selftest.command, npuwatch.probes.runtime.child",
        "import npuwatch.health, npuwatch.check_command, npuwatch.polling_pause",
        "import npuwatch.exporter.metrics, npuwatch.exporter.server, npuwatch.exporter.command",
        "import npuwatch.recording, npuwatch.replay, npuwatch.record_command",
        "import npuwatch.notebook",
    ],
)
def test_headless_modules_load_no_ui_library(statement):
    assert loaded_after(statement, UI_MODULES) == "[]"


def loaded_after(statement: str, modules: tuple) -> str:
    """Which of ``modules`` a fresh interpreter has loaded after running ``statement``."""
    code = f"{statement}; import sys; print([m for m in {modules!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    return out.stdout.strip()


@pytest.mark.parametrize(
    "statement",
    [
        "import npuwatch.jupyter, npuwatch.widgets.notebook.live_view, npuwatch.widgets.notebook.reports",
        "from npuwatch import notebook; notebook.snapshot(demo=True)",
    ],
)
def test_the_notebook_modules_load_no_textual(statement):
    assert loaded_after(statement, ("textual",)) == "[]"


def test_the_dashboard_loads_no_ipywidgets():
    assert loaded_after("import npuwatch.widgets.tui.app", ("ipywidgets", "IPython")) == "[]"


def test_snapshot_command_loads_no_ui_library(tmp_path):
    code = (
        f"import sys; from npuwatch.cli import main; main(['snapshot', '--root', {str(tmp_path)!r}]);"
        f"print([m for m in {UI_MODULES!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_code_imports_npuwatch_names_never_the_folder_names():
    offenders = []
    for folder in ("npuwatch", "probes", "widgets", "tests", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                offenders += [
                    f"{path}:{node.lineno}" for n in names if n.split(".")[0] in ("probes", "widgets")
                ]
    assert offenders == []


def test_no_io_at_import_time_of_probes():
    # Importing the probes must not start a process or read the machine.
    code = (
        "import subprocess; calls = []\n"
        "orig = subprocess.Popen.__init__\n"
        "def spy(self, *a, **k): calls.append(a); orig(self, *a, **k)\n"
        "subprocess.Popen.__init__ = spy\n"
        "import npuwatch.probes.npu_smi, npuwatch.probes.pci, npuwatch.probes.host, npuwatch.sampler\n"
        "print(len(calls))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "0"
