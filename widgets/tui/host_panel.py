"""Provides HostPanel: the host's CPU (overall and per core), memory and load average."""

from __future__ import annotations

from typing import List, Optional

from rich.text import Text

from npuwatch.model import HostInfo, MetricStatus, Snapshot
from npuwatch.text_safety import inert
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.line import TextLines


class HostPanel(TextLines):
    """Two lines: CPU bar + one cell per core, then memory and load; or why there is no host."""

    def __init__(self) -> None:
        super().__init__(id="host")
        self.snapshot: Optional[Snapshot] = None

    def show(self, snapshot: Snapshot) -> None:
        """Render the host of the latest snapshot."""
        self.snapshot = snapshot
        self.redraw()

    def lines(self) -> List[Text]:
        return list(panel_text(self.snapshot, max(40, self.size.width)).split("\n"))


def panel_text(snapshot: Optional[Snapshot], width: int) -> Text:
    """The panel's text for a snapshot (``None`` before the first one arrives)."""
    if snapshot is None:
        return Text("Host: waiting for the first sample…", style="dim")
    if snapshot.host is None:
        return Text(f"Host: {missing_host(snapshot)}", style="dim")
    return host_lines(snapshot.host, width)


def missing_host(snapshot: Snapshot) -> str:
    """Why a snapshot has no host: its probe failed, the source is a replayed capture, or none was asked."""
    failed = next((p for p in snapshot.probes if p.name == "host" and p.status is not MetricStatus.OK), None)
    if failed is not None:
        return f"could not be read ({inert(failed.message or failed.status.value)})"
    if snapshot.source.startswith("replay:"):
        return "not part of this source (a replayed capture)"
    return "not sampled for this source"


def host_lines(host: HostInfo, width: int) -> Text:
    """The panel's text for a sampled host (pure, so it is testable without an app)."""
    bar_w = max(8, min(24, width // 6))
    line = Text("CPU ", style="bold")
    cpu = host.cpu_percent
    line.append_text(render.bar(None if cpu is None else cpu / 100, bar_w, "green"))
    line.append(f" {fmt.percent(cpu):>4}  ")
    cores = host.per_cpu_percent
    room = width - len(line.plain) - 6
    if cores and room > 4:
        line.append("cores ", style="dim")
        shown = cores[:room]
        line.append_text(render.spark(shown, len(shown), 100))
        if len(cores) > len(shown):
            line.append(f" +{len(cores) - len(shown)}", style="dim")
    line.append("\n")
    line.append("MEM ", style="bold")
    share, pct = render.fraction(host.memory_used_bytes, host.memory_total_bytes)
    line.append_text(render.bar(share, bar_w, render.usage_style(pct)))
    line.append(f" {fmt.used_total_bytes(host.memory_used_bytes, host.memory_total_bytes)}  ")
    line.append("load ", style="dim")
    line.append(fmt.load(host.load_average))
    line.append(f"  ·  {inert(host.hostname)}", style="dim")
    if host.in_container:
        line.append(" (container)", style="dim")
    return line
