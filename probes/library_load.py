"""Provides load_libraries(): dlopen shared libraries in a child process and keep the loader's errors.

A library is opened in a child Python (``ctypes.CDLL``, which binds every symbol now), never in
npuwatch itself: a library whose constructor hangs or crashes (a driver library talking to a
wedged device) costs a killed child, not the doctor.  The child reports each library on its own
line as soon as it is done, so a crash or a hang is pinned on the library that caused it and the
rest are tried again in a fresh child.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

from npuwatch.probes.runner import LaunchError, RunResult, run

DEFAULT_TIMEOUT_S = 5.0

#: One JSON line per library: {"path": ..., "error": null | "loader text"}.
_CHILD = """\
import ctypes, json, sys
for path in sys.argv[1:]:
    try:
        ctypes.CDLL(path)
        error = None
    except OSError as exc:
        error = str(exc) or repr(exc)
    except Exception as exc:
        error = repr(exc)
    sys.stdout.write(json.dumps({"path": path, "error": error}) + "\\n")
    sys.stdout.flush()
"""

PathLike = Union[str, Path]


def load_libraries(
    paths: Sequence[PathLike],
    ld_library_path: Union[str, Sequence[PathLike]] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Dict[str, Optional[str]]:
    """Try to ``dlopen`` each of ``paths``; map ``str(path)`` to ``None`` (loaded) or the error text.

    ``ld_library_path`` (a ``:``-joined string or a list of folders) is the child's whole
    ``LD_LIBRARY_PATH``, so dependencies are searched exactly there; ``timeout_s`` bounds all
    children together.  Never raises for a broken library or a missing interpreter.
    """
    wanted = [str(path) for path in paths]
    results: Dict[str, Optional[str]] = {}
    env = _child_env(ld_library_path)
    deadline = time.monotonic() + timeout_s
    remaining = [path for path in dict.fromkeys(wanted)]
    while remaining:
        left_s = deadline - time.monotonic()
        if left_s <= 0:
            for path in remaining:
                results[path] = f"not tried: the {timeout_s:g} s allowed for loading libraries ran out"
            break
        outcome = _run_child(remaining, env, left_s)
        if isinstance(outcome, str):  # the child could not start at all
            for path in remaining:
                results[path] = outcome
            break
        reported = _reported(outcome.stdout)
        results.update({path: reported[path] for path in remaining if path in reported})
        remaining = [path for path in remaining if path not in reported]
        if remaining:  # the child died or was killed on this one: blame it, retry the others
            culprit = remaining.pop(0)
            results[culprit] = _death(outcome)
    return {path: results[path] for path in wanted}


def _child_env(ld_library_path: Union[str, Sequence[PathLike]]) -> Mapping[str, str]:
    if isinstance(ld_library_path, str):
        joined = ld_library_path
    else:
        joined = ":".join(str(entry) for entry in ld_library_path)
    env = {key: value for key, value in os.environ.items() if key != "LD_LIBRARY_PATH"}
    if joined:
        env["LD_LIBRARY_PATH"] = joined
    env["LC_ALL"] = "C"  # the loader's messages in English, as users paste them into issues
    return env


def _run_child(paths: List[str], env: Mapping[str, str], timeout_s: float) -> Union[RunResult, str]:
    # -I: no user site, no PYTHON* variables; -S: no site import (fast, and no .pth side effects).
    argv = [sys.executable, "-I", "-S", "-c", _CHILD, *paths]
    try:
        return run(argv, timeout_s, env=env)
    except LaunchError as exc:
        return f"could not start a Python child to load the library: {exc.reason}"


def _reported(stdout: str) -> Dict[str, Optional[str]]:
    found: Dict[str, Optional[str]] = {}
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a library's constructor may print on stdout
        if isinstance(record, dict) and isinstance(record.get("path"), str):
            error = record.get("error")
            found[record["path"]] = error if isinstance(error, str) else None
    return found


def _death(outcome: RunResult) -> str:
    if outcome.timed_out:
        limit_s = outcome.timeout_s or outcome.duration_s
        return f"loading did not finish within {limit_s:.1f} s (hung while loading)"
    code = outcome.exit_code
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the process loading it was killed by {name} (the library crashed while loading)"
    last = outcome.stderr.strip().splitlines()[-1:] or [""]
    return f"the process loading it exited with code {code}" + (f": {last[0]}" if last[0] else "")
