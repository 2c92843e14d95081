"""An unreadable /dev is "cannot read /dev as <user>", never "missing" (issue 27, item 13).

``check`` and the doctor said "/dev/davinci_manager … missing" when /dev could not be listed: the
listing hid the refusal.  Root reads any folder, and CI runs as root, so each surface is shown
twice: with the listing refused (a monkeypatched ``os.listdir``, as a mount that refuses root
would), and for real as uid 65534 in a forked child over a ``chmod 000`` /dev.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Union

import pytest

from npuwatch.doctor.checks import device_nodes
from npuwatch.doctor.machine import Machine
from npuwatch.health import check_health
from npuwatch.probes.devices import scan_dev
from npuwatch.probes.npu_smi.source import CaptureSource
from npuwatch.probes.sysroot import Sysroot
from npuwatch.verdict import Reason
from tests.hostile.test_verdicts import FULL_TABLE, _shared_machine, as_nobody, build_machine, shared_tree

__all__ = ["shared_tree"]  # the fixture, used by name


@pytest.fixture
def refused_dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine whose /dev is there but cannot be listed (PermissionError, even as root)."""
    builder = build_machine(tmp_path / "root")
    dev = str(builder.path("/dev"))
    original = os.listdir

    def listdir(path: Union[str, os.PathLike[str]] = ".") -> List[str]:
        if os.fspath(path).rstrip("/") == dev:
            raise PermissionError(13, "Permission denied", dev)
        return original(path)

    monkeypatch.setattr(os, "listdir", listdir)
    return builder.root


def test_scan_dev_says_it_cannot_read_dev(refused_dev: Path) -> None:
    nodes = scan_dev(Sysroot(refused_dev, environ={}))
    assert nodes.unreadable and nodes.reason is not None
    assert nodes.reason.startswith("cannot read /dev as this user ("), nodes.reason


def test_check_says_cannot_read_dev_not_missing(refused_dev: Path, tmp_path: Path) -> None:
    capture = tmp_path / "info.txt"
    capture.write_text(FULL_TABLE, encoding="utf-8")
    verdict = check_health(Sysroot(refused_dev, environ={}), CaptureSource(capture))
    nodes = [p for p in verdict.problems if p.reason is Reason.DEVICE_NODES]
    assert len(nodes) == 1, verdict.problems
    assert nodes[0].message.startswith("cannot read /dev as this user ("), nodes[0]
    assert "missing" not in verdict.line and "ls -ld /dev" in nodes[0].hint, verdict.line


def test_the_doctor_says_cannot_read_dev_not_missing(refused_dev: Path) -> None:
    finding = device_nodes.run(Machine(Sysroot(refused_dev, environ={}), None))
    assert finding.summary.startswith("cannot read /dev as this user ("), finding
    assert "missing" not in finding.summary.lower(), finding


def test_as_another_user_a_closed_dev_is_cannot_read(shared_tree: Path) -> None:
    builder, npu_smi = _shared_machine(shared_tree)
    builder.path("/dev").chmod(0o000)
    result = as_nobody(builder.root, npu_smi, "device-nodes")
    finding = result["device-nodes"]
    assert result["has_hardware"] is True, result
    assert finding["status"] == "fail", finding
    assert finding["summary"].startswith("cannot read /dev as this user ("), finding
    assert "missing" not in finding["summary"].lower(), finding
