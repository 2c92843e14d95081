"""Renders one sample of a post-mortem (``npuwatch snapshot --replay FILE --all``) as a compact
text block: its time, each chip's level, class and flags, and the alert line shown at it."""

from __future__ import annotations

import sys
from typing import Sequence

from npuwatch.alerts import Alert, summary_line
from npuwatch.model import Snapshot
from npuwatch.text_safety import inert
from npuwatch.widgets.view_model import chip_rows


def render_judged_sample(snapshot: Snapshot, alerts: Sequence[Alert]) -> str:
    """``2026-03-01 08:00:06.000 UTC``, a line per chip (``NPU 0  910B3  critical  compute-bound``,
    with ``· throttled: …`` when throttled), then ``alerts: ⚠ …`` (every alert, the most severe
    first: the dashboard's line uncut) or ``alerts: no alerts``; a blank line ends the block.
    Strings from the recording are shown inert."""
    taken = snapshot.taken_at
    when = f"{taken:%Y-%m-%d %H:%M:%S}.{taken.microsecond // 1000:03d} {taken:%Z}".strip()
    lines = [when]
    rows = chip_rows(snapshot, ordered=False)  # npu-smi's order, as `snapshot` prints them
    labels = [inert(f"{row.identity.label}  {row.model or '?'}") for row in rows]
    width = max((len(label) for label in labels), default=0)
    for label, row in zip(labels, rows):
        shown = row.explanation
        workload = "-" if shown is None else shown.heading  # class · throttled: cause
        lines.append(f"  {label.ljust(width)}  {row.level.value:<8}  {inert(workload)}".rstrip())
    if not rows:
        lines.append("  No NPU chips could be read.")
    lines.append(f"  alerts: {inert(summary_line(alerts, sys.maxsize))}")
    return "\n".join(lines) + "\n\n"
