"""The wheel maps probes/, widgets/ under npuwatch (docs/design.md §1), ships every module and data file."""

from __future__ import annotations

import subprocess
import zipfile

from tests.conftest import REPO
from tests.installed.product import pip_wheel_argv


def test_wheel_contains_every_module_under_the_npuwatch_name(tmp_path):
    out = subprocess.run(
        pip_wheel_argv(REPO, tmp_path),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    wheel = next(tmp_path.glob("npuwatch-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"npuwatch/{p.relative_to(REPO / 'npuwatch')}" for p in (REPO / "npuwatch").rglob("*.py")}
    for folder in ("probes", "widgets"):
        expected |= {
            f"npuwatch/{folder}/{p.relative_to(REPO / folder)}" for p in (REPO / folder).rglob("*.py")
        }
    expected = {name for name in expected if "__pycache__" not in name}
    assert expected - names == set()
    assert "npuwatch/py.typed" in names
    assert "npuwatch/snapshot-v1.schema.json" in names
    assert not any(n.startswith(("probes/", "widgets/")) for n in names)
