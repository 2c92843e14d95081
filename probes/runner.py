"""Provides run(): the one place npuwatch starts a subprocess, with a timeout that kills the group.

Every child runs in its own session and is registered while it lives; ``kill_all()`` (run at
exit and by the CLI's signal handlers) kills every one, so nothing npuwatch starts outlives it.

A process that calls ``setsid()`` leaves the child's group and session, and once its parent has
exited it is no longer a descendant either.  So a long-lived child (the DCMI worker, which loads
a library that may start daemons) can be started with a *mark*: a random token in the
``MARK_VARIABLE`` environment variable, which every process it forks inherits.  Killing the
child's tree then also kills every process of this user whose environment holds the mark
(``/proc/PID/environ``), wherever it went; ``kill_all()`` sweeps every mark it ever issued.
What belongs to a child's tree is read from ``/proc`` by ``process_tree``; this module kills it.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import secrets
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Set, Union

from npuwatch.probes.process_tree import MARK_VARIABLE as MARK_VARIABLE  # re-exported
from npuwatch.probes.process_tree import descendants as descendants  # re-exported
from npuwatch.probes.process_tree import fd_of, tree_of
from npuwatch.probes.process_tree import marked_processes as marked_processes  # re-exported

#: The most output read from one command (npu-smi prints a few KiB): past it the command is
#: killed and its result says ``too_large``, so a runaway child cannot fill npuwatch's memory.
MAX_OUTPUT_BYTES = 4 * 1024 * 1024

#: How long after its deadline (or its kill) a run may still take: reaping the killed child and
#: reading what it printed.  ``worst_case_s()`` is what callers wait for at most.
KILL_GRACE_S = 1.0

_READ_CHUNK = 64 * 1024


class LaunchError(Exception):
    """The command could not be started at all (missing, not executable, bad format)."""

    def __init__(self, argv: Sequence[str], reason: str, errno_name: str) -> None:
        super().__init__(f"{argv[0]}: {reason}")
        self.argv = tuple(argv)
        self.reason = reason
        self.errno_name = errno_name


@dataclass(frozen=True)
class RunResult:
    """What a finished (or killed) command left behind."""

    argv: tuple[str, ...]
    exit_code: Optional[int]  # None when npuwatch killed it (timeout, too much output, exit)
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    timeout_s: Optional[float] = None  # the limit it ran under
    too_large: bool = False  # printed more than MAX_OUTPUT_BYTES and was killed


def worst_case_s(timeout_s: float) -> float:
    """The longest ``run(argv, timeout_s)`` takes, whatever the child does."""
    return timeout_s + KILL_GRACE_S


#: What a Python child runs before its module: drops the current directory from ``sys.path``,
#: so a folder named ``npuwatch/`` where the user stands (a source checkout) cannot shadow the
#: installed package.  ``-I`` would do it too, but it also drops ``PYTHONPATH`` and the user site,
#: where CANN's ``set_env.sh`` and ``pip install --user`` put the packages the child needs.
_LAUNCHER = (
    "import os, runpy, sys\n"
    "if sys.path and sys.path[0] in ('', os.getcwd()):\n"
    "    del sys.path[0]\n"
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
)


def python_module_argv(python: str, module: str, args: Sequence[str]) -> list[str]:
    """The argv that runs ``python -m module args`` with the installed npuwatch, never the cwd's."""
    return [python, "-c", _LAUNCHER.format(module=module), *args]


# --- the registry of live children -------------------------------------------------------------

_LIVE: Dict[int, subprocess.Popen[bytes]] = {}
_ENDED: Set[int] = set()  # live children kill_all() killed: their run() stops waiting at once
# Re-entrant: a signal handler (run in the main thread between two bytecodes) calls kill_all()
# while the main thread may be inside one of the short sections below.
_LIVE_LOCK = threading.RLock()
#: Set by ``end_all()``: npuwatch is ending, so no new child starts (a sampling thread whose
#: npu-smi was just killed must not start the next one, nor a DCMI worker its restart).
_ENDING = threading.Event()
_MARKS: Dict[int, str] = {}  # live child's pid → its mark
_ISSUED: Set[str] = set()  # every mark handed out: kill_all() sweeps them all at exit


def new_mark() -> str:
    """A fresh mark for one child: put it in the child's environment as ``MARK_VARIABLE`` and give
    it to ``register_child``; every process the child starts inherits it (unless it replaces its
    whole environment)."""
    mark = secrets.token_hex(16)
    with _LIVE_LOCK:
        _ISSUED.add(mark)
    return mark


def kill_all() -> None:
    """Kill every child ``run()`` started that is still running, with all it spawned.

    A thread blocked in ``run()`` on one of them returns at once (with ``exit_code`` None).
    Safe from a signal handler and at exit; npuwatch's signals are held off meanwhile.
    """
    with held_signals():
        with _LIVE_LOCK:
            children = list(_LIVE.values())
            _ENDED.update(proc.pid for proc in children)
            marks = set(_ISSUED)
        for proc in children:
            _kill_tree(proc)
        if marks:  # what a marked child started and that outlived it (it crashed, or was killed)
            for pid in marked_processes(marks):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


atexit.register(kill_all)


def end_all() -> None:
    """npuwatch is ending (a signal): kill every live child and start no new one from now on.

    A ``run()`` called afterwards returns at once as killed (``exit_code`` None) and a child
    counted with ``register_child`` is killed as it is counted.  For the process's last moments
    only: nothing undoes it.
    """
    _ENDING.set()
    kill_all()


def ending() -> bool:
    """Whether ``end_all()`` ran: npuwatch is ending and starts no child."""
    return _ENDING.is_set()


def register_child(proc: subprocess.Popen[bytes], mark: Optional[str] = None) -> None:
    """Count a long-lived child npuwatch started itself (the DCMI worker) among the live ones:
    ``kill_all()`` kills it, with all it spawned, at exit and on npuwatch's signals.

    Start it as ``run()`` starts its children: ``start_new_session=True`` (its own group).
    ``mark``: the ``new_mark()`` in its environment: killing its tree kills the processes that
    carry it too.
    """
    with _LIVE_LOCK:
        _LIVE[proc.pid] = proc
        _ENDED.discard(proc.pid)
        if mark is not None:
            _MARKS[proc.pid] = mark
    if _ENDING.is_set():  # started while npuwatch ends: it ends too (its user sees it gone)
        kill_all()


def forget_child(proc: subprocess.Popen[bytes]) -> None:
    """Stop counting ``proc`` (``register_child``): it ended, and was reaped."""
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)
        _ENDED.discard(proc.pid)
        _MARKS.pop(proc.pid, None)


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a child's group and session, its descendants, and whoever holds its pipes."""
    _kill_tree(proc)


#: The signals that end npuwatch (``npuwatch.termination``).
_ENDING_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")


def _ending_signals() -> Set[int]:
    return {int(getattr(signal, name)) for name in _ENDING_SIGNALS if hasattr(signal, name)}


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold SIGTERM/SIGHUP/SIGINT off meanwhile (main thread only); one that came is handled when
    they are released.  So a signal cannot cut a sweep of the children, or a start-up step, short."""
    previous: Optional[Set[Union[int, signal.Signals]]] = None
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask"):
        with contextlib.suppress(OSError, ValueError):
            previous = signal.pthread_sigmask(signal.SIG_BLOCK, _ending_signals())
    try:
        yield
    finally:
        if previous is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def release_signals() -> None:
    """Unblock the ending signals in this thread (a thread starts with its creator's mask)."""
    if hasattr(signal, "pthread_sigmask"):
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _ending_signals())


# --- running one command -----------------------------------------------------------------------


def run(
    argv: Sequence[str],
    timeout_s: float,
    env: Optional[Mapping[str, str]] = None,
) -> RunResult:
    """Run ``argv`` with a hard ``timeout_s``; on expiry kill its whole process tree.

    The child gets its own session, so anything it forks dies with it; a process that left the
    session but still holds the output pipes is found and killed too, and the pipes are never
    waited on past the deadline.  Output is read as it comes and capped at ``MAX_OUTPUT_BYTES``.
    The run takes at most ``worst_case_s(timeout_s)``.  Raises ``LaunchError`` when the command
    cannot be started; every other outcome is a ``RunResult``.
    """
    started = time.monotonic()
    if _ENDING.is_set():  # npuwatch is ending: the run is as if killed at once (``end_all``)
        return RunResult(tuple(argv), None, "", "", 0.0, timeout_s=timeout_s)
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise LaunchError(argv, "no such file", "ENOENT") from exc
    except PermissionError as exc:
        raise LaunchError(argv, "permission denied", "EACCES") from exc
    except OSError as exc:  # ENOEXEC (not a binary for this machine), ETXTBSY, …
        raise LaunchError(argv, exc.strerror or str(exc), _errno_name(exc)) from exc
    with _LIVE_LOCK:
        _LIVE[proc.pid] = proc
        if _ENDING.is_set():  # end_all() ran between the check above and now
            _ENDED.add(proc.pid)
            _kill_tree(proc)
    try:
        reading = _Reading(proc, started + timeout_s)
        reading.until_done()
        out, err = reading.output()
    except BaseException:  # Ctrl-C (or a signal made an exception) while waiting: never leave it running
        _kill_tree(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=KILL_GRACE_S)
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE.pop(proc.pid, None)
            _ENDED.discard(proc.pid)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
    return RunResult(
        argv=tuple(argv),
        exit_code=None if reading.killed else proc.returncode,
        stdout=_decode(out),
        stderr=_decode(err),
        duration_s=time.monotonic() - started,
        timed_out=reading.timed_out,
        timeout_s=timeout_s,
        too_large=reading.too_large,
    )


class _Reading:
    """Reads a child's stdout and stderr until both close, its deadline, or the output cap."""

    def __init__(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        self.proc = proc
        self.deadline = deadline
        self.chunks: Dict[int, List[bytes]] = {}
        self.size = 0
        self.timed_out = False
        self.too_large = False
        self.killed = False
        self.selector = selectors.DefaultSelector()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
                self.selector.register(pipe.fileno(), selectors.EVENT_READ)
                self.chunks[pipe.fileno()] = []

    def output(self) -> tuple[bytes, bytes]:
        out = b"".join(self.chunks.get(fd_of(self.proc.stdout), []))
        err = b"".join(self.chunks.get(fd_of(self.proc.stderr), []))
        return out, err

    def until_done(self) -> None:
        try:
            self._read_until(self.deadline)
            if self.killed:  # by kill_all(): npuwatch is ending, do not wait on pipes
                self._reap()
                return
            if self.selector.get_map():  # the deadline or the cap: kill, then read what is left
                self.timed_out = not self.too_large
                self._kill()
                self._read_until(time.monotonic() + KILL_GRACE_S / 2)
            self._reap()
        finally:
            self.selector.close()

    def _read_until(self, deadline: float) -> None:
        while self.selector.get_map() and not self.too_large:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for key, _events in self.selector.select(min(left, 0.5)):
                self._read_one(int(key.fd))
            if self._killed_from_outside():
                return

    def _killed_from_outside(self) -> bool:
        """``kill_all()`` ran (npuwatch is ending): stop waiting on pipes an escaped process may hold."""
        with _LIVE_LOCK:
            ended = self.proc.pid in _ENDED
        if ended:
            self.killed = True
        return ended

    def _read_one(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(fd)
            return
        room = MAX_OUTPUT_BYTES - self.size
        self.chunks[fd].append(data[:room])
        self.size += min(len(data), room)
        if len(data) > room or self.size >= MAX_OUTPUT_BYTES:
            self.too_large = True

    def _kill(self) -> None:
        self.killed = True
        _kill_tree(self.proc)

    def _reap(self) -> None:
        # A process stuck in the kernel (a hung driver call) cannot die until the call returns:
        # stop waiting at the grace rather than hang with it.
        wait_s = KILL_GRACE_S / 2 if self.killed else max(0.0, self.deadline - time.monotonic())
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            if not self.killed:  # closed its output but still runs past the deadline
                self.timed_out = True
                self._kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=KILL_GRACE_S / 2)


# --- killing a whole tree ----------------------------------------------------------------------


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's group and session, its descendants, whoever holds its pipes, and every
    process that carries its mark."""
    victims = tree_of(proc)
    with _LIVE_LOCK:
        mark = _MARKS.get(proc.pid)
    if mark is not None:
        victims |= marked_processes({mark})
        victims.discard(os.getpid())
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # Already gone, or a setuid child this user may not signal.
        with contextlib.suppress(OSError):
            proc.kill()
    for pid in victims:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _decode(data: Optional[bytes]) -> str:
    if not data:
        return ""
    return data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "EOTHER")
