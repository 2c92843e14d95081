"""Measures `npuwatch serve` under scrape load: 50 concurrent scrapers against the 16-chip A3 demo.

Starts ``python -m npuwatch serve --demo a3`` on a free loopback port, lets it sample alone for
a few seconds (the idle cost: one npu-smi run per second), then runs N scraper threads, each on
its own keep-alive connection, that GET /metrics back to back for S seconds.  Prints requests,
errors, p50/p99 latency and the server process's CPU and RSS, measured with psutil around each
phase.  Scrapes only read the latest sample, so the npu-smi cost does not grow with scrapers.

The CPU of the demo's fake npu-smi (a Python script, run once per sample) is reported apart:
on a real machine that time is npu-smi's and the driver's, the same for any tool that asks.
Tests never assert a wall-clock time (docs/design.md §7); this prints the numbers.

Run: python benchmarks/exporter.py [--seconds S] [--scrapers N] [--idle-seconds S]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import psutil

STARTED = re.compile(r"listening on http://127\.0\.0\.1:(\d+) ")


@dataclass
class Load:
    """What the scraper threads saw."""

    latencies_s: List[float] = field(default_factory=list)
    errors: int = 0
    body_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def start_server() -> Tuple[subprocess.Popen, int]:
    command = [sys.executable, "-m", "npuwatch", "serve", "--demo", "a3", "--listen", "127.0.0.1:0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()  # the one start-up line
    found = STARTED.search(line)
    if not found:
        server.kill()
        raise SystemExit(f"serve did not start: {line!r} {server.stderr.read() if server.stderr else ''}")
    return server, int(found.group(1))


def get(conn: http.client.HTTPConnection, path: str) -> Tuple[int, bytes]:
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def wait_up(port: int, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            if b"npuwatch_up 1.0" in get(conn, "/metrics")[1]:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.1)
    raise SystemExit("serve never reported npuwatch_up 1")


def scraper(port: int, until: float, load: Load) -> None:
    conn: Optional[http.client.HTTPConnection] = None
    latencies: List[float] = []
    errors = 0
    size = 0
    while time.perf_counter() < until:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        started = time.perf_counter()
        try:
            status, body = get(conn, "/metrics")
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = None
            continue
        latencies.append(time.perf_counter() - started)
        if status != 200:
            errors += 1
        size = len(body)
    if conn is not None:
        conn.close()
    with load.lock:
        load.latencies_s.extend(latencies)
        load.errors += errors
        load.body_bytes = max(load.body_bytes, size)


def cpu_s(process: psutil.Process) -> Tuple[float, float]:
    """(the server's own CPU seconds, its reaped children's: the fake npu-smi runs)."""
    times = process.cpu_times()
    return times.user + times.system, times.children_user + times.children_system


def percentile(values: List[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the scrapers run (default 30)")
    parser.add_argument("--scrapers", type=int, default=50, help="concurrent scraper threads (default 50)")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="sampling alone first (default 5)")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args()

    server, port = start_server()
    process = psutil.Process(server.pid)
    try:
        wait_up(port)
        idle_before, idle_wall = cpu_s(process), time.perf_counter()
        time.sleep(args.idle_seconds)
        idle_after, idle_end = cpu_s(process), time.perf_counter()

        load = Load()
        until = time.perf_counter() + args.seconds
        threads = [threading.Thread(target=scraper, args=(port, until, load)) for _ in range(args.scrapers)]
        me = psutil.Process()
        before, wall, client_before = cpu_s(process), time.perf_counter(), cpu_s(me)[0]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after, wall_end, client_after = cpu_s(process), time.perf_counter(), cpu_s(me)[0]
        rss_mib = process.memory_info().rss / 2**20
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)

    elapsed = wall_end - wall
    idle = idle_end - idle_wall
    requests = len(load.latencies_s)
    print(
        f"npuwatch serve --demo a3 (16 chips), {args.scrapers} scrapers on keep-alive connections, "
        f"{elapsed:.1f} s"
    )
    print(f"  requests        {requests} ({requests / elapsed:.0f}/s), errors {load.errors}")
    print(f"  /metrics size   {load.body_bytes} bytes")
    if requests:
        p50 = statistics.median(load.latencies_s) * 1000
        p99 = percentile(load.latencies_s, 0.99) * 1000
        print(f"  latency         p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    print(f"  server CPU      {100 * (after[0] - before[0]) / elapsed:.1f} % of one core under load")
    print(
        f"  server CPU idle {100 * (idle_after[0] - idle_before[0]) / idle:.1f} % of one core (sampling only)"
    )
    print(
        f"  fake npu-smi    {100 * (after[1] - before[1]) / elapsed:.1f} % under load, "
        f"{100 * (idle_after[1] - idle_before[1]) / idle:.1f} % idle (the demo's simulator, not npuwatch)"
    )
    print(f"  server RSS      {rss_mib:.1f} MiB")
    client = 100 * (client_after - client_before) / elapsed
    print(f"  scraper CPU     {client:.1f} % of one core (the load generator itself, for scale)")
    print(f"  exit on SIGTERM {code}")
    if args.json:  # for benchmarks/run.py: one object on the last line
        latencies_ms = sorted(1000 * t for t in load.latencies_s)
        figures = {
            "requests": requests,
            "errors": load.errors,
            "p50_ms": statistics.median(latencies_ms) if latencies_ms else None,
            "p99_ms": percentile(load.latencies_s, 0.99) * 1000 if latencies_ms else None,
            "server_cpu_percent": 100 * (after[0] - before[0]) / elapsed,
            "server_idle_cpu_percent": 100 * (idle_after[0] - idle_before[0]) / idle,
            "server_rss_mb": rss_mib,
            "seconds": elapsed,
            "scrapers": args.scrapers,
        }
        print(json.dumps(figures))
    return 0 if code == 0 and load.errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
