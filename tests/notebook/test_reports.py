"""The static forms' HTML: snapshot table, doctor report and self-test report."""

from __future__ import annotations

from dataclasses import replace
from typing import List

from npuwatch.doctor.engine import DoctorReport
from npuwatch.doctor.result import CheckResult, Group, Status
from npuwatch.probes.runtime.protocol import Step, StepStatus
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult
from npuwatch.widgets.notebook.reports import DoctorResult, SelftestResult, SnapshotResult, progress_html
from tests.notebook.helpers import Elements
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
    hints = [h["text"] for h in Elements(html).by_class("npuwatch-hint")]
    assert hints == ["→ fix: run `npu-smi info` as root"]
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
    assert [h["text"] for h in Elements(html).by_class("npuwatch-hint")] == ["→ fix: reset the device"]
    assert "not run: set device failed" not in html
    assert result.exit_code == 2 and "exit 2" in html
    assert "device 0: copy H2D" in progress_html({0: "copy H2D"})


#: Inline elements a notebook front-end paints a background behind unless told otherwise:
#: JupyterLab's ``.jp-RenderedHTMLCommon :not(pre) > code`` has a background and 1px 5px padding.
FRONTEND_PAINTED = frozenset(("code", "kbd", "mark"))
INLINE = frozenset(("a", "b", "code", "em", "i", "kbd", "mark", "small", "span", "strong"))


def inline_backgrounds(html: str) -> List[str]:
    """The text of every inline element of ``html`` that paints a background.

    An inline background is painted with its own line box, after the lines above it: where it
    reaches into the line above (padding, a line-height smaller than the font's box) it hides
    that line's underscores — ``/dev/davinci_manager`` read ``/dev/davinci manager``.  A block's
    background is painted before any text, so it can never hide one.
    """
    found = []
    for element in Elements(html).found:
        style = element["style"]
        if element["tag"] not in INLINE or style.get("display", "inline") != "inline":
            continue
        background = style.get("background", style.get("background-color"))
        painted = (
            background not in ("transparent", "none")
            if background is not None
            else element["tag"] in FRONTEND_PAINTED and "pre" not in element["inside"]
        )
        if painted:
            found.append(element["text"])
    return found


def _missing_nodes_report() -> DoctorReport:
    nodes = "/dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc"
    fix = "start the container with --device /dev/davinci_manager --device /dev/devmm_svm"
    return DoctorReport(
        (
            _check("device-nodes", Status.FAIL, fix, (f"missing: {nodes}",)),
            replace(_check("npu-smi", Status.FAIL, fix), summary=f"npu-smi failed: {nodes} are missing"),
        ),
        has_hardware=True,
        duration_s=0.1,
    )


def test_doctor_fix_line_paints_no_inline_background_over_the_line_above():
    html = DoctorResult(_missing_nodes_report(), "npuwatch doctor", {}).html()
    assert inline_backgrounds(html) == []
    hints = Elements(html).by_class("npuwatch-hint")
    assert len(hints) == 2
    for hint in hints:
        assert hint["tag"] == "div"  # the fix line's background is a block's: painted under all text
        assert "/dev/davinci_manager" in hint["text"]


def test_selftest_fix_line_paints_no_inline_background():
    error = StepError(561003, "ACL_ERROR_OP_NOT_FOUND", "no kernels", "install the opp_kernel package")
    steps = (StepResult(Step.KERNEL, StepStatus.FAIL, 0.01, "aclnn_add failed", error=error),)
    report = SelftestReport("quick", "auto", "0", (DeviceRun(0, "acl", steps, 0.1),), 0.1, 60.0)
    assert inline_backgrounds(SelftestResult(report).html()) == []


def _not_reported(html: str) -> str:
    """The visible text of a snapshot report's "Not reported" list."""
    text = Elements(html).found[0]["text"]
    assert "Not reported:" in text
    return text.split("Not reported:", 1)[1]


def test_not_reported_names_every_chip_of_duo_cards_by_npu_and_chip():
    snapshot = capture_snapshot("044")  # two Atlas 300I Duo cards: NPUs 1 and 2, chips 0 and 1
    assert [c.identity.key for c in snapshot.chips] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    listed = _not_reported(SnapshotResult(snapshot).html())
    for chip in snapshot.chips:
        assert f"NPU {chip.identity.npu_id} chip {chip.identity.chip_id}" in listed
    assert listed.count("this chip does not report it") == 1  # one reason, said once


def test_a_failing_npu_smi_is_said_once_in_the_snapshot_report():
    from npuwatch import notebook

    result = notebook.snapshot(demo="container-missing-nodes")
    chips = result.snapshot.chips
    reason = chips[0].notes["temperature_c"].reason
    assert len(chips) == 8 and len(reason) > 100
    html = result.html()
    assert Elements(html).found[0]["text"].count(reason) == 1
    listed = _not_reported(html)
    assert all(f"NPU {c.identity.npu_id} chip {c.identity.chip_id}" in listed for c in chips)
    chip_metrics = ("util", "memory", "power", "temperature")
    values = [
        v["text"]
        for v in Elements(html).by_class("npuwatch-value")
        if v["attrs"]["data-metric"] in chip_metrics
    ]
    assert values == ["n/a"] * 4 * len(chips)  # every metric still says n/a
