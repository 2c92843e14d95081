"""Provides ``start_worker``: a DCMI ``Worker`` started at once, its library and limit resolved.

This imports little, so starting the worker can be the first thing a feed does.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

from npuwatch.probes.dcmi.worker.process import DEFAULT_TIMEOUT_S, START_GRACE_S, Worker
from npuwatch.probes.dcmi.worker.protocol import LIBRARY_VARIABLE


def start_worker(
    library: Optional[str],
    root: str = "/",
    timeout_s: Optional[float] = None,
    environ: Optional[Mapping[str, str]] = None,
    start_grace_s: float = START_GRACE_S,
    restart_at_once: bool = True,
) -> Worker:
    """A ``Worker`` started now: it loads the library, initialises and enumerates while the caller
    does other things (this module imports little, so it can be the first thing a feed does).

    ``library``: the path (or ``python:<module>``) to load; ``None``: ``NPUWATCH_DCMI_LIB`` (in
    ``environ``, then the process's), else the search path under ``root``.  ``timeout_s``: one
    read's limit (``None``: ``DEFAULT_TIMEOUT_S``).  ``environ`` is added to the worker's
    environment (a demo's fake library reads its variables there).  ``start_grace_s``: how much
    longer than one read the first answer (the interpreter's start, the library's load and
    ``dcmi_init``) may take.  ``restart_at_once``: start a fresh worker as soon as one failed
    (``False`` for a one-shot command, which has no next read to have it ready for).
    """
    env = dict(environ or {})
    if library is None:
        library = env.get(LIBRARY_VARIABLE) or os.environ.get(LIBRARY_VARIABLE) or None
    limit_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    worker = Worker(library, root, limit_s, env, start_grace_s=start_grace_s, restart_at_once=restart_at_once)
    worker.start()
    return worker
