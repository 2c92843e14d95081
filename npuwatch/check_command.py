"""Provides the ``npuwatch check`` sub-command: one line, exit 0 healthy or 1 unhealthy, never 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Mapping, Optional, TextIO, Union

from npuwatch.health import CRITICAL_OVER_C, HealthVerdict, Problem, Reason, check_health
from npuwatch.option_values import env_seconds, machine_root
from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S, NpuSmi, find_npu_smi
from npuwatch.probes.sysroot import Sysroot
from npuwatch.text_safety import inert

if TYPE_CHECKING:
    from npuwatch.probes.simulator.machine import Simulation

_MAX_TEMP_HELP = (
    "unhealthy when a chip is hotter than C °C (default per chip: 95 °C for the 910 family — "
    "910A/910B/A3/950 — and 90 °C for the 310 family, {over:g} °C above the dashboard's "
    "throttling warning, where it turns critical)"
)


class CheckUsageError(ValueError):
    """Options that contradict each other (``--demo`` with ``--root``): a usage error, exit 64."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``check``'s own options (the shared data-source options come from the main parser)."""
    parser.add_argument("--json", action="store_true", help="print npuwatch/check/v1 JSON, not the line")
    parser.add_argument(
        "--max-temp",
        dest="max_temp",
        type=_celsius,
        metavar="C",
        help=_MAX_TEMP_HELP.format(over=CRITICAL_OVER_C),
    )
    parser.add_argument(
        "--selftest",
        action="store_true",
        help="also run a quick runtime self-test on every device the runtime sees (seconds, not "
        "milliseconds: give the probe a longer timeout; ASCEND_RT_VISIBLE_DEVICES narrows it, "
        "--devices does not); skipped counts as unhealthy",
    )


def run(args: argparse.Namespace, environ: Optional[Mapping[str, str]] = None) -> int:
    """Run the check with the parsed ``args``; print the verdict; return 0 or 1.

    Every problem of the machine or of npuwatch's environment variables is a verdict (exit 1);
    only contradicting options raise ``CheckUsageError`` (the CLI's exit 64).
    """
    env = os.environ if environ is None else environ
    as_json = bool(getattr(args, "json", False))
    try:
        verdict = evaluate(args, env)
    except CheckUsageError:
        raise  # a bad command line: the CLI prints it and exits 64 (DESIGN §2.1)
    except Exception as exc:
        if getattr(args, "verbose", False):
            raise
        from npuwatch.crash import write_report

        kept = write_report(exc, "npuwatch check")
        verdict = _config_verdict(
            f"internal error in npuwatch check: {exc!r}",
            f"traceback in {kept}; please report it" if kept else "run with --verbose for the traceback",
        )
    _print(verdict, as_json)
    return verdict.exit_code


def evaluate(args: argparse.Namespace, environ: Mapping[str, str]) -> HealthVerdict:
    """The verdict for ``args`` (DESIGN §2.1 options, unset ones from ``NPUWATCH_*``)."""
    timeout_s: Optional[float] = getattr(args, "timeout", None)
    if timeout_s is None:
        try:
            timeout_s = env_seconds(environ, "NPUWATCH_TIMEOUT", DEFAULT_TIMEOUT_S)
        except ValueError as exc:
            return _config_verdict(str(exc), "unset it or give seconds, e.g. NPUWATCH_TIMEOUT=5")
    demo: Optional[str] = getattr(args, "demo", None)
    replay: Optional[str] = getattr(args, "replay", None)
    clash = _clash(args, demo, replay)
    if clash is not None:
        raise CheckUsageError(clash)
    if replay is not None:
        try:
            text = Path(replay).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return _config_verdict(f"--replay {replay}: {exc.strerror or exc}", "give a saved npu-smi text")
        skip = "--replay judges a saved npu-smi text: there is no runtime to self-test"
        return _judge(
            args, None, None, capture=text, source=f"replay:{Path(replay).name}", selftest_skip=skip
        )
    if demo is not None:
        sim = _start_demo(demo)
        if isinstance(sim, HealthVerdict):
            return sim
        try:
            sysroot = Sysroot(sim.root, environ=sim.environ)
            npu_smi = NpuSmi(sim.npu_smi, timeout_s=timeout_s)
            skip = f"--demo {demo} simulates npu-smi and sysfs, not the Ascend runtime: nothing to self-test"
            return _judge(args, sysroot, npu_smi, source=f"demo:{sim.scenario.name}", selftest_skip=skip)
        finally:
            sim.close()
    try:
        root = machine_root(getattr(args, "root", None), environ)
    except ValueError as exc:
        if getattr(args, "root", None):
            raise CheckUsageError(str(exc)) from None  # a bad option: exit 64, like every command
        return _config_verdict(str(exc), "unset NPUWATCH_ROOT or point it at a machine root folder")
    sysroot = Sysroot(root, environ=environ)
    path = find_npu_smi(sysroot, getattr(args, "npu_smi", None) or environ.get("NPUWATCH_NPU_SMI"))
    return _judge(args, sysroot, NpuSmi(path, timeout_s=timeout_s))


def _judge(
    args: argparse.Namespace,
    sysroot: Optional[Sysroot],
    npu_smi: Optional[NpuSmi],
    *,
    capture: Optional[str] = None,
    source: str = "npu-smi",
    selftest_skip: Optional[str] = None,
) -> HealthVerdict:
    devices: Optional[Collection[int]] = getattr(args, "devices", None)
    return check_health(
        sysroot,
        npu_smi,
        devices=None if devices is None else frozenset(devices),
        max_temp_c=getattr(args, "max_temp", None),
        selftest=bool(getattr(args, "selftest", False)),
        selftest_skip=selftest_skip,
        capture=capture,
        source=source,
    )


def _clash(args: argparse.Namespace, demo: Optional[str], replay: Optional[str]) -> Optional[str]:
    if demo is not None and replay is not None:
        return "--demo and --replay cannot be combined"
    for other in ("root", "npu_smi"):
        if demo is not None and getattr(args, other, None) is not None:
            return f"--demo brings its own machine: it cannot be combined with --{other.replace('_', '-')}"
    return None


def _start_demo(scenario: str) -> Union[Simulation, HealthVerdict]:
    from npuwatch.probes.simulator import Simulation

    try:
        return Simulation.start(scenario)
    except ValueError as exc:
        return _config_verdict(str(exc), "`npuwatch check --demo list` lists the scenarios")


def _config_verdict(message: str, hint: str) -> HealthVerdict:
    return HealthVerdict(problems=(Problem(Reason.CONFIG, message, hint),), source="none")


def _print(verdict: HealthVerdict, as_json: bool) -> None:
    if as_json:
        _write(sys.stdout, json.dumps(verdict.to_dict()))
        return
    _write(sys.stdout, inert(verdict.line))  # names and messages from npu-smi: shown, never obeyed
    hint = verdict.hint
    if hint:
        _write(sys.stderr, f"npuwatch: {inert(hint)}")


def _write(stream: TextIO, line: str) -> None:
    """Print ``line``; a stream that cannot encode ``°`` (a Latin-1 or ASCII locale) gets ``?``."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    safe = line.encode(encoding, errors="replace").decode(encoding, errors="replace")
    stream.write(safe + "\n")
    stream.flush()


def _celsius(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected degrees Celsius, got {text!r}") from None
    if not -50.0 < value < 200.0:
        raise argparse.ArgumentTypeError(f"expected degrees Celsius between -50 and 200, got {text!r}")
    return value
