"""``npuwatch serve`` out of file descriptors (issue 14, defect 14).

With a low ``ulimit -n`` and many idle connections, ``accept()`` fails with EMFILE while the
listening socket stays readable: the accept loop must back off (not spin at 100 % CPU), log the
condition once, and serve again when descriptors come back.  The host probe's EMFILE is a probe
error in the snapshot, not a traceback on stderr.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import List

from tests.conftest import CAPTURES

CAPTURE = str(next(CAPTURES.glob("044_*.txt")))

#: The exporter in a child whose descriptor limit is 64; it counts accept() attempts in a window.
CHILD = textwrap.dedent(
    """
    import http.client, logging, resource, sys, threading, time
    from npuwatch.exporter.server import Exporter, _Server
    from npuwatch.feeds import FeedOptions, open_feed

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    attempts = [0]
    real = _Server.get_request
    def counting(self):
        attempts[0] += 1
        return real(self)
    _Server.get_request = counting
    _Server.request_queue_size = 128  # the kernel queues the connections the server cannot take
    feed = open_feed(FeedOptions(replay=sys.argv[1], interval_s=0.2))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    exporter = Exporter(feed, "127.0.0.1", 0)
    exporter.start()
    print(exporter.address[1], flush=True)
    sys.stdin.readline()            # the parent holds 120 idle connections now
    time.sleep(0.5)
    attempts[0] = 0
    time.sleep(2.0)
    print(attempts[0], flush=True)
    sys.stdin.readline()            # the parent closed them
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline and status is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", exporter.address[1], timeout=5)
            conn.request("GET", "/healthz")
            status = conn.getresponse().status
            conn.close()
        except OSError:
            time.sleep(0.2)
    print(status, flush=True)
    exporter.stop()
    feed.close()
    """
)


def _connect_many(port: int, count: int) -> List[socket.socket]:
    """Up to ``count`` idle connections; stops once the server no longer takes them (its backlog is full)."""
    held: List[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(1.0)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:
            sock.close()
            break
        held.append(sock)
    return held


def test_serve_backs_off_when_out_of_descriptors_and_recovers(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, CAPTURE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(tmp_path),
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    held: List[socket.socket] = []
    try:
        assert child.stdout is not None and child.stdin is not None
        port = int(child.stdout.readline())
        held = _connect_many(port, 120)
        child.stdin.write("go\n")
        child.stdin.flush()
        attempts = int(child.stdout.readline())
        for sock in held:
            sock.close()
        held = []
        time.sleep(0.5)
        child.stdin.write("go\n")
        child.stdin.flush()
        status = child.stdout.readline().strip()
        _, err = child.communicate(timeout=60)
    finally:
        for sock in held:
            sock.close()
        if child.poll() is None:
            child.kill()
            child.communicate()
    # A spinning loop makes tens of thousands of attempts in the 2 s window; backing off, a few dozen.
    assert attempts < 200, f"{attempts} accept attempts in 2 s: the accept loop spins"
    assert status in ("200", "503"), err
    assert err.count("out of file descriptors") == 1, err
    assert "Traceback" not in err
    assert child.returncode == 0, err
