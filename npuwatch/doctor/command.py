"""Provides the ``npuwatch doctor`` command: options, machine wiring, report and exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from npuwatch.doctor.checks import dcmi as dcmi_check
from npuwatch.doctor.engine import DoctorReport, run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.registry import all_checks, select
from npuwatch.doctor.result import Check, CheckResult
from npuwatch.errors import UsageError, VariableError
from npuwatch.feeds import FeedOptions, MachineHandle, open_machine


class DoctorUsageError(UsageError):
    """A bad doctor option: the CLI turns it into exit 64."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The doctor's own options (the shared data-source options come from the CLI)."""
    parser.add_argument("--json", action="store_true", help="print npuwatch/doctor/v1 JSON")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--only", type=_ids, default=(), metavar="ID,…", help="run only these checks")
    parser.add_argument("--skip", type=_ids, default=(), metavar="ID,…", help="do not run these checks")
    parser.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="judge this Python interpreter's packages (default: the active venv or conda env, else "
        "npuwatch's own; under --root a path on that machine)",
    )


def _ids(text: str) -> Tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def run(args: argparse.Namespace) -> int:
    """Run the doctor as the options say; returns 0 all pass, 1 warnings, 2 failures."""
    if getattr(args, "list", False):
        from npuwatch.widgets.doctor_text import render_check_list

        sys.stdout.write(render_check_list(all_checks()))
        return 0
    if getattr(args, "replay", None) is not None:
        raise DoctorUsageError("doctor examines a machine: use --root DIR or --demo, not --replay")
    options = FeedOptions.from_args(args)
    chosen = choose_checks(getattr(args, "only", ()), getattr(args, "skip", ()))
    verbose = bool(getattr(args, "verbose", False))
    as_json = bool(getattr(args, "json", False))
    progress = _Progress(len(chosen)) if sys.stderr.isatty() and not as_json else None
    with open_machine(options) as handle:
        report, about = diagnose(
            handle,
            options,
            chosen,
            verbose=verbose,
            python=getattr(args, "python", None),
            on_result=progress.step if progress else None,
        )
    if progress:
        progress.clear()
    if as_json:
        from npuwatch.doctor.report_json import to_dict

        print(json.dumps(to_dict(report, about), indent=2))
    else:
        sys.stdout.write(_render(report, about, verbose))
    return report.exit_code


def choose_checks(only: Sequence[str], skip: Sequence[str]) -> Tuple[Check, ...]:
    """The checks ``--only``/``--skip`` leave, in order; ``DoctorUsageError`` for an unknown ID."""
    try:
        return select(all_checks(), tuple(only), tuple(skip))
    except ValueError as exc:
        raise DoctorUsageError(str(exc)) from None


def diagnose(
    handle: MachineHandle,
    options: FeedOptions,
    checks: Sequence[Check],
    *,
    verbose: bool = False,
    python: Optional[str] = None,
    on_result: Optional[Callable[[CheckResult], None]] = None,
) -> Tuple[DoctorReport, Dict[str, Any]]:
    """Run ``checks`` on the opened machine; the report and what was examined (for its title and JSON)."""
    machine = Machine(
        handle.sysroot,
        handle.npu_smi_path,
        options.timeout(),
        verbose=verbose,
        python=python,
        dcmi_library=handle.dcmi_library,
        dcmi_kind=handle.dcmi_kind,
        chip_backend=_backend(options),
        npu_smi_withheld=handle.npu_smi_withheld,
    )
    about: Dict[str, Any] = {
        "demo": handle.scenario,
        "root": str(Path(handle.sysroot.root)),
        "npu_smi": None if handle.npu_smi_path is None else str(handle.npu_smi_path),
    }
    if any(check.id == dcmi_check.CHECK.id for check in checks):
        dcmi_check.prefetch(machine)  # a hung library waits beside npu-smi's checks, not after them
    try:
        return run_doctor(machine, checks, on_result=on_result), about
    finally:
        machine.close_dcmi()  # no DCMI worker outlives the report (a notebook's kernel lives on)


def _backend(options: FeedOptions) -> str:
    """The chip backend chosen (``--backend``, ``NPUWATCH_BACKEND``); a bad variable is ``auto`` here:
    the doctor diagnoses, ``check`` and the dashboard report the variable."""
    try:
        return options.chip_backend()
    except VariableError:
        return "auto"


def doctor_title(about: Dict[str, Any]) -> str:
    """``npuwatch doctor: this machine`` (or the demo, or the --root tree) for a report's heading."""
    if about["demo"]:
        where = f"simulated machine `{about['demo']}`"
    elif about["root"] != "/":
        where = f"the machine under {about['root']}"
    else:
        where = "this machine"
    return f"npuwatch doctor: {where}"


def _render(report: DoctorReport, about: Dict[str, Any], verbose: bool) -> str:
    from npuwatch.widgets.doctor_text import render_doctor

    title = doctor_title(about)
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    return render_doctor(report, title=title, verbose=verbose, colour=colour, unicode=encoding == "utf8")


class _Progress:
    """A transient ``[ 7/19] npu-smi`` line on a terminal's stderr while checks run."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def step(self, result: CheckResult) -> None:
        self.done += 1
        sys.stderr.write(f"\r\x1b[2K[{self.done:>2}/{self.total}] {result.id}")
        sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
