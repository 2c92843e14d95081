"""Provides the ``npuwatch selftest`` command: options, a progress line, text or JSON, the exit code."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional, Union

from npuwatch.feeds import FeedOptions, open_machine
from npuwatch.option_values import parse_npu_ids, seconds
from npuwatch.selftest.orchestrate import DEFAULT_TIMEOUT_S, SelftestUsageError, run_selftest
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The self-test's own options (the shared data-source options come from the CLI)."""
    parser.add_argument(
        "--device",
        dest="selftest_device",
        type=_device,
        default="all",
        metavar="N|all",
        help="logical device ID as the runtime numbers it (after ASCEND_RT_VISIBLE_DEVICES), or all",
    )
    parser.add_argument(
        "--level",
        choices=("quick", "full"),
        default="quick",
        help="quick: seconds per chip (default); full: 1–256 MiB copy sweep and a larger kernel",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "acl", "torch"),
        default="auto",
        help="pyACL, torch_npu, or auto: pyACL when it imports (default)",
    )
    parser.add_argument("--json", action="store_true", help="print npuwatch/selftest/v1 JSON")
    parser.add_argument(
        "--timeout-per-device",
        dest="timeout_per_device",
        type=seconds,
        metavar="S",
        help=f"kill a device's self-test after S s (default {DEFAULT_TIMEOUT_S[_level('quick')]:g} quick, "
        f"{DEFAULT_TIMEOUT_S[_level('full')]:g} full)",
    )


def _level(name: str) -> Any:
    from npuwatch.probes.runtime.protocol import Level

    return Level(name)


def _device(text: str) -> Union[str, List[int]]:
    if text.strip().lower() == "all":
        return "all"
    try:
        return parse_npu_ids(text)  # logical IDs, written as NPU IDs are
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a device ID like 0 (or 0,1) or all, got {text!r}"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Run the self-test as the options say; returns 0 pass, 1 skipped or warnings, 2 failures."""
    if getattr(args, "devices", None) is not None:
        raise SelftestUsageError(
            "selftest takes --device N|all: logical IDs as the runtime numbers them, not npu-smi's NPU IDs"
        )
    if getattr(args, "replay", None) is not None:
        raise SelftestUsageError("selftest runs the runtime on this machine: it cannot use --replay")
    as_json = bool(getattr(args, "json", False))
    options = FeedOptions.from_args(args)
    level = getattr(args, "level", "quick")
    backend = getattr(args, "backend", "auto")
    timeout_s = getattr(args, "timeout_per_device", None) or options.timeout_s
    if options.demo is not None:
        report = demo_report(options.demo, level, backend, timeout_s)
    else:
        progress = _Progress() if sys.stderr.isatty() and not as_json else None
        try:
            with open_machine(options) as machine:
                report = run_selftest(
                    devices=getattr(args, "selftest_device", "all"),
                    level=level,
                    backend=backend,
                    timeout_s=timeout_s,
                    sysroot=machine.sysroot,
                    on_progress=progress.event if progress else None,
                )
        finally:
            if progress:
                progress.clear()
    if as_json:
        from npuwatch.selftest.report_json import to_dict

        print(json.dumps(to_dict(report), indent=2))
    else:
        from npuwatch.selftest.render import render_report

        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
        verbose = bool(getattr(args, "verbose", False))
        sys.stdout.write(render_report(report, verbose=verbose, colour=colour, unicode=encoding == "utf8"))
    return report.exit_code


def demo_report(scenario: str, level: str, backend: str, timeout_s: Optional[float]) -> SelftestReport:
    """A demo machine simulates npu-smi and sysfs, not the runtime: say so instead of testing this host."""
    from npuwatch.probes.runtime.protocol import Step, StepStatus

    detail = (
        f"--demo {scenario} simulates npu-smi and sysfs, not the Ascend runtime: nothing to self-test "
        "(run `npuwatch selftest` without --demo on an Ascend host)"
    )
    run = DeviceRun(None, None, (StepResult(Step.IMPORT, StepStatus.SKIP, None, detail),), 0.0)
    return SelftestReport(
        level=level,
        backend_requested=backend,
        devices_requested="all",
        runs=(run,),
        duration_s=0.0,
        timeout_s=timeout_s or DEFAULT_TIMEOUT_S[_level(level)],
    )


class _Progress:
    """A transient ``device 0: copy H2D … (acl.rt.synchronize_event)`` line on a terminal's stderr."""

    def __init__(self) -> None:
        self.where: Dict[int, str] = {}

    def event(self, device: int, event: Dict[str, Any]) -> None:
        from npuwatch.probes.runtime.protocol import Step

        kind = event.get("event")
        if kind == "start":
            try:
                self.where[device] = Step(event.get("step")).title
            except ValueError:
                return
        elif kind == "call" and device in self.where:
            self.where[device] = self.where[device].split(" (", 1)[0] + f" ({event.get('name')})"
        else:
            return
        sys.stderr.write(f"\r\x1b[2Kselftest: device {device}: {self.where[device]} …")
        sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()
