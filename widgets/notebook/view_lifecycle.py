"""Provides ViewLifecycle: what every live notebook view (``LiveView``, ``FleetView``) does with its
root widget: stop when it is closed (from Python or the front-end), close its tree, wait for the
first update, and show itself as the widget with text and HTML fallbacks.
"""

from __future__ import annotations

import threading
from typing import Any, Dict


class ViewLifecycle:
    """A mixin for a view with a root ``widget``, a ``_first`` event set by its first update,
    and ``stop()``, ``text()``, ``html()``; call ``_watch_widget()`` once the widget exists."""

    widget: Any
    _first: threading.Event

    def stop(self) -> None:
        """Stop updating (the view's own)."""
        raise NotImplementedError

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
