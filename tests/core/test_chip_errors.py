"""A chip that is not OK carries the error codes `npu-smi info -t health` gives, with their meaning:
asked by the live source once per chip and state, kept in the snapshot and its JSON."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import jsonschema

from npuwatch import snapshot_json
from npuwatch.model import ChipError, ChipIdentity, ChipSample, Health, Snapshot
from npuwatch.probes.npu_smi import NpuSmi
from npuwatch.probes.npu_smi.source import NpuSmiSource
from tests.conftest import CAPTURES

ALARM_HEALTH = (
    "        Health Status                  : Alarm\n"
    "        Error Code                     : 80E01801 80CB8002\n"
    "        Error Information              : HBM multi-bit ECC error\n"
    "                                       : AI Core is abnormal\n"  # a blank-key continuation
)


def fake_npu_smi(tmp_path: Path, info: str, health: str, health_exit: int = 0) -> Path:
    """An npu-smi printing capture ``info`` for `info`, ``health`` for `info -t health`; logs calls."""
    log = tmp_path / "calls.log"
    tool = tmp_path / "npu-smi"
    info_file = next(CAPTURES.glob(f"{info}_*.txt"))
    health_file = tmp_path / "health.txt"
    health_file.write_text(health)
    tool.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        'if [ "$2" = "-m" ]; then exit 255; fi\n'
        f'if [ "$2" = "-t" ]; then cat {shlex.quote(str(health_file))}; exit {health_exit}; fi\n'
        f"cat {shlex.quote(str(info_file))}\n"
    )
    tool.chmod(0o755)
    return tool


def test_a_chip_in_alarm_gets_its_error_codes_and_their_meaning(tmp_path: Path) -> None:
    source = NpuSmiSource(NpuSmi(fake_npu_smi(tmp_path, "041", ALARM_HEALTH)))  # 310B4 in Alarm
    table = source.read().reading
    assert table is not None
    assert table.chips[0].health is Health.ALARM
    assert table.chips[0].errors == (
        ChipError("80E01801", "HBM multi-bit ECC error"),
        ChipError("80CB8002", "AI Core is abnormal"),
    )


def test_the_codes_are_asked_once_per_state_not_every_tick(tmp_path: Path) -> None:
    source = NpuSmiSource(NpuSmi(fake_npu_smi(tmp_path, "041", ALARM_HEALTH)))
    for _ in range(3):
        source.read()
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert calls.count("info -t health -i 0 -c 0") == 1, calls
    assert calls.count("info") == 3


def test_healthy_chips_cost_no_query(tmp_path: Path) -> None:
    source = NpuSmiSource(NpuSmi(fake_npu_smi(tmp_path, "022", ALARM_HEALTH)))
    table = source.read().reading
    assert table is not None and all(chip.errors == () for chip in table.chips)
    assert not [c for c in (tmp_path / "calls.log").read_text().splitlines() if "-t" in c]


def test_a_failing_health_query_leaves_the_codes_unknown(tmp_path: Path) -> None:
    source = NpuSmiSource(NpuSmi(fake_npu_smi(tmp_path, "041", "Error: busy\n", health_exit=1)))
    reading = source.read()
    assert reading.failure is None and reading.reading is not None
    assert reading.reading.chips[0].health is Health.ALARM
    assert reading.reading.chips[0].errors == ()


def test_error_codes_survive_the_json_round_trip() -> None:
    chip = ChipSample(ChipIdentity(3, 0, name="910B3"), health=Health.ALARM)
    chip = replace(chip, errors=(ChipError("80E01801", "HBM multi-bit ECC error"), ChipError("80CB8002")))
    snapshot = Snapshot(datetime(2026, 1, 1, tzinfo=timezone.utc), "demo:chip-alarm", chips=(chip,))
    doc = snapshot_json.to_dict(snapshot)
    assert doc["chips"][0]["error_codes"] == [  # the name and shape docs/design.md §2.2 fixes
        {
            "code": "80E01801",
            "text": "HBM multi-bit ECC error",
            "handling": "restart-business",
            "action": "restart the job (from its last checkpoint): the chip itself stays in service",
        },
        {
            "code": "80CB8002",
            "text": None,
            "handling": "restart-request",
            "action": "retry the failed request or step: the fault is transient",
        },
    ]
    schema = json.loads((Path(snapshot_json.__file__).parent / "snapshot-v1.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert snapshot_json.from_dict(json.loads(snapshot_json.dumps(snapshot))) == snapshot
