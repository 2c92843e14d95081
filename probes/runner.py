"""Provides run(): the one place npuwatch starts a subprocess, with a timeout that kills the group."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

#: The most output decoded and kept from one command (npu-smi prints a few KiB); a runaway
#: child's excess is dropped after the pipe is drained.
MAX_OUTPUT_BYTES = 4 * 1024 * 1024


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
    exit_code: Optional[int]  # None when npuwatch killed it at the timeout
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    timeout_s: Optional[float] = None  # the limit it ran under


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


def run(
    argv: Sequence[str],
    timeout_s: float,
    env: Optional[Mapping[str, str]] = None,
) -> RunResult:
    """Run ``argv`` with a hard ``timeout_s``; on expiry kill its whole process group.

    The child gets its own session, so anything it forks dies with it and cannot keep
    npuwatch waiting on an inherited pipe.  Raises ``LaunchError`` when the command
    cannot be started; every other outcome is a ``RunResult``.
    """
    started = time.monotonic()
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
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = _drain(proc)
    except BaseException:  # Ctrl-C (or a signal made an exception) while waiting: never leave it running
        _kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
        raise
    return RunResult(
        argv=tuple(argv),
        exit_code=None if timed_out else proc.returncode,
        stdout=_decode(out),
        stderr=_decode(err),
        duration_s=time.monotonic() - started,
        timed_out=timed_out,
        timeout_s=timeout_s,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # Already gone, or a setuid child this user may not signal.
        with contextlib.suppress(OSError):
            proc.kill()


def _drain(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Reap a killed child and keep whatever it printed before it died."""
    try:
        return proc.communicate(timeout=2.0)
    except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipe
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        # A process stuck in the kernel (a hung driver call) cannot die until the call returns:
        # stop waiting rather than hang with it.
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
        return b"", b""


def _decode(data: Optional[bytes]) -> str:
    if not data:
        return ""
    return data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace")


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "EOTHER")
