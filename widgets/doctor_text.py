"""Provides render_doctor(): doctor results as a readable report grouped hardware → container."""

from __future__ import annotations

import textwrap
from typing import Dict, List, Sequence

from npuwatch.doctor.engine import DoctorReport
from npuwatch.doctor.result import Check, CheckResult, Group, Status
from npuwatch.text_safety import inert

_MARKS_UNICODE = {
    Status.PASS: "✔",
    Status.WARN: "▲",
    Status.FAIL: "✘",
    Status.SKIP: "–",
    Status.ERROR: "!",
}
_MARKS_ASCII = {
    Status.PASS: "ok",
    Status.WARN: "WARN",
    Status.FAIL: "FAIL",
    Status.SKIP: "skip",
    Status.ERROR: "ERR",
}
# SGR colours: green, yellow, red, dim, magenta.
_COLOURS = {Status.PASS: "32", Status.WARN: "33", Status.FAIL: "31", Status.SKIP: "2", Status.ERROR: "35"}

_WIDTH = 100


def render_doctor(
    report: DoctorReport,
    *,
    title: str,
    verbose: bool = False,
    colour: bool = False,
    unicode: bool = True,
) -> str:
    """The whole report: a title, one section per group, a line per check and its hint, a summary.

    What checks found on the machine (summaries, hints, details, a --root path in the title) is
    shown inert: a control character in it is printed escaped, never obeyed.
    """
    lines = [inert(title), ""]
    if not report.has_hardware:
        lines += ["No Ascend NPU was found on this machine: the checks that need one are skipped.", ""]
    by_group: Dict[Group, List[CheckResult]] = {group: [] for group in Group}
    for result in report.results:
        by_group[result.group].append(result)
    id_width = max((len(r.id) for r in report.results), default=10)
    for group, results in by_group.items():
        if not results:
            continue
        lines.append(_bold(group.value.capitalize() if group.value.islower() else group.value, colour))
        for result in results:
            lines += _result_lines(result, id_width, verbose, colour, unicode)
        lines.append("")
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"


def summary_line(report: DoctorReport) -> str:
    """``15 passed, 1 warning, 1 failed, 2 skipped in 1.2 s: exit 2``."""
    counts = report.counts()
    words = [
        (Status.PASS, "passed", "passed"),
        (Status.WARN, "warning", "warnings"),
        (Status.FAIL, "failed", "failed"),
        (Status.ERROR, "could not run", "could not run"),
        (Status.SKIP, "skipped", "skipped"),
    ]
    parts = [
        f"{counts[status]} {one if counts[status] == 1 else many}"
        for status, one, many in words
        if counts[status]
    ]
    verdict = {0: "all good", 1: "works, with warnings", 2: "broken"}[report.exit_code]
    counted = ", ".join(parts) or "no checks run"
    return f"{counted} in {report.duration_s:.1f} s: {verdict} (exit {report.exit_code})"


def _result_lines(
    result: CheckResult, id_width: int, verbose: bool, colour: bool, unicode: bool
) -> List[str]:
    marks = _MARKS_UNICODE if unicode else _MARKS_ASCII
    mark = _paint(f"{marks[result.status]:>4}", _COLOURS[result.status], colour)
    head = f"{mark} {inert(result.id):<{id_width}}  "
    indent = " " * (5 + id_width + 2)
    lines = _wrap(inert(result.summary), head, indent, visible_head=5 + id_width + 2)
    if result.hint:
        arrow = "→ fix: " if unicode else "-> fix: "
        lines += _wrap(inert(result.hint), indent + arrow, indent + " " * len(arrow))
    if verbose or result.status in (Status.FAIL, Status.ERROR):
        shown = result.details if verbose else result.details[:4]
        for detail in shown:
            for number, line in enumerate(detail.rstrip("\n").splitlines() or [""]):
                prefix = "· " if number == 0 else "  "
                lines.append(_paint(indent + prefix + inert(line), "2", colour))
        if len(result.details) > len(shown):
            lines.append(
                _paint(f"{indent}· … {len(result.details) - len(shown)} more (--verbose)", "2", colour)
            )
    return lines


def _wrap(text: str, first: str, rest: str, visible_head: int = -1) -> List[str]:
    head_width = len(first) if visible_head < 0 else visible_head
    width = max(_WIDTH - head_width, 30)
    chunks = textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]
    return [first + chunks[0]] + [rest + chunk for chunk in chunks[1:]]


def _paint(text: str, code: str, colour: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour else text


def _bold(text: str, colour: bool) -> str:
    return _paint(text, "1", colour)


def render_check_list(checks: Sequence[Check]) -> str:
    """``--list``: every check ID, its section and what it establishes, in run order."""
    width = max(len(check.id) for check in checks)
    lines = [f"{check.id:<{width}}  {check.group.value:<10}  {check.title}" for check in checks]
    return "\n".join(lines) + "\n"
