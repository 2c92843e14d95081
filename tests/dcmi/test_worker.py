"""The DCMI worker process: one per source, deadlines, restarts, crashes reported, nothing left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from npuwatch.probes import runner
from npuwatch.probes.dcmi import records
from npuwatch.probes.dcmi.worker import (
    RESTART_BACKOFF_MAX_S,
    RESTARTS_AT_ONCE,
    Worker,
    WorkerFailure,
    WorkerTick,
    crash_message,
    restart_delay_s,
)
from tests.conftest import REPO
from tests.dcmi.helpers import gone as _gone
from tests.dcmi.helpers import standin_environ

OPENER = "tests.dcmi.standin:open_reader"


def _worker(tmp_path: Path, mode: str = "ok", timeout_s: float = 5.0, **extra: str) -> Worker:
    environ = {**standin_environ(tmp_path, mode), **extra}
    return Worker(None, "/", timeout_s, environ, opener=OPENER)


def _tick(worker: Worker) -> WorkerTick:
    answer = worker.tick()
    assert isinstance(answer, WorkerTick), answer
    return answer


def test_one_worker_serves_every_tick_with_the_enumeration_it_made(tmp_path):
    with _worker(tmp_path) as worker:
        worker.start()
        first = _tick(worker)
        second = _tick(worker)
        assert worker.starts == 1
        assert first.pid == second.pid == worker.pid
        assert first.enumerated and not second.enumerated
        assert [chip.ref.card_id for chip in first.inventory.chips] == [0, 3]
        assert first.inventory.driver_version == "24.1.rc1.b030"
        # The reader lives on in the one worker: its tick count goes on.
        assert [t.values["aicore_percent"] for t in (first.chips[0], second.chips[0])] == [1.0, 2.0]


def test_a_reenumeration_is_done_on_request_by_the_same_worker(tmp_path):
    with _worker(tmp_path) as worker:
        _tick(worker)
        again = worker.tick(reenumerate=True)
        assert isinstance(again, WorkerTick)
        assert again.enumerated and "inventory_s" in again.timings
        assert worker.starts == 1


def test_the_worker_runs_in_its_own_session_and_is_counted_for_kill_all(tmp_path):
    with _worker(tmp_path) as worker:
        _tick(worker)
        pid = worker.pid
        assert pid is not None
        assert os.getsid(pid) == pid  # its own session (and group)
        assert pid in runner._LIVE
    assert pid not in runner._LIVE


def test_a_hung_call_is_killed_at_its_deadline_and_a_fresh_worker_serves_the_next_tick(tmp_path):
    with _worker(tmp_path, "hang-tick-once", timeout_s=0.5) as worker:
        worker.start()
        hung_pid = worker.pid
        assert hung_pid is not None
        hung = worker.tick()
        assert isinstance(hung, WorkerFailure)
        assert hung.kind == "timeout"
        assert "did not return within 0.5 s (the tick's calls)" in hung.message
        assert _gone(hung_pid)
        assert hung_pid not in runner._LIVE
        after = _tick(worker)  # a fresh worker: re-init, re-enumerate, then the tick
        assert after.enumerated
        assert worker.starts == 2
        assert after.pid != hung_pid
        assert [chip.ref.card_id for chip in after.chips] == [0, 3]


def test_a_segfault_in_the_library_is_a_reported_failure_and_the_next_tick_restarts(tmp_path):
    with _worker(tmp_path, "segv-tick-once") as worker:
        crashed = worker.tick()
        assert isinstance(crashed, WorkerFailure)
        assert crashed.kind == "crash"
        assert crashed.message == "the DCMI library crashed (SIGSEGV) in the worker; npuwatch kept running"
        after = _tick(worker)
        assert after.enumerated
        assert worker.starts == 2


def test_a_reader_exception_is_a_crash_failure_with_its_traceback(tmp_path):
    with _worker(tmp_path, "raise-tick") as worker:
        failed = worker.tick()
        assert isinstance(failed, WorkerFailure)
        assert failed.kind == "crash"
        assert "ValueError: the stand-in's bug" in failed.message
        assert "Traceback" in failed.output


def test_what_the_library_prints_never_reaches_the_protocol(tmp_path):
    with _worker(tmp_path, "print") as worker:
        for _ in range(3):
            _tick(worker)
        assert worker.starts == 1


def test_the_refresh_function_runs_before_each_tick(tmp_path):
    log = tmp_path / "refreshes"
    with _worker(
        tmp_path,
        NPUWATCH_FAKE_DCMI_REFRESH="tests.dcmi.standin:refresh",
        STANDIN_REFRESHES=str(log),
    ) as worker:
        _tick(worker)
        _tick(worker)
    assert log.read_text().splitlines() == ["refreshed", "refreshed"]


def test_a_broken_refresh_function_is_a_warning_not_a_failure(tmp_path):
    with _worker(tmp_path, NPUWATCH_FAKE_DCMI_REFRESH="tests.dcmi.no_such_module:refresh") as worker:
        tick = _tick(worker)
    assert len(tick.warnings) == 1
    assert "NPUWATCH_FAKE_DCMI_REFRESH=tests.dcmi.no_such_module:refresh failed" in tick.warnings[0]


@pytest.mark.parametrize(
    ("mode", "kind", "code", "words"),
    [
        ("init:-8002", "permission", -8002, "not root and not in the HwHiAiUser group"),
        ("init:-8005", "init", -8005, "dcmi_init failed with -8005"),
        ("not-found", "not-found", None, "libdcmi.so not found"),
    ],
)
def test_an_init_failure_says_why_and_its_worker_ends(tmp_path, mode, kind, code, words):
    with _worker(tmp_path, mode) as worker:
        worker.start()
        pid = worker.pid
        assert pid is not None
        failure = worker.tick()
        assert isinstance(failure, WorkerFailure)
        assert (failure.kind, failure.code) == (kind, code)
        assert words in failure.message
        assert _gone(pid)
        # Trying again at once would fail the same way: the next worker waits for the next read.
        assert (worker.pid, worker.starts) == (None, 1)
        again = worker.tick()
        assert isinstance(again, WorkerFailure) and again.kind == kind and worker.starts == 2
    if kind == "permission":
        assert "usermod -aG HwHiAiUser" in failure.hint
    if kind == "init":
        assert "--device /dev/davinci_manager" in failure.hint  # dcmi_codes' container hint


def test_a_library_without_dcmi_init_is_not_a_dcmi_library(tmp_path):
    with _worker(tmp_path, f"init:{records.SYMBOL_MISSING}") as worker:
        failure = worker.tick()
    assert isinstance(failure, WorkerFailure)
    assert (failure.kind, failure.message) == (
        "load",
        "the library loaded has no dcmi_init: it is not a DCMI library",
    )
    assert "--dcmi-lib" in failure.hint


def test_failures_in_a_row_back_off_before_a_new_worker_starts(tmp_path):
    clock = [100.0]
    worker = _worker(tmp_path, "init:-8002")
    worker._clock = lambda: clock[0]
    with worker:
        for _ in range(3):
            assert isinstance(worker.tick(), WorkerFailure)
        starts = worker.starts
        repeated = worker.tick()  # backing off: the same answer, no new process
        assert isinstance(repeated, WorkerFailure) and repeated.kind == "permission"
        assert worker.starts == starts and worker.pid is None
        clock[0] += RESTART_BACKOFF_MAX_S
        worker.tick()
        assert worker.starts == starts + 1


def test_restart_delays_grow_to_a_cap():
    delays = [restart_delay_s(n) for n in range(1, 12)]
    assert delays[:2] == [0.0, 0.0]
    assert delays[2:5] == [2.0, 4.0, 8.0]
    assert delays[-1] == RESTART_BACKOFF_MAX_S


def test_crash_messages_name_the_signal_or_the_exit_code():
    assert crash_message(-11) == "the DCMI library crashed (SIGSEGV) in the worker; npuwatch kept running"
    assert crash_message(-6).startswith("the DCMI library crashed (SIGABRT)")
    assert "exit code 3" in crash_message(3)


def test_close_ends_the_worker_and_later_ticks_say_closed(tmp_path):
    worker = _worker(tmp_path)
    _tick(worker)
    pid = worker.pid
    assert pid is not None
    worker.close()
    assert _gone(pid)
    assert worker.pid is None
    closed = worker.tick()
    assert isinstance(closed, WorkerFailure) and closed.kind == "closed"
    worker.close()  # idempotent


def test_close_during_a_hung_tick_kills_the_worker_at_once_and_the_tick_answers(tmp_path):
    """Quitting npuwatch must not wait out a hung call's deadline (``q`` took 27 s on dcmi-hang)."""
    import threading

    with _worker(tmp_path, "hang-tick-once", timeout_s=60.0) as worker:
        worker.start()
        answers = []
        ticking = threading.Thread(target=lambda: answers.append(worker.tick()), daemon=True)
        ticking.start()
        deadline = time.monotonic() + 20.0
        while not (tmp_path / "mark").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the stand-in marks the hang it entered
        assert (tmp_path / "mark").exists() and ticking.is_alive()
        hung_pid = worker.pid
        assert hung_pid is not None
        worker.close()  # not bounded by the 60 s deadline
        assert _gone(hung_pid, within_s=5.0)
        ticking.join(timeout=5.0)
        assert not ticking.is_alive()
        (answer,) = answers
        assert isinstance(answer, WorkerFailure) and answer.kind in ("crash", "closed")
        assert worker.pid is None  # closed: no fresh worker started after it


def test_records_cross_the_pipe_as_the_records_module_s_own(tmp_path):
    with _worker(tmp_path) as worker:
        tick = _tick(worker)
    assert type(tick.chips[0]) is records.ChipTick
    assert type(tick.inventory) is records.Inventory


# --- the default opener: the real loader and reader ---------------------------------------------


def _real(library: str, tmp_path: Path) -> WorkerFailure:
    with Worker(library, str(tmp_path), 10.0, {"PYTHONPATH": str(REPO)}) as worker:
        answer = worker.tick()
    assert isinstance(answer, WorkerFailure), answer
    return answer


def test_a_library_that_is_not_there_is_not_found(tmp_path):
    failure = _real(str(tmp_path / "libdcmi.so"), tmp_path)
    assert failure.kind == "not-found"
    assert failure.message == f"{tmp_path / 'libdcmi.so'} not found"
    assert failure.hint


def test_a_file_that_is_no_library_is_a_load_failure(tmp_path):
    junk = tmp_path / "libdcmi.so"
    junk.write_text("not an ELF file\n")
    failure = _real(str(junk), tmp_path)
    assert failure.kind == "load"
    assert str(junk) in failure.message


def test_a_stand_in_that_cannot_be_imported_is_a_load_failure(tmp_path):
    failure = _real("python:tests.dcmi.no_such_stand_in", tmp_path)
    assert failure.kind == "load"
    assert "ModuleNotFoundError" in failure.message


def test_no_library_under_the_root_is_not_found(tmp_path):
    trusted = {"PYTHONPATH": str(REPO), "NPUWATCH_TRUST_ROOT": "1"}
    with Worker(None, str(tmp_path), 10.0, trusted) as worker:
        failure = worker.tick()
    assert isinstance(failure, WorkerFailure)
    assert failure.kind == "not-found"
    assert failure.message.startswith("libdcmi.so not found (tried ")


def test_an_untrusted_tree_s_library_is_not_loaded_and_says_why(tmp_path, monkeypatch):
    monkeypatch.delenv("NPUWATCH_TRUST_ROOT", raising=False)
    library = tmp_path / "usr/local/dcmi/libdcmi.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"not even a library: it must not be opened")
    with Worker(None, str(tmp_path), 10.0, {"PYTHONPATH": str(REPO)}) as worker:
        failure = worker.tick()
    assert isinstance(failure, WorkerFailure)
    assert failure.kind == "not-found"
    assert failure.message == (
        "the tree's libdcmi.so (/usr/local/dcmi/libdcmi.so) was not loaded: pass --trust-root to load it"
    )


def test_an_unforeseen_error_on_npuwatch_s_side_is_a_failure_not_an_exception(tmp_path, monkeypatch):
    with _worker(tmp_path) as worker:
        _tick(worker)
        pid = worker.pid
        assert pid is not None

        def broken(message: object) -> None:
            raise ValueError("I/O operation on closed file")

        monkeypatch.setattr(worker, "_send", broken)
        failure = worker.tick()
        assert isinstance(failure, WorkerFailure) and failure.kind == "crash"
        assert "ValueError: I/O operation on closed file" in failure.message
        assert _gone(pid)  # that worker is ended: the next tick starts afresh
        monkeypatch.undo()
        assert isinstance(worker.tick(), WorkerTick)


def test_a_ready_worker_asked_long_after_its_start_answers_and_is_not_killed_as_hung(tmp_path):
    """The first answer's limit runs from the request for a worker that waited, ready, to be asked
    (the fallback's background retry a minute later, a long --interval): never from its start."""
    environ = standin_environ(tmp_path, "ok")
    with Worker(None, "/", 0.5, environ, opener=OPENER, start_grace_s=0.5) as worker:
        worker.start()
        time.sleep(2.0)  # ready long ago: start + grace + timeout passed before it is asked
        answer = worker.tick()
        assert isinstance(answer, WorkerTick), answer
        assert worker.restarts == 0 and worker.starts == 1


def test_failures_between_good_ticks_still_back_off(tmp_path):
    """A worker killed every other tick (a busy library thread) backs off like one that fails in a row."""
    clock = [100.0]
    worker = _worker(tmp_path)
    worker._clock = lambda: clock[0]
    with worker:
        for _ in range(RESTARTS_AT_ONCE):
            _tick(worker)
            worker._end(polite=False)  # killed past a bound, as _check_bounds does
            worker._failed(WorkerFailure("limit", "past a bound"))
            clock[0] += 1.0
        starts = worker.starts
        held = worker.tick()  # the third recent failure: the next worker waits its turn
        assert isinstance(held, WorkerFailure) and held.kind == "limit"
        assert worker.starts == starts
        clock[0] += RESTART_BACKOFF_MAX_S
        _tick(worker)


def test_a_one_shots_worker_is_not_restarted_at_once_after_a_failure(tmp_path):
    environ = standin_environ(tmp_path, "ok")
    with Worker(None, "/", 5.0, environ, opener=OPENER, restart_at_once=False) as worker:
        _tick(worker)
        worker._end(polite=False)
        worker._failed(WorkerFailure("crash", "gone"))
        assert worker.pid is None and worker.starts == 1  # nothing started for a read that never comes
