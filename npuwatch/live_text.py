"""Provides run_live(): a plain, refreshing text view of the machine (like `watch npu-smi info`)."""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING

from npuwatch.feeds import FeedOptions, demo_fallback, open_feed
from npuwatch.poller import Poller
from npuwatch.widgets.text import render_snapshot

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed

_CLEAR = "\x1b[H\x1b[2J"


def run_live(options: FeedOptions) -> int:
    """Refresh the snapshot text every interval until Ctrl-C; falls back to the demo without NPUs."""
    options, banner = demo_fallback(options)
    header = f"{banner}\n\n" if banner else ""
    # Ctrl-C is how this view ends: the feed then closes (a demo's machine is removed).
    with open_feed(options) as sampler, contextlib.suppress(KeyboardInterrupt):
        Poller(lambda: _show(sampler, header), lambda: sampler.interval_s).run()
    return 0


def _show(sampler: SnapshotFeed, header: str) -> None:
    """One refresh: the latest snapshot's text, over the previous one on a terminal."""
    text = render_snapshot(sampler.sample())
    sys.stdout.write((_CLEAR if sys.stdout.isatty() else "") + header + text)
    sys.stdout.flush()
