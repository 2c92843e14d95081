"""Tests for the chip sources: live npu-smi (with logic IDs from `-m`) and replayed captures."""

from __future__ import annotations

import shlex
from pathlib import Path

from npuwatch.probes.npu_smi import FailureKind, NpuSmi
from npuwatch.probes.npu_smi.source import MAPPING_REFRESH_S, CaptureSource, NpuSmiSource
from tests.conftest import CAPTURES


def fake_npu_smi(tmp_path: Path, info: str, mapping: str, mapping_exit: int = 0) -> Path:
    """An npu-smi that prints capture `info` for `info` and `mapping` for `info -m`, logging calls."""
    log = tmp_path / "calls.log"
    tool = tmp_path / "npu-smi"
    info_file = next(CAPTURES.glob(f"{info}_*.txt"))
    mapping_file = next(CAPTURES.glob(f"{mapping}_*.txt"))
    tool.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        f'if [ "$2" = "-m" ]; then cat {shlex.quote(str(mapping_file))}; exit {mapping_exit}; fi\n'
        f"cat {shlex.quote(str(info_file))}\n"
    )
    tool.chmod(0o755)
    return tool


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_logic_ids_come_from_the_mapping(tmp_path):
    tool = fake_npu_smi(tmp_path, "022", "023")
    reading = NpuSmiSource(NpuSmi(tool)).read()
    assert reading.reading is not None
    assert [c.identity.logic_id for c in reading.reading.chips] == list(range(8))


def test_mapping_is_a_slow_fact_asked_again_only_after_its_refresh(tmp_path):
    tool = fake_npu_smi(tmp_path, "022", "023")
    clock = Clock()
    source = NpuSmiSource(NpuSmi(tool), clock=clock)
    source.read()
    source.read()
    clock.now += MAPPING_REFRESH_S
    source.read()
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls == ["info", "info -m", "info", "info", "info -m"]


def test_a_failing_mapping_leaves_logic_ids_unknown(tmp_path):
    tool = fake_npu_smi(tmp_path, "022", "070", mapping_exit=255)  # "does not support querying"
    reading = NpuSmiSource(NpuSmi(tool)).read()
    assert reading.reading is not None
    assert {c.identity.logic_id for c in reading.reading.chips} == {None}


def test_capture_source_explains_an_error_capture_as_the_live_path_would():
    reading = CaptureSource(next(CAPTURES.glob("034_*.txt"))).read()
    assert reading.reading is None
    assert reading.failure is not None
    assert reading.failure.kind == FailureKind.DCMI.value
    assert reading.failure.error_code == -8020
