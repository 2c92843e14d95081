"""A refresh function for the worker's tests that logs its import and each call.

``REFRESH_PROBE_LOG`` names the file: ``imported`` when the worker imports this module,
``refreshed`` each time it calls ``refresh``.  Runs in the worker process.
"""

from __future__ import annotations

import os


def _log(line: str) -> None:
    with open(os.environ["REFRESH_PROBE_LOG"], "a") as handle:
        handle.write(line + "\n")


_log("imported")


def refresh() -> None:
    _log("refreshed")
