"""Provides DetailScreen: one chip in full — every metric and why one is n/a, PCIe, versions,
large graphs, and what ``npu-smi info -t board|usages|common|health`` reports, fetched on demand."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, List, Optional, Tuple

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from npuwatch.chip_details import ChipDetails
from npuwatch.model import CHIP_METRICS, ChipSample, Snapshot
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render

if TYPE_CHECKING:
    from npuwatch.widgets.tui.app import SamplerLike

GRAPHS = (
    ("AI Core %", "aicore_percent", 100.0),
    ("NPU Util %", "npu_util_percent", 100.0),
    ("HBM MiB", "hbm_used_mib", None),
    ("DDR MiB", "memory_used_mib", None),
    ("Power W", "power_w", None),
    ("Temperature °C", "temperature_c", None),
)


class DetailScreen(Screen[None]):
    """Esc goes back; the npu-smi queries run once, in a thread, when the screen opens."""

    BINDINGS = [("escape", "app.pop_screen", "Back"), ("q", "app.pop_screen", "Back")]

    def __init__(self, key: Tuple[int, int], snapshot: Snapshot, sampler: SamplerLike) -> None:
        super().__init__()
        self.key = key
        self.snapshot = snapshot
        self.sampler = sampler

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(id="detail-now")
            yield Static(id="detail-graphs")
            yield Static(
                "[dim]Asking npu-smi for board, usages, common and health…[/dim]", id="detail-npu-smi"
            )
        yield Footer()

    def on_mount(self) -> None:
        self.show(self.snapshot)
        # A daemon thread, like the sampler's: quitting never waits for a hung npu-smi.
        threading.Thread(target=self._fetch, name="npuwatch-details", daemon=True).start()

    def show(self, snapshot: Snapshot) -> None:
        """Re-render the live parts from a newer snapshot."""
        self.snapshot = snapshot
        chip = snapshot.chip(*self.key)
        now = self.query_one("#detail-now", Static)
        if chip is None:
            now.update(
                Text(f"NPU {self.key[0]} chip {self.key[1]} is not in the latest sample.", style="bold red")
            )
            return
        now.update(chip_summary(chip, snapshot))
        width = max(20, self.size.width - 22)
        self.query_one("#detail-graphs", Static).update(graphs(self.sampler, chip, width))

    def _fetch(self) -> None:
        try:
            shown: RenderableType = npu_smi_tables(self.sampler.chip_details(*self.key))
        except Exception as exc:  # shown, never raised: the screen stays usable
            shown = Text(f"npu-smi queries failed: {type(exc).__name__}: {exc}", style="red")
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile: its loop is gone
            self.app.call_from_thread(self._show_details, shown)

    def _show_details(self, shown: RenderableType) -> None:
        with contextlib.suppress(NoMatches):  # the user already went back
            self.query_one("#detail-npu-smi", Static).update(shown)


def chip_summary(chip: ChipSample, snapshot: Snapshot) -> RenderableType:
    """Identity, health, every metric (n/a with its reason), PCIe and versions."""
    ident = chip.identity
    title = Text(
        f"NPU {ident.npu_id} · chip {ident.chip_id} · {ident.name or 'unknown model'}  ", style="bold"
    )
    title.append_text(render.badge(chip.health))
    ids = Text(
        f"Bus-Id {ident.bus_id or 'n/a'} · Phy-ID {_id(ident.phy_id)} · Device {_id(ident.device_id)} · "
        f"Logic ID {_id(ident.logic_id)}",
        style="dim",
    )
    metrics = Table(box=None, show_header=False, padding=(0, 2))
    metrics.add_column(style="bold")
    metrics.add_column()
    metrics.add_column(style="dim")
    for name in CHIP_METRICS:
        value = getattr(chip, name)
        note = chip.notes.get(name)
        shown = fmt.NA if value is None else f"{value:g}"
        why = "" if note is None else f"{note.status.value}: {note.reason}"
        metrics.add_row(name, shown, why)
    v = snapshot.versions
    versions = Text(
        f"npu-smi {v.npu_smi or 'n/a'} · driver {v.driver or 'n/a'} · firmware {v.firmware or 'n/a'} · "
        f"CANN {v.cann or 'n/a'}",
        style="dim",
    )
    return Group(title, ids, Text(""), metrics, Text(""), pcie_text(chip), versions, Text(""))


def pcie_text(chip: ChipSample) -> Text:
    """The PCIe link, current against maximum, with a warning when it trained below it."""
    link = chip.pcie
    if link is None:
        return Text("PCIe: not known (no matching PCI function in sysfs)", style="dim")
    if not link.present:
        return Text("PCIe: the device fell off the bus (config space reads ff ff)", style="bold red")
    text = Text("PCIe: ", style="bold")
    text.append(
        f"{fmt.number(link.current_speed_gt_s, 1)} GT/s x{_id(link.current_width)} "
        f"of {fmt.number(link.max_speed_gt_s, 1)} GT/s x{_id(link.max_width)}"
    )
    if link.degraded:
        text.append("  ▲ degraded: the link trained below its maximum", style="bold dark_orange")
    text.append(f" · NUMA node {_id(link.numa_node)}", style="dim")
    errors = (link.aer_correctable_total, link.aer_nonfatal_total, link.aer_fatal_total)
    if any(errors):
        text.append(f" · AER corr/nonfatal/fatal {'/'.join(_id(e) for e in errors)}", style="dark_orange")
    return text


def graphs(sampler: SamplerLike, chip: ChipSample, width: int) -> RenderableType:
    """Large history graphs (4 rows each) for the metrics this chip reports."""
    parts: List[RenderableType] = []
    for label, metric, ceiling in GRAPHS:
        values = sampler.history.values(chip.identity.key, metric, last=width)
        if not any(v is not None for v in values):
            continue
        top = ceiling or _ceiling(chip, metric, values)
        latest = next((v for v in reversed(values) if v is not None), None)
        parts.append(Text(f"{label}  now {fmt.number(latest, 1)}  max {fmt.number(top, 0)}", style="bold"))
        parts.extend(render.graph(values, width, 4, top))
    return Group(*parts) if parts else Text("No history yet.", style="dim")


def _ceiling(chip: ChipSample, metric: str, values: List[Optional[float]]) -> float:
    if metric == "hbm_used_mib" and chip.hbm_total_mib:
        return float(chip.hbm_total_mib)
    if metric == "memory_used_mib" and chip.memory_total_mib:
        return float(chip.memory_total_mib)
    return max((v for v in values if v is not None), default=1.0) * 1.1 or 1.0


def npu_smi_tables(details: Optional[ChipDetails]) -> RenderableType:
    """Every key and value npu-smi printed for this chip, per query, or why a query failed."""
    if details is None:
        return Text("npu-smi queries are not available for this source (a replayed capture).", style="dim")
    parts: List[RenderableType] = []
    for query in details.queries:
        if query.duration_s is None:
            continue
        parts.append(Text(f"$ {query.command}", style="bold"))
        if query.failure is not None:
            parts.append(Text(f"  {query.failure.message}", style="dark_orange"))
            continue
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="dim")
        table.add_column()
        for key, value in query.fields:
            table.add_row(key, value)
        parts.append(table)
    return Group(*parts)


def _id(value: Optional[int]) -> str:
    return "n/a" if value is None else str(value)
