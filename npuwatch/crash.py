"""Provides crash reports: an internal error's traceback goes to a file, the user gets one line naming it."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Optional

#: BSD sysexits EX_SOFTWARE: an internal error, never a success (docs/design.md §2.1).
EXIT_INTERNAL = 70


def report_folder() -> Path:
    """Where tracebacks go: ``$XDG_STATE_HOME/npuwatch`` (``~/.local/state/npuwatch``)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "npuwatch"


def write_report(exc: BaseException, where: str) -> Optional[Path]:
    """Write ``exc``'s traceback with what npuwatch was doing (and its ``details`` text, if it has
    one); the file, or None if none could be written."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = (
        f"npuwatch internal error in {where}\n"
        f"time: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
        f"python: {sys.version.split()[0]} ({sys.executable})\n"
        f"argv: {sys.argv!r}\n\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    )
    details = getattr(exc, "details", None)  # what the toolkit reported, when it caught the error itself
    if isinstance(details, str) and details:
        text += "\n" + details
    for folder in (report_folder(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        for number in range(1, 100):  # a second report in the same second gets its own file
            suffix = "" if number == 1 else f"-{number}"
            path = folder / f"npuwatch-crash-{stamp}-{os.getpid()}{suffix}.txt"
            try:
                with open(path, "x", encoding="utf-8", errors="backslashreplace") as handle:
                    handle.write(text)
            except FileExistsError:
                continue
            except OSError:
                break
            return path
    return None


def crash_line(exc: BaseException, where: str) -> str:
    """The one line a user sees: what happened and where the full traceback was written."""
    path = write_report(exc, where)
    kept = f"traceback in {path}" if path else "the traceback could not be written to a file"
    summary = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"npuwatch: internal error in {where}: {summary} ({kept}; please report it)"
