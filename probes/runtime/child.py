"""The self-test child: ``python -m npuwatch.probes.runtime.child --device N [--level --backend --events F]``.

It runs one device's steps and appends one JSON line per event to ``FILE`` (or to stdout when no
file is given), flushed as it goes, so the parent that kills it at its timeout still knows which
step, and which blocking call, it hung in.  Exit status 0 means the protocol completed; the
verdict is in the events.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import os
import signal
import sys
from typing import IO, List, Optional

from npuwatch.probes.runtime.discover import import_runtime
from npuwatch.probes.runtime.plan import plan_for
from npuwatch.probes.runtime.protocol import PROTOCOL_VERSION, Backend, EventKind, Level
from npuwatch.probes.runtime.recorder import Recorder

_PR_SET_PDEATHSIG = 1


def main(argv: Optional[List[str]] = None) -> int:
    """Run one device's self-test; returns 0 once every event is written."""
    parser = argparse.ArgumentParser(prog="python -m npuwatch.probes.runtime.child")
    parser.add_argument("--device", type=int, required=True)
    parser.add_argument("--level", choices=[level.value for level in Level], default=Level.QUICK.value)
    parser.add_argument("--backend", choices=["auto"] + [b.value for b in Backend], default="auto")
    parser.add_argument("--events", help="append events to this file instead of stdout")
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash inside a native library leaves its Python stack on stderr
    _die_with_parent()
    stream = _event_stream(args.events)
    rec = Recorder(stream)
    requested = None if args.backend == "auto" else Backend(args.backend)
    rec.emit(
        EventKind.HELLO,
        protocol=PROTOCOL_VERSION,
        pid=os.getpid(),
        device=args.device,
        level=args.level,
        backend=args.backend,
        python=sys.version.split()[0],
    )
    chosen = import_runtime(requested, rec, os.environ)
    if chosen is not None:
        backend, module = chosen
        plan = plan_for(Level(args.level))
        if backend is Backend.ACL:
            from npuwatch.probes.runtime.acl_backend import run_acl

            run_acl(module, args.device, plan, rec, os.environ)
        else:
            from npuwatch.probes.runtime.torch_backend import run_torch

            run_torch(module, args.device, plan, rec, os.environ)
    rec.emit(EventKind.DONE)
    stream.close()
    return 0


def _event_stream(path: Optional[str]) -> IO[str]:
    if path:
        return open(path, "a", encoding="utf-8")
    # Events go to a private copy of stdout; fd 1 then points at stderr, so anything a native
    # library prints cannot land inside an event line.
    events_fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(events_fd, "w", encoding="utf-8")


def _die_with_parent() -> None:
    """Linux: get SIGKILL if npuwatch dies first, so a self-test never runs on unattended."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main())
