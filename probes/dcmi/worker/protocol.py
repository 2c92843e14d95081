"""Provides the DCMI worker's protocol: the messages both sides exchange and how one is framed.

Requests go on the worker's stdin, answers on the pipe that was its stdout.  Each message is a
4-byte big-endian length and a pickle: the ``records`` the reader fills, or this module's
``InitOutcome``/``TickOutcome``; npuwatch's side answers its caller with a ``WorkerTick`` or a
``WorkerFailure``.  Imports the standard library and ``records`` only: the worker loads it first.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass, field
from typing import Mapping, Optional, Tuple, Union

from npuwatch.probes.dcmi import records

#: The module the worker process runs (the package: its ``__main__``).
MODULE = "npuwatch.probes.dcmi.worker"
#: ``module:function`` the worker calls before each tick when set (the demo's fake writes its state).
REFRESH_VARIABLE = "NPUWATCH_FAKE_DCMI_REFRESH"
#: The environment variable naming the library (``--dcmi-lib`` wins).
LIBRARY_VARIABLE = "NPUWATCH_DCMI_LIB"
#: The largest answer accepted (a tick of hundreds of chips is a few hundred KiB).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

HEADER = struct.Struct(">I")


# --- the messages ------------------------------------------------------------------------------


@dataclass(frozen=True)
class InitOutcome:
    """How loading the library and ``dcmi_init`` went, as the worker reports it."""

    #: ``ok``; ``not-found`` / ``load`` (the loader's words in message/hint); ``init`` (code).
    kind: str
    code: Optional[int] = None  # dcmi_init's return code, when it ran
    message: str = ""
    hint: str = ""
    tried: Tuple[str, ...] = ()  # the paths the loader tried


@dataclass(frozen=True)
class TickOutcome:
    """One tick's records, and what the worker could not do cleanly around them."""

    chips: Tuple[records.ChipTick, ...] = ()
    warnings: Tuple[str, ...] = ()
    #: The worker's CPU seconds in the demo's refresh function before this tick (the simulated
    #: driver writing its state: work a real machine's driver does outside npuwatch).
    refresh_cpu_s: float = 0.0


@dataclass(frozen=True)
class WorkerFailure:
    """Why the worker gave no tick: ``not-found``, ``load``, ``init``, ``permission``, ``timeout``,
    ``crash``, ``limit`` (past a memory or CPU bound) or ``closed``."""

    kind: str
    message: str
    hint: str = ""
    code: Optional[int] = None  # the DCMI code (dcmi_init's), when one was given
    output: str = ""


@dataclass(frozen=True)
class WorkerTick:
    """A good tick: the chips' records with the enumeration they were read against."""

    inventory: records.Inventory
    chips: Tuple[records.ChipTick, ...]
    warnings: Tuple[str, ...] = ()
    #: True when ``inventory`` is new since the last good tick (a fresh worker, a re-enumeration).
    enumerated: bool = False
    pid: Optional[int] = None  # the worker that read it
    timings: Mapping[str, float] = field(default_factory=dict)


WorkerAnswer = Union[WorkerTick, WorkerFailure]


def frame(message: object) -> bytes:
    """``message`` as one framed message: its pickle's length, then the pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data
