"""Provides the static notebook reports: snapshot table, doctor and self-test, as HTML plus plain text.

Each result object keeps the core record (``.snapshot`` / ``.report``) and renders through
``_repr_mimebundle_`` with text/html and text/plain, so it needs no widgets and reads the same in
any front-end or an exported notebook.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence

from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.notebook.html_parts import (
    chip_classes,
    not_reported_html,
    value_html,
    workload_hover,
    workload_tag_html,
)
from npuwatch.widgets.view_model import (
    cell_columns,
    chip_rows,
    host_row,
    process_row,
    reason_groups,
    sample_time,
)

if TYPE_CHECKING:
    from npuwatch.doctor.engine import DoctorReport
    from npuwatch.model import Snapshot
    from npuwatch.selftest.report import SelftestReport

_STATUS_COLOURS = {
    "pass": "#2e7d32",
    "warn": "#ef6c00",
    "fail": "#c62828",
    "error": "#8e24aa",
    "skip": "#757575",
    "not_run": "#9e9e9e",
}
_STATUS_MARKS = {"pass": "✔", "warn": "▲", "fail": "✘", "error": "!", "skip": "–", "not_run": "·"}
_TD = "padding:2px 10px 2px 0;text-align:left;vertical-align:top"
#: Front-ends paint inline ``<code>`` with a background and vertical padding (JupyterLab:
#: ``:not(pre) > code {padding: 1px 5px}``).  Painted with its own line, after the line above,
#: that background hid the underscores of the line above (``/dev/davinci manager``): our code
#: paints none, and the fix line's background belongs to its block, which is painted under all text.
_CODE = "background:transparent;padding:0;font-size:inherit"
_HINT = (
    "margin-top:3px;padding:2px 6px;line-height:1.5;border-radius:3px;"
    "background:var(--jp-layout-color2, rgba(128,128,128,0.14))"
)


def status_html(status: str) -> str:
    """A doctor or self-test status as a coloured mark and word."""
    colour = _STATUS_COLOURS.get(status, "inherit")
    mark = _STATUS_MARKS.get(status, "?")
    return (
        f'<span class="npuwatch-status-{escape(status)}" style="color:{colour};font-weight:600;'
        f'white-space:nowrap">{mark} {escape(status)}</span>'
    )


def code_html(text: str, nowrap: bool = False) -> str:
    """``text`` in a ``<code>`` that paints no background of its own (see ``_CODE``)."""
    style = _CODE + (";white-space:nowrap" if nowrap else "")
    return f'<code style="{style}">{escape(text)}</code>'


def hint_html(fix: str) -> str:
    """The ``→ fix:`` line under a failed check or step: a block with its own background."""
    return f'<div class="npuwatch-hint" style="{_HINT}">→ fix: {code_html(fix)}</div>'


def _row(cells: Sequence[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f'<{tag} style="{_TD}">{cell}</{tag}>' for cell in cells) + "</tr>"


def snapshot_html(snapshot: Snapshot, problem: Optional[str] = None) -> str:
    """One sample as a static table: a row per chip, then host, processes, n/a reasons, warnings.

    ``problem`` says why the sample holds no NPU data (``availability.no_data_reason``).
    """
    chips = chip_rows(snapshot)
    with_workload = any(row.workload is not None for row in chips)  # once a feed has judged them
    rows = []
    for row in chips:
        cells = [
            escape(str(row.identity.npu_id)),
            escape(str(row.identity.chip_id)),
            escape(row.identity.name or "n/a"),
            escape(row.identity.bus_id or "n/a"),
            live_html.badge_html(row.health_class, row.badge),
        ]
        if with_workload:
            tag, shown = row.workload, row.explanation
            hover = "" if shown is None else workload_hover(shown)
            cells.append("" if tag is None else workload_tag_html(tag, hover))
        cells += [f"{value_html(cell)} <small>{escape(cell.label)}</small>" for cell in row.metrics]
        rows.append(_row(cells).replace("<tr>", f'<tr class="{chip_classes(row)}">'))
    workload = ["Workload"] if with_workload else []
    header = _row(["NPU", "Chip", "Name", "Bus-Id", "Health", *workload, *cell_columns()], "th")
    table = (
        f'<table class="npuwatch-snapshot" style="border-collapse:collapse;font-size:12px">{header}'
        f"{''.join(rows)}</table>"
        if rows
        else "<p>No NPU chips could be read.</p>"
    )
    if problem:
        table += f'<p class="npuwatch-problem" style="color:#c62828">{escape(problem)}</p>'
    host = live_html.host_html(None if snapshot.host is None else host_row(snapshot.host))
    now_s = snapshot.taken_at.timestamp()
    processes = live_html.processes_html(process_row(p, now_s) for p in snapshot.processes)
    title = (
        f"<b>npuwatch snapshot</b> · {escape(snapshot.source)} · "
        f'<span class="npuwatch-updated">{escape(sample_time(snapshot))}</span>'
    )
    return (
        f'<div class="npuwatch-report npuwatch-snapshot-report" style="font-family:{live_html.FONT}">'
        f"<div>{title}</div>{table}{host}{processes}{not_reported_html(reason_groups(chips))}"
        f"{live_html.notes_html(snapshot.warnings)}</div>"
    )


@dataclass(frozen=True)
class SnapshotResult:
    """``%npuwatch snapshot``: the Snapshot, shown as an HTML table (and the CLI's text)."""

    snapshot: Snapshot
    problem: Optional[str] = None  # why no NPU could be read, with the next step

    def text(self) -> str:
        """The plain-text report, as ``npuwatch snapshot`` prints it."""
        from npuwatch.widgets.text import render_snapshot

        text = render_snapshot(self.snapshot)
        return text + (f"\nnpuwatch: {self.problem}\n" if self.problem else "")

    def html(self) -> str:
        """The HTML table."""
        return snapshot_html(self.snapshot, self.problem)

    def _repr_mimebundle_(self, **kwargs: Any) -> Dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


def doctor_html(report: DoctorReport, title: str) -> str:
    """The doctor's results grouped hardware → container, each with its status, summary and fix."""
    from npuwatch.widgets.doctor_text import summary_line

    sections: Dict[str, List[str]] = {}
    for result in report.results:
        hint = ""
        if result.hint:
            hint = hint_html(result.hint)
        details = ""
        if result.details:
            shown = "".join(f"<li>{code_html(d)}</li>" for d in result.details)
            opened = " open" if result.status.value in ("fail", "error") else ""
            details = f"<details{opened}><summary>details</summary><ul>{shown}</ul></details>"
        cells = [status_html(result.status.value), code_html(result.id, nowrap=True)]
        cells.append(f"{escape(result.summary)}{hint}{details}")
        row = _row(cells).replace("<tr>", f'<tr class="npuwatch-check npuwatch-check-{result.status.value}">')
        sections.setdefault(result.group.value, []).append(row)
    blocks = []
    if not report.has_hardware:
        blocks.append("<p>No Ascend NPU was found on this machine: the checks that need one are skipped.</p>")
    for group, rows in sections.items():
        blocks.append(
            f'<h4 style="margin:6px 0 2px">{escape(group[:1].upper() + group[1:])}</h4>'
            f'<table style="border-collapse:collapse;font-size:12px">{"".join(rows)}</table>'
        )
    verdict = escape(summary_line(report))
    return (
        f'<div class="npuwatch-report npuwatch-doctor" style="font-family:{live_html.FONT}">'
        f"<b>{escape(title)}</b>{''.join(blocks)}"
        f'<p class="npuwatch-verdict"><b>{verdict}</b></p></div>'
    )


@dataclass(frozen=True)
class DoctorResult:
    """``%npuwatch doctor``: the DoctorReport with the machine it examined."""

    report: DoctorReport
    title: str
    about: Mapping[str, Any]

    @property
    def exit_code(self) -> int:
        """0 all pass, 1 warnings, 2 failures (as the CLI exits)."""
        return self.report.exit_code

    def text(self) -> str:
        """The CLI's text report."""
        from npuwatch.widgets.doctor_text import render_doctor

        return render_doctor(self.report, title=self.title)

    def html(self) -> str:
        """The HTML report."""
        return doctor_html(self.report, self.title)

    def _repr_mimebundle_(self, **kwargs: Any) -> Dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


def selftest_html(report: SelftestReport) -> str:
    """Per device: its verdict and each step's status, time and detail; failures with their fix."""
    from npuwatch.selftest.render import verdict_line
    from npuwatch.selftest.report import StepStatus

    blocks = []
    for run in report.runs:
        name = "no device" if run.device is None else f"device {run.device}"
        rows = []
        for step in run.steps:
            if step.status is StepStatus.NOT_RUN:
                continue
            took = "" if step.duration_s is None else f"{step.duration_s * 1e3:.0f} ms"
            detail = escape(step.detail)
            error = step.error
            if error is not None and step.status is not StepStatus.PASS:
                meaning = (
                    f"{error.code} {error.name}: {error.meaning}" if error.code is not None else error.meaning
                )
                if meaning:
                    detail += f"<div>{escape(meaning)}</div>"
                if error.fix:
                    detail += hint_html(error.fix)
            rows.append(_row([status_html(step.status.value), escape(step.step.title), took, detail]))
        problem = f"<p>{escape(run.problem)}</p>" if run.problem else ""
        blocks.append(
            f'<h4 style="margin:6px 0 2px">{escape(name)} {status_html(run.status.value)} '
            f"<small>{run.duration_s:.2f} s</small></h4>"
            f'<table style="border-collapse:collapse;font-size:12px">{"".join(rows)}</table>{problem}'
        )
    notes = "".join(f"<p>note: {escape(n)}</p>" for n in report.notes)
    return (
        f'<div class="npuwatch-report npuwatch-selftest" style="font-family:{live_html.FONT}">'
        f"<b>npuwatch selftest</b> · level {escape(report.level)}{''.join(blocks)}{notes}"
        f'<p class="npuwatch-verdict"><b>{escape(verdict_line(report))}</b></p></div>'
    )


def progress_html(steps: Mapping[int, str]) -> str:
    """The self-test's progress while it runs: the step each device is at."""
    items = "".join(f"<li>device {d}: {escape(step)} …</li>" for d, step in sorted(steps.items()))
    return (
        f'<div class="npuwatch-progress" style="font-family:{live_html.FONT};font-size:12px">'
        f"<b>npuwatch selftest running…</b><ul>{items}</ul></div>"
    )


@dataclass(frozen=True)
class SelftestResult:
    """``%npuwatch selftest``: the SelftestReport."""

    report: SelftestReport

    @property
    def exit_code(self) -> int:
        """0 pass, 1 skipped or warnings, 2 failures (as the CLI exits)."""
        return self.report.exit_code

    def text(self) -> str:
        """The CLI's text report."""
        from npuwatch.selftest.render import render_report

        return render_report(self.report)

    def html(self) -> str:
        """The HTML report."""
        return selftest_html(self.report)

    def _repr_mimebundle_(self, **kwargs: Any) -> Dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}
