"""A signal always ends npuwatch: even when the app it asks to stop never does.

Seen (issue 16's session): a dashboard whose terminal a SIGHUP took away right after start
stayed alive for hours — textual's shutdown blocked writing to the gone terminal. The handler
now ends the process when the stop it asked for has not ended it within ``STOP_GRACE_S``.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

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
