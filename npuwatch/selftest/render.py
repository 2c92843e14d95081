"""Provides render_report(): a SelftestReport as text, a block per device, failures explained with a fix."""

from __future__ import annotations

import textwrap
from typing import Dict, List, Optional

from npuwatch.probes.runtime.protocol import StepStatus
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult
from npuwatch.text_safety import inert

_MARKS_UNICODE = {
    StepStatus.PASS: "✔",
    StepStatus.WARN: "▲",
    StepStatus.FAIL: "✘",
    StepStatus.SKIP: "–",
    StepStatus.ERROR: "!",
    StepStatus.NOT_RUN: "·",
}
_MARKS_ASCII = {
    StepStatus.PASS: "ok",
    StepStatus.WARN: "WARN",
    StepStatus.FAIL: "FAIL",
    StepStatus.SKIP: "skip",
    StepStatus.ERROR: "ERR",
    StepStatus.NOT_RUN: "-",
}
_COLOURS = {StepStatus.PASS: "32", StepStatus.WARN: "33", StepStatus.FAIL: "31", StepStatus.ERROR: "35"}
_WIDTH = 100
_INDENT = "      "


def render_report(
    report: SelftestReport, *, verbose: bool = False, colour: bool = False, unicode: bool = True
) -> str:
    """The report as lines of text ending in the one-line verdict.

    What the runtime and the child said (messages, stderr, facts) is shown inert: a control
    character in it is printed escaped, never obeyed.
    """
    marks = _MARKS_UNICODE if unicode else _MARKS_ASCII
    lines = [_title(report, unicode), ""]
    for run in report.runs:
        lines += _device_lines(run, marks, verbose, colour)
        lines.append("")
    lines += [f"note: {inert(note)}" for note in report.notes]
    lines.append(verdict_line(report))
    return "\n".join(lines) + "\n"


def verdict_line(report: SelftestReport) -> str:
    """``2 devices: 2 passed in 1.1 s: exit 0``."""
    return inert(f"{report.summary} in {report.duration_s:.1f} s: exit {report.exit_code}")


def _title(report: SelftestReport, unicode: bool) -> str:
    arrow = "→" if unicode else "->"
    used = sorted({run.backend for run in report.runs if run.backend})
    backend = report.backend_requested + (
        f" {arrow} {', '.join(used)}" if report.backend_requested == "auto" and used else ""
    )
    facts: Dict[str, object] = {}
    for run in report.runs:
        facts.update({k: v for k, v in run.facts.items() if v is not None})
    extra = [f"SoC {facts['soc_name']}"] if facts.get("soc_name") else []
    if facts.get("torch_npu_version"):
        extra.append(f"torch_npu {facts['torch_npu_version']}")
    head = f"npuwatch selftest: level {report.level}, backend {backend}"
    head += f", timeout {report.timeout_s:g} s per device"
    return head + (f" ({inert(', '.join(extra))})" if extra else "")


def _device_lines(run: DeviceRun, marks: Dict[StepStatus, str], verbose: bool, colour: bool) -> List[str]:
    name = "no device" if run.device is None else f"device {run.device}"
    status = run.status
    verdict = _paint(f"{marks[status]} {status.value}", _COLOURS.get(status), colour)
    lines = [f"{_paint(name, '1', colour)}  {verdict}  {_seconds(run.duration_s)}"]
    title_width = max((len(r.step.title) for r in run.steps), default=10)
    not_run = [r for r in run.steps if r.status is StepStatus.NOT_RUN]
    for result in run.steps:
        if result.status is StepStatus.NOT_RUN and not verbose:
            continue
        lines += _step_lines(result, marks, title_width, verbose, colour)
    if not_run and not verbose:
        lines.append(
            f"  {marks[StepStatus.NOT_RUN]} {len(not_run)} more step(s) not run: "
            + inert(not_run[0].detail.replace("not run: ", ""))
        )
    if run.problem:
        lines += _wrapped(inert(run.problem), "  ")
    if run.stderr_tail and (verbose or run.problem or run.timed_out):
        lines.append("  the child's last stderr lines:")
        lines += [f"{_INDENT}{inert(line)}" for line in run.stderr_tail.splitlines()[-8:]]
    return lines


def _step_lines(
    result: StepResult, marks: Dict[StepStatus, str], width: int, verbose: bool, colour: bool
) -> List[str]:
    mark = _paint(f"{marks[result.status]:>2}", _COLOURS.get(result.status), colour)
    took = _ms(result.duration_s)
    detail = inert(result.detail)
    lines = _wrapped(f"{mark} {result.step.title:<{width}} {took:>9}  {detail}", "  ", hang=width + 16)
    for warning in result.warnings:
        if warning not in result.detail:
            lines += _wrapped(f"warning: {inert(warning)}", _INDENT)
    if result.error is not None and result.status is not StepStatus.PASS:
        lines += _error_lines(result.error)
    if verbose:
        lines += _metric_lines(result)
    return lines


def _error_lines(error: StepError) -> List[str]:
    lines: List[str] = []
    if error.code is not None:
        lines += _wrapped(inert(f"{error.code} {error.name}: {error.meaning}"), _INDENT)
    elif error.meaning:
        lines += _wrapped(inert(error.meaning), _INDENT)
    if error.message:
        said = [line.strip() for line in error.message.splitlines() if line.strip()]
        lines += _wrapped(inert("the runtime said: " + " / ".join(said[:4])), _INDENT)
    for code, meaning in error.log_codes:
        if meaning:
            lines += _wrapped(inert(f"{code}: {meaning}"), _INDENT)
    if error.fix:
        lines += _wrapped(inert(f"fix: {error.fix}"), _INDENT)
    return lines


def _metric_lines(result: StepResult) -> List[str]:
    sizes = result.metrics.get("sizes")
    lines = []
    if isinstance(sizes, list):
        for entry in sizes:
            size_mib = int(entry.get("size_bytes") or 0) >> 20
            lines.append(
                f"{_INDENT}{size_mib:>5} MiB  best {entry.get('best_gb_s')} GB/s"
                f"  median {entry.get('median_gb_s')} GB/s"
            )
    return lines


def _wrapped(text: str, indent: str, hang: int = 4) -> List[str]:
    return textwrap.wrap(
        text,
        width=_WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + " " * hang,
        break_on_hyphens=False,
    ) or [indent]


def _ms(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    ms = seconds * 1e3
    if ms < 1:
        return f"{ms:.2f} ms"
    return f"{ms:.0f} ms" if ms < 1000 else f"{seconds:.2f} s"


def _seconds(seconds: float) -> str:
    return f"{seconds:.2f} s"


def _paint(text: str, code: Optional[str], colour: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text
