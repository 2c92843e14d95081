"""Provides sampler_options() and open_feed(): the shared DESIGN §2.1 options → a SnapshotFeed."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, Dict

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed


class SamplerUsageError(ValueError):
    """Options that contradict each other or name nothing: the CLI's exit 64."""


def check_scenario(name: str) -> None:
    """Accept a known ``--demo`` scenario; ``list``/``help`` prints them and exits 0."""
    from npuwatch.probes.simulator import list_scenarios

    names = [scenario for scenario, _ in list_scenarios()]
    if name in names:
        return
    listing = "\n".join(f"  {scenario:<24} {about}" for scenario, about in list_scenarios())
    if name in ("list", "help"):
        print(f"Scenarios for --demo:\n{listing}")
        raise SystemExit(0)
    raise SamplerUsageError(f"unknown demo scenario {name!r}; choose one of:\n{listing}")


def sampler_options(args: argparse.Namespace) -> Dict[str, Any]:
    """``build_sampler`` keyword arguments from parsed shared options; checks their combinations."""
    demo = getattr(args, "demo", None)
    if demo is not None:
        check_scenario(demo)
    replay = getattr(args, "replay", None)
    if demo is not None and replay is not None:
        raise SamplerUsageError("--demo and --replay cannot be combined")
    for other in ("root", "npu_smi"):
        if demo is not None and getattr(args, other, None) is not None:
            raise SamplerUsageError(
                f"--demo brings its own machine: it cannot be combined with --{other.replace('_', '-')}"
            )
    if replay is not None and not os.path.isfile(replay):
        why = "a directory, not a file" if os.path.isdir(replay) else "no such file"
        raise SamplerUsageError(f"--replay {replay}: {why}")
    options: Dict[str, Any] = {
        "demo": demo,
        "replay": replay,
        "root": getattr(args, "root", None),
        "npu_smi": getattr(args, "npu_smi", None),
        "timeout_s": getattr(args, "timeout", None),
        "interval_s": getattr(args, "interval", None),
        "devices": getattr(args, "devices", None),
    }
    speed = getattr(args, "speed", None)
    if speed is not None:
        options["speed"] = speed
    return options


def open_feed(args: argparse.Namespace) -> SnapshotFeed:
    """The SnapshotFeed the parsed options name (live, ``--demo`` or ``--replay``)."""
    from npuwatch.wiring import build_sampler

    try:
        return build_sampler(**sampler_options(args))
    except SamplerUsageError:
        raise
    except ValueError as exc:
        raise SamplerUsageError(str(exc)) from exc
