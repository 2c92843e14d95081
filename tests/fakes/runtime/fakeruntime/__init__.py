"""Shared machinery of the fake Ascend runtimes: fault injection, a simulated device clock, the ledger.

Environment (read when a fake is first imported, in the self-test child):

- ``NPUWATCH_FAKE_FAULT``: comma-separated ``call[@N]:action``; action is an error code
  (``507033``), ``hang`` (block forever, with a ``sleep`` grandchild in the same process group),
  ``corrupt`` (wrong data, return 0) or ``crash`` (SIGSEGV).  ``@N`` hits only the N-th call
  (1-based).  ``NPUWATCH_FAKE_FAULT_DEVICES=1,3`` limits the faults to processes working on
  those devices (from ``set_device`` on; earlier calls are not hit).  Calls: ``init device_count
  set_device create_context create_stream create_event get_mem_info malloc malloc_host memcpy
  memset record_event synchronize elapsed kernel kernel_run free free_host destroy_event
  destroy_stream destroy_context reset_device finalize``.
- ``NPUWATCH_FAKE_LEDGER_DIR``: where each process writes ``ledger-<backend>-<pid>.json`` at exit
  (every create/destroy, what is still live) and ``pid-<pid>`` when it starts.
- ``NPUWATCH_FAKE_DEVICE_COUNT`` (2), ``NPUWATCH_FAKE_SOC`` (Ascend910B3),
  ``NPUWATCH_FAKE_HBM_MIB`` (65536), ``NPUWATCH_FAKE_USED_MIB`` (3072),
  ``NPUWATCH_FAKE_GBPS`` (``h2d=22,d2h=24,d2d=700,kernel=600``: simulated rates; the host waits
  for them, so event times and wall time agree as on a device).
- ``NPUWATCH_FAKE_HIDE``: ``acl`` and/or ``torch_npu``: that module fails to import as if absent.
- ``NPUWATCH_FAKE_ACL_IMPORT_ERROR``: ``import acl`` raises ImportError with this text.
- ``NPUWATCH_FAKE_OLD_PYACL=1``: no ``create_event_with_flag``, ``query_event_status``, ``get_run_mode``.
- ``NPUWATCH_FAKE_NO_ACLNN=1``: the fake pyACL offers no aclnn libraries, so the product falls
  back to ``ctypes.CDLL`` (which finds none on a test machine).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import time
from typing import Dict, List, Optional, Tuple

MIB = 1 << 20


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def hidden(module: str) -> bool:
    return module in [part.strip() for part in env("NPUWATCH_FAKE_HIDE").split(",")]


class Faults:
    """Which calls fail, and how."""

    def __init__(self, spec: str) -> None:
        self.rules: Dict[str, List[Tuple[Optional[int], str]]] = {}
        self.calls: Dict[str, int] = {}
        for part in spec.split(","):
            if ":" not in part:
                continue
            name, action = part.strip().split(":", 1)
            nth: Optional[int] = None
            if "@" in name:
                name, count = name.split("@", 1)
                nth = int(count)
            self.rules.setdefault(name, []).append((nth, action.strip()))

    def hit(self, name: str) -> Optional[str]:
        """Count a call to ``name``; its action when a rule applies to this call, else None."""
        self.calls[name] = self.calls.get(name, 0) + 1
        for nth, action in self.rules.get(name, ()):
            if nth is None or nth == self.calls[name]:
                return action
        return None


FAULTS = Faults(env("NPUWATCH_FAKE_FAULT"))
_ONLY_DEVICES = {
    int(part) for part in env("NPUWATCH_FAKE_FAULT_DEVICES").split(",") if part.strip().isdigit()
}
_DEVICE: List[Optional[int]] = [None]


def working_on(device: Optional[int]) -> None:
    """Tell the fault rules which device this process is on (set_device calls it first)."""
    _DEVICE[0] = device


def act(name: str) -> Optional[str]:
    """Count a call and apply its fault: hang and crash happen here; else None, ``corrupt`` or a code."""
    action = FAULTS.hit(name)
    if _ONLY_DEVICES and _DEVICE[0] not in _ONLY_DEVICES:
        return None
    if action == "hang":
        hang_forever()
    if action == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    return action


def error_of(action: Optional[str]) -> Optional[int]:
    """The error code an action asks the call to return, if any."""
    return None if action in (None, "corrupt") else int(action)


def hang_forever() -> None:
    """A driver call that never returns; a helper process in the same group must die with us."""
    subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
    while True:
        time.sleep(3600)


def rates_gb_s() -> Dict[str, float]:
    rates = {"h2d": 22.0, "d2h": 24.0, "d2d": 700.0, "kernel": 600.0}
    for part in env("NPUWATCH_FAKE_GBPS").split(","):
        if "=" in part:
            key, value = part.split("=", 1)
            rates[key.strip()] = float(value)
    return rates


class Timeline:
    """A stream's simulated clock: work advances it at a rate; events stamp it; the host waits for it."""

    #: Event timestamps are quantised like a device timer (1 µs), and recording costs a little.
    TICK_S = 1e-6

    def __init__(self) -> None:
        self.busy_until = time.perf_counter()

    def enqueue(self, seconds: float, since: Optional[float] = None) -> None:
        """Work of ``seconds`` that the host began issuing at ``since`` (default now)."""
        start = max(time.perf_counter() if since is None else since, self.busy_until)
        self.busy_until = start + seconds

    def stamp(self) -> float:
        self.enqueue(2 * self.TICK_S)
        return round(self.busy_until / self.TICK_S) * self.TICK_S

    @staticmethod
    def wait_until(moment: float) -> None:
        delay = moment - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


class Ledger:
    """Every resource opened and closed, and every call made, written as JSON when the process exits."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.live: Dict[str, Dict[int, str]] = {}
        self.opened: Dict[str, int] = {}
        self.closed: Dict[str, int] = {}
        self.calls: List[Tuple[str, int]] = []
        self.errors: List[str] = []  # misuse a real runtime would reject (double free, unknown handle)
        folder = env("NPUWATCH_FAKE_LEDGER_DIR")
        self.folder = folder or None
        if self.folder:
            with open(os.path.join(self.folder, f"pid-{os.getpid()}"), "w") as handle:
                handle.write(str(os.getpid()))
            atexit.register(self.write)

    def call(self, name: str, ret: int) -> int:
        self.calls.append((name, ret))
        return ret

    def open(self, kind: str, handle: int, what: str = "") -> None:
        self.live.setdefault(kind, {})[handle] = what
        self.opened[kind] = self.opened.get(kind, 0) + 1

    def close(self, kind: str, handle: int) -> bool:
        if handle not in self.live.get(kind, {}):
            self.errors.append(f"{kind} {handle:#x} released but not live")
            return False
        del self.live[kind][handle]
        self.closed[kind] = self.closed.get(kind, 0) + 1
        return True

    def write(self) -> None:
        if self.folder is None:
            return
        body = {
            "pid": os.getpid(),
            "backend": self.backend,
            "opened": self.opened,
            "closed": self.closed,
            "live": {
                kind: sorted(f"{h:#x} {w}".strip() for h, w in items.items())
                for kind, items in self.live.items()
            },
            "errors": self.errors,
            "calls": self.calls,
        }
        path = os.path.join(self.folder, f"ledger-{self.backend}-{os.getpid()}.json")
        with open(path, "w") as handle:
            json.dump(body, handle, indent=1)
