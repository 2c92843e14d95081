"""Provides NpuwatchApp: the live dashboard; a thread worker samples, the UI only renders snapshots."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Dict, List, Optional, Protocol, Tuple

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.events import Resize
from textual.message import Message
from textual.widgets import Footer, Input, Static

from npuwatch.alerts import Alert, AlertTracker, Severity, summary_line
from npuwatch.chip_details import ChipDetails
from npuwatch.crash import EXIT_INTERNAL, crash_line
from npuwatch.history import History
from npuwatch.model import Snapshot
from npuwatch.replay import ReplaySampler
from npuwatch.widgets.tui.chips import ChipCard, NpuGroup, group_chips
from npuwatch.widgets.tui.detail_screen import DetailScreen
from npuwatch.widgets.tui.help_screen import HelpScreen
from npuwatch.widgets.tui.host_panel import HostPanel
from npuwatch.widgets.tui.line import Line
from npuwatch.widgets.tui.messages import SamplerFailed, SnapshotReady
from npuwatch.widgets.tui.processes import ProcessTable

#: The intervals `+` and `-` step through (seconds).
INTERVALS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
#: Below this width (columns) chips are one line each; above, cards in a grid.
WIDE_MIN_COLUMNS = 120
CARD_COLUMNS = 38


class SamplerLike(Protocol):
    """What the dashboard needs from ``npuwatch.sampler.Sampler`` (tests pass fakes)."""

    interval_s: float
    history: History

    @property
    def label(self) -> str: ...

    def sample(self) -> Snapshot: ...

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]: ...


class NpuwatchApp(App[None]):
    """``npuwatch``: header, alerts, chip cards per NPU, host panel, process table."""

    CSS_PATH = "npuwatch.tcss"
    TITLE = "npuwatch"
    AUTO_FOCUS = None  # the first chip card takes the focus once it exists (see _render_chips)
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("p", "pause", "Pause"),
        Binding("plus,equals_sign", "interval(1)", "Slower"),
        Binding("minus", "interval(-1)", "Faster"),
        Binding("s", "sort", "Sort"),
        Binding("slash", "filter", "Filter"),
        Binding("t", "theme", "Theme"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("left_square_bracket", "seek(-10)", "-10 s"),
        Binding("right_square_bracket", "seek(10)", "+10 s"),
        Binding("less_than_sign", "speed(-1)", "Slower replay"),
        Binding("greater_than_sign", "speed(1)", "Faster replay"),
    ]

    def __init__(self, sampler: SamplerLike, banner: str = "") -> None:
        super().__init__()
        self.sampler = sampler
        self.banner = banner
        self.paused = False
        self.compact = True
        self.snapshot: Optional[Snapshot] = None
        self.alerts: Tuple[Alert, ...] = ()
        self.tracker = AlertTracker()
        self._groups: Dict[int, NpuGroup] = {}
        self._chip_layout: List[Tuple[int, int]] = []
        self._sampling_since: Optional[float] = None
        self._updated_at: Optional[float] = None
        self._last_took_s = 0.0
        self._failure: Optional[str] = None
        self.crash: Optional[Exception] = None

    def _handle_exception(self, error: Exception) -> None:
        """An internal error ends the app; run_dashboard prints one line naming the traceback
        file instead of Textual's screenful of locals."""
        self.crash = error
        super()._handle_exception(error)
        self._exit_renderables.clear()

    # --- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Line(id="header")
        yield Line(id="alerts")
        chips = VerticalScroll(id="chips")
        chips.can_focus = False  # Tab goes straight from card to card
        yield chips
        yield HostPanel()
        yield ProcessTable()
        yield Input(placeholder="filter processes by user, command or PID", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#filter").display = False
        if self.banner:  # the banner takes the header's second line
            self.query_one("#header").styles.height = 2
        self._render_header()
        self.set_interval(1.0, self._tick_clock)
        self._start_sample()

    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size.width)

    def _apply_layout(self, width: int) -> None:
        compact = width < WIDE_MIN_COLUMNS
        self.compact = compact
        self.screen.set_class(compact, "compact")
        chips = self.query_one("#chips")
        columns = max(1, width // CARD_COLUMNS)
        if any(len(group.cards) > 1 for group in self._groups.values()):
            columns = max(2, columns - columns % 2)  # two-chip groups span two columns: keep them aligned
        chips.styles.grid_size_columns = 1 if compact else columns
        for card in self.query(ChipCard):
            card.set_class(compact, "compact")
            card.refresh()

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
            snapshot = self.sampler.sample()
        except Exception as exc:  # the sampler contains environment problems; this is a bug
            self._post(SamplerFailed(crash_line(exc, "sampling")))
            return
        self._post(SnapshotReady(snapshot, time.monotonic() - started))

    def _post(self, message: Message) -> None:
        with contextlib.suppress(RuntimeError):  # the app quit while this sample ran: loop closed
            self.post_message(message)

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
        self.query_one(HostPanel).show(snapshot.host)
        self.query_one(ProcessTable).show(snapshot.processes, snapshot.taken_at.timestamp())
        self._render_header()
        self._render_alerts()
        if isinstance(self.screen, DetailScreen):
            self.screen.show(snapshot)

    def _render_chips(self, snapshot: Snapshot) -> None:
        groups = group_chips(snapshot.chips)
        layout = [chip.identity.key for group in groups for chip in group]
        area = self.query_one("#chips")
        if layout != self._chip_layout:
            self._chip_layout = layout
            area.remove_children()
            self._groups = {
                group[0].identity.npu_id: NpuGroup(group, self.sampler.history) for group in groups
            }
            for box in self._groups.values():  # born in the current layout: no frame drawn wide first
                for card in box.cards:
                    card.set_class(self.compact, "compact")
            area.mount(*self._groups.values())
            if not groups:
                area.mount(Static("No NPU chips could be read: see the alerts line.", classes="empty"))
            self.call_after_refresh(self._apply_layout, self.size.width)
            if self.focused is None and groups:  # Enter opens the first chip until the user moves
                self.call_after_refresh(self._groups[groups[0][0].identity.npu_id].cards[0].focus)
        for group in groups:
            self._groups[group[0].identity.npu_id].show(group)

    def _render_header(self) -> None:
        snap = self.snapshot
        text = Text()
        text.append(" npuwatch ", style="bold reverse")
        if snap is None:
            text.append("  waiting for the first sample…", style="dim")
        else:
            host = snap.host.hostname if snap.host else "replay"
            v = snap.versions
            text.append(f" {host} ", style="bold")
            text.append(f"· {snap.source} ")
            text.append(f"· {snap.taken_at.astimezone().strftime('%H:%M:%S')} ")
            replay = self.replay
            if replay is None:
                text.append(f"· every {self.sampler.interval_s:g} s ")
            else:
                position = replay.position_s
                state = "⏸" if replay.paused else "■" if position >= replay.duration_s else "▶"
                text.append(
                    f"· {state} {_clock(position)} / {_clock(replay.duration_s)} ×{replay.speed:g} ",
                    style="bold",
                )
                if position >= replay.duration_s:
                    text.append("end of recording ", style="bold dark_orange")
            versions = f"· npu-smi {v.npu_smi or 'n/a'} · CANN {v.cann or 'n/a'}"
            if not self.compact:
                versions += f" · driver {v.driver or 'n/a'} · firmware {v.firmware or 'n/a'}"
            text.append(versions, style="dim")
        if self.paused:
            text.append("  ⏸ PAUSED", style="bold black on yellow")
        busy = self._busy_s()
        if busy is not None and busy > self.sampler.interval_s + 1:
            text.append(f"  ⏳ sampling for {busy:.0f} s (stale)", style="bold dark_orange")
        if self.banner:
            text.append(f"\n {self.banner}", style="italic")
        self.query_one("#header", Line).set(text)

    def _render_alerts(self) -> None:
        widget = self.query_one("#alerts", Line)
        width = max(20, self.size.width - 2)
        if self._failure:
            widget.set(Text(f"✖ sampler error: {self._failure}", style="bold red"))
            return
        line = summary_line(self.alerts, width)
        if not self.alerts:
            widget.set(Text(line, style="dim green"))
            return
        worst = max(alert.severity for alert in self.alerts)
        style = {Severity.CRITICAL: "bold red", Severity.WARNING: "bold dark_orange"}.get(worst, "green")
        widget.set(Text(line, style=style))

    def _busy_s(self) -> Optional[float]:
        return None if self._sampling_since is None else time.monotonic() - self._sampling_since

    def _tick_clock(self) -> None:
        # Only the "sampling for N s" marker moves between samples; the rest comes with them.
        busy = self._busy_s()
        if busy is not None and busy > self.sampler.interval_s + 1:
            self._render_header()

    # --- actions --------------------------------------------------------------------------

    @property
    def replay(self) -> Optional[ReplaySampler]:
        """The recording being played, when the dashboard replays one."""
        return self.sampler if isinstance(self.sampler, ReplaySampler) else None

    def check_action(self, action: str, parameters: Tuple[object, ...]) -> Optional[bool]:
        # The replay keys exist only while a recording plays: hidden from the footer otherwise.
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
        self.push_screen(HelpScreen())

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

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.query_one(ProcessTable).set_filter("")

    def action_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_one(ProcessTable).set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_kept(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.query_one(ProcessTable).focus()

    def on_chip_card_selected(self, message: ChipCard.Selected) -> None:
        if self.snapshot is not None:
            self.push_screen(DetailScreen(message.key, self.snapshot, self.sampler))


def _clock(seconds: float) -> str:
    """``MM:SS`` (``H:MM:SS`` past an hour) for replay positions."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


def run_dashboard(options: Dict[str, object]) -> int:
    """Open the dashboard for these sampler options; the demo stands in when the machine has no NPU."""
    from npuwatch.live_text import demo_fallback
    from npuwatch.wiring import build_sampler

    options, banner = demo_fallback(options)
    with build_sampler(**options) as sampler:  # type: ignore[arg-type]
        app = NpuwatchApp(sampler, banner=banner.strip())
        app.run()
    if app.crash is not None:  # the terminal is restored by now: one line, the traceback in a file
        print(crash_line(app.crash, "the dashboard"), file=sys.stderr)
        return EXIT_INTERNAL
    return app.return_code or 0
