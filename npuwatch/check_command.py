"""Provides the ``npuwatch check`` sub-command: one line, exit 0 healthy or 1 unhealthy, never 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Collection, Mapping, Optional, TextIO

from npuwatch.chip_families import critical_limits_text
from npuwatch.chip_source import ChipSource, close_source
from npuwatch.errors import UsageError, VariableError
from npuwatch.feeds import FeedOptions, MachineHandle, one_shot_deadline, open_machine
from npuwatch.health import check_health, check_source
from npuwatch.probes.npu_smi.source import CaptureSource
from npuwatch.probes.sysroot import Sysroot
from npuwatch.text_safety import inert
from npuwatch.verdict import HealthVerdict, Problem, Reason


def max_temp_help() -> str:
    """``--max-temp``'s help: the default limits are the chip-family table's critical ones."""
    return (
        "unhealthy when a chip is at or above C °C (default: the judge's critical limit per chip "
        f"family, {critical_limits_text()}, where the dashboard turns it red)"
    )


class CheckUsageError(UsageError):
    """Options that contradict each other (``--demo`` with ``--root``): a usage error, exit 64."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``check``'s own options (the shared data-source options come from the main parser)."""
    parser.add_argument("--json", action="store_true", help="print npuwatch/check/v1 JSON, not the line")
    parser.add_argument(
        "--max-temp",
        dest="max_temp",
        type=_celsius,
        metavar="C",
        help=max_temp_help(),
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
    only bad or contradicting options raise ``UsageError`` (the CLI's exit 64).
    """
    env = os.environ if environ is None else environ
    as_json = bool(getattr(args, "json", False))
    options = FeedOptions.from_args(args)  # a bad command line: the CLI exits 64 (docs/design.md §2.1)
    try:
        verdict = evaluate(args, options, env)
    except VariableError as exc:  # set by the container, not typed: the machine is unhealthy
        verdict = _config_verdict(str(exc), exc.hint)
    except UsageError:
        raise
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


def evaluate(args: argparse.Namespace, options: FeedOptions, environ: Mapping[str, str]) -> HealthVerdict:
    """The verdict for the machine ``options`` name (unset ones from ``NPUWATCH_*``).

    ``VariableError`` for a variable that cannot be used, ``UsageError`` for a ``--root`` that
    is not a folder.
    """
    started = time.monotonic()
    timeout_s = options.timeout(environ)  # a bad NPUWATCH_TIMEOUT is unhealthy, even for a replay
    replay = options.replay
    if replay is not None:
        try:
            text = Path(replay).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return _config_verdict(f"--replay {replay}: {exc.strerror or exc}", "give a saved npu-smi text")
        skip = "--replay judges a saved npu-smi text: there is no runtime to self-test"
        return _judge(args, None, CaptureSource(Path(replay), text), selftest_skip=skip)
    backend = options.chip_backend(environ)  # a bad NPUWATCH_BACKEND is unhealthy, before any demo starts
    with open_machine(options, environ) as machine:
        no_runtime = None
        if machine.scenario is not None:
            no_runtime = (
                f"--demo {machine.scenario} simulates npu-smi and sysfs, not the Ascend runtime: "
                "nothing to self-test"
            )
        chips = live_source(machine, backend, timeout_s, one_shot_deadline(timeout_s, started))
        try:
            return _judge(args, machine.sysroot, chips, selftest_skip=no_runtime)
        finally:
            close_source(chips)  # no DCMI worker outlives ``check``


def live_source(
    machine: MachineHandle, backend: str, timeout_s: float, deadline: Optional[float] = None
) -> ChipSource:
    """The chips of ``machine`` as ``backend`` reads them (``feeds.chip_source``), with npu-smi read
    the check's way (``health.check_source``: one ``npu-smi info``, no logic-ID mapping, the error
    codes of chips not OK within a short budget) wherever npu-smi reads them.  ``deadline``
    (``time.monotonic()``): no npu-smi call runs past it.  Close it."""
    from npuwatch.feeds import chip_source

    npu_smi = check_source(machine.npu_smi(timeout_s, deadline), machine.label)
    return chip_source(machine, backend, timeout_s, npu_smi=npu_smi, deadline=deadline)


def _judge(
    args: argparse.Namespace,
    sysroot: Optional[Sysroot],
    chips: ChipSource,
    *,
    selftest_skip: Optional[str] = None,
    backend_note: Optional[str] = None,
) -> HealthVerdict:
    devices: Optional[Collection[int]] = getattr(args, "devices", None)
    return check_health(
        sysroot,
        chips,
        devices=None if devices is None else frozenset(devices),
        max_temp_c=getattr(args, "max_temp", None),
        selftest=bool(getattr(args, "selftest", False)),
        selftest_skip=selftest_skip,
        backend_note=backend_note,
    )


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
