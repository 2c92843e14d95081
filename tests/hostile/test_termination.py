"""A signal always ends npuwatch: even when the app it asks to stop never does.

Seen (issue 16's session): a dashboard whose terminal a SIGHUP took away right after start
stayed alive for hours — textual's shutdown blocked writing to the gone terminal. The handler
now ends the process when the stop it asked for has not ended it within ``STOP_GRACE_S``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hostile.test_processes import _wait_for, marker  # noqa: F401 (a fixture)

DEADLINE_S = 60.0

# An "app" whose stop callback does nothing: the event loop runs on, as a wedged shutdown would.
_STUCK_APP = """
import asyncio, sys
from npuwatch.termination import call_on_termination

async def main():
    print("ready", flush=True)
    await asyncio.sleep(3600)

with call_on_termination(lambda code: None):
    asyncio.run(main())
"""


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
def test_a_signal_ends_the_process_even_when_the_app_never_stops(signum):
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_APP], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signum)
        code = proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 128 + signum


# --- issue 27, 3: a signal ends record and serve at once, whatever --timeout is ---------------------

HUNG_TIMEOUT_S = 30.0


def _recording_or_listening(command: str, tmp_path: Path) -> tuple:
    """argv for ``command`` on the demo whose npu-smi (and DCMI library) never answers, and a
    condition true once its own signal handler is in place."""
    from tests.hostile.test_processes import _wait_listening

    common = ["--demo", "npu-smi-hang", "--timeout", f"{HUNG_TIMEOUT_S:g}"]
    if command == "record":
        out = tmp_path / "rec.ndjson"
        return ["record", str(out), *common], lambda proc: _wait_for(out.exists, "the recording file")
    return ["serve", "--listen", "127.0.0.1:0", *common], _wait_listening


@pytest.mark.parametrize("command", ["record", "serve"])
@pytest.mark.parametrize(("backend", "hung"), [("npu-smi", "npu-smi"), ("auto", "DCMI worker")])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_ends_record_and_serve_at_once_while_the_source_hangs(
    tmp_path,
    marker,  # noqa: F811
    command,
    backend,
    hung,
    signum,
):
    """Seen: ``record --timeout 30`` took 29.3 s to exit on SIGTERM (its handler only set a flag;
    the sampling went on waiting for the hung npu-smi), 59 s with DCMI hung too; ``serve`` 10 s
    (its sampling thread joined).  The handler kills what is in flight and starts nothing new."""
    from tests.hostile.test_processes import (
        _assert_none_left,
        _dcmi_worker_in_flight,
        _npu_smi_in_flight,
        _start,
    )

    argv, ready = _recording_or_listening(command, tmp_path)
    proc = _start([*argv, "--backend", backend], tmp_path)
    ready(proc)
    _wait_for(_npu_smi_in_flight(marker) if backend == "npu-smi" else _dcmi_worker_in_flight(marker), hung)
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        _out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    took_s = time.monotonic() - sent
    assert proc.returncode == 0, err  # README: record and serve close cleanly on a signal, exit 0
    assert took_s < HUNG_TIMEOUT_S / 4, f"{command} took {took_s:.1f} s at --timeout {HUNG_TIMEOUT_S:g}"
    if command == "record":
        name = signal.Signals(signum).name
        assert f"(stopped by {name})" in err.decode() and "Traceback" not in err.decode()
    _assert_none_left(marker)
