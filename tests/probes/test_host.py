"""Tests for the host probe: host figures, and process enrichment by PID namespace."""

from __future__ import annotations

import os
from typing import Dict, Optional, Union

from npuwatch.model import NpuProcess, ProcessHostInfo
from npuwatch.probes.host import FoundProcess, HostProbe, PsutilLookup, same_task


class FakeLookup:
    def __init__(self, known: Dict[int, tuple]) -> None:
        self.known = known  # pid -> (name, info)

    def lookup(self, pid: int) -> Union[FoundProcess, str]:
        if pid not in self.known:
            return f"no process {pid} on this host"
        return FoundProcess(*self.known[pid])


INFO = ProcessHostInfo(
    user="alice", command="python train.py", cpu_percent=97.0, rss_bytes=123, start_time_s=1.0
)


def proc(pid: int, name: Optional[str] = "python", container_pid: Optional[int] = None) -> NpuProcess:
    return NpuProcess(
        npu_id=0, chip_id=0, pid=pid, name=name, npu_memory_mib=100, container_pid=container_pid
    )


def test_host_sample_has_real_figures():
    info = HostProbe(lookup=FakeLookup({})).sample()
    assert info.hostname
    assert info.memory_total_bytes and info.memory_total_bytes > 0
    assert 0 <= (info.cpu_percent or 0) <= 100
    assert len(info.per_cpu_percent) == os.cpu_count()


def test_the_first_sample_waits_only_what_is_left_of_the_cpu_window(monkeypatch):
    import npuwatch.probes.host as host

    clock = [100.0]
    waits = []
    monkeypatch.setattr(host.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(HostProbe, "_wait_s", staticmethod(lambda s: waits.append(round(s, 6))))
    probe = HostProbe(lookup=FakeLookup({}))
    clock[0] += 0.07  # the chips were read meanwhile
    probe.sample()
    assert waits == [round(host._MIN_CPU_WINDOW_S - 0.07, 6)]
    probe.sample()  # later samples read the CPU since the last one: no wait
    assert len(waits) == 1
    late = HostProbe(lookup=FakeLookup({}))
    clock[0] += 0.5  # a first sample long after the probe was made
    late.sample()
    assert waits[1] < 0  # nothing to wait for (``_wait_s`` sleeps only a positive time)


def test_host_namespace_enriches_a_matching_process():
    probe = HostProbe(lookup=FakeLookup({42: ("python", INFO)}), host_pid_namespace=True)
    (out,) = probe.enrich([proc(42)])
    assert out.host == INFO
    assert out.host_unavailable is None


def test_npu_smi_name_is_compared_on_the_15_character_task_name():
    probe = HostProbe(lookup=FakeLookup({7: ("VLLMWorker_TP_long_name", INFO)}), host_pid_namespace=True)
    (out,) = probe.enrich([proc(7, name="VLLMWorker_TP_l")])
    assert out.host == INFO


def test_a_different_process_behind_the_pid_is_not_attributed():
    probe = HostProbe(lookup=FakeLookup({42: ("bash", INFO)}), host_pid_namespace=True)
    (out,) = probe.enrich([proc(42, name="python")])
    assert out.host is None
    assert "'bash', not 'python'" in (out.host_unavailable or "")


def test_missing_process_says_why():
    (out,) = HostProbe(lookup=FakeLookup({}), host_pid_namespace=True).enrich([proc(9)])
    assert out.host is None
    assert out.host_unavailable == "no process 9 on this host"


def test_container_namespace_without_container_pid_says_why():
    probe = HostProbe(lookup=FakeLookup({42: ("python", INFO)}), host_pid_namespace=False)
    (out,) = probe.enrich([proc(42)])
    assert out.host is None
    assert "container PID namespace" in (out.host_unavailable or "")


def test_container_namespace_never_matches_even_with_a_container_pid():
    # docs/design.md §2.2: host fields only in the host's PID namespace.
    probe = HostProbe(lookup=FakeLookup({5: ("python", INFO)}), host_pid_namespace=False)
    (out,) = probe.enrich([proc(485946, container_pid=5)])
    assert out.host is None
    assert "--pid=host" in (out.host_unavailable or "")


def test_unknown_namespace_does_not_match():
    probe = HostProbe(lookup=FakeLookup({42: ("python", INFO)}), host_pid_namespace=None)
    (out,) = probe.enrich([proc(42)])
    assert out.host is None
    assert "cannot tell" in (out.host_unavailable or "")


def test_blank_npu_smi_name_is_still_enriched():
    # capture 003: the process name column is empty inside a container
    probe = HostProbe(lookup=FakeLookup({641248: ("python3", INFO)}), host_pid_namespace=True)
    (out,) = probe.enrich([proc(641248, name=None)])
    assert out.host == INFO
    assert out.name == "python3"  # a source that lists no name (DCMI: PID and memory only) takes the host's


def test_a_listed_name_is_kept_over_the_hosts():
    probe = HostProbe(lookup=FakeLookup({7: ("python3.11", INFO)}), host_pid_namespace=True)
    (out,) = probe.enrich([proc(7, name="python3.1")])  # capture 089: the column cut the name
    assert out.name == "python3.1"


def test_psutil_lookup_reads_this_process():
    lookup = PsutilLookup()
    found = lookup.lookup(os.getpid())
    assert isinstance(found, FoundProcess)
    assert same_task(found.name, found.name[:15])
    found_info = found.info
    assert found_info.rss_bytes and found_info.rss_bytes > 0
    assert found_info.start_time_s and found_info.start_time_s > 0
    assert "python" in (found_info.command or "").lower() or "pytest" in (found_info.command or "")


def test_psutil_lookup_of_a_dead_pid_says_why():
    found = PsutilLookup().lookup(2**22 + 12345)
    assert isinstance(found, str)
    assert "no process" in found


def test_psutil_lookup_counts_the_cpu_of_a_process_s_children() -> None:
    # A data-loader's workers are children of the listed process: psutil's per-process CPU leaves
    # them out, so the lookup sums them.  A real parent with two spinning workers.
    import subprocess
    import sys
    import time

    spin = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
    parent_code = (
        "import subprocess, sys, time\n"
        f"workers = [subprocess.Popen([sys.executable, '-c', {spin!r}]) for _ in range(2)]\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
        "for w in workers: w.kill(); w.wait()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        lookup = PsutilLookup()
        first = lookup.lookup(parent.pid)
        assert isinstance(first, FoundProcess) and first.info.children == 2
        deadline = time.monotonic() + 30.0
        busy = 0.0
        while time.monotonic() < deadline and busy < 20.0:
            time.sleep(0.5)
            found = lookup.lookup(parent.pid)
            assert isinstance(found, FoundProcess)
            busy = found.info.children_cpu_percent or 0.0
        assert busy >= 20.0  # two spinning workers on a shared 2-core machine
        assert found.info.tree_cpu_percent is not None and found.info.tree_cpu_percent >= busy
        assert (found.info.cpu_percent or 0.0) < busy  # the parent itself only waits
    finally:
        if parent.stdin is not None:
            parent.stdin.close()
        parent.wait(timeout=30)


def test_children_are_listed_once_per_relist_period_not_every_tick(monkeypatch):
    # Listing children scans every process's /proc/PID/stat: a monitor must not do it each tick.
    import psutil

    from npuwatch.probes import host

    listed = []
    real = psutil.Process.children

    def counting(self, recursive=False):
        listed.append(self.pid)
        return real(self, recursive=recursive)

    monkeypatch.setattr(psutil.Process, "children", counting)
    clock = [1000.0]
    monkeypatch.setattr(host.time, "monotonic", lambda: clock[0])
    lookup = PsutilLookup()
    for _ in range(5):  # five ticks within the period
        assert isinstance(lookup.lookup(os.getpid()), FoundProcess)
        clock[0] += 1.0
    assert listed == [os.getpid()]
    clock[0] += host._CHILDREN_RELIST_S
    lookup.lookup(os.getpid())
    assert listed == [os.getpid()] * 2
