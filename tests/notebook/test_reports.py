"""The static forms' HTML: snapshot table, doctor report and self-test report."""

from __future__ import annotations

from dataclasses import replace

from npuwatch.doctor.engine import DoctorReport
from npuwatch.doctor.result import CheckResult, Group, Status
from npuwatch.probes.runtime.protocol import Step, StepStatus
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult
from npuwatch.widgets.notebook.reports import DoctorResult, SelftestResult, SnapshotResult, progress_html
from tests.widgets.fakes import capture_snapshot


def test_snapshot_table_has_a_row_per_chip_with_values_and_reasons():
    snapshot = capture_snapshot("044")
    bundle = SnapshotResult(snapshot)._repr_mimebundle_()
    html = bundle["text/html"]
    assert html.count('<tr class="npuwatch-chip npuwatch-health-') == len(snapshot.chips)
    assert "Not reported:" in html and "this chip does not report it" in html
    assert 'title="npu-smi prints &#x27;NA&#x27;: this chip does not report it"' in html
    assert bundle["text/plain"].startswith("npuwatch · ")


def test_snapshot_without_chips_says_why():
    snapshot = replace(capture_snapshot("001"), chips=(), processes=())
    result = SnapshotResult(snapshot, "no NPU could be read: npu-smi timed out after 5 s")
    html = result.html()
    assert "No NPU chips could be read." in html
    assert 'class="npuwatch-problem"' in html and "timed out after 5 s" in html
    assert result.text().rstrip().endswith("npu-smi timed out after 5 s")


def _check(check_id: str, status: Status, hint=None, details=()) -> CheckResult:
    return CheckResult(check_id, Group.DRIVER, check_id, status, f"{check_id} <summary>", details, hint)


def test_doctor_report_groups_statuses_hints_and_escapes():
    report = DoctorReport(
        (
            _check("device-nodes", Status.PASS),
            _check("npu-smi", Status.FAIL, "run `npu-smi info` as root", ("dcmi error -8020",)),
        ),
        has_hardware=True,
        duration_s=0.4,
    )
    result = DoctorResult(report, "npuwatch doctor: this machine", {"demo": None})
    html = result.html()
    assert "npuwatch-check-pass" in html and "npuwatch-check-fail" in html
    assert "→ fix: <code>run `npu-smi info` as root</code>" in html
    assert "<details open>" in html and "dcmi error -8020" in html
    assert "&lt;summary&gt;" in html  # check text is escaped, never markup
    assert "exit 2" in html and result.exit_code == 2
    assert "npu-smi" in result.text()


def test_selftest_report_shows_each_step_and_the_fix_for_a_failure():
    error = StepError(507033, "ACL_ERROR_RT_DEV_SETUP_ERROR", "device setup failed", "reset the device")
    steps = (
        StepResult(Step.IMPORT, StepStatus.PASS, 0.5, "pyACL 8.0"),
        StepResult(Step.SET_DEVICE, StepStatus.FAIL, 0.01, "set_device(0) failed", error=error),
        StepResult(Step.CLEANUP, StepStatus.NOT_RUN, None, "not run: set device failed"),
    )
    report = SelftestReport("quick", "auto", "0", (DeviceRun(0, "acl", steps, 0.6),), 0.6, 60.0)
    result = SelftestResult(report)
    html = result.html()
    assert "npuwatch-status-pass" in html and "npuwatch-status-fail" in html
    assert "507033 ACL_ERROR_RT_DEV_SETUP_ERROR: device setup failed" in html
    assert "→ fix: <code>reset the device</code>" in html
    assert "not run: set device failed" not in html
    assert result.exit_code == 2 and "exit 2" in html
    assert "device 0: copy H2D" in progress_html({0: "copy H2D"})
