"""Provides npuwatch's side of the DCMI worker: ``Worker``, one child process per source that makes
every library call under a deadline.

Requests are serialised (a lock) and each has a deadline: a missed one kills the worker's whole
tree, the read reports ``timeout``, and a fresh worker (re-init, re-enumeration) serves the next
read.  A worker that dies (``SIGSEGV`` in the library) is a reported failure, never an exception
out of ``tick()``.  At start the worker answers ``init`` then ``inventory`` unasked, so
construction starts them and the first read finds them (nearly) done.

**Bounds.**  npuwatch measures the worker from its side after every answer and while it waits
for one (``bounds``: resident memory from ``/proc/PID/statm``, CPU time beyond its requests from
``/proc/PID/stat``); a worker past a bound is killed and the read fails with kind ``limit`` and
the reason (``the DCMI worker used 1.2 GiB of memory (limit 512 MiB); it was killed and
restarted``).  The next worker starts with the same back-off as after a crash
(``failures.restart_delay_s``); ``restarts`` counts them.

Each worker carries its own mark (``runner.new_mark``) and is killed as a tree
(``runner.kill_tree``): see ``watchdog`` for why nothing the library starts outlives npuwatch.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import subprocess
import sys
import threading
import time
from typing import Callable, List, Mapping, Optional, Tuple

from npuwatch.probes import runner
from npuwatch.probes.dcmi import records
from npuwatch.probes.dcmi.bounds import Bounds, Meter
from npuwatch.probes.dcmi.worker.failures import (
    CRASH_HINT,
    FAILURE_WINDOW_S,
    FailedError,
    crash_message,
    first_line,
    init_failure,
    restart_delay_s,
)
from npuwatch.probes.dcmi.worker.protocol import (
    HEADER,
    MAX_MESSAGE_BYTES,
    MODULE,
    InitOutcome,
    TickOutcome,
    WorkerAnswer,
    WorkerFailure,
    WorkerTick,
    frame,
)

#: The ``module:function`` that loads the library and calls ``dcmi_init`` in the worker (``Opener``).
DEFAULT_OPENER = f"{MODULE}:open_reader"
#: The limit of one DCMI read when none is given (a read takes milliseconds; npu-smi's is 5 s).
DEFAULT_TIMEOUT_S = 2.0
#: On top of ``timeout_s``, how long a new worker may take to start (a fresh interpreter, its imports).
START_GRACE_S = 5.0
#: How often npuwatch looks at the worker's memory while it waits for an answer (a leak inside
#: one long call is caught within this, not only at the end of the call).
LIMIT_CHECK_S = 0.25
#: The bounds of a worker when none are given: ``bounds.DEFAULT_MEMORY_LIMIT_BYTES`` resident,
#: ``bounds.DEFAULT_IDLE_CPU_SHARE`` of a core beyond its requests.
DEFAULT_BOUNDS = Bounds()


class Worker:
    """The worker process of one DCMI source, started at once and restarted after a failure.

    ``tick()`` answers a ``WorkerTick`` or a ``WorkerFailure`` and never raises for anything the
    library or the worker does; ``close()`` ends the worker.  Thread-safe: requests are serialised.
    """

    def __init__(
        self,
        library: Optional[str],
        root: str,
        timeout_s: float,
        environ: Optional[Mapping[str, str]] = None,
        *,
        start_grace_s: float = START_GRACE_S,
        restart_at_once: bool = True,
        python: str = sys.executable,
        opener: str = DEFAULT_OPENER,
        clock: Callable[[], float] = time.monotonic,
        bounds: Optional[Bounds] = None,
    ) -> None:
        self.library = library
        self.root = root
        self.timeout_s = timeout_s
        self.environ = dict(environ or {})
        self.start_grace_s = start_grace_s
        #: Start the next worker as soon as one failed (a live feed's next tick finds it ready);
        #: ``False`` for a one-shot command, which has no next tick to wait for one.
        self.restart_at_once = restart_at_once
        self.python = python
        self.opener = opener  # "module:function" (an ``Opener``): tests give a stand-in reader
        self.bounds = DEFAULT_BOUNDS if bounds is None else bounds  # what it may use (``bounds``)
        self._meter: Optional[Meter] = None  # the running worker's use against ``bounds``
        self._clock = clock
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen[bytes]] = None
        self._started_at = 0.0
        self._buffer = bytearray()
        self._inventory: Optional[records.Inventory] = None
        self._ready = False  # the worker's init and inventory answers were read
        self._enumerated = False  # a new inventory not yet handed on with a tick
        self._dying: List[subprocess.Popen[bytes]] = []  # killed, not reaped yet (stuck in the driver)
        self._failed_at: List[float] = []  # when the failures of the last FAILURE_WINDOW_S came
        self._next_start = 0.0
        self._last_failure: Optional[WorkerFailure] = None
        self._closed = False
        self.starts = 0  # how many workers were started (the first and every restart)
        self._kills = 0  # how many were killed after a failure (``restarts``)

    # public -------------------------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        """The running worker's process ID (``None`` when none runs)."""
        proc = self._proc
        return None if proc is None else proc.pid

    @property
    def restarts(self) -> int:
        """How many workers npuwatch killed after a failure (a hang, a crash, an answer it could
        not read, a bound), each to be replaced by a fresh one; a library that is missing or
        whose ``dcmi_init`` refuses is retried, not counted."""
        return self._kills

    def start(self) -> None:
        """Start the worker now, unless one runs (or the back-off says wait): it loads the library,
        calls ``dcmi_init`` and enumerates while npuwatch does other things."""
        with self._lock:
            if self._proc is None and not self._closed:
                self._spawn_if_due()

    def tick(self, reenumerate: bool = False) -> WorkerAnswer:
        """Every chip's records, read now (``reenumerate``: list the chips again first)."""
        with self._lock:
            if self._closed:
                return WorkerFailure("closed", "the DCMI worker was closed", "")
            try:
                answer = self._tick(reenumerate)
            except FailedError as exc:
                return self._failed(exc.failure)
            except (OSError, ValueError, TypeError, AssertionError) as exc:  # a bug of ours: no traceback
                self._end(polite=False)
                return self._failed(
                    WorkerFailure(
                        "crash",
                        f"the DCMI worker's pipe failed: {type(exc).__name__}: {exc}; it was restarted",
                        CRASH_HINT,
                    )
                )
            self._last_failure = None
            if self._closed:  # closed while this request started a worker: it ends here
                self._end(polite=False)
            return answer

    def close(self) -> None:
        """End the worker and all it started; later ticks answer ``closed``.  Idempotent.

        Never waits for a request in flight (npuwatch is quitting: ``q`` must not wait out a hung
        call's deadline): the worker is killed at once, and the request's ``tick()`` answers with
        the worker's death.
        """
        self._closed = True
        if not self._lock.acquire(blocking=False):
            proc = self._proc  # a request is in flight: kill from here, then let it answer
            if proc is not None:
                runner.kill_tree(proc)
            if not self._lock.acquire(timeout=runner.KILL_GRACE_S):
                return  # the request's thread ends it (it sees the worker gone)
        try:
            self._end(polite=True)
            self._reap_dying(wait_s=runner.KILL_GRACE_S / 2)
        finally:
            self._lock.release()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # one request --------------------------------------------------------------------------------

    def _tick(self, reenumerate: bool) -> WorkerTick:
        timings = {}
        self._reap_dying()
        if self._proc is None:
            failure = self._spawn_if_due()
            if failure is not None:
                raise FailedError(failure)
        # One deadline for the whole request (issue 27: one budget): a worker's start, the
        # enumeration and the tick's calls share it; a start gets ``start_grace_s`` more, counted
        # from the worker's start, or from now for a worker that has waited, ready, to be asked.
        deadline = self._clock() + self.timeout_s
        if not self._ready:
            deadline = max(self._started_at + self.start_grace_s, self._clock()) + self.timeout_s
            began = self._clock()
            self._receive_startup(deadline)
            timings["startup_s"] = self._clock() - began
            self._busy(self._clock() - self._started_at)  # the interpreter's start, loading, init
        elif reenumerate:
            began = self._clock()
            self._send(("inventory",))
            self._take_inventory(self._receive("inventory", deadline, "enumeration"))
            timings["inventory_s"] = self._clock() - began
            self._busy(timings["inventory_s"])
        began = self._clock()
        self._send(("tick",))
        outcome = self._receive("tick", deadline, "the tick's calls")
        timings["tick_s"] = self._clock() - began
        self._busy(timings["tick_s"])
        self._check_bounds(cpu=True)
        if not isinstance(outcome, TickOutcome) or self._inventory is None:
            raise FailedError(self._protocol_failure(outcome))
        enumerated, self._enumerated = self._enumerated, False
        if outcome.refresh_cpu_s:
            timings["refresh_cpu_s"] = outcome.refresh_cpu_s
        return WorkerTick(
            self._inventory,
            outcome.chips,
            outcome.warnings,
            enumerated=enumerated,
            pid=self.pid,
            timings=timings,
        )

    def _receive_startup(self, deadline: float) -> None:
        init = self._receive("init", deadline, "loading the library and dcmi_init")
        if not isinstance(init, InitOutcome):
            raise FailedError(self._protocol_failure(init))
        if init.kind != "ok":
            self._end(polite=True)
            raise FailedError(init_failure(init))
        self._take_inventory(self._receive("inventory", deadline, "enumeration"))
        self._ready = True

    def _take_inventory(self, inventory: object) -> None:
        if not isinstance(inventory, records.Inventory):
            raise FailedError(self._protocol_failure(inventory))
        self._inventory = inventory
        self._enumerated = True

    # the pipes ----------------------------------------------------------------------------------

    def _send(self, message: object) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        data = frame(message)
        try:
            fd = proc.stdin.fileno()
            while data:
                data = data[os.write(fd, data) :]
        except OSError:  # EPIPE: the worker is gone; its answer pipe tells how
            raise FailedError(self._died()) from None

    def _receive(self, kind: str, deadline: float, doing: str) -> object:
        """The next answer, which must be ``kind``; ``FailedError`` on a missed deadline or a dead worker."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while True:
            message = self._take_message()
            if message is not None:
                return self._expect(kind, message)
            left = deadline - self._clock()
            # An answer already in the pipe is read whatever the time: a deadline is missed only
            # by a worker that has not answered.
            if not _readable(fd, max(0.0, min(left, LIMIT_CHECK_S))):
                if self._clock() >= deadline:
                    raise FailedError(self._timed_out(doing))
                self._check_bounds(cpu=False)  # a call that leaks while it runs
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                raise FailedError(self._died())
            self._buffer += chunk

    def _take_message(self) -> Optional[Tuple[str, object]]:
        if len(self._buffer) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self._buffer)
        if size > MAX_MESSAGE_BYTES:
            raise FailedError(self._protocol_failure(f"an answer of {size} bytes"))
        if len(self._buffer) < HEADER.size + size:
            return None
        data = bytes(self._buffer[HEADER.size : HEADER.size + size])
        del self._buffer[: HEADER.size + size]
        try:
            message = pickle.loads(data)  # our own worker's records
        except Exception as exc:
            raise FailedError(self._protocol_failure(f"an unreadable answer ({exc!r})")) from None
        if not (isinstance(message, tuple) and len(message) == 2 and isinstance(message[0], str)):
            raise FailedError(self._protocol_failure(message))
        return message[0], message[1]

    def _expect(self, kind: str, message: Tuple[str, object]) -> object:
        got, payload = message
        if got == "error":
            self._end(polite=False)
            raise FailedError(
                WorkerFailure(
                    "crash",
                    f"the DCMI reader failed in the worker: {first_line(str(payload))}; "
                    "npuwatch kept running",
                    "a fresh worker starts on the next read; please report it (`npuwatch doctor`)",
                    output=str(payload)[-4096:],
                )
            )
        if got != kind:
            raise FailedError(self._protocol_failure(f"a {got!r} answer where {kind!r} was due"))
        return payload

    # failures -----------------------------------------------------------------------------------

    def _timed_out(self, doing: str) -> WorkerFailure:
        self._end(polite=False)
        return WorkerFailure(
            "timeout",
            f"a DCMI call did not return within {self.timeout_s:g} s ({doing}); "
            "its worker was killed and a fresh one serves the next read",
            "the driver may be wedged: check `dmesg` and `npu-smi info`; npuwatch keeps running",
        )

    def _busy(self, seconds: float) -> None:
        if self._meter is not None:
            self._meter.busy(seconds)

    def _check_bounds(self, cpu: bool) -> None:
        """``FailedError`` (kind ``limit``) when the worker is past a bound: it is killed."""
        meter = self._meter
        reason = None if meter is None else meter.check(self._clock(), cpu)
        if reason is None:
            return
        self._end(polite=False)
        raise FailedError(
            WorkerFailure(
                "limit",
                f"{reason}; it was killed and restarted",
                "the DCMI library leaks or keeps a thread busy: npuwatch restarts its worker "
                "(waiting longer each time); use `--backend npu-smi` and report the driver "
                "version (`npuwatch doctor`)",
            )
        )

    def _died(self) -> WorkerFailure:
        proc = self._proc
        code: Optional[int] = None
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = proc.wait(timeout=runner.KILL_GRACE_S / 2)
        self._end(polite=False)
        return WorkerFailure("crash", crash_message(code), CRASH_HINT)

    def _protocol_failure(self, what: object) -> WorkerFailure:
        self._end(polite=False)
        shown = what if isinstance(what, str) else f"an unexpected {type(what).__name__}"
        return WorkerFailure("crash", f"the DCMI worker sent {shown}; it was restarted", CRASH_HINT)

    def _failed(self, failure: WorkerFailure) -> WorkerFailure:
        """Count a failure; start the next worker now when the back-off allows (it starts up while
        npuwatch waits for its next tick)."""
        settled = failure.kind in ("permission", "init", "not-found", "load")
        if settled:
            self._end(polite=True)
        now = self._clock()
        self._failed_at = [at for at in self._failed_at if now - at < FAILURE_WINDOW_S] + [now]
        self._last_failure = failure
        self._next_start = now + restart_delay_s(len(self._failed_at))
        # A missing library or a refused dcmi_init will not change by trying again at once: the
        # next worker starts on the next read, not now (a process and a close's wait saved).
        eager = self.restart_at_once and not settled and not self._closed and not runner.ending()
        if eager and self._proc is None and self._clock() >= self._next_start:
            self._spawn_if_due()
        return failure

    # starting and ending ------------------------------------------------------------------------

    def _spawn_if_due(self) -> Optional[WorkerFailure]:
        if self._clock() < self._next_start and self._last_failure is not None:
            return self._last_failure  # backing off: the same answer, without a new process
        if runner.ending():  # npuwatch is ending (a signal): it starts nothing new
            return WorkerFailure("closed", "npuwatch is ending: no DCMI worker starts", "")
        self._reap_dying()
        if self._dying:
            return WorkerFailure(
                "timeout",
                "the DCMI worker killed after a hung call has not exited yet (stuck in the driver); "
                "no new one starts until it does",
                "the driver may be wedged: check `dmesg` and `npu-smi info`; npuwatch keeps running",
            )
        argv = runner.python_module_argv(
            self.python, MODULE, [json.dumps(self.library), self.root, str(os.getpid()), self.opener]
        )
        mark = runner.new_mark()  # inherited by all the library starts: found wherever it goes
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={**os.environ, **self.environ, runner.MARK_VARIABLE: mark},
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return WorkerFailure(
                "load",
                f"the DCMI worker could not start: {exc.strerror or exc}",
                f"check that {self.python} runs",
            )
        runner.register_child(proc, mark)
        self._proc = proc
        self._started_at = self._clock()
        self._meter = Meter(self.bounds, proc.pid, self._started_at)
        self._buffer = bytearray()
        self._ready = False
        self.starts += 1
        return None

    def _end(self, polite: bool) -> None:
        """End the running worker: close its stdin (``polite``: it may exit by itself for a moment),
        kill its group, reap it (or keep it in ``_dying`` when the driver holds it)."""
        proc = self._proc
        if proc is None:
            return
        if not polite:  # a failure: a hang, a crash, an unreadable answer, a bound
            self._kills += 1
        self._proc = None
        self._ready = False
        self._buffer = bytearray()
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if polite:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=runner.KILL_GRACE_S / 4)
        runner.kill_tree(proc)  # also whatever the library started in its group
        if proc.stdout is not None:
            with contextlib.suppress(OSError):
                proc.stdout.close()
        try:
            proc.wait(timeout=runner.KILL_GRACE_S / 2)
        except subprocess.TimeoutExpired:
            self._dying.append(proc)
            return
        runner.forget_child(proc)

    def _reap_dying(self, wait_s: float = 0.0) -> None:
        still: List[subprocess.Popen[bytes]] = []
        for proc in self._dying:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=wait_s) if wait_s > 0 else proc.poll()
            if proc.returncode is None:
                still.append(proc)
            else:
                runner.forget_child(proc)
        self._dying = still


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has data (or hung up) within ``timeout_s`` (poll: one system call, any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout_s) * 1000))
