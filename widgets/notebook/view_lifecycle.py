"""Provides ViewLifecycle: what every live notebook view (``LiveView``, ``FleetView``) does with its
root widget: stop when it is closed (from Python or the front-end), close its tree, draw an update
from its thread (an exception is one crash line in the view, never a frozen view), wait for the
first update, and show itself as the widget with text and HTML fallbacks.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict


class ViewLifecycle:
    """A mixin for a view with a root ``widget``, a ``_first`` event set by its first update,
    and ``stop()``, ``text()``, ``html()``; call ``_watch_widget()`` once the widget exists."""

    widget: Any
    _first: threading.Event
    _lock: threading.RLock

    @property
    def running(self) -> bool:
        """True until ``stop()`` or the widget is closed (the view's own)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop updating (the view's own)."""
        raise NotImplementedError

    def _crash_line(self, exc: Exception) -> str:
        """The crash line of ``exc`` (the view's own)."""
        raise NotImplementedError

    def _on_crash(self, line: str) -> None:
        """Show a crash line (the view's own)."""
        raise NotImplementedError

    def _show(self, render: Callable[[], None]) -> None:
        """Run ``render`` under the view's lock (on the updating thread) unless the view stopped; a
        widget closed meanwhile stops the view.  An exception is a bug in npuwatch: one line in the
        view, never a frozen view.  ``wait_first`` wakes either way."""
        try:
            with self._lock:
                if not self.running:
                    return
                if self.widget.comm is None:
                    self.stop()
                    return
                render()
        except Exception as exc:
            self._on_crash(self._crash_line(exc))
        finally:
            self._first.set()

    def text(self) -> str:
        """The text/plain fallback (the view's own)."""
        raise NotImplementedError

    def html(self) -> str:
        """The text/html fallback (the view's own)."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop and close the widgets (the output area empties)."""
        self.stop()
        for child in self.widget.children:
            close_tree(child)
        self.widget.close()

    def wait_first(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the first update (or error); True when one arrived."""
        return self._first.wait(timeout_s)

    def _watch_widget(self) -> None:
        """Stop when the root widget is closed: ``Widget.close()`` from Python clears its comm; the
        front-end closing the model (cell deleted, page closed) calls the comm's ``on_close``."""
        self.widget.observe(self._on_comm_change, names="comm")
        on_close = getattr(self.widget.comm, "on_close", None)
        if on_close is not None:
            on_close(lambda _message: self.stop())

    def _on_comm_change(self, change: Dict[str, Any]) -> None:
        if change.get("new") is None:  # Widget.close() from Python
            self.stop()

    def _repr_mimebundle_(self, **kwargs: Any) -> Dict[str, Any]:
        bundle: Dict[str, Any] = {}
        if self.widget.comm is not None:
            bundle.update(self.widget._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.text()
        bundle["text/html"] = self.html()
        return bundle


def close_tree(widget: Any) -> None:
    """Close ``widget`` and every widget under it."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    widget.close()
