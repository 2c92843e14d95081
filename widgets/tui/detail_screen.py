"""Provides DetailScreen: one chip in full — every metric and why one is n/a, PCIe, versions,
large graphs, and what ``npu-smi info -t board|usages|common|health`` reports, fetched on demand."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static

from npuwatch.chip_details import ChipDetails
from npuwatch.chip_facts import chip_memory
from npuwatch.chip_link import KIND_PCIE, LinkState
from npuwatch.judge.limits import PowerRating, power_rating, power_ratings
from npuwatch.judge.rules import Judgement, judge_snapshot, link_verdicts
from npuwatch.metrics_table import CELLS, METRICS, SHOWN_WHEN_REPORTED, cell_metrics, metric
from npuwatch.model import ChipSample, Level, MetricStatus, Snapshot
from npuwatch.source_info import SCOPE_CARD
from npuwatch.text_safety import inert
from npuwatch.widgets import format as fmt
from npuwatch.widgets.tui import render
from npuwatch.widgets.tui.key_bar import KeyBar
from npuwatch.widgets.view_model import WorkloadExplanation, chip_row, explain, graph_top

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed

#: The metrics ``metric_rows`` gives a row of their own (the four card cells with their totals, and
#: huge pages); any other metric of the table the chip reports gets a plain row after them.
_OWN_ROWS = frozenset(
    {name for row in METRICS if row.cell in CELLS[:4] for name in (row.name, row.total) if name}
    | {"hugepages_used", "hugepages_total"}
)


class DetailScreen(Screen[None]):
    """Esc goes back; the npu-smi queries run once, in a thread, when the screen opens."""

    BINDINGS = [("escape", "app.pop_screen", "Back"), ("q", "app.pop_screen", "Back")]
    # The scroll area takes the focus, so PageUp/PageDown/Home/End and the arrows scroll it.
    AUTO_FOCUS = "VerticalScroll"

    def __init__(self, key: Tuple[int, int], snapshot: Snapshot, sampler: SnapshotFeed) -> None:
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
        yield KeyBar()

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
            details = self.sampler.chip_details(*self.key)
            shown: RenderableType = npu_smi_tables(details, self.snapshot.source)
        except Exception as exc:  # shown, never raised: the screen stays usable
            shown = Text(inert(f"npu-smi queries failed: {type(exc).__name__}: {exc}"), style="red")
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile: its loop is gone
            self.app.call_from_thread(self._show_details, shown)

    def _show_details(self, shown: RenderableType) -> None:
        with contextlib.suppress(NoMatches):  # the user already went back
            self.query_one("#detail-npu-smi", Static).update(shown)


def chip_summary(chip: ChipSample, snapshot: Snapshot) -> RenderableType:
    """Identity, health, the metrics this chip has (n/a with its reason), PCIe and versions.

    Names and versions are what npu-smi, DCMI or a file said: shown inert, never obeyed.
    """
    ident = chip.identity
    title = Text(
        f"NPU {ident.npu_id} · chip {ident.chip_id} · {inert(ident.name or 'unknown model')}  ", style="bold"
    )
    title.append_text(render.badge(chip.health))
    ids = Text(
        f"Bus-Id {inert(ident.bus_id or 'n/a')} · Phy-ID {_id(ident.phy_id)} · "
        f"Device {_id(ident.device_id)} · Logic ID {_id(ident.logic_id)}",
        style="dim",
    )
    v = snapshot.versions
    versions = Text(
        inert(
            f"{snapshot.chip_source} {snapshot.chip_source_version or 'n/a'} · driver {v.driver or 'n/a'} · "
            f"firmware {v.firmware or 'n/a'} · "
            f"CANN {v.cann or 'n/a'}"
        ),
        style="dim",
    )
    workload = (
        () if chip.workload is None else (workload_text(explain(chip.workload, snapshot.taken_at)), Text(""))
    )
    verdict = verdict_text(judge_snapshot(snapshot).get(ident.key))
    return Group(
        title,
        ids,
        *verdict,
        Text(""),
        metric_table(chip, power_ratings(snapshot).get(ident.key)),
        Text(""),
        *workload,
        pcie_text(chip),
        versions,
        Text(""),
    )


def verdict_text(judged: Optional[Judgement]) -> Tuple[RenderableType, ...]:
    """The judge's reasons for a chip that is not ok, each with what to do (its detail sentence):
    an error code's handling class and action, a temperature limit, memory held with no process."""
    if judged is None or not judged.reasons:
        return ()
    lines: List[RenderableType] = [Text("")]
    for reason in judged.reasons:
        style = render.text_style(reason.level) or "bold"
        line = Text(f" {reason.level.value}: ", style=style)
        line.append(inert(reason.text), style=style)
        lines.append(line)
        lines.append(Text(f"   {inert(reason.detail)}"))
    return tuple(lines)


def workload_text(shown: WorkloadExplanation) -> RenderableType:
    """What the chip is limited by: the class (and throttling), over what window, the summary, the
    numbers that decided it with their units, the next step, what only the DCMI backend could
    tell, and who last held memory held with no process."""
    head = Text("Limited by  ", style="bold")
    head.append(shown.kind, style=render.LEVEL_TEXT_STYLES.get(shown.level, "bold"))
    if shown.throttling:
        head.append(f"  ▼ {shown.throttling}", style=render.LEVEL_TEXT_STYLES[Level.WARNING])
    head.append(f"  {shown.window}", style="dim")
    parts: List[RenderableType] = [head, Text(f"  {inert(shown.summary)}")]
    if shown.evidence:
        table = Table(box=None, show_header=False, padding=(0, 2), pad_edge=True)
        table.add_column(style="dim")
        table.add_column()
        for row in shown.evidence:
            table.add_row(row.label, Text(inert(row.value)))
        parts.append(table)
    step = Text("  Next step: ", style="bold")
    step.append(inert(shown.next_step))
    parts.append(step)
    if shown.owner:
        owner = Text("  Likely owner: ", style="bold")
        owner.append(inert(shown.owner))
        parts.append(owner)
    if shown.needs_dcmi:
        parts.append(Text(f"  {shown.needs_dcmi[:1].upper()}{shown.needs_dcmi[1:]}.", style="dim"))
    return Group(*parts)


@dataclass(frozen=True)
class MetricRow:
    """One line of the detail screen's metrics: a label, the value with its unit (None: n/a), and
    the metrics whose notes say why it is n/a or stale."""

    label: str
    value: Optional[str]
    metrics: Tuple[str, ...]


def memory_kind(chip: ChipSample) -> str:
    """``HBM`` or ``DDR``: what npu-smi reported a total for, else what the chip's family has."""
    return chip_memory(chip).kind or "HBM"


def metric_rows(chip: ChipSample, power: Optional[PowerRating] = None) -> List[MetricRow]:
    """The metrics this chip has, labelled and with units (a 910B has HBM and no DDR; a 310P the reverse).

    A metric the npu-smi layout does not print at all (NPU Util beside AI Core, huge pages
    on a chip that has none) is left out rather than shown as ``n/a`` or ``0/0``.
    """
    rows: List[MetricRow] = []
    for index, util in enumerate(cell_metrics("util")):  # AI Core; NPU Util where the layout has it
        # The first unless its layout lacks it; a later one when reported or when none was shown.
        wanted = not _unsupported(chip, util.name) if index == 0 else not rows
        if getattr(chip, util.name) is not None or wanted:
            rows.append(_plain_row(chip, util.name))
    kind = memory_kind(chip)
    if kind == "HBM":
        used, total, metrics = chip.hbm_used_mib, chip.hbm_total_mib, ("hbm_used_mib", "hbm_total_mib")
    else:
        used, total = chip.memory_used_mib, chip.memory_total_mib
        metrics = ("memory_used_mib", "memory_total_mib")
    memory = None
    if used is not None and total:
        memory = f"{fmt.used_total_gib(used, total)} ({fmt.percent(100 * used / total)})"
    rows.append(MetricRow(metric(metrics[0]).title, memory, metrics))
    if chip.hugepages_total:
        pages = f"{chip.hugepages_used if chip.hugepages_used is not None else fmt.NA}/{chip.hugepages_total}"
        rows.append(MetricRow("Huge pages", f"{pages} pages", ("hugepages_used", "hugepages_total")))
    watts = _opt(chip.power_w, fmt.watts)
    rating = power or power_rating(chip.identity.name)
    if watts is not None and rating.scope == SCOPE_CARD:
        watts += " (the card's"
        watts += f", rated ≈{rating.watts:.0f} W)" if rating.watts else ")"
    elif watts is not None and rating.watts:
        watts += f" (rated ≈{rating.watts:.0f} W)"
    rows.append(MetricRow(metric("power_w").title, watts, ("power_w",)))
    rows.append(_plain_row(chip, "temperature_c"))
    others = (
        row.name for row in METRICS if row.name not in _OWN_ROWS and row.name not in SHOWN_WHEN_REPORTED
    )
    rows += [_plain_row(chip, name) for name in others if getattr(chip, name) is not None]
    # What only the DCMI backend reads, as the view model says it (the frequency against rated):
    # a row for each metric the chip reports, none for one it does not.
    rows += [
        MetricRow(metric(cell.metric).title, cell.text, _extra_metrics(cell.metric))
        for cell in chip_row(chip).extras
    ]
    return rows


def _extra_metrics(name: str) -> Tuple[str, ...]:
    """The metrics a row of the new ones reads: itself, and its rated value (the frequency)."""
    rated = metric(name).rated
    return (name, rated) if rated else (name,)


def _plain_row(chip: ChipSample, name: str) -> MetricRow:
    """A metric's row: its title, its value in its unit (None: n/a)."""
    row = metric(name)
    value = chip.metric(name)
    return MetricRow(row.title, None if value is None else fmt.with_unit(value, row.unit), (name,))


def metric_table(chip: ChipSample, power: Optional[PowerRating] = None) -> Table:
    """The metric rows; an n/a row says why, and a reason shared with the row above is not repeated."""
    table = Table(box=None, show_header=False, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_column(style="dim")
    said: List[str] = []
    for row in metric_rows(chip, power):
        why = ""
        note = next((chip.notes[m] for m in row.metrics if m in chip.notes), None)
        if note is not None and (row.value is None or note.status is MetricStatus.STALE):
            why = inert(f"{note.status.value}: {note.reason}")
            if why in said:
                why = "(the same reason)"
            else:
                said.append(why)
        table.add_row(row.label, fmt.NA if row.value is None else row.value, why)
    return table


def _unsupported(chip: ChipSample, metric: str) -> bool:
    note = chip.notes.get(metric)
    return note is not None and note.status is MetricStatus.UNSUPPORTED


def _opt(value: Optional[float], shown: Callable[[Optional[float]], str]) -> Optional[str]:
    return None if value is None else shown(value)


def pcie_text(chip: ChipSample) -> Text:
    """The PCIe link, current against maximum, with the judge's verdict when it is below it."""
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
    for verdict in link_verdicts(chip):  # the judge's word on it: power saving at idle is fine
        if verdict.link.kind != KIND_PCIE or verdict.state is LinkState.UP:
            continue
        mark = "▲ " if verdict.level is not Level.OK else ""
        text.append(f"  {mark}{verdict.word}", style=_LINK_STYLES[verdict.level])
    text.append(f" · NUMA node {_id(link.numa_node)}", style="dim")
    errors = (link.aer_correctable_total, link.aer_nonfatal_total, link.aer_fatal_total)
    if any(errors):
        text.append(f" · AER corr/nonfatal/fatal {'/'.join(_id(e) for e in errors)}", style="dark_orange")
    return text


_LINK_STYLES = {Level.OK: "dim", **render.LEVEL_TEXT_STYLES}


def graphs(sampler: SnapshotFeed, chip: ChipSample, width: int) -> RenderableType:
    """Large history graphs (4 rows each) for the metrics this chip has and reports."""
    shown = [name for row in metric_rows(chip) for name in row.metrics if metric(name).graphed]
    parts: List[RenderableType] = []
    for name in shown:  # in the order of the rows above: AI Core, memory, power, temperature
        row = metric(name)
        values = sampler.history.values(chip.identity.key, name, last=width)
        if not any(v is not None for v in values):
            continue
        top = graph_top(chip, name, values)
        latest = next((v for v in reversed(values) if v is not None), None)
        title = Text(f"{row.title}  now {fmt.with_unit(latest, row.unit)}", style="bold")
        title.append(f"  (graph top {fmt.with_unit(top, row.unit)})", style="dim")
        parts.append(title)
        parts.extend(render.graph(values, width, 4, top))
    return Group(*parts) if parts else Text("No history yet.", style="dim")


def npu_smi_tables(details: Optional[ChipDetails], source: str = "") -> RenderableType:
    """Every key and value npu-smi printed for this chip, per query, or why a query failed."""
    if details is None:
        why = " (a replay: there is no npu-smi to ask)" if source.startswith("replay:") else ""
        return Text(f"npu-smi queries are not available for this source{why}.", style="dim")
    parts: List[RenderableType] = []
    for query in details.sections:
        if query.duration_s is None:
            continue
        parts.append(Text(f"$ {inert(query.command)}", style="bold"))
        if query.failure is not None:
            parts.append(Text(f"  {inert(query.failure)}", style="dark_orange"))
            continue
        table = Table(box=None, show_header=False, padding=(0, 2))
        table.add_column(style="dim")
        table.add_column()
        for key, value in query.fields:
            table.add_row(Text(inert(key)), Text(inert(value)))  # a Text: no markup, nothing obeyed
        parts.append(table)
    return Group(*parts)


def _id(value: Optional[int]) -> str:
    return "n/a" if value is None else str(value)
