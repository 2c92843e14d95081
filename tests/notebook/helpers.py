"""Helpers for the notebook tests: a fake feed (fixed snapshots, no npu-smi), polling, a real
IPython shell with the magic loaded, and a real Jupyter kernel running cells."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import pytest

from npuwatch.feeds import FeedOptions
from npuwatch.history import History
from npuwatch.model import Snapshot
from tests.conftest import need

#: Generous: a loaded CI machine may take long to schedule a thread; no test asserts a duration.
DEADLINE_S = 30.0


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after a generous deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


class FakeFeed:
    """A SnapshotFeed over fixed snapshots: the n-th sample is taken n seconds after the first.

    ``gate`` (an Event) blocks every sample until set, as a hung npu-smi would; ``error`` is
    raised by every sample (a bug in the sampler: npu-smi failures are notes, never exceptions).
    """

    def __init__(
        self,
        snapshots: Sequence[Snapshot],
        *,
        interval_s: float = 0.02,
        gate: Optional[threading.Event] = None,
        error: Optional[Exception] = None,
    ) -> None:
        self.snapshots = list(snapshots)
        self.interval_s = interval_s
        self.history = History()
        self.gate = gate
        self.error = error
        self.calls = 0
        self.closed = threading.Event()

    @property
    def label(self) -> str:
        return "fake"

    def sample(self) -> Snapshot:
        if self.gate is not None:
            self.gate.wait()
        self.calls += 1
        if self.error is not None:
            raise self.error
        base = self.snapshots[min(self.calls, len(self.snapshots)) - 1]
        return replace(base, taken_at=base.taken_at + timedelta(seconds=self.calls - 1))

    def chip_details(self, npu_id: int, chip_id: int) -> None:
        return None

    def close(self) -> None:
        self.closed.set()

    def __enter__(self) -> FakeFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FeedMaker:
    """The hub's factory: records the options of every feed it builds."""

    def __init__(
        self,
        snapshots: Sequence[Snapshot],
        gate: Optional[threading.Event] = None,
        error: Optional[Exception] = None,
    ) -> None:
        self.snapshots = snapshots
        self.gate = gate
        self.error = error
        self.built: List[FakeFeed] = []
        self.options: List[FeedOptions] = []

    def __call__(self, options: FeedOptions) -> FakeFeed:
        self.options.append(options)
        interval = options.interval_s or 0.02
        feed = FakeFeed(self.snapshots, interval_s=interval, gate=self.gate, error=self.error)
        self.built.append(feed)
        return feed


#: Elements without an end tag in the HTML we write.
VOID = frozenset(("br", "circle", "img", "line", "polyline"))


class Elements(HTMLParser):
    """Every element's tag, attributes, classes, inline style and text (to query HTML by class)."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.found: List[Dict] = []
        self._open: List[Dict] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        named = dict(attrs)
        element = {"tag": tag, "attrs": named, "classes": (named.get("class") or "").split()}
        element["style"] = inline_style(named.get("style") or "")
        element["text"] = ""
        element["inside"] = [e["tag"] for e in self._open]
        self.found.append(element)
        if tag not in VOID:
            self._open.append(element)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)  # ``<circle/>``: nothing to close, so no end tag
        if tag not in VOID:
            self._open.pop()

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for element in self._open:
            element["text"] += data

    def by_class(self, name: str) -> List[Dict]:
        return [e for e in self.found if name in e["classes"]]

    def by_tag(self, tag: str) -> List[Dict]:
        return [e for e in self.found if e["tag"] == tag]


def inline_style(style: str) -> Dict[str, str]:
    """``"a:b;c:d"`` as ``{"a": "b", "c": "d"}`` (property names lower-cased)."""
    out: Dict[str, str] = {}
    for part in style.split(";"):
        name, colon, value = part.partition(":")
        if colon:
            out[name.strip().lower()] = value.strip()
    return out


@contextmanager
def magic_shell() -> Iterator[Any]:
    """A real IPython shell (no kernel) with ``%load_ext npuwatch``; every notebook view it started
    is stopped on the way out."""
    from IPython.core.interactiveshell import InteractiveShell

    from npuwatch import notebook

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "npuwatch")
    try:
        yield shell
    finally:
        notebook.stop_all()


def _kernel_available() -> bool:
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError:
        return False
    return True


def run_in_kernel(cells: Sequence[str], path: Path) -> Any:
    """The notebook of ``cells`` after a real Jupyter kernel (nbclient) ran them in ``path``; the
    test is skipped without ipykernel, nbclient and nbformat."""
    need(_kernel_available(), "ipykernel, nbclient and nbformat are needed to run a real kernel")
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(
        notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(path)}}
    )
    client.execute()
    return notebook


def cell_stream(cell: Any) -> str:
    """What a cell printed (its stream outputs)."""
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
