"""Provides the ``npuwatch doctor`` command: options, machine wiring, report and exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from npuwatch.doctor.engine import DoctorReport, run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.registry import all_checks, select
from npuwatch.doctor.result import CheckResult
from npuwatch.option_values import env_seconds, machine_root
from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S, find_npu_smi
from npuwatch.probes.sysroot import Sysroot


class DoctorUsageError(ValueError):
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
    checks = all_checks()
    if getattr(args, "list", False):
        from npuwatch.widgets.doctor_text import render_check_list

        sys.stdout.write(render_check_list(checks))
        return 0
    if getattr(args, "replay", None) is not None:
        raise DoctorUsageError("doctor examines a machine: use --root DIR or --demo, not --replay")
    try:
        chosen = select(checks, getattr(args, "only", ()), getattr(args, "skip", ()))
    except ValueError as exc:
        raise DoctorUsageError(str(exc)) from None
    verbose = bool(getattr(args, "verbose", False))
    with ExitStack() as stack:
        machine, about = open_machine(args, stack, verbose)
        progress = (
            _Progress(len(chosen)) if sys.stderr.isatty() and not getattr(args, "json", False) else None
        )
        report = run_doctor(machine, chosen, on_result=progress.step if progress else None)
        if progress:
            progress.clear()
    if getattr(args, "json", False):
        from npuwatch.doctor.report_json import to_dict

        print(json.dumps(to_dict(report, about), indent=2))
    else:
        sys.stdout.write(_render(report, about, verbose))
    return report.exit_code


def open_machine(args: argparse.Namespace, stack: ExitStack, verbose: bool) -> Tuple[Machine, Dict[str, Any]]:
    """The machine under diagnosis: a demo scenario's tree, ``--root``, or this machine."""
    timeout_s = getattr(args, "timeout", None) or _env_timeout()
    demo = getattr(args, "demo", None)
    if demo is not None:
        for other in ("root", "npu_smi"):
            if getattr(args, other, None) is not None:
                raise DoctorUsageError(
                    f"--demo brings its own machine: it cannot be combined with --{other.replace('_', '-')}"
                )
        from npuwatch.probes.simulator import Simulation

        sim = stack.enter_context(Simulation.start(demo))
        sysroot = Sysroot(sim.root, environ=dict(sim.environ))
        about: Dict[str, Any] = {
            "demo": sim.scenario.name,
            "root": str(sim.root),
            "npu_smi": str(sim.npu_smi),
        }
        python = getattr(args, "python", None)
        return Machine(sysroot, sim.npu_smi, timeout_s, verbose=verbose, python=python), about
    try:
        root = machine_root(getattr(args, "root", None), os.environ)
    except ValueError as exc:
        raise DoctorUsageError(str(exc)) from None
    sysroot = Sysroot(root)
    npu_smi = find_npu_smi(sysroot, getattr(args, "npu_smi", None) or os.environ.get("NPUWATCH_NPU_SMI"))
    about = {
        "demo": None,
        "root": str(Path(root)),
        "npu_smi": None if npu_smi is None else str(npu_smi),
    }
    return Machine(sysroot, npu_smi, timeout_s, verbose=verbose, python=getattr(args, "python", None)), about


def _env_timeout() -> float:
    try:
        return env_seconds(os.environ, "NPUWATCH_TIMEOUT", DEFAULT_TIMEOUT_S)
    except ValueError as exc:
        raise DoctorUsageError(str(exc)) from None


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


def machine_for(root: Optional[str] = None) -> Machine:
    """A Machine for ``root`` (default ``/``) with npu-smi found as DESIGN §3 says (API use)."""
    sysroot = Sysroot(root or "/")
    return Machine(sysroot, find_npu_smi(sysroot), DEFAULT_TIMEOUT_S)
