"""Provides the worker's side of the DCMI worker: the child process that loads the library and
answers npuwatch's requests (``python -m npuwatch.probes.dcmi.worker``).

It answers on the pipe that was its stdout: it keeps a duplicate of it and points fd 1 at
``/dev/null``, so a library that prints cannot corrupt the protocol.  It answers ``init`` then
``inventory`` unasked, then one answer per request; it ends when its stdin closes, and its
``watchdog`` ends it (and all the library started) when npuwatch is gone.  It imports the
standard library, ``records`` and, once running, the loader and the reader; never the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import threading
import time
import traceback
from typing import Callable, Optional, Protocol, Sequence, Tuple, cast

from npuwatch.probes.dcmi import records
from npuwatch.probes.dcmi.worker.protocol import HEADER, REFRESH_VARIABLE, InitOutcome, TickOutcome, frame
from npuwatch.probes.dcmi.worker.watchdog import become_subreaper, watch_parent


class Reader(Protocol):
    """What the worker asks of a reader (``reader.Reader``; a test's stand-in)."""

    def inventory(self) -> records.Inventory: ...

    def tick(self, chips: Sequence[records.ChipFacts]) -> Sequence[records.ChipTick]: ...


Opener = Callable[[Optional[str], str], Tuple[InitOutcome, Optional[Reader]]]


def child_main(argv: Sequence[str]) -> int:
    """The worker: ``[library spec as JSON, root, parent pid, opener]``.  Answers on the pipe that
    was fd 1; fd 1 itself goes to ``/dev/null``."""
    answers = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # whatever the library prints goes nowhere, never into the protocol
    os.close(null)
    spec, root, parent, opener = json.loads(argv[0]), argv[1], int(argv[2]), argv[3]
    become_subreaper()  # before the library loads: its orphans stay the worker's descendants
    threading.Thread(target=watch_parent, args=(parent, 0), name="watch-parent", daemon=True).start()
    channel = _Channel(0, answers)
    try:
        open_with = cast(Opener, _resolve(opener))
        init, reader = open_with(spec, root)
    except Exception:
        channel.send(("error", traceback.format_exc()))
        return 1
    channel.send(("init", init))
    if reader is None:
        return 0
    return _serve(channel, reader)


def _serve(channel: _Channel, reader: Reader) -> int:
    refresh = _Refresh(os.environ.get(REFRESH_VARIABLE, ""))
    chips: Tuple[records.ChipFacts, ...] = ()
    request: object = ("inventory",)  # the first enumeration, unasked
    while True:
        try:
            if request == ("inventory",):
                inventory = reader.inventory()
                chips = tuple(inventory.chips)
                channel.send(("inventory", inventory))
                refresh.prepare()  # its imports while npuwatch has not asked for a tick yet
            elif request == ("tick",):
                began = time.thread_time()
                warnings = refresh()
                refresh_cpu_s = time.thread_time() - began if refresh.name else 0.0
                ticks = tuple(reader.tick(chips))
                channel.send(("tick", TickOutcome(ticks, warnings, refresh_cpu_s)))
            else:
                return 0  # ("exit",) or anything else
        except Exception:
            channel.send(("error", traceback.format_exc()))
        request = channel.receive()
        if request is None:  # npuwatch closed the pipe: it ended, or closed this source
            return 0


def _resolve(name: str) -> Callable[..., object]:
    """The function ``module:function`` names."""
    import importlib

    module, _, attribute = name.partition(":")
    function = getattr(importlib.import_module(module), attribute)
    if not callable(function):
        raise TypeError(f"{name} is not a function")
    return cast(Callable[..., object], function)


def open_reader(spec: Optional[str], root: str) -> Tuple[InitOutcome, Optional[Reader]]:
    """Load the library and ``dcmi_init``: the outcome, and the reader when it worked (the default
    ``opener``)."""
    from npuwatch.probes.dcmi import library, reader

    try:
        loaded = library.load_library(spec, root)
    except library.LibraryError as exc:
        failure = exc.failure
        kind = "not-found" if _not_found(failure) else "load"
        return InitOutcome(kind, message=failure.message, hint=failure.hint, tried=failure.tried), None
    read = reader.Reader(loaded)
    code = read.init()
    if code != 0:
        return InitOutcome("init", code=code), None
    return InitOutcome("ok", code=0), read


def _not_found(failure: records.LibraryFailure) -> bool:
    """Whether no candidate existed at all (rather than one that failed to load)."""
    flag = getattr(failure, "not_found", None)
    if isinstance(flag, bool):
        return flag
    return failure.message.endswith(" not found") or " not found (tried " in failure.message


class _Refresh:
    """The demo's ``module:function`` called before each tick (its fake writes the live state)."""

    def __init__(self, name: str) -> None:
        self.name = name.strip()
        self.function: Optional[Callable[[], object]] = None

    def prepare(self) -> None:
        """Import the function now, without calling it (a failure is reported by the next call)."""
        if self.name and self.function is None:
            with contextlib.suppress(Exception):
                self.function = _resolve(self.name)

    def __call__(self) -> Tuple[str, ...]:
        if not self.name:
            return ()
        try:
            if self.function is None:
                self.function = _resolve(self.name)
            self.function()
        except Exception as exc:
            return (f"{REFRESH_VARIABLE}={self.name} failed: {exc!r}",)
        return ()


class _Channel:
    """The worker's ends of the pipes: requests in, answers out."""

    def __init__(self, requests: int, answers: int) -> None:
        self.requests = requests
        self.answers = answers

    def send(self, message: object) -> None:
        data = frame(message)
        while data:
            data = data[os.write(self.answers, data) :]

    def receive(self) -> Optional[object]:
        header = self._exactly(HEADER.size)
        if header is None:
            return None
        (size,) = HEADER.unpack(header)
        data = self._exactly(size)
        return None if data is None else pickle.loads(data)

    def _exactly(self, size: int) -> Optional[bytes]:
        chunks = []
        while size > 0:
            chunk = os.read(self.requests, min(size, 1 << 16))
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)
