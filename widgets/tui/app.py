"""Provides NpuwatchApp: the live dashboard; a thread worker samples, the UI only renders snapshots."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, List, Optional, Tuple

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.events import Resize
from textual.geometry import Size
from textual.widgets import Input

from npuwatch.alerts import Alert, AlertTracker, Severity, summary_line
from npuwatch.feed import ReplayControls
from npuwatch.judge import judge_snapshot
from npuwatch.judge.limits import power_ratings
from npuwatch.model import Snapshot
from npuwatch.text_safety import inert
from npuwatch.widgets.tui.app_base import LiveApp, exit_status, run_live_app
from npuwatch.widgets.tui.chip_grid import ChipGrid
from npuwatch.widgets.tui.chip_layout import CHIP_MIN_ROWS, ChipLayout, GroupShape, choose_layout
from npuwatch.widgets.tui.chip_list import HUGE_CHIPS, ChipList
from npuwatch.widgets.tui.chips import group_chips
from npuwatch.widgets.tui.host_panel import HostPanel
from npuwatch.widgets.tui.key_bar import KeyBar
from npuwatch.widgets.tui.line import Line
from npuwatch.widgets.tui.messages import ChipSelected, SamplerFailed, SnapshotReady
from npuwatch.widgets.tui.processes import ProcessTable

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed
    from npuwatch.feeds import FeedOptions, OpeningFeed  # run_dashboard, the command's entry, opens the feed
    from npuwatch.widgets.tui.detail_screen import DetailScreen  # imported when a chip is opened

#: The keys that act on the process table, which only the dashboard's own screen shows.
PROCESS_TABLE_ACTIONS = frozenset({"sort", "filter", "clear_filter"})
#: The intervals `+` and `-` step through (seconds).
INTERVALS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
#: The header names how long samples take once they take this many times the interval (the real pace).
SLOW_SAMPLE_FACTOR = 1.2


class NpuwatchApp(LiveApp):
    """``npuwatch``: header, alerts, chip cards per NPU, host panel, process table."""

    CSS_PATH = "npuwatch.tcss"
    FILTER_PLACEHOLDER = "filter processes by user, command or PID"
    TITLE = "npuwatch"
    AUTO_FOCUS = None  # the chip area takes the focus once it has chips (see _render_chips)
    # The footer shows each description; the help screen (``?``) lists each tooltip.
    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="quit"),
        Binding("question_mark", "help", "Help", tooltip="this help"),
        Binding("p", "pause", "Pause", tooltip="pause / resume sampling (a replay's clock too)"),
        Binding(
            "plus,equals_sign",
            "interval(1)",
            "Slower",
            tooltip=f"slower: sample less often (a longer interval, up to {INTERVALS_S[-1]:g} s)",
        ),
        Binding(
            "minus",
            "interval(-1)",
            "Faster",
            tooltip=f"faster: sample more often (a shorter interval, down to {INTERVALS_S[0]:g} s)",
        ),
        Binding("s", "sort", "Sort", tooltip="sort processes (NPU, NPU memory, %CPU, PID, user)"),
        Binding("slash", "filter", "Filter", tooltip="filter processes (Enter keeps it, Esc clears it)"),
        Binding("t", "theme", "Theme", tooltip="dark / light theme"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("left_square_bracket", "seek(-10)", "-10 s", tooltip="replay: back 10 s"),
        Binding("right_square_bracket", "seek(10)", "+10 s", tooltip="replay: forward 10 s"),
        Binding("less_than_sign", "speed(-1)", "Slower replay", tooltip="replay: play slower"),
        Binding("greater_than_sign", "speed(1)", "Faster replay", tooltip="replay: play faster"),
    ]

    def __init__(
        self,
        sampler: SnapshotFeed,
        banner: str = "",
        first_sample: Optional[Callable[[], Optional[Tuple[Snapshot, float]]]] = None,
    ) -> None:
        """``first_sample``: the feed's first snapshot and the seconds it took, already being
        taken while the app started (``OpeningFeed.first_sample``); called off the UI thread."""
        super().__init__()
        self.sampler = sampler
        self.banner = banner
        self._first_sample = first_sample
        self.paused = False
        self.compact = True
        self.chip_layout = ChipLayout(compact=True, columns=1, max_rows=CHIP_MIN_ROWS)
        # The terminal's size as the last Resize gave it: in a real terminal ``self.size`` still
        # holds the old one while the Resize handler runs.
        self._terminal: Optional[Size] = None
        self._shapes: List[GroupShape] = []  # the NPU boxes' shapes the layout was chosen for
        self.snapshot: Optional[Snapshot] = None
        self.alerts: Tuple[Alert, ...] = ()
        self.tracker = AlertTracker()
        self._detail: Optional[DetailScreen] = None  # the chip screen last opened
        self._chip_layout: Optional[List[Tuple[int, int]]] = None  # the chips the grid was given
        self._updated_at: Optional[float] = None
        self._last_took_s = 0.0
        self._failure: Optional[str] = None

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Line(id="header")
        yield Line(id="alerts")
        yield ChipGrid(self.sampler.history, id="chips")
        yield HostPanel()
        yield ProcessTable()
        yield KeyBar()

    def on_mount(self) -> None:
        if self.banner:  # the banner takes the header's second line
            self.query_one("#header").styles.height = 2
        self._render_header()
        self.set_interval(1.0, self._tick_clock)
        self._start_sample()

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size)

    def _apply_layout(self, size: Size) -> None:
        self._terminal = size
        header_rows = 2 if self.banner else 1
        grid = self.query_one(ChipGrid)
        self._shapes = grid.shapes()
        layout = choose_layout(size, self._shapes, header_rows)
        self.chip_layout = layout
        self.compact = layout.compact
        grid.styles.max_height = layout.max_rows
        grid.set_layout(layout.compact, layout.columns)
        self._render_header()
        if self.snapshot is not None or self._failure:  # the alerts line is cut to the width
            self._render_alerts()

    # --- sampling (never on the UI thread) -----------------------------------------------

    def _start_sample(self) -> None:
        if self.paused or self._sampling_since is not None:
            return
        self._sampling_since = time.monotonic()
        # A daemon thread, not a textual thread worker: those run in asyncio's default executor,
        # which the event loop joins on exit, so `q` would wait for a hung npu-smi to time out
        # (or forever for a sampler stuck in the kernel).  post_message is thread-safe.
        threading.Thread(target=self._sample, name="npuwatch-sample", daemon=True).start()

    def _sample(self) -> None:
        started = time.monotonic()
        try:
            first, self._first_sample = self._first_sample, None
            taken = first() if first is not None else None
            if taken is not None:
                self._post(SnapshotReady(*taken))
                return
            snapshot = self.sampler.sample()
        except Exception as exc:  # the sampler contains environment problems; this is a bug
            self._post(SamplerFailed(self.refresh_crash_line(exc, "sampling")))
            return
        self._post(SnapshotReady(snapshot, time.monotonic() - started))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self._sampling_since = None
        self._updated_at = time.monotonic()
        self._last_took_s = message.took_s
        self._failure = None
        try:
            self.show(message.snapshot)
        except NoMatches:  # a sample that lands while the app shuts down: its widgets are gone
            return
        self._schedule_next(message.took_s)

    def on_sampler_failed(self, message: SamplerFailed) -> None:
        self._sampling_since = None
        self._failure = message.error
        try:
            self._render_alerts()
        except NoMatches:  # the app is shutting down
            return
        self._schedule_next(0.0)

    def _schedule_next(self, took_s: float) -> None:
        # Re-arm after each sample, so samples never overlap however slow npu-smi is.
        self.set_timer(max(0.05, self.sampler.interval_s - took_s), self._start_sample)

    # --- rendering ------------------------------------------------------------------------

    def show(self, snapshot: Snapshot) -> None:
        """Render one snapshot everywhere (also used by tests, without the worker)."""
        self.snapshot = snapshot
        self.alerts = self.tracker.update(snapshot)
        self._render_chips(snapshot)
        self.query_one(HostPanel).show(snapshot)
        self.query_one(ProcessTable).show(snapshot.processes, snapshot.taken_at.timestamp())
        self._render_header()
        self._render_alerts()
        if self._detail is not None:
            if self.screen is self._detail:
                self._detail.show(snapshot)
            elif self._detail not in self.screen_stack:
                self._detail = None  # closed: its widgets and snapshot go

    def _render_chips(self, snapshot: Snapshot) -> None:
        if len(snapshot.chips) > HUGE_CHIPS:  # thousands of cards would freeze the first paint
            self._render_chip_list(snapshot)
            return
        grid = self.query_one(ChipGrid)
        groups = group_chips(snapshot.chips)
        layout = [chip.identity.key for group in groups for chip in group]
        if layout != self._chip_layout or not grid.display:
            self._chip_layout = layout
            grid.display = True
            self.query(ChipList).remove()
            grid.set_chips(groups)
            self._apply_layout(self._terminal or self.size)
            self.call_after_refresh(lambda: self._apply_layout(self._terminal or self.size))
            if self.focused is None and groups:  # Enter opens the first chip until the user moves
                # Now, not after the next refresh: a key pressed as the chips appear reaches them.
                grid.screen.set_focus(grid, scroll_visible=False)
        # The judge's verdicts colour the cards.  A card's height can change with its chip's state
        # (a problem line under its metrics): the layout is chosen again only then.
        if (
            grid.show(groups, judge_snapshot(snapshot), power_ratings(snapshot))
            and grid.shapes() != self._shapes
        ):
            self._apply_layout(self._terminal or self.size)

    def _render_chip_list(self, snapshot: Snapshot) -> None:
        """Every chip on one line in one virtual list: the work per frame is the rows on screen."""
        grid = self.query_one(ChipGrid)
        found = self.query(ChipList)
        if found:
            chip_list = found.first()
        else:
            grid.display = False
            grid.set_chips([])
            self._chip_layout = None
            chip_list = ChipList(self.sampler.history)
            self.mount(chip_list, after=grid)
            if self.focused is None:
                self.call_after_refresh(chip_list.focus)
        chip_list.styles.height = self.chip_layout.max_rows
        chip_list.show(
            sorted(snapshot.chips, key=lambda chip: chip.identity.key),
            judge_snapshot(snapshot),
            power_ratings(snapshot),
        )

    def _render_header(self) -> None:
        """Name, state markers, then host, source, time and cadence; versions as far as they fit.

        The state comes first so a narrow terminal never hides that the view is paused or stale;
        what the width cuts is the versions, whole ones at a time.
        """
        snap = self.snapshot
        text = Text()
        text.append(" npuwatch ", style="bold reverse")
        if self.paused:
            text.append(" ")
            text.append("⏸ PAUSED", style="bold black on yellow")
        busy = self._busy_s()
        if busy is not None and busy > self.sampler.interval_s + 1:
            text.append(f" ⏳ sampling for {busy:.0f} s (stale)", style="bold dark_orange")
        if snap is None:
            text.append("  waiting for the first sample…", style="dim")
        else:
            host = _host_name(snap)
            if host:
                text.append(f" {inert(host)}", style="bold")
            when = snap.taken_at.astimezone().strftime("%H:%M:%S")
            text.append(f" · {inert(snap.source)} · {when} ")  # a replayed file's name included
            text.append_text(self._cadence())
            v = snap.versions
            width = self._width()
            for part in (
                f"{snap.chip_source} {snap.chip_source_version or 'n/a'}",
                f"CANN {v.cann or 'n/a'}",
                f"driver {v.driver or 'n/a'}",
                f"firmware {v.firmware or 'n/a'}",
            ):
                part = inert(part)
                if text.cell_len + len(part) + 2 > width:
                    break
                text.append(f"· {part} ", style="dim")
        if self.banner:
            text.append(f"\n {self.banner}", style="italic")
        self.query_one("#header", Line).set(text)

    def _cadence(self) -> Text:
        """``every 1 s``, saying so when samples take longer than that (a slow npu-smi sets the pace);
        for a recording, its position, length and speed."""
        replay = self.replay
        if replay is None:
            interval = self.sampler.interval_s
            shown = Text(f"· every {interval:g} s ")
            if self._last_took_s > interval * SLOW_SAMPLE_FACTOR:
                shown.append(f"(samples take {_seconds(self._last_took_s)} s) ", style="bold dark_orange")
            return shown
        position = replay.position_s
        state = "⏸" if replay.paused else "■" if position >= replay.duration_s else "▶"
        shown = Text(
            f"· {state} {_clock(position)} / {_clock(replay.duration_s)} ×{replay.speed:g} ", style="bold"
        )
        if position >= replay.duration_s:
            shown.append("end of recording ", style="bold dark_orange")
        return shown

    def _render_alerts(self) -> None:
        widget = self.query_one("#alerts", Line)
        width = max(20, self._width() - 2)
        if self._failure:
            widget.set(Text(f"✖ sampler error: {inert(self._failure)}", style="bold red"))
            return
        line = inert(summary_line(self.alerts, width))  # alerts quote chip names and npu-smi's words
        if not self.alerts:
            widget.set(Text(line, style="dim green"))
            return
        worst = max(alert.severity for alert in self.alerts)
        style = {Severity.CRITICAL: "bold red", Severity.WARNING: "bold dark_orange"}.get(worst, "green")
        widget.set(Text(line, style=style))

    def _width(self) -> int:
        return (self._terminal or self.size).width

    def _tick_clock(self) -> None:
        # Only the "sampling for N s" marker moves between samples; the rest comes with them.
        busy = self._busy_s()
        if busy is not None and busy > self.sampler.interval_s + 1:
            self._render_header()

    # --- actions --------------------------------------------------------------------------

    @property
    def replay(self) -> Optional[ReplayControls]:
        """The recording being played, when the dashboard replays one."""
        return self.sampler if isinstance(self.sampler, ReplayControls) else None

    def check_action(self, action: str, parameters: Tuple[object, ...]) -> Optional[bool]:
        # The replay keys exist only while a recording plays: hidden from the key bar otherwise.
        # The process table's keys act on the table: hidden (and idle) on a chip's screen.
        if action in PROCESS_TABLE_ACTIONS and self.screen is not self.screen_stack[0]:
            return False
        return not (action in ("seek", "speed") and self.replay is None)

    def action_seek(self, delta_s: float) -> None:
        replay = self.replay
        if replay is None:
            return
        replay.seek(delta_s)
        self._show_replay_position()

    def action_speed(self, step: int) -> None:
        replay = self.replay
        if replay is None:
            return
        replay.faster() if step > 0 else replay.slower()
        self._render_header()

    def _show_replay_position(self) -> None:
        """A seek shows its frame at once, paused or not: a replay's sample reads no device."""
        if self._sampling_since is None and self.replay is not None:
            self.show(self.replay.sample())

    def action_help(self) -> None:
        from npuwatch.widgets.tui.help_screen import HelpScreen

        self.push_screen(HelpScreen(self.help_keys()))

    def help_keys(self) -> List[Tuple[str, str]]:
        """(key, what it does) for the help screen: each binding's tooltip, so the two never disagree."""
        from npuwatch.widgets.tui.help_screen import OTHER_KEYS

        keys: List[Tuple[str, str]] = []
        replay_keys: List[Tuple[str, str]] = []
        for binding, shown in self.binding_help():
            (replay_keys if binding.action.startswith(("seek", "speed")) else keys).append(shown)
        return [*keys, *OTHER_KEYS, *replay_keys]

    def action_pause(self) -> None:
        self.paused = not self.paused
        replay = self.replay
        if replay is not None:  # a paused replay stops its clock too: resuming continues there
            replay.pause() if self.paused else replay.resume()
        self._render_header()
        if not self.paused:
            self._start_sample()

    def action_interval(self, step: int) -> None:
        current = self.sampler.interval_s
        steps = list(INTERVALS_S)
        index = min(range(len(steps)), key=lambda i: abs(steps[i] - current))
        self.sampler.interval_s = steps[max(0, min(len(steps) - 1, index + step))]
        self._render_header()

    def action_sort(self) -> None:
        self.query_one(ProcessTable).next_sort()

    def action_clear_filter(self) -> None:
        self.close_filter_box()
        self.query_one(ProcessTable).set_filter("")

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(ProcessTable).set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.query_one(ProcessTable).focus()

    def on_chip_selected(self, message: ChipSelected) -> None:
        if self.snapshot is not None:
            # The detail and help screens are imported when first opened: not on the way to the
            # first screen.
            from npuwatch.widgets.tui.detail_screen import DetailScreen

            self._detail = DetailScreen(message.key, self.snapshot, self.sampler)
            self.push_screen(self._detail)


def _host_name(snapshot: Snapshot) -> Optional[str]:
    """The sampled host's name; ``replay`` for a capture that holds none; None when it is unknown."""
    if snapshot.host is not None:
        return snapshot.host.hostname
    return "replay" if snapshot.source.startswith("replay:") else None


def _seconds(value: float) -> str:
    """``6`` for 6.2 s, ``1.4`` under 2 s: how long a sample takes, as the header says it."""
    return f"{value:.0f}" if value >= 2 else f"{value:.1f}"


def _clock(seconds: float) -> str:
    """``MM:SS`` (``H:MM:SS`` past an hour) for replay positions."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def run_dashboard(options: FeedOptions, opening: Optional[OpeningFeed] = None) -> int:
    """Open the dashboard on the feed ``options`` name; the demo stands in when the machine has no NPU.

    ``opening``: the same feed already being opened (``feeds.OpeningFeed``, started before this
    module's toolkit was imported).
    """
    from npuwatch.feeds import OpeningFeed

    opening = opening or OpeningFeed(options)
    sampler, banner = opening.result()
    with sampler:
        app = NpuwatchApp(sampler, banner=banner.strip(), first_sample=opening.first_sample)
        run_live_app(app)
    return exit_status(app, "the dashboard")
