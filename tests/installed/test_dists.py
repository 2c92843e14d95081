"""The sdist and the wheel carry every file the product reads at run time."""

from __future__ import annotations

import zipfile

import pytest

from tests.installed.product import Dists, sdist_names

pytestmark = pytest.mark.slow

#: Run-time data files, by where they sit in the source tree and in the installed package.
DATA_FILES = {
    "npuwatch/py.typed": "npuwatch/py.typed",
    "npuwatch/snapshot-v1.schema.json": "npuwatch/snapshot-v1.schema.json",
    "widgets/tui/npuwatch.tcss": "npuwatch/widgets/tui/npuwatch.tcss",
    # the demos' fake libdcmi.so, compiled on first use where a C compiler exists
    "probes/simulator/dcmi_fake/fake_dcmi.c": "npuwatch/probes/simulator/dcmi_fake/fake_dcmi.c",
}


def test_sdist_carries_the_run_time_data_files(dists: Dists):
    names = set(sdist_names(dists.sdist))
    assert set(DATA_FILES) - names == set()
    assert "pyproject.toml" in names and "README.md" in names


def test_wheel_built_from_the_sdist_carries_them_too(dists: Dists):
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    assert set(DATA_FILES.values()) - names == set()
