"""Provides the DCMI worker: one long-lived child process that makes every library call under a deadline.

A DCMI call can block inside the driver, and a thread cannot be interrupted; a library can crash.
So no call is made in npuwatch's own process: one worker per source (a fresh interpreter run
through ``runner.python_module_argv``, its own session, counted by ``runner.register_child`` so
``kill_all()`` ends it) loads the library, calls ``dcmi_init``, enumerates and reads the ticks.
Requests are serialised (a lock) and each has a deadline: a missed one kills the worker's whole
group, the read reports ``timeout``, and a fresh worker (re-init, re-enumeration) serves the
next read.  A worker that dies (``SIGSEGV`` in the library) is a reported failure, never an
exception out of ``tick()``.

The protocol: requests on the worker's stdin, answers on the pipe that was its stdout (the
worker keeps a duplicate of it and points fd 1 at ``/dev/null``, so a library that prints cannot
corrupt it).  Each message is a 4-byte big-endian length and a pickle: the ``records`` the
reader fills, or this module's ``InitOutcome``/``TickOutcome``.  At start the worker answers
``init`` then ``inventory`` unasked, so construction starts them and the first read finds them
(nearly) done.  The worker ends when npuwatch does: its stdin closes, and a watchdog thread,
woken by that hang-up (it never wakes on a timer while npuwatch runs), sees its parent change
(even while the main thread is stuck in the library).

**Bounds.**  npuwatch measures the worker from its side after every answer and while it waits
for one (``bounds``: resident memory from ``/proc/PID/statm``, CPU time beyond its requests from
``/proc/PID/stat``); a worker past a bound is killed and the read fails with kind ``limit`` and
the reason (``the DCMI worker used 1.2 GiB of memory (limit 512 MiB); it was killed and
restarted``).  The next worker starts with the same back-off as after a crash
(``restart_delay_s``); ``restarts`` counts them.

**Nothing the library starts outlives npuwatch.**  Killing the worker's group is not enough: a
library may fork a daemon that calls ``setsid()`` (a new session and group) and, once its
parent exited, is not even a descendant of the worker any more.  So:

* the worker makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``, before the
  library loads): an orphan of anything the library started is re-parented to the worker, not
  to init, so while the worker lives every such process is its descendant, and killing the
  worker's tree (``runner.kill_tree``: group, session, descendants, pipe holders) finds them;
* every worker gets its own mark (``runner.new_mark``, in ``runner.MARK_VARIABLE``), which
  everything it forks inherits: after the worker died first (a crash, the OOM killer), its
  orphans are found by the mark in ``/proc/PID/environ`` and killed with the worker's tree, and
  ``runner.kill_all()`` sweeps every mark at npuwatch's exit; the worker's own watchdog kills
  its descendants and its mark's holders when npuwatch is gone;
* what escapes both (a process that ``exec``s with a new environment *after* the worker died)
  is the one gap left: a library that does that does it on purpose.

A subreaper inherits zombies: an orphan that exits stays a zombie of the worker until the worker
ends (it never ``wait``s for processes it did not start, which could steal the library's own
children from its ``waitpid``).  ``PR_SET_PDEATHSIG`` is not used for the worker: the signal
comes when the *thread* that started the worker ends (prctl(2)), and npuwatch starts workers from
short-lived threads (the dashboard's opening thread); the watchdog covers npuwatch's end.

The child side imports the standard library, ``records`` and, once running, the loader and the
reader; never the model.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, List, Mapping, Optional, Protocol, Sequence, Tuple, Union, cast

from npuwatch.probes import runner
from npuwatch.probes.dcmi import records
from npuwatch.probes.dcmi.bounds import Bounds, Meter

#: The module the worker process runs.
MODULE = "npuwatch.probes.dcmi.worker"
#: The ``module:function`` that loads the library and calls ``dcmi_init`` in the worker (``Opener``).
DEFAULT_OPENER = f"{MODULE}:open_reader"
#: ``module:function`` the worker calls before each tick when set (the demo's fake writes its state).
REFRESH_VARIABLE = "NPUWATCH_FAKE_DCMI_REFRESH"
#: The environment variable naming the library (``--dcmi-lib`` wins).
LIBRARY_VARIABLE = "NPUWATCH_DCMI_LIB"
#: The limit of one DCMI read when none is given (a read takes milliseconds; npu-smi's is 5 s).
DEFAULT_TIMEOUT_S = 2.0
#: On top of ``timeout_s``, how long a new worker may take to start (a fresh interpreter, its imports).
START_GRACE_S = 5.0
#: How often the worker looks whether npuwatch is still there once its request pipe closed.
WATCH_PARENT_S = 0.25
#: How often it looks otherwise: npuwatch's end closes the request pipe, which wakes the watchdog
#: at once, so it does not wake while npuwatch runs; a copy of npuwatch forked without exec holds
#: the pipe open too, and this bounds how long such a copy can hide npuwatch's end.
WATCH_PARENT_IDLE_S = 2.0
#: The largest answer accepted (a tick of hundreds of chips is a few hundred KiB).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Failures in a row a fresh worker is started after at once; then the wait doubles up to the cap.
RESTARTS_AT_ONCE = 3
RESTART_BACKOFF_MAX_S = 60.0
#: Failures count towards the back-off while they are this recent, good ticks between them or not
#: (a library whose worker is killed every third tick must back off too, not restart for ever).
FAILURE_WINDOW_S = 300.0
#: How often npuwatch looks at the worker's memory while it waits for an answer (a leak inside
#: one long call is caught within this, not only at the end of the call).
LIMIT_CHECK_S = 0.25
#: The bounds of a worker when none are given: ``bounds.DEFAULT_MEMORY_LIMIT_BYTES`` resident,
#: ``bounds.DEFAULT_IDLE_CPU_SHARE`` of a core beyond its requests.
DEFAULT_BOUNDS = Bounds()

_HEADER = struct.Struct(">I")


# --- the messages ------------------------------------------------------------------------------


@dataclass(frozen=True)
class InitOutcome:
    """How loading the library and ``dcmi_init`` went, as the worker reports it."""

    #: ``ok``; ``not-found`` / ``load`` (the loader's words in message/hint); ``init`` (code).
    kind: str
    code: Optional[int] = None  # dcmi_init's return code, when it ran
    message: str = ""
    hint: str = ""
    tried: Tuple[str, ...] = ()  # the paths the loader tried


@dataclass(frozen=True)
class TickOutcome:
    """One tick's records, and what the worker could not do cleanly around them."""

    chips: Tuple[records.ChipTick, ...] = ()
    warnings: Tuple[str, ...] = ()
    #: The worker's CPU seconds in the demo's refresh function before this tick (the simulated
    #: driver writing its state: work a real machine's driver does outside npuwatch).
    refresh_cpu_s: float = 0.0


@dataclass(frozen=True)
class WorkerFailure:
    """Why the worker gave no tick: ``not-found``, ``load``, ``init``, ``permission``, ``timeout``,
    ``crash``, ``limit`` (past a memory or CPU bound) or ``closed``."""

    kind: str
    message: str
    hint: str = ""
    code: Optional[int] = None  # the DCMI code (dcmi_init's), when one was given
    output: str = ""


@dataclass(frozen=True)
class WorkerTick:
    """A good tick: the chips' records with the enumeration they were read against."""

    inventory: records.Inventory
    chips: Tuple[records.ChipTick, ...]
    warnings: Tuple[str, ...] = ()
    #: True when ``inventory`` is new since the last good tick (a fresh worker, a re-enumeration).
    enumerated: bool = False
    pid: Optional[int] = None  # the worker that read it
    timings: Mapping[str, float] = field(default_factory=dict)


WorkerAnswer = Union[WorkerTick, WorkerFailure]


class _FailedError(Exception):
    def __init__(self, failure: WorkerFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


# --- npuwatch's side ---------------------------------------------------------------------------


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
            except _FailedError as exc:
                return self._failed(exc.failure)
            except (OSError, ValueError, TypeError, AssertionError) as exc:  # a bug of ours: no traceback
                self._end(polite=False)
                return self._failed(
                    WorkerFailure(
                        "crash",
                        f"the DCMI worker's pipe failed: {type(exc).__name__}: {exc}; it was restarted",
                        _CRASH_HINT,
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
                raise _FailedError(failure)
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
            raise _FailedError(self._protocol_failure(outcome))
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
            raise _FailedError(self._protocol_failure(init))
        if init.kind != "ok":
            self._end(polite=True)
            raise _FailedError(_init_failure(init))
        self._take_inventory(self._receive("inventory", deadline, "enumeration"))
        self._ready = True

    def _take_inventory(self, inventory: object) -> None:
        if not isinstance(inventory, records.Inventory):
            raise _FailedError(self._protocol_failure(inventory))
        self._inventory = inventory
        self._enumerated = True

    # the pipes ----------------------------------------------------------------------------------

    def _send(self, message: object) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        data = _frame(message)
        try:
            fd = proc.stdin.fileno()
            while data:
                data = data[os.write(fd, data) :]
        except OSError:  # EPIPE: the worker is gone; its answer pipe tells how
            raise _FailedError(self._died()) from None

    def _receive(self, kind: str, deadline: float, doing: str) -> object:
        """The next answer, which must be ``kind``; ``_FailedError`` on a missed deadline or a dead worker."""
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
                    raise _FailedError(self._timed_out(doing))
                self._check_bounds(cpu=False)  # a call that leaks while it runs
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                raise _FailedError(self._died())
            self._buffer += chunk

    def _take_message(self) -> Optional[Tuple[str, object]]:
        if len(self._buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self._buffer)
        if size > MAX_MESSAGE_BYTES:
            raise _FailedError(self._protocol_failure(f"an answer of {size} bytes"))
        if len(self._buffer) < _HEADER.size + size:
            return None
        data = bytes(self._buffer[_HEADER.size : _HEADER.size + size])
        del self._buffer[: _HEADER.size + size]
        try:
            message = pickle.loads(data)  # our own worker's records
        except Exception as exc:
            raise _FailedError(self._protocol_failure(f"an unreadable answer ({exc!r})")) from None
        if not (isinstance(message, tuple) and len(message) == 2 and isinstance(message[0], str)):
            raise _FailedError(self._protocol_failure(message))
        return message[0], message[1]

    def _expect(self, kind: str, message: Tuple[str, object]) -> object:
        got, payload = message
        if got == "error":
            self._end(polite=False)
            raise _FailedError(
                WorkerFailure(
                    "crash",
                    f"the DCMI reader failed in the worker: {_first_line(str(payload))}; "
                    "npuwatch kept running",
                    "a fresh worker starts on the next read; please report it (`npuwatch doctor`)",
                    output=str(payload)[-4096:],
                )
            )
        if got != kind:
            raise _FailedError(self._protocol_failure(f"a {got!r} answer where {kind!r} was due"))
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
        """``_FailedError`` (kind ``limit``) when the worker is past a bound: it is killed."""
        meter = self._meter
        reason = None if meter is None else meter.check(self._clock(), cpu)
        if reason is None:
            return
        self._end(polite=False)
        raise _FailedError(
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
        return WorkerFailure("crash", crash_message(code), _CRASH_HINT)

    def _protocol_failure(self, what: object) -> WorkerFailure:
        self._end(polite=False)
        shown = what if isinstance(what, str) else f"an unexpected {type(what).__name__}"
        return WorkerFailure("crash", f"the DCMI worker sent {shown}; it was restarted", _CRASH_HINT)

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


def start_worker(
    library: Optional[str],
    root: str = "/",
    timeout_s: Optional[float] = None,
    environ: Optional[Mapping[str, str]] = None,
    start_grace_s: float = START_GRACE_S,
    restart_at_once: bool = True,
) -> Worker:
    """A ``Worker`` started now: it loads the library, initialises and enumerates while the caller
    does other things (this module imports little, so it can be the first thing a feed does).

    ``library``: the path (or ``python:<module>``) to load; ``None``: ``NPUWATCH_DCMI_LIB`` (in
    ``environ``, then the process's), else the search path under ``root``.  ``timeout_s``: one
    read's limit (``None``: ``DEFAULT_TIMEOUT_S``).  ``environ`` is added to the worker's
    environment (a demo's fake library reads its variables there).  ``start_grace_s``: how much
    longer than one read the first answer (the interpreter's start, the library's load and
    ``dcmi_init``) may take.  ``restart_at_once``: start a fresh worker as soon as one failed
    (``False`` for a one-shot command, which has no next read to have it ready for).
    """
    env = dict(environ or {})
    if library is None:
        library = env.get(LIBRARY_VARIABLE) or os.environ.get(LIBRARY_VARIABLE) or None
    limit_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    worker = Worker(library, root, limit_s, env, start_grace_s=start_grace_s, restart_at_once=restart_at_once)
    worker.start()
    return worker


_CRASH_HINT = (
    "a fresh worker starts on the next read; if it keeps crashing use `--backend npu-smi` "
    "and report the driver version (`npuwatch doctor`)"
)


def crash_message(returncode: Optional[int]) -> str:
    """What a dead worker's exit status says: ``the DCMI library crashed (SIGSEGV) in the worker…``."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the DCMI library crashed ({name}) in the worker; npuwatch kept running"
    if returncode is not None:
        return f"the DCMI worker exited unexpectedly (exit code {returncode}); npuwatch kept running"
    return "the DCMI worker closed its pipe without exiting; it was killed, npuwatch kept running"


def restart_delay_s(failures: int) -> float:
    """How long after ``failures`` recent failures (``FAILURE_WINDOW_S``) the next worker starts:
    at once for the first ``RESTARTS_AT_ONCE``, then 2, 4, 8 … s up to ``RESTART_BACKOFF_MAX_S``."""
    if failures < RESTARTS_AT_ONCE:
        return 0.0
    return min(RESTART_BACKOFF_MAX_S, 2.0 ** (failures - RESTARTS_AT_ONCE + 1))


def _init_failure(init: InitOutcome) -> WorkerFailure:
    if init.kind != "init":
        return WorkerFailure(init.kind, init.message, init.hint, output="\n".join(init.tried))
    from npuwatch.probes.dcmi.status import PERMISSION_HINT, hint, meaning

    code = init.code if init.code is not None else 0
    if code == records.SYMBOL_MISSING:  # a file named libdcmi.so that is not DCMI (or far too old)
        return WorkerFailure(
            "load",
            "the library loaded has no dcmi_init: it is not a DCMI library",
            "point --dcmi-lib (NPUWATCH_DCMI_LIB) at the driver's libdcmi.so, or use --backend npu-smi",
            code=code,
        )
    if code == -8002:
        return WorkerFailure(
            "permission",
            "dcmi_init failed with -8002: not root and not in the HwHiAiUser group",
            PERMISSION_HINT,
            code=code,
        )
    return WorkerFailure(
        "init",
        f"dcmi_init failed with {code}: {meaning(code)}",
        hint(code) or "run `npuwatch doctor`",
        code=code,
    )


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has data (or hung up) within ``timeout_s`` (poll: one system call, any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout_s) * 1000))


def _frame(message: object) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:200] if lines else "an error"


# --- the worker's side -------------------------------------------------------------------------


class Reader(Protocol):
    """What the worker asks of a reader (``reader.Reader``; a test's stand-in)."""

    def inventory(self) -> records.Inventory: ...

    def tick(self, chips: Sequence[records.ChipFacts]) -> Sequence[records.ChipTick]: ...


Opener = Callable[[Optional[str], str], Tuple[InitOutcome, Optional[Reader]]]


def child_main(argv: Sequence[str]) -> int:
    """The worker: ``[library spec as JSON, root, parent pid, opener]``.  Answers on the pipe that
    was fd 1; fd 1 itself goes to ``/dev/null``."""
    answers = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # whatever the library prints goes nowhere, never into the protocol
    os.close(null)
    spec, root, parent, opener = json.loads(argv[0]), argv[1], int(argv[2]), argv[3]
    _become_subreaper()  # before the library loads: its orphans stay the worker's descendants
    threading.Thread(target=_watch_parent, args=(parent, 0), name="watch-parent", daemon=True).start()
    channel = _Channel(0, answers)
    try:
        open_with = cast(Opener, _resolve(opener))
        init, reader = open_with(spec, root)
    except Exception:
        channel.send(("error", traceback.format_exc()))
        return 1
    channel.send(("init", init))
    if reader is None:
        return 0
    return _serve(channel, reader)


def _serve(channel: _Channel, reader: Reader) -> int:
    refresh = _Refresh(os.environ.get(REFRESH_VARIABLE, ""))
    chips: Tuple[records.ChipFacts, ...] = ()
    request: object = ("inventory",)  # the first enumeration, unasked
    while True:
        try:
            if request == ("inventory",):
                inventory = reader.inventory()
                chips = tuple(inventory.chips)
                channel.send(("inventory", inventory))
                refresh.prepare()  # its imports while npuwatch has not asked for a tick yet
            elif request == ("tick",):
                began = time.thread_time()
                warnings = refresh()
                refresh_cpu_s = time.thread_time() - began if refresh.name else 0.0
                ticks = tuple(reader.tick(chips))
                channel.send(("tick", TickOutcome(ticks, warnings, refresh_cpu_s)))
            else:
                return 0  # ("exit",) or anything else
        except Exception:
            channel.send(("error", traceback.format_exc()))
        request = channel.receive()
        if request is None:  # npuwatch closed the pipe: it ended, or closed this source
            return 0


def _resolve(name: str) -> Callable[..., object]:
    """The function ``module:function`` names."""
    import importlib

    module, _, attribute = name.partition(":")
    function = getattr(importlib.import_module(module), attribute)
    if not callable(function):
        raise TypeError(f"{name} is not a function")
    return cast(Callable[..., object], function)


def open_reader(spec: Optional[str], root: str) -> Tuple[InitOutcome, Optional[Reader]]:
    """Load the library and ``dcmi_init``: the outcome, and the reader when it worked (the default
    ``opener``)."""
    from npuwatch.probes.dcmi import library, reader

    try:
        loaded = library.load_library(spec, root)
    except library.LibraryError as exc:
        failure = exc.failure
        kind = "not-found" if _not_found(failure) else "load"
        return InitOutcome(kind, message=failure.message, hint=failure.hint, tried=failure.tried), None
    read = reader.Reader(loaded)
    code = read.init()
    if code != 0:
        return InitOutcome("init", code=code), None
    return InitOutcome("ok", code=0), read


def _not_found(failure: records.LibraryFailure) -> bool:
    """Whether no candidate existed at all (rather than one that failed to load)."""
    flag = getattr(failure, "not_found", None)
    if isinstance(flag, bool):
        return flag
    return failure.message.endswith(" not found") or " not found (tried " in failure.message


class _Refresh:
    """The demo's ``module:function`` called before each tick (its fake writes the live state)."""

    def __init__(self, name: str) -> None:
        self.name = name.strip()
        self.function: Optional[Callable[[], object]] = None

    def prepare(self) -> None:
        """Import the function now, without calling it (a failure is reported by the next call)."""
        if self.name and self.function is None:
            with contextlib.suppress(Exception):
                self.function = _resolve(self.name)

    def __call__(self) -> Tuple[str, ...]:
        if not self.name:
            return ()
        try:
            if self.function is None:
                self.function = _resolve(self.name)
            self.function()
        except Exception as exc:
            return (f"{REFRESH_VARIABLE}={self.name} failed: {exc!r}",)
        return ()


class _Channel:
    """The worker's ends of the pipes: requests in, answers out."""

    def __init__(self, requests: int, answers: int) -> None:
        self.requests = requests
        self.answers = answers

    def send(self, message: object) -> None:
        data = _frame(message)
        while data:
            data = data[os.write(self.answers, data) :]

    def receive(self) -> Optional[object]:
        header = self._exactly(_HEADER.size)
        if header is None:
            return None
        (size,) = _HEADER.unpack(header)
        data = self._exactly(size)
        return None if data is None else pickle.loads(data)

    def _exactly(self, size: int) -> Optional[bytes]:
        chunks = []
        while size > 0:
            chunk = os.read(self.requests, min(size, 1 << 16))
            if not chunk:
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


def _watch_parent(parent: int, requests: int = 0) -> None:
    """End the worker's whole group when npuwatch is gone, even while a library call hangs.

    Waits for the request pipe (``requests``) to hang up, which it does when npuwatch ends or
    closes the worker, looking at the parent every ``WATCH_PARENT_IDLE_S`` meanwhile; then every
    ``WATCH_PARENT_S`` (a closed pipe stays hung up, and the worker may be ending by itself).
    """
    poller = select.poll()
    poller.register(requests, 0)  # no events asked: only a hang-up (or an error) wakes it
    hung_up = False
    while os.getppid() == parent:
        if hung_up:
            time.sleep(WATCH_PARENT_S)
        else:
            hung_up = bool(poller.poll(WATCH_PARENT_IDLE_S * 1000))
    _end_group()


def _end_group() -> None:
    """Kill all the library started (its descendants, whatever carries the worker's mark, its
    process group), then the worker."""
    mark = os.environ.get(runner.MARK_VARIABLE)
    victims = runner.descendants(os.getpid())
    if mark:
        victims |= runner.marked_processes({mark})
    for pid in victims:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if os.getpgrp() == os.getpid():  # its own group (always, as Worker starts it)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(0)


#: prctl(2)'s option that makes a process the reaper of its descendants' orphans.
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Make the worker the reaper of every orphan below it (Linux 3.4+; nothing elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        zero = ctypes.c_ulong(0)
        libc.prctl(ctypes.c_int(_PR_SET_CHILD_SUBREAPER), ctypes.c_ulong(1), zero, zero, zero)


if __name__ == "__main__":
    # Run the module imported by its name, so the answers pickle as ``npuwatch.probes.dcmi.worker``
    # records, not ``__main__`` ones.
    from npuwatch.probes.dcmi.worker import child_main as _main

    sys.exit(_main(sys.argv[1:]))
