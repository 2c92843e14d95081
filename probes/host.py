"""Provides the host probe (psutil): CPU, memory, load, and host details of NPU processes."""

from __future__ import annotations

import getpass
import os
import socket
import time
from dataclasses import replace
from typing import Dict, Optional, Protocol, Sequence, Tuple, Union

import psutil

from npuwatch.model import HostInfo, NpuProcess, ProcessHostInfo

#: npu-smi prints the kernel's task name, which the kernel cuts to 15 characters
#: (TASK_COMM_LEN 16); a host name is compared on that prefix.
COMM_LENGTH = 15

#: The first psutil CPU reading needs an interval behind it; shorter than this and the
#: number is noise, so a one-shot sample waits this long once.
_MIN_CPU_WINDOW_S = 0.1


class ProcessLookup(Protocol):
    """Finds what the host knows about a PID; returns the details or the reason there are none."""

    def lookup(self, pid: int) -> Union[ProcessHostInfo, str]:
        """Details of ``pid``, or a sentence saying why they cannot be had."""
        ...

    def name_of(self, pid: int) -> Optional[str]:
        """The task name of ``pid`` (for matching npu-smi's truncated name), if visible."""
        ...


class PsutilLookup:
    """``ProcessLookup`` over psutil, keeping Process objects so CPU % spans ticks."""

    def __init__(self) -> None:
        self._procs: Dict[int, psutil.Process] = {}
        self._static: Dict[Tuple[int, float], Tuple[Optional[str], Optional[str]]] = {}

    def _process(self, pid: int) -> psutil.Process:
        proc = self._procs.get(pid)
        if proc is None or not proc.is_running():
            proc = psutil.Process(pid)
            proc.cpu_percent(None)  # prime: the next call measures from here
            self._procs[pid] = proc
        return proc

    def lookup(self, pid: int) -> Union[ProcessHostInfo, str]:
        try:
            proc = self._process(pid)
            with proc.oneshot():
                created = proc.create_time()
                user, command = self._user_and_command(proc, pid, created)
                return ProcessHostInfo(
                    user=user,
                    command=command,
                    cpu_percent=proc.cpu_percent(None),
                    rss_bytes=proc.memory_info().rss,
                    start_time_s=created,
                )
        except psutil.NoSuchProcess:
            self._procs.pop(pid, None)
            return f"no process {pid} on this host (it exited, or it lives in another PID namespace)"
        except psutil.AccessDenied:
            return f"access to process {pid} denied (run as root or as its owner to see its details)"

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

    def name_of(self, pid: int) -> Optional[str]:
        try:
            return self._process(pid).name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def forget_except(self, pids: Sequence[int]) -> None:
        """Drop cached processes npu-smi no longer lists."""
        keep = set(pids)
        for pid in [p for p in self._procs if p not in keep]:
            del self._procs[pid]
        self._static = {k: v for k, v in self._static.items() if k[0] in keep}


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
        self._cpu_primed_at = time.monotonic()
        psutil.cpu_percent(None, percpu=True)

    def sample(self) -> HostInfo:
        """CPU (overall and per core), memory and load average now."""
        if time.monotonic() - self._cpu_primed_at < _MIN_CPU_WINDOW_S:
            per_cpu = psutil.cpu_percent(_MIN_CPU_WINDOW_S, percpu=True)
        else:
            per_cpu = psutil.cpu_percent(None, percpu=True)
        self._cpu_primed_at = 0.0
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
        out = tuple(self._enrich_one(p) for p in processes)
        forget = getattr(self.lookup, "forget_except", None)
        if forget is not None:
            forget([p.pid for p in processes] + [p.container_pid for p in processes if p.container_pid])
        return out

    def _enrich_one(self, process: NpuProcess) -> NpuProcess:
        pid = process.pid
        if self.host_pid_namespace is False:
            # npu-smi reports host PIDs.  From inside a container only the
            # "Process id in container" column (26.x) can be looked up here, and only
            # when the name confirms it is the same process.
            if process.container_pid is None:
                return replace(
                    process,
                    host_unavailable="npuwatch runs in a container PID namespace; npu-smi reports host PIDs, "
                    "which are not visible here (run npuwatch on the host, or with --pid=host)",
                )
            pid = process.container_pid
        mismatch = self._name_mismatch(pid, process.name)
        if mismatch is not None:
            return replace(process, host_unavailable=mismatch)
        found = self.lookup.lookup(pid)
        if isinstance(found, str):
            return replace(process, host_unavailable=found)
        return replace(process, host=found, host_unavailable=None)

    def _name_mismatch(self, pid: int, npu_name: Optional[str]) -> Optional[str]:
        if not npu_name:
            return None
        here = self.lookup.name_of(pid)
        if here is None or here[:COMM_LENGTH] == npu_name[:COMM_LENGTH]:
            return None
        # npu-smi's column may cut the name further (089 shows `python3.1`): accept a prefix.
        if here.startswith(npu_name) or npu_name.startswith(here[:COMM_LENGTH]):
            return None
        return (
            f"PID {pid} here is '{here}', not '{npu_name}': npu-smi's PID belongs to another "
            "PID namespace, so host details are not shown"
        )


def current_user() -> str:
    """The login name of the user running npuwatch (for highlighting their processes)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
