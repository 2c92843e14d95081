"""Provides run_live(): a plain, refreshing text view of the machine (like `watch npu-smi info`)."""

from __future__ import annotations

import sys
import time

from npuwatch.feeds import FeedOptions, demo_fallback, open_feed
from npuwatch.widgets.text import render_snapshot

_CLEAR = "\x1b[H\x1b[2J"


def run_live(options: FeedOptions) -> int:
    """Refresh the snapshot text every interval until Ctrl-C; falls back to the demo without NPUs."""
    options, banner = demo_fallback(options)
    header = f"{banner}\n\n" if banner else ""
    with open_feed(options) as sampler:
        try:
            while True:
                started = time.monotonic()
                text = render_snapshot(sampler.sample())
                sys.stdout.write((_CLEAR if sys.stdout.isatty() else "") + header + text)
                sys.stdout.flush()
                time.sleep(max(0.0, sampler.interval_s - (time.monotonic() - started)))
        except KeyboardInterrupt:
            return 0
