"""The chip-source seam: every surface reads chips through one ChipSource and asks the snapshot for
the chip source's report, never for ``"npu-smi"`` by name; check, the doctor and the dashboard get
the same error codes from the same query."""

from __future__ import annotations

import ast
import json
import shlex
from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

import pytest

from npuwatch.chip_details import ChipDetails
from npuwatch.chip_source import ChipReading, SourceFailure, SourceReading
from npuwatch.cli import main
from npuwatch.doctor.checks import chip_health
from npuwatch.doctor.machine import Machine
from npuwatch.model import ChipError, ChipIdentity, ChipSample, Health, MetricStatus, Snapshot, Versions
from npuwatch.probes.npu_smi import NpuSmi
from npuwatch.probes.npu_smi.source import NpuSmiSource
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from tests.conftest import CAPTURES, REPO

ALARM_HEALTH = (
    "        Health Status                  : Alarm\n"
    "        Error Code                     : 80E01801\n"
    "        Error Information              : HBM multi-bit ECC error\n"
)


def refusing_npu_smi(builder: SysrootBuilder) -> Path:
    """An npu-smi with a 310B4 in Alarm (capture 041) that refuses ``-c`` for ``-t health`` and
    answers the card-level query, as some drivers do; every call is logged to ``/calls.log``."""
    log = builder.path("/calls.log")
    info = builder.write_file("/info.txt", next(CAPTURES.glob("041_*.txt")).read_text())
    health = builder.write_file("/health.txt", ALARM_HEALTH)
    return builder.install_executable(
        "/usr/local/bin/npu-smi",
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        'case "$*" in\n'
        '  "info -t health -i 0 -c 0") echo "Error parameter of -c"; exit 1;;\n'
        f'  "info -t health -i 0") cat {shlex.quote(str(health))};;\n'
        f'  "info") cat {shlex.quote(str(info))};;\n'
        "  *) exit 1;;\n"
        "esac\n",
    )


@pytest.fixture
def refusing(tmp_path) -> SysrootBuilder:
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes(range(1))
    refusing_npu_smi(builder)
    return builder


# --- one error-code query: check, the doctor and the dashboard agree ---------------------------


def test_check_names_the_error_code_when_npu_smi_refuses_the_chip_option(refusing, capsys):
    main(["check", "--json", "--root", str(refusing.root), "--trust-root"])
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["chips"][0]["error_codes"] == ["80E01801"]


def test_the_doctor_names_the_same_error_code(refusing):
    machine = Machine(Sysroot(refusing.root, environ={}), refusing.path("/usr/local/bin/npu-smi"))
    finding = chip_health.CHECK.run(machine)
    assert "80E01801" in finding.summary


def test_the_dashboard_source_names_the_same_error_code(refusing):
    source = NpuSmiSource(NpuSmi(refusing.path("/usr/local/bin/npu-smi"), timeout_s=5.0))
    outcome = source.read()
    assert outcome.reading is not None
    assert outcome.reading.chips[0].errors == (ChipError("80E01801", "HBM multi-bit ECC error"),)


def test_the_doctor_runs_npu_smi_info_once_for_every_fact(refusing):
    machine = Machine(Sysroot(refusing.root, environ={}), refusing.path("/usr/local/bin/npu-smi"))
    reading = machine.info_table()
    machine.npu_smi_info()
    machine.prints_container_pids()
    assert isinstance(reading, ChipReading)
    calls = refusing.path("/calls.log").read_text().splitlines()
    assert calls.count("info") == 1, calls


# --- a source that is not npu-smi: every consumer asks the snapshot for the chip source's report --


class DcmiLike:
    """A chip source with another probe name (as the DCMI backend will be): scripted readings."""

    probe_name = "dcmi"
    label = "dcmi"
    provides_details = False
    provides_processes = False
    provides_logic_ids = True

    def __init__(self, *outcomes: SourceReading) -> None:
        self.outcomes = list(outcomes)

    def read(self) -> SourceReading:
        return self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        return None


CHIP = ChipSample(ChipIdentity(0, 0, "910B3", logic_id=0), Health.OK, power_w=90.0, temperature_c=50)
GOOD = SourceReading(ChipReading(chips=(CHIP,)), None, 0.01)
HUNG = SourceReading(
    None,
    SourceFailure(
        "timeout", "dcmi_get_device_health did not return within 2 s", "check dmesg", MetricStatus.TIMEOUT
    ),
    2.0,
)


def sample(*outcomes: SourceReading) -> List[Snapshot]:
    from npuwatch.sampler import Sampler

    sampler = Sampler(DcmiLike(*outcomes), None, None)
    return [sampler.sample() for _ in outcomes]


def test_the_snapshot_names_its_chip_source_and_its_report():
    snapshot = sample(GOOD)[0]
    assert snapshot.chip_source == "dcmi"
    report = snapshot.chip_source_report
    assert report is not None and report.name == "dcmi" and report.status is MetricStatus.OK
    assert report.found == 1
    assert snapshot.probe("npu-smi") is None


def test_a_failed_source_is_seen_by_every_consumer_through_its_report():
    from npuwatch.availability import no_data_reason
    from npuwatch.exporter.healthz import judge_healthz
    from npuwatch.exporter.metrics import ExporterView

    snapshot = sample(HUNG)[0]
    assert snapshot.chip_source_report is not None
    assert snapshot.chip_source_report.status is MetricStatus.TIMEOUT
    assert "dcmi_get_device_health did not return" in (no_data_reason(snapshot) or "")
    assert not ExporterView(snapshot).up
    answer = judge_healthz(ExporterView(snapshot), 0.0, 60.0)
    assert answer.line.startswith("unhealthy: DCMI timeout: dcmi_get_device_health"), answer
    assert any(w.startswith("dcmi: dcmi_get_device_health") for w in snapshot.warnings)


def test_a_source_that_fails_after_a_good_read_marks_the_values_stale():
    snapshot = sample(GOOD, HUNG)[1]
    assert snapshot.chips[0].power_w == 90.0
    assert snapshot.chips[0].notes["power_w"].status is MetricStatus.STALE


def test_the_version_line_names_the_chip_source():
    from npuwatch.widgets.text import render_snapshot

    ours = Snapshot(
        datetime(2026, 1, 1, tzinfo=timezone.utc), "npu-smi", versions=Versions(npu_smi="24.1.rc2")
    )
    theirs = Snapshot(datetime(2026, 1, 1, tzinfo=timezone.utc), "dcmi", chip_source="dcmi")
    assert ours.chip_source_version == "24.1.rc2"
    assert "npu-smi 24.1.rc2 · driver" in render_snapshot(ours)
    assert theirs.chip_source_version is None
    assert "dcmi n/a · driver" in render_snapshot(theirs)


def test_check_reads_any_chip_source():
    from npuwatch.health import check_health

    healthy = check_health(None, DcmiLike(GOOD))
    assert healthy.healthy and healthy.source == "dcmi" and healthy.chips_total == 1
    hung = check_health(None, DcmiLike(HUNG))
    assert not hung.healthy
    assert hung.problems[0].message == "DCMI failed: dcmi_get_device_health did not return within 2 s"


def test_a_source_without_details_gives_the_views_none():
    from npuwatch.sampler import Sampler

    assert Sampler(DcmiLike(GOOD), None, None).chip_details(0, 0) is None


def test_the_healthy_check_loads_neither_the_detail_queries_nor_the_mapping_parser(tmp_path):
    import subprocess
    import sys

    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes(range(8))
    capture = builder.write_file("/capture.txt", next(CAPTURES.glob("001_*.txt")).read_text())
    builder.install_executable("/usr/local/bin/npu-smi", f"#!/bin/sh\ncat {capture}\n")
    unwanted = (
        "npuwatch.probes.npu_smi.details",
        "npuwatch.probes.npu_smi.lists",
        "npuwatch.probes.npu_smi.reports",
    )
    code = (
        "import sys; from npuwatch.cli import main; "
        f"code = main(['check', '--root', {str(builder.root)!r}, '--trust-root']); "
        f"print(code, [m for m in {unwanted!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def _npuwatch_imports(module: str) -> set:
    tree = ast.parse((REPO / "npuwatch" / f"{module}.py").read_text())
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
    } | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return {name for name in imported if name.startswith("npuwatch")}


def test_the_seam_is_in_the_model_layer():
    # chip_details only for the Protocol's annotation; chip_details itself imports nothing of ours.
    assert _npuwatch_imports("chip_source") == {
        "npuwatch.model",
        "npuwatch.chip_details",
        "npuwatch.source_info",
    }
    assert _npuwatch_imports("chip_details") == set()


def test_the_npu_smi_classes_convert_to_the_seam():
    from npuwatch.probes.npu_smi import FailureKind, NpuSmiFailure
    from npuwatch.probes.npu_smi.table import parse_info

    table = parse_info(next(CAPTURES.glob("001_*.txt")).read_text())
    reading = table.to_reading()
    assert reading.chips == table.chips and reading.processes == table.processes
    assert reading.versions.npu_smi == table.npu_smi_version
    failure = NpuSmiFailure(
        FailureKind.PERMISSION, "refused", "join HwHiAiUser", exit_code=1, dcmi_code=-8002
    )
    seam = failure.to_source_failure()
    assert (seam.kind, seam.metric_status, seam.error_code) == ("permission", MetricStatus.PERMISSION, -8002)
    assert NpuSmiFailure.from_source_failure(seam) == failure
