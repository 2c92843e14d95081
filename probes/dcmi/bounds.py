"""Provides the DCMI worker's bounds: its memory and its CPU, measured from npuwatch's side.

A library that leaks (1 MB a call took a worker to 7.3 GB in a minute) or runs a busy thread
(a core held at 100 %) must not cost the machine more than a bounded amount.  npuwatch reads
the worker's resident memory (``/proc/PID/statm``) and its CPU time, all threads
(``/proc/PID/stat``), after every answer and while it waits for one; past a bound the worker is
killed and restarted (``worker.Worker``), and the read reports why.

* **Memory: resident set, not address space.**  ``RLIMIT_AS`` set in the worker would bound what
  it maps, not what it uses: glibc reserves 64 MiB of address space for each thread's malloc
  arena (up to 8 × cores of them, mallopt(3) ``M_ARENA_MAX``), so a driver library that starts
  a few threads needs hundreds of MiB it never touches, on top of the device windows it maps;
  and a limit makes ``malloc`` fail *inside* the driver, where a C library may crash or leave
  its state half-done.  RSS is what a leak costs the machine, and a SIGKILL from outside
  leaves nothing half-done.  Measured: a worker reading the 16-chip ``--demo a3`` through the
  fake library holds 23 MiB resident in 101 MiB of address space; the default limit
  (``DEFAULT_MEMORY_LIMIT_BYTES``, 512 MiB) is twenty times that.
* **CPU: what it burns beyond its requests.**  The worker is blocked on its request pipe
  between requests, and makes one call at a time during them: its CPU time cannot exceed the
  wall time of its requests.  What it uses beyond that, as a share of the wall time measured
  over at least ``CPU_WINDOW_S``, is a thread of the library that runs on its own.  Past
  ``DEFAULT_IDLE_CPU_SHARE`` of a core, the worker is restarted.  Judging starts after the first
  tick: what a worker does once after its start-up answers (the demo's fake imports its state
  writer) is not a thread that runs on its own.

Linux ``/proc`` only: where it cannot be read, nothing is judged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

#: The most resident memory a worker may hold (a worker reading 16 chips holds about 30 MiB).
DEFAULT_MEMORY_LIMIT_BYTES = 512 * 2**20
#: The most of one core a worker may burn beyond its requests' wall time: none is expected, and a
#: spinning thread measured 40 % of a core on a loaded 2-core machine (load 3.4), 100 % on an idle one.
DEFAULT_IDLE_CPU_SHARE = 0.25
#: The shortest wall time CPU use is judged over (clock ticks are 10 ms; one tick is too short).
CPU_WINDOW_S = 2.0

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Bounds:
    """What one worker may use; ``None`` lifts a bound."""

    memory_limit_bytes: Optional[int] = DEFAULT_MEMORY_LIMIT_BYTES
    idle_cpu_share: Optional[float] = DEFAULT_IDLE_CPU_SHARE
    cpu_window_s: float = CPU_WINDOW_S


@dataclass(frozen=True)
class Usage:
    """A process's resident memory and CPU time (all its threads) now."""

    rss_bytes: int
    cpu_s: float


def usage_of(pid: int) -> Optional[Usage]:
    """``pid``'s usage from ``/proc`` (``None`` when it is gone or ``/proc`` cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            resident_pages = int(statm.read().split()[1])
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except (OSError, IndexError, ValueError):
        return None
    fields = text[text.rfind(b")") + 2 :].split()
    try:  # utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name
        ticks = int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None
    return Usage(resident_pages * _PAGE_BYTES, ticks / _TICKS_PER_S)


class Meter:
    """One worker's use against its bounds: ``busy()`` after each request, ``check()`` to judge.

    ``check()`` answers the reason the worker must go (``the DCMI worker used 1.2 GiB of memory
    (limit 512 MiB)``), or ``None``.
    """

    def __init__(
        self,
        bounds: Bounds,
        pid: int,
        started_at: float,
        read: Callable[[int], Optional[Usage]] = usage_of,
    ) -> None:
        self.bounds = bounds
        self.pid = pid
        self._read = read
        self._window_at = started_at
        self._window_cpu_s: Optional[float] = None  # its CPU time when the window began (None: not yet)
        self._busy_s = 0.0  # wall time of its requests since then
        self.peak_rss_bytes = 0

    def busy(self, seconds: float) -> None:
        """Count ``seconds`` of a request (the worker may burn CPU meanwhile)."""
        self._busy_s += max(0.0, seconds)

    def check(self, now: float, cpu: bool = True) -> Optional[str]:
        """Why the worker is past a bound now, or ``None`` (``cpu``: judge its CPU use too, which
        only makes sense between requests)."""
        bounds = self.bounds
        if bounds.memory_limit_bytes is None and (bounds.idle_cpu_share is None or not cpu):
            return None
        usage = self._read(self.pid)
        if usage is None:
            return None
        self.peak_rss_bytes = max(self.peak_rss_bytes, usage.rss_bytes)
        limit = bounds.memory_limit_bytes
        if limit is not None and usage.rss_bytes > limit:
            return f"the DCMI worker used {size_text(usage.rss_bytes)} of memory (limit {size_text(limit)})"
        if not cpu or bounds.idle_cpu_share is None:
            return None
        began_cpu_s, wall_s = self._window_cpu_s, now - self._window_at
        if began_cpu_s is not None and wall_s < bounds.cpu_window_s:
            return None
        self._window_at, self._window_cpu_s, self._busy_s, busy_s = now, usage.cpu_s, 0.0, self._busy_s
        if began_cpu_s is None:  # the first look, after the first tick: the window starts now
            return None
        share = ((usage.cpu_s - began_cpu_s) - busy_s) / wall_s
        if share > bounds.idle_cpu_share:
            return (
                f"the DCMI worker used {share:.0%} of a CPU core with no call to make "
                f"(limit {bounds.idle_cpu_share:.0%}): a thread of the library runs on its own"
            )
        return None


def size_text(size_bytes: float) -> str:
    """``1.2 GiB``, ``512 MiB``, ``900 KiB``: a size in binary units, two or three digits."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}" if 0 < value < 10 and unit != "B" else f"{value:.0f} {unit}"
        value /= 1024
    return f"{value:.0f} GiB"  # not reached
