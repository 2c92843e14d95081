"""The one poller: ticks every interval, stops at once, skips paused rounds, logs a failure once."""

from __future__ import annotations

import logging
import threading

import pytest

from npuwatch.poller import ENDED, STOPPED, FailureLog, Poller


class FakeTime:
    """A clock that only moves when the poller waits (or a tick says it took time)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


def test_ticks_every_interval_minus_the_time_the_tick_took():
    time = FakeTime()
    ticks = []

    def tick() -> None:
        ticks.append(time.now)
        time.now += 0.25  # the sample takes a quarter second
        if len(ticks) == 3:
            poller.stop()

    poller = Poller(tick, lambda: 1.0, clock=time.clock, sleep=time.sleep)
    assert poller.run() == STOPPED
    assert ticks == [100.0, 101.0, 102.0]
    assert time.waits == [0.75, 0.75]


def test_a_slow_tick_waits_at_least_the_floor_and_the_interval_is_read_every_round():
    time = FakeTime()
    intervals = iter([1.0, 0.5, 0.5])
    ticks = []

    def tick() -> None:
        ticks.append(time.now)
        time.now += 2.0 if len(ticks) == 1 else 0.0
        if len(ticks) == 3:
            poller.stop()

    poller = Poller(tick, lambda: next(intervals), clock=time.clock, sleep=time.sleep, min_wait_s=0.05)
    poller.run()
    assert time.waits == [0.05, 0.5]


def test_paused_rounds_skip_the_tick_but_keep_the_pace():
    time = FakeTime()
    paused = iter([False, True, True, False])
    ticks = []

    def tick() -> None:
        ticks.append(time.now)
        if len(ticks) == 2:
            poller.stop()

    poller = Poller(tick, lambda: 1.0, clock=time.clock, sleep=time.sleep, paused=lambda: next(paused))
    poller.run()
    assert ticks == [100.0, 103.0]


def test_the_loop_ends_at_its_deadline_and_never_waits_past_it():
    time = FakeTime()
    ticks = []
    poller = Poller(
        lambda: ticks.append(time.now), lambda: 1.0, clock=time.clock, sleep=time.sleep, ends_at=102.5
    )
    assert poller.run() == ENDED
    assert ticks == [100.0, 101.0, 102.0]
    assert time.waits == [1.0, 1.0, 0.5]


def test_a_foreground_run_lets_the_ticks_exception_through():
    def tick() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Poller(tick, lambda: 1.0).run()


def test_stop_from_another_thread_ends_a_wait_at_once():
    started = threading.Event()
    poller = Poller(started.set, lambda: 3600.0, name="npuwatch-test-poller")
    thread = poller.start()
    assert started.wait(30)
    poller.stop()
    thread.join(30)
    assert not thread.is_alive()
    assert thread.name == "npuwatch-test-poller" and thread.daemon


def test_a_background_poller_survives_its_ticks_failures_and_logs_each_once(caplog):
    calls = []
    done = threading.Event()

    def tick() -> None:
        calls.append(1)
        if len(calls) >= 6:
            done.set()
            poller.stop()
            return
        raise RuntimeError("npu-smi vanished" if len(calls) % 2 else "disk full")

    poller = Poller(tick, lambda: 0.0, failures=FailureLog("npuwatch test"))
    with caplog.at_level(logging.WARNING, logger="npuwatch"):
        poller.start()
        assert done.wait(30)
        poller.join(30)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "npuwatch test: RuntimeError: npu-smi vanished",
        "npuwatch test: RuntimeError: disk full",
    ]


def test_failure_log_says_whether_a_message_is_new_and_keeps_traceback_for_bugs_only(caplog):
    log = FailureLog("npuwatch serve")
    with caplog.at_level(logging.WARNING, logger="npuwatch"):
        assert log.warn("out of descriptors", OSError(24, "Too many open files"))
        assert not log.warn("out of descriptors", OSError(24, "Too many open files"))
        assert log.warn("rendering failed", ValueError("bad"))
    assert [r.exc_info is not None for r in caplog.records] == [False, True]
