"""Provides run_live(): a plain, refreshing text view of the machine (like `watch npu-smi info`)."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, Tuple

from npuwatch.availability import machine_has_npu
from npuwatch.probes.simulator import DEFAULT_SCENARIO
from npuwatch.probes.sysroot import Sysroot
from npuwatch.widgets.text import render_snapshot
from npuwatch.wiring import build_sampler

_CLEAR = "\x1b[H\x1b[2J"


def demo_fallback(options: Dict[str, Any]) -> Tuple[Dict[str, Any], str]:
    """The options to use, and a banner: the demo when nothing was chosen and there is no NPU."""
    if _nothing_chosen(options) and not machine_has_npu(Sysroot("/")):
        banner = (
            "No Ascend NPU here (no npu-smi, no Ascend PCI device): showing the simulated "
            f"'{DEFAULT_SCENARIO}' machine. `npuwatch --demo list` shows other scenarios."
        )
        return {**options, "demo": DEFAULT_SCENARIO}, banner
    return options, ""


def run_live(options: Dict[str, Any]) -> int:
    """Refresh the snapshot text every interval until Ctrl-C; falls back to the demo without NPUs."""
    options, banner = demo_fallback(options)
    header = f"{banner}\n\n" if banner else ""
    with build_sampler(**options) as sampler:
        try:
            while True:
                started = time.monotonic()
                text = render_snapshot(sampler.sample())
                sys.stdout.write((_CLEAR if sys.stdout.isatty() else "") + header + text)
                sys.stdout.flush()
                time.sleep(max(0.0, sampler.interval_s - (time.monotonic() - started)))
        except KeyboardInterrupt:
            return 0


def _nothing_chosen(options: Dict[str, Any]) -> bool:
    """No source named on the command line or in ``NPUWATCH_ROOT`` / ``NPUWATCH_NPU_SMI``."""
    named = any(options.get(k) is not None for k in ("demo", "replay", "root", "npu_smi"))
    return not named and not os.environ.get("NPUWATCH_ROOT") and not os.environ.get("NPUWATCH_NPU_SMI")
