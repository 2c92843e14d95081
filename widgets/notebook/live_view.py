"""Provides LiveView: the ``%npuwatch`` ipywidgets tree, updated by setting traits from a sampler thread.

Every widget is created here, on the caller's (the kernel's main) thread; the hub's thread only
assigns ``.value`` strings, so no comm is opened off the main thread.  The view stops when its
root widget is closed (from Python or the front-end), on ``stop()``, and at interpreter exit (the
hub's atexit handler).

The chips are cards, or a compact table (one row per chip) by default above
``COMPACT_ABOVE_CHIPS``; a toggle in the view switches.  An exception while rendering is a bug:
its traceback goes to a file (``npuwatch.crash``), the view shows one line naming it and keeps
trying with the next sample, so it never freezes silently.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Deque, Dict, Optional, Tuple

from npuwatch.alerts import Alert, AlertTracker
from npuwatch.availability import no_data_reason
from npuwatch.crash import crash_line
from npuwatch.history import History
from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.notebook.hub import SamplerHub, Subscription, default_hub
from npuwatch.widgets.notebook.layout import resolve_layout
from npuwatch.widgets.notebook.own_memory import OwnMemoryReader, own_memory_text
from npuwatch.widgets.notebook.view_lifecycle import ViewLifecycle
from npuwatch.widgets.view_model import ViewModel, build_view

if TYPE_CHECKING:
    from npuwatch.feeds import FeedOptions
    from npuwatch.model import Snapshot

JUPYTER_EXTRA_HINT = "pip install 'npuwatch[jupyter]'"
SAMPLING = "sampling…"
INTERNAL_ERROR = "internal error"
#: What the crash line names as the failing part.
WHERE = "the notebook live view"


def import_ipywidgets() -> Any:
    """The ipywidgets module, or an ImportError that names the extra to install."""
    try:
        import ipywidgets  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ImportError(
            f"the npuwatch live view needs ipywidgets: {JUPYTER_EXTRA_HINT} (then restart the kernel)"
        ) from exc
    return ipywidgets


class LiveView(ViewLifecycle):
    """A live view of one feed: ``.widget`` (display it), ``.snapshot``, ``.alerts``, ``.stop()``."""

    def __init__(
        self,
        options: FeedOptions,
        *,
        interval_s: float,
        history_min: float = 15.0,
        banner: str = "",
        hub: Optional[SamplerHub] = None,
        layout: str = "auto",
        read_own_memory: Optional[OwnMemoryReader] = None,
    ) -> None:
        widgets = import_ipywidgets()
        resolve_layout(layout, 0)  # a ValueError naming the choices, before any widget exists
        self.layout_choice = layout  # auto | cards | table; a click on the toggle makes it explicit
        self.options = options
        self.interval_s = interval_s
        self.history_min = history_min
        self.points = max(2, int(history_min * 60.0 / interval_s + 0.5))
        self.window = f"{history_min:g} min"
        self.history = History(self.points)
        self.tracker = AlertTracker()
        self.snapshot: Optional[Snapshot] = None
        self.alerts: Tuple[Alert, ...] = ()
        self.view: Optional[ViewModel] = None
        self.error: Optional[str] = None
        self.crash_line: Optional[str] = None  # an internal error, with where its traceback is
        self.status = SAMPLING
        self.updates = 0
        self._problem: Optional[str] = None
        self._shown_layout: Optional[str] = None  # the form the chips are drawn in, once known
        self._last_crash: Optional[Tuple[Tuple[str, str], str]] = None  # (type, message), line
        self._host_cpu: Deque[Optional[float]] = deque(maxlen=self.points)
        self._lock = threading.RLock()
        self._first = threading.Event()
        self._stopped = False
        self._hub = hub or default_hub()
        self._read_own_memory = read_own_memory  # this kernel's torch_npu figures (the notebook's reader)

        html = widgets.HTML
        source = self._source_label()
        self.header = html(live_html.header_html("npuwatch", source, SAMPLING))
        self.updated = html("--:--:--")
        self.updated.add_class("npuwatch-updated")
        self.alerts_html = html("")
        self.chips = html(f'<div class="npuwatch-sampling" style="opacity:0.8">{SAMPLING}</div>')
        self.host = html("")
        self.processes = html("", layout=widgets.Layout(max_height="260px", overflow="auto"))
        self.notes = html("")
        self.crash = html("")
        self.layout_toggle = widgets.ToggleButtons(
            options=[("cards", "cards"), ("table", "table")],
            index=None if layout == "auto" else ("cards", "table").index(layout),
            tooltips=["a card per chip, with labelled plots", "a row per chip (the default above 8 chips)"],
            style={"button_width": "auto"},
            layout=widgets.Layout(width="auto"),
        )
        self.layout_toggle.add_class("npuwatch-layout-toggle")
        self.layout_toggle.observe(self._on_layout_toggle, names="value")
        parts = []
        if banner:
            parts.append(html(f'<div class="npuwatch-banner" style="font-size:12px">{_esc(banner)}</div>'))
        clock = widgets.HBox([html('<span style="opacity:0.7">updated</span>'), self.updated])
        right = widgets.HBox([self.layout_toggle, clock], layout=widgets.Layout(align_items="center"))
        parts += [
            widgets.HBox([self.header, right], layout=widgets.Layout(justify_content="space-between")),
            self.crash,
            self.alerts_html,
            self.chips,
            self.host,
            self.processes,
            self.notes,
        ]
        self.widget = widgets.VBox(parts)
        self.widget.add_class("npuwatch-live")
        self._watch_widget()
        self._subscription: Subscription = self._hub.subscribe(
            self.options, self._on_snapshot, self._on_error, self._on_crash
        )

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def subscription(self) -> Subscription:
        """This view's place on the shared sampler channel."""
        return self._subscription

    @property
    def thread(self) -> threading.Thread:
        """The sampler thread feeding this view (shared with views of the same options)."""
        return self._subscription.channel.thread

    @property
    def running(self) -> bool:
        """True until ``stop()`` or the widget is closed."""
        return not self._stopped

    def stop(self) -> None:
        """Stop updating; the sampler thread ends when no other view uses it.  Never blocks."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self.status = "stopped"
        self._subscription.cancel()
        if self.widget.comm is not None:
            self.header.value = live_html.header_html(self._title(), self._source_label(), self.status)

    # --- updates (on the hub's thread) -----------------------------------------------------------

    def _on_snapshot(self, snapshot: Snapshot) -> None:
        self._show(lambda: self._render(snapshot))

    def _own_memory(self, snapshot: Snapshot) -> Optional[Dict[Tuple[int, int], str]]:
        """This kernel's allocator figures as text by chip key; ``None`` without a reader."""
        if self._read_own_memory is None:
            return None
        return own_memory_text(self._read_own_memory(snapshot.chips), snapshot.chips)

    def _render(self, snapshot: Snapshot) -> None:
        self.history.add(snapshot)
        self._host_cpu.append(snapshot.host.cpu_percent if snapshot.host is not None else None)
        self.alerts = self.tracker.update(snapshot)
        view = build_view(
            snapshot,
            self.history,
            self.alerts,
            points=self.points,
            window=self.window,
            own_memory=self._own_memory(snapshot),
            host_cpu_series=tuple(self._host_cpu) if snapshot.host is not None else (),
            my_pid=os.getpid(),
        )
        self.snapshot, self.view, self.error = snapshot, view, None
        self._problem = None if snapshot.chips else no_data_reason(snapshot)
        self.alerts_html.value = live_html.alerts_html(view)
        self._draw_chips(resolve_layout(self.layout_choice, len(view.chips)))
        self.host.value = live_html.host_html(view.host, view.window, self.points)
        self.processes.value = live_html.processes_html(view.processes)
        self.notes.value = live_html.notes_html(view.warnings)
        self.updated.value = view.updated
        self.status = "live"
        self.header.value = live_html.header_html(view.title, view.source, self.status)
        self.updates += 1

    def _draw_chips(self, layout: str) -> None:
        """Draw the chips of the current frame as ``layout``; the toggle shows which form it is."""
        if self.view is None:
            return
        self._shown_layout = layout  # first: the toggle's observer then sees no change of choice
        self.layout_toggle.value = layout
        self.chips.value = live_html.chips_html(self.view, self.points, self._problem, layout=layout)

    def _on_layout_toggle(self, change: Dict[str, Any]) -> None:
        """A click on cards/table (on the kernel's main thread): redraw now, keep the choice."""
        layout = change.get("new")
        if layout not in ("cards", "table"):
            return
        try:
            with self._lock:
                if layout == self._shown_layout:  # set by _draw_chips, not by a click
                    return
                self.layout_choice = layout
                self._draw_chips(layout)
        except Exception as exc:
            self._on_crash(self._crash_line(exc))

    def _crash_line(self, exc: Exception) -> str:
        """The line for ``exc``; the same error on every sample writes its traceback only once."""
        key = (type(exc).__name__, str(exc))
        with self._lock:
            if self._last_crash is None or self._last_crash[0] != key:
                self._last_crash = (key, crash_line(exc, WHERE))
            return self._last_crash[1]

    def _on_crash(self, line: str) -> None:
        """Show an internal error's line (from rendering, or from the hub's sampler thread)."""
        with self._lock:
            if self._stopped or self.widget.comm is None:
                return
            self.crash_line = line
            self.status = INTERNAL_ERROR
            self.crash.value = live_html.crash_html(line)
            self.header.value = live_html.header_html(self._title(), self._source_label(), self.status)
            if self.snapshot is None:
                self.chips.value = ""
        self._first.set()

    def _on_error(self, message: str) -> None:
        with self._lock:
            if self._stopped or self.widget.comm is None:
                return
            self.error = message
            self.status = message if self.snapshot is None else f"{message} (showing the last sample)"
            self.header.value = live_html.header_html(self._title(), self._source_label(), self.status)
            if self.snapshot is None:
                self.chips.value = f'<div class="npuwatch-error" style="color:#c62828">{_esc(message)}</div>'
        self._first.set()

    def _title(self) -> str:
        return self.view.title if self.view is not None else "npuwatch"

    def _source_label(self) -> str:
        if self.view is not None:
            return self.view.source
        demo, replay = self.options.demo, self.options.replay
        if demo:
            return f"demo:{demo}"
        if replay:
            return f"replay:{os.path.basename(str(replay))}"
        return "npu-smi"

    # --- what a notebook shows ---------------------------------------------------------------------

    def text(self) -> str:
        """The current frame as plain text (the text/plain fallback)."""
        try:
            return self._text()
        except Exception as exc:  # shown when the cell displays: never a traceback there
            line = self._crash_line(exc)
            self._on_crash(line)
            return line

    def _text(self) -> str:
        from npuwatch.widgets.text import render_snapshot

        with self._lock:
            snapshot, alerts, status, crash = self.snapshot, self.alerts, self.status, self.crash_line
        after = f"\n{crash}" if crash else ""
        if snapshot is None:
            return f"npuwatch live view ({self._source_label()}): {status}{after}"
        lines = [render_snapshot(snapshot).rstrip("\n"), ""]
        lines += [f"⚠ {a.message}: {a.detail}" for a in alerts] or ["no alerts"]
        when = self.view.updated if self.view else ""
        return "\n".join(lines) + f"\n(live view {status}; sample time {when}){after}"

    def html(self) -> str:
        """The current frame as static HTML (the text/html fallback), in the form the view shows."""
        try:
            return self._html()
        except Exception as exc:  # shown when the cell displays: never a traceback there
            line = self._crash_line(exc)
            self._on_crash(line)
            return f'<div class="npuwatch-live">{live_html.crash_html(line)}</div>'

    def _html(self) -> str:
        with self._lock:
            view, status, crash, layout = self.view, self.status, self.crash_line, self._shown_layout
        if view is None:
            head = live_html.header_html("npuwatch", self._source_label(), status)
            return f'<div class="npuwatch-live">{head}{live_html.crash_html(crash)}</div>'
        return live_html.page_html(view, status, self.points, layout or "cards", crash)

    def __repr__(self) -> str:
        return f"<npuwatch LiveView {self._source_label()}: {self.status}, {self.updates} updates>"

    def state(self) -> Dict[str, Any]:
        """What the view shows, as plain data (tests, and scripts that poll a running view)."""
        with self._lock:
            view = self.view
            chips = []
            for row in view.chips if view is not None else ():
                metrics = {cell.key: cell.text for cell in row.metrics}
                reasons = {cell.key: cell.reason for cell in row.metrics if cell.reason}
                chips.append(
                    {
                        "npu_id": row.key[0],
                        "chip_id": row.key[1],
                        "health": row.health,
                        "metrics": metrics,
                        "reasons": reasons,
                        "own_memory": row.own_memory,
                    }
                )
            return {
                "status": self.status,
                "crash": self.crash_line,
                "layout": self._shown_layout,
                "layout_choice": self.layout_choice,
                "shared_reason": view.shared_reason if view is not None else None,
                "updates": self.updates,
                "updated": self.updated.value,
                "source": view.source if view is not None else self._source_label(),
                "chips": chips,
                "alerts": [alert.message for alert in self.alerts],
                "root_classes": list(self.widget._dom_classes),
                "updated_classes": list(self.updated._dom_classes),
                "chips_html": self.chips.value,
                "running": self.running,
                "thread_alive": self.thread.is_alive(),
            }


def _esc(text: str) -> str:
    from html import escape

    return escape(text)
