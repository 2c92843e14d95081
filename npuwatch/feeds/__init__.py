"""Provides the one composition root: FeedOptions, open_machine() and open_feed().

Every command, the notebook and the dashboard name their data source the same way (docs/design.md §2.1):
``shared_options()`` declares the flags, ``FeedOptions.from_args`` reads them (the notebook builds
one from keywords), ``FeedOptions.validate`` holds every rule about their combinations, and

- ``open_machine(options)`` wires the machine to read: a demo's simulated tree, ``--root`` or
  this machine, and the npu-smi that belongs to it (``check``, ``doctor``, ``selftest``);
- ``open_feed(options)`` wires a SnapshotFeed on top of it, or over a recording or a saved
  ``npu-smi info`` text (the dashboard, the plain view, ``snapshot``, ``serve``, ``record``, the
  notebook);
- ``OpeningFeed`` opens the dashboard's feed on a thread while the toolkit imports.

One job a module: ``options`` (the flags, ``FeedOptions``), ``budgets`` (the time budgets),
``machine_handle`` (``MachineHandle``), ``machine`` (``open_machine``, ``demo_fallback``),
``chips`` (``chip_source``, ``auto_backend``), ``wiring`` (``open_feed``), ``opening``
(``OpeningFeed``).  This package re-exports their public names: importers name ``npuwatch.feeds``.

These modules import only light things at the top: ``npuwatch check`` loads it, and its import
graph is pinned (tests/core/test_check.py); the sampler, the simulator and the recording modules
load inside the functions that need them.
"""

from npuwatch.feeds.budgets import (
    ERROR_QUERIES_BUDGET_S,
    ONE_SHOT_GRACE_S,
    WORKER_START_GRACE_S,
    one_shot_deadline,
)
from npuwatch.feeds.chips import auto_backend, chip_source
from npuwatch.feeds.machine import demo_fallback, open_machine
from npuwatch.feeds.machine_handle import MachineHandle
from npuwatch.feeds.opening import OpeningFeed
from npuwatch.feeds.options import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_INTERVAL_S,
    FeedOptions,
    parse_devices,
    scenario_listing,
    shared_options,
)
from npuwatch.feeds.wiring import open_feed

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "DEFAULT_INTERVAL_S",
    "ERROR_QUERIES_BUDGET_S",
    "ONE_SHOT_GRACE_S",
    "WORKER_START_GRACE_S",
    "FeedOptions",
    "MachineHandle",
    "OpeningFeed",
    "auto_backend",
    "chip_source",
    "demo_fallback",
    "one_shot_deadline",
    "open_feed",
    "open_machine",
    "parse_devices",
    "scenario_listing",
    "shared_options",
]
