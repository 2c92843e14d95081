"""Provides the host probe (psutil): CPU, memory, load, and host details of NPU processes."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from typing import Dict, Optional, Protocol, Sequence, Tuple, Union

import psutil

from npuwatch.model import HostInfo, NpuProcess, ProcessHostInfo
from npuwatch.probes.values import PID_MAX

#: npu-smi prints the kernel's task name, which the kernel cuts to 15 characters
#: (TASK_COMM_LEN 16); a host name is compared on that prefix.
COMM_LENGTH = 15

#: The first psutil CPU reading needs an interval behind it; shorter than this and the
#: number is noise, so a one-shot sample waits this long once.
_MIN_CPU_WINDOW_S = 0.1

#: A PID npu-smi lists but this host cannot see is looked up again only after this long,
#: so a container's foreign PIDs cost nothing per tick; PID reuse is ruled out as often.
_MISSING_RETRY_S = 10.0

#: At most this many child processes of one NPU process are read per tick (data-loader workers
#: number a few dozen; a fork bomb must not cost a tick): memory and time stay bounded.
_MAX_CHILDREN = 256
#: Listing a process's children reads every process's /proc/PID/stat (psutil's parent map), so
#: each NPU process's children are listed again only this often; between listings, only the
#: known children's CPU is read (one read each).  Data-loader workers live as long as the epoch.
_CHILDREN_RELIST_S = 10.0


@dataclass(frozen=True)
class FoundProcess:
    """A process the host can see: its task name (to match npu-smi's) and its details."""

    name: str
    info: ProcessHostInfo


class ProcessLookup(Protocol):
    """Finds what the host knows about a PID; returns the process or the reason there is none."""

    def lookup(self, pid: int) -> Union[FoundProcess, str]:
        """``pid``'s name and details, or a sentence saying why they cannot be had."""
        ...


class PsutilLookup:
    """``ProcessLookup`` over psutil, keeping Process objects so CPU % spans ticks."""

    def __init__(self) -> None:
        self._procs: Dict[int, psutil.Process] = {}
        self._static: Dict[Tuple[int, float], Tuple[Optional[str], Optional[str]]] = {}
        self._missing: Dict[int, float] = {}  # pid → when it was last found missing (monotonic)
        self._reuse_checked: Dict[int, float] = {}  # pid → when PID reuse was last ruled out
        #: Each NPU process's children (data-loader workers) by PID, kept so their CPU % spans ticks.
        self._children: Dict[int, Dict[int, psutil.Process]] = {}
        self._children_listed: Dict[int, float] = {}  # pid → when its children were last listed

    def _reuse_check_due(self, pid: int) -> bool:
        # is_running() costs its own /proc read; a PID is reused rarely, so check now and then.
        now = time.monotonic()
        if now - self._reuse_checked.get(pid, 0.0) < _MISSING_RETRY_S:
            return False
        self._reuse_checked[pid] = now
        return True

    def _process(self, pid: int) -> psutil.Process:
        proc = self._procs.get(pid)
        if proc is not None:
            return proc
        missing_since = self._missing.get(pid)
        if missing_since is not None and time.monotonic() - missing_since < _MISSING_RETRY_S:
            raise psutil.NoSuchProcess(pid)
        try:
            proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            self._missing[pid] = time.monotonic()
            raise
        proc.cpu_percent(None)  # prime: the next call measures from here
        self._procs[pid] = proc
        return proc

    def lookup(self, pid: int) -> Union[FoundProcess, str]:
        try:
            proc = self._process(pid)
            # One oneshot: name, start time and CPU come from one read of /proc/<pid>/stat.
            if self._reuse_check_due(pid) and not proc.is_running():  # the PID was reused
                self._procs.pop(pid, None)
                proc = self._process(pid)
            with proc.oneshot():
                created = proc.create_time()
                user, command = self._user_and_command(proc, pid, created)
                cpu_percent = proc.cpu_percent(None)
                rss_bytes = proc.memory_info().rss
                name = proc.name()
            children, children_cpu = self._children_cpu(pid, proc)
            info = ProcessHostInfo(
                user=user,
                command=command,
                cpu_percent=cpu_percent,
                rss_bytes=rss_bytes,
                start_time_s=created,
                children=children,
                children_cpu_percent=children_cpu,
            )
            return FoundProcess(name, info)
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            return f"no process {pid} on this host (it exited, or it lives in another PID namespace)"
        except psutil.AccessDenied:
            return f"access to process {pid} denied (run as root or as its owner to see its details)"
        except (psutil.Error, ValueError, OverflowError, OSError) as exc:  # PID -1, 2**40, a zombie …
            self._procs.pop(pid, None)
            return f"no details for PID {pid}: {exc}"

    def _children_cpu(self, pid: int, proc: psutil.Process) -> Tuple[Optional[int], Optional[float]]:
        """How many children ``pid`` has (all generations) and their CPU summed, in % of one core;
        a child first seen counts 0 until its next reading.  The children are listed every
        ``_CHILDREN_RELIST_S`` (a full /proc scan); in between, the known ones are read.
        (None, None) when they cannot be listed."""
        known = self._children.get(pid)
        now = time.monotonic()
        if known is None or now - self._children_listed.get(pid, 0.0) >= _CHILDREN_RELIST_S:
            try:
                found = proc.children(recursive=True)[:_MAX_CHILDREN]
            except (psutil.Error, OSError):
                return None, None
            self._children_listed[pid] = now
            before, known = known or {}, {}
            for child in found:
                old = before.get(child.pid)  # same PID and start time: its reading spans the tick
                known[child.pid] = old if old is not None and old == child else child
        kept: Dict[int, psutil.Process] = {}
        total = 0.0
        for child_pid, child in known.items():
            try:
                total += child.cpu_percent(None)
            except (psutil.Error, OSError):
                continue  # exited since it was listed
            kept[child_pid] = child
        self._children[pid] = kept
        return len(kept), round(total, 1)

    def _user_and_command(
        self, proc: psutil.Process, pid: int, created: float
    ) -> Tuple[Optional[str], Optional[str]]:
        key = (pid, created)
        known = self._static.get(key)
        if known is None:
            try:
                user: Optional[str] = proc.username()
            except (KeyError, psutil.AccessDenied):  # a UID with no passwd entry (containers)
                user = None
            try:
                command: Optional[str] = " ".join(proc.cmdline()) or proc.name()
            except psutil.AccessDenied:
                command = None
            known = self._static[key] = (user, command)
        return known

    def forget_except(self, pids: Sequence[int]) -> None:
        """Drop cached processes npu-smi no longer lists."""
        keep = set(pids)
        for pid in [p for p in self._procs if p not in keep]:
            del self._procs[pid]
        self._children = {pid: c for pid, c in self._children.items() if pid in keep}
        self._children_listed = {pid: t for pid, t in self._children_listed.items() if pid in keep}
        self._static = {k: v for k, v in self._static.items() if k[0] in keep}
        self._missing = {pid: t for pid, t in self._missing.items() if pid in keep}
        self._reuse_checked = {pid: t for pid, t in self._reuse_checked.items() if pid in keep}


class HostProbe:
    """Samples the host and enriches npu-smi's process rows where the PID namespace allows."""

    def __init__(
        self,
        lookup: Optional[ProcessLookup] = None,
        in_container: bool = False,
        host_pid_namespace: Optional[bool] = None,
    ) -> None:
        self.lookup = lookup if lookup is not None else PsutilLookup()
        self.in_container = in_container
        self.host_pid_namespace = host_pid_namespace
        self._hostname = socket.gethostname()
        self._cpu_primed_at: Optional[float] = time.monotonic()  # None once a sample read the CPU
        psutil.cpu_percent(None, percpu=True)

    @staticmethod
    def _wait_s(seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def sample(self) -> HostInfo:
        """CPU (overall and per core), memory and load average now.

        The first sample reads CPU over the time since the probe was made, after waiting out
        what is left of ``_MIN_CPU_WINDOW_S``: a feed's first sample comes after its chips were
        read, so it seldom waits at all (``psutil.cpu_percent(0.1)`` slept a whole 0.1 s, on the
        way to the dashboard's first screen)."""
        if self._cpu_primed_at is not None:
            self._wait_s(_MIN_CPU_WINDOW_S - (time.monotonic() - self._cpu_primed_at))
            self._cpu_primed_at = None
        per_cpu = psutil.cpu_percent(None, percpu=True)
        memory = psutil.virtual_memory()
        try:
            load: Optional[Tuple[float, float, float]] = os.getloadavg()
        except OSError:
            load = None
        return HostInfo(
            hostname=self._hostname,
            cpu_percent=round(sum(per_cpu) / len(per_cpu), 1) if per_cpu else None,
            per_cpu_percent=tuple(per_cpu),
            memory_used_bytes=memory.total - memory.available,
            memory_total_bytes=memory.total,
            load_average=load,
            in_container=self.in_container,
            host_pid_namespace=self.host_pid_namespace,
        )

    def enrich(self, processes: Sequence[NpuProcess]) -> Tuple[NpuProcess, ...]:
        """Fill user, command, CPU %, RSS and start time for each process that is visible here."""
        # One process often holds several NPUs (capture 001): look each PID up once per tick.
        seen: Dict[int, Union[FoundProcess, str]] = {}
        out = tuple(self._enrich_one(p, seen) for p in processes)
        forget = getattr(self.lookup, "forget_except", None)
        if forget is not None:
            forget([p.pid for p in processes])
        return out

    def _lookup(self, pid: int) -> Union[FoundProcess, str]:
        """One PID's details; a PID that is not one, or any failure, is that row's reason alone."""
        if not 0 < pid <= PID_MAX:
            return f"PID {pid} is not a process ID"
        try:
            return self.lookup.lookup(pid)
        except Exception as exc:  # one bad row never blanks the others
            return f"no details for PID {pid}: {type(exc).__name__}: {exc}"

    def _enrich_one(self, process: NpuProcess, seen: Dict[int, Union[FoundProcess, str]]) -> NpuProcess:
        # npu-smi reports host PIDs; host details are filled only where they mean the same
        # process (docs/design.md §2.2), i.e. in the host's PID namespace.
        if self.host_pid_namespace is False:
            return replace(process, host_unavailable=_OTHER_NAMESPACE)
        if self.host_pid_namespace is None:
            return replace(process, host_unavailable=_UNKNOWN_NAMESPACE)
        pid = process.pid
        found = seen.get(pid)
        if found is None:
            found = seen[pid] = self._lookup(pid)
        if isinstance(found, str):
            return replace(process, host_unavailable=found)
        if not same_task(found.name, process.name):
            return replace(
                process,
                host_unavailable=f"PID {pid} here is '{found.name}', not '{process.name}': npu-smi's PID "
                "belongs to another PID namespace, so host details are not shown",
            )
        # A source that lists no name (DCMI gives PIDs and memory only) takes the host's task name.
        name = process.name or found.name[:COMM_LENGTH] or None
        return replace(process, name=name, host=found.info, host_unavailable=None)


_OTHER_NAMESPACE = (
    "npuwatch runs in a container PID namespace; npu-smi reports host PIDs, which are not "
    "visible here (run npuwatch on the host, or the container with --pid=host)"
)
_UNKNOWN_NAMESPACE = (
    "cannot tell whether npuwatch shares the host's PID namespace (/proc/self/ns/pid unreadable), "
    "so npu-smi's PIDs are not matched to processes here"
)


def same_task(host_name: str, npu_name: Optional[str]) -> bool:
    """Whether npu-smi's process name fits the host's task name.

    npu-smi prints the kernel task name, cut to 15 characters (TASK_COMM_LEN), and its
    column may cut it further (capture 089 shows ``python3.1``).  A blank name (003) fits.
    """
    if not npu_name:
        return True
    here = host_name[:COMM_LENGTH]
    return here == npu_name[:COMM_LENGTH] or here.startswith(npu_name)
