"""Provides the DCMI worker: one long-lived child process that makes every library call under a deadline.

A DCMI call can block inside the driver, and a thread cannot be interrupted; a library can crash.
So no call is made in npuwatch's own process: one worker per source (a fresh interpreter run
through ``runner.python_module_argv``, its own session, counted by ``runner.register_child`` so
``kill_all()`` ends it) loads the library, calls ``dcmi_init``, enumerates and reads the ticks.

One job a module:

* ``protocol``: the messages (``InitOutcome``, ``TickOutcome``, ``WorkerTick``,
  ``WorkerFailure``) and their framing (a 4-byte length and a pickle);
* ``process``: npuwatch's side, ``Worker`` (one deadline per request, kills, restarts, bounds);
  ``start``: ``start_worker``;
* ``failures``: what a failure says and the restart back-off (``restart_delay_s``);
* ``child``: the worker's side (``child_main``, run by ``__main__``; the default opener
  ``open_reader``);
* ``watchdog``: the worker ends, with all the library started, when npuwatch is gone (child
  subreaper, marks).

This package re-exports their public names: ``npuwatch.probes.dcmi.worker`` is what importers
name.
"""

from npuwatch.probes.dcmi.worker.child import Opener, Reader, child_main, open_reader
from npuwatch.probes.dcmi.worker.failures import (
    FAILURE_WINDOW_S,
    RESTART_BACKOFF_MAX_S,
    RESTARTS_AT_ONCE,
    crash_message,
    restart_delay_s,
)
from npuwatch.probes.dcmi.worker.process import (
    DEFAULT_BOUNDS,
    DEFAULT_OPENER,
    DEFAULT_TIMEOUT_S,
    LIMIT_CHECK_S,
    START_GRACE_S,
    Worker,
)
from npuwatch.probes.dcmi.worker.protocol import (
    LIBRARY_VARIABLE,
    MAX_MESSAGE_BYTES,
    MODULE,
    REFRESH_VARIABLE,
    InitOutcome,
    TickOutcome,
    WorkerAnswer,
    WorkerFailure,
    WorkerTick,
)
from npuwatch.probes.dcmi.worker.start import start_worker
from npuwatch.probes.dcmi.worker.watchdog import WATCH_PARENT_IDLE_S, WATCH_PARENT_S

__all__ = [
    "DEFAULT_BOUNDS",
    "DEFAULT_OPENER",
    "DEFAULT_TIMEOUT_S",
    "FAILURE_WINDOW_S",
    "LIBRARY_VARIABLE",
    "LIMIT_CHECK_S",
    "MAX_MESSAGE_BYTES",
    "MODULE",
    "REFRESH_VARIABLE",
    "RESTARTS_AT_ONCE",
    "RESTART_BACKOFF_MAX_S",
    "START_GRACE_S",
    "WATCH_PARENT_IDLE_S",
    "WATCH_PARENT_S",
    "InitOutcome",
    "Opener",
    "Reader",
    "TickOutcome",
    "Worker",
    "WorkerAnswer",
    "WorkerFailure",
    "WorkerTick",
    "child_main",
    "crash_message",
    "open_reader",
    "restart_delay_s",
    "start_worker",
]
