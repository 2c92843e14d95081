"""The DCMI worker's bounds as npuwatch's side judges them: resident memory, CPU beyond requests."""

from __future__ import annotations

import os
from typing import List, Optional

import pytest

from npuwatch.probes.dcmi.bounds import Bounds, Meter, Usage, size_text, usage_of

MIB = 2**20


class Readings:
    """What /proc says of the worker, one reading per check."""

    def __init__(self, *usages: Usage) -> None:
        self.usages: List[Usage] = list(usages)

    def __call__(self, pid: int) -> Optional[Usage]:
        return self.usages.pop(0) if self.usages else None


def test_memory_past_the_limit_is_the_reason_with_both_sizes():
    read = Readings(Usage(100 * MIB, 0.0), Usage(int(1.2 * 2**30), 0.0))
    meter = Meter(Bounds(memory_limit_bytes=512 * MIB, idle_cpu_share=None), 1, 0.0, read)
    assert meter.check(1.0) is None
    assert meter.check(2.0) == "the DCMI worker used 1.2 GiB of memory (limit 512 MiB)"
    assert meter.peak_rss_bytes == int(1.2 * 2**30)


def test_the_first_look_after_start_up_only_starts_the_window():
    bounds = Bounds(memory_limit_bytes=None, idle_cpu_share=0.25, cpu_window_s=2.0)
    # Start-up and whatever the worker does once after its start-up answers: never judged.
    meter = Meter(bounds, 1, 0.0, Readings(Usage(MIB, 3.0), Usage(MIB, 3.1)))
    assert meter.check(2.5) is None
    assert meter.check(5.0) is None  # 0.1 s in the 2.5 s since: 4 %


def test_cpu_time_spent_in_requests_is_never_held_against_the_worker():
    bounds = Bounds(memory_limit_bytes=None, idle_cpu_share=0.25, cpu_window_s=2.0)
    # 1.9 s of CPU in 2 s: but 1.9 s of it were requests (a slow machine, a big tick).
    meter = Meter(bounds, 1, 0.0, Readings(Usage(MIB, 0.3), Usage(MIB, 2.2)))
    assert meter.check(0.5) is None
    meter.busy(1.9)
    assert meter.check(2.5) is None


def test_cpu_burnt_while_idle_past_the_share_is_the_reason():
    bounds = Bounds(memory_limit_bytes=None, idle_cpu_share=0.5, cpu_window_s=2.0)
    meter = Meter(bounds, 1, 0.0, Readings(Usage(MIB, 0.3), Usage(MIB, 0.8), Usage(MIB, 2.6)))
    assert meter.check(0.5) is None  # the first look
    meter.busy(0.1)
    assert meter.check(1.5) is None  # shorter than the window: not judged yet
    meter.busy(0.1)
    reason = meter.check(2.5)
    assert reason is not None and reason.startswith("the DCMI worker used 105% of a CPU core with no call")
    assert "(limit 50%)" in reason


def test_a_window_is_judged_once_and_a_new_one_begins():
    bounds = Bounds(memory_limit_bytes=None, idle_cpu_share=0.5, cpu_window_s=1.0)
    read = Readings(Usage(MIB, 0.0), Usage(MIB, 0.2), Usage(MIB, 0.3), Usage(MIB, 2.0))
    meter = Meter(bounds, 1, 0.0, read)
    assert meter.check(0.0) is None  # the first look
    assert meter.check(1.0) is None  # 0.2 s in 1 s
    assert meter.check(2.0) is None  # 0.1 s in the next second
    assert meter.check(3.0) is not None  # 1.7 s in the third


def test_during_a_request_only_memory_is_judged():
    bounds = Bounds(memory_limit_bytes=64 * MIB, idle_cpu_share=0.1, cpu_window_s=1.0)
    meter = Meter(bounds, 1, 0.0, Readings(Usage(MIB, 5.0)))
    assert meter.check(5.0, cpu=False) is None


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 B"), (900, "900 B"), (1536, "1.5 KiB"), (512 * MIB, "512 MiB"), (7.3 * 2**30, "7.3 GiB")],
)
def test_sizes_read_as_people_write_them(size, text):
    assert size_text(size) == text


def test_this_process_usage_is_read_from_proc():
    if not os.path.exists(f"/proc/{os.getpid()}/statm"):
        pytest.skip("no /proc")
    usage = usage_of(os.getpid())
    assert usage is not None and usage.rss_bytes > MIB and usage.cpu_s > 0
    assert usage_of(2**22 + 12345) is None  # no such process
