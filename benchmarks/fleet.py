"""Measures ``npuwatch fleet`` at scale: one refresh of 500 nodes × 16 chips, its JSON, and the live
view's CPU at a 5 s refresh.

Run: python benchmarks/fleet.py [--nodes 500] [--chips 16] [--view-seconds 60]
A real Prometheus (``prometheus`` on PATH: Debian's package) scrapes every 15 s one generated
exposition per node (``npuwatch serve``'s series, levels and workload classes included; one node
in 97 has a chip in Alarm) from a server in this process.  Once every target has been scraped
twice, the fleet feed refreshes four times (wall and CPU time of npuwatch's own process: the
queries, parsing and judging) and writes ``--json``.  Then ``npuwatch fleet --prometheus URL
--interval 5`` runs in a detached 200×50 tmux session and its process's CPU is read with psutil.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import psutil
from dashboard import end_process, find_dashboard  # benchmarks/ is the script's folder

from npuwatch.fleet import fleet_json
from npuwatch.fleet.feed import FleetFeed, PrometheusSource
from npuwatch.fleet.prometheus import Prometheus

LEVELS = ("ok", "warning", "unknown", "critical")
CLASSES = (
    "compute-bound",
    "memory-bound",
    "aicpu-bound",
    "input-bound",
    "waiting",
    "idle",
    "idle-holding-hbm",
    "unknown",
)
#: (name, value for chip c) of the plain per-chip gauges each node exports.
GAUGES: Tuple[Tuple[str, float], ...] = (
    ("npu_chip_info_power", 300.5),
    ("npu_chip_info_temperature", 45.0),
    ("npu_chip_info_utilization", 90.0),
    ("npu_chip_info_overall_utilization", 90.0),
    ("npu_chip_info_hbm_used_memory", 50000.0),
    ("npu_chip_info_hbm_total_memory", 65536.0),
    ("npu_chip_info_aicore_current_freq", 1800.0),
    ("npuwatch_chip_aicore_rated_freq", 1800.0),
    ("npu_chip_info_vector_utilization", 70.0),
    ("npu_chip_info_hbm_bandwidth_utilization", 60.0),
    ("npu_chip_info_hbm_temperature", 40.0),
    ("npu_chip_info_voltage", 0.9),
)


def exposition(node: int, chips: int) -> bytes:
    """One node's /metrics as ``npuwatch serve`` writes it (the names the fleet reads)."""
    out = [
        "npuwatch_up 1",
        f"npuwatch_last_sample_timestamp_seconds {time.time():.3f}",
        "npuwatch_sample_age_seconds 0.4",
    ]
    for c in range(chips):
        labels = f'chip_id="0",id="{c}",model_name="910B3",npu_id="{c}",pcie_bus_info="0000:{c:02X}:00.0"'
        alarm = node % 97 == 0 and c == 3
        out.append(f"npu_chip_info_health_status{{{labels}}} {0 if alarm else 1}")
        shown = "critical" if alarm else "ok"
        out += [f'npuwatch_chip_level{{{labels},level="{lv}"}} {int(lv == shown)}' for lv in LEVELS]
        out += [f'npuwatch_chip_workload{{{labels},class="{k}"}} {int(k == CLASSES[0])}' for k in CLASSES]
        out += [f"{name}{{{labels}}} {value + c % 7}" for name, value in GAUGES]
        out.append(
            f'npu_chip_info_process_info{{{labels},process_id="{1000 + c}",process_name="python3"}} 48000'
        )
    return ("\n".join(out) + "\n").encode()


def serve_expositions(chips: int) -> ThreadingHTTPServer:
    """A loopback server answering ``/metrics/<node>`` with that node's exposition."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = exposition(int(self.path.rsplit("/", 1)[1]), chips)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prometheus_config(address: str, nodes: int) -> str:
    lines = [
        "global: {scrape_interval: 15s, scrape_timeout: 10s}",
        "scrape_configs:",
        "  - job_name: npu",
        "    static_configs:",
    ]
    for n in range(nodes):
        lines.append(f"      - targets: ['{address}']")
        lines.append(f"        labels: {{__metrics_path__: '/metrics/{n}', instance: 'node-{n:04d}:9492'}}")
    return "\n".join(lines) + "\n"


def wait_scraped(url: str, chips_expected: int, deadline_s: float) -> int:
    """Wait until Prometheus holds every chip's health series; the count it holds."""
    query = f"{url}/api/v1/query?query=count(npu_chip_info_health_status)"
    end, count = time.monotonic() + deadline_s, 0
    while time.monotonic() < end and count < chips_expected:
        try:
            with urllib.request.urlopen(query, timeout=5) as answer:
                result = json.load(answer)["data"]["result"]
            count = int(float(result[0]["value"][1])) if result else 0
        except OSError:
            count = 0
        time.sleep(1)
    return count


def refreshes(url: str, rounds: int = 4) -> List[str]:
    """``rounds`` fleet refreshes: wall and CPU of this process, and the JSON's time and size."""
    feed = FleetFeed(PrometheusSource(Prometheus(url, timeout_s=60), matchers='job="npu"'), 5.0)
    lines = []
    for attempt in range(rounds):
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        fleet = feed.sample()
        t1, after = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        text = fleet_json.dumps(fleet)
        t2 = time.perf_counter()
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        lines.append(
            f"refresh {attempt}: {t1 - t0:.2f} s wall, {cpu:.2f} s CPU; {len(fleet.nodes)} nodes, "
            f"{fleet.chips_total} chips, worst {fleet.nodes[0].node} ({fleet.nodes[0].reason}); "
            f"--json {t2 - t1:.2f} s, {len(text) / 1e6:.1f} MB"
        )
    return lines


def view_cpu_percent(url: str, seconds: float, warmup_s: float = 15.0) -> Optional[float]:
    """The live view's own CPU, % of one core, at a 5 s refresh in a 200×50 tmux pane."""
    if shutil.which("tmux") is None:
        return None
    socket_name = f"npuwatch-fleet-bench-{time.time_ns()}"
    tmux = ["tmux", "-L", socket_name]
    command = f"{sys.executable} -m npuwatch fleet --prometheus {url} --interval 5"
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "50", command], check=True)
    try:
        pane = subprocess.run([*tmux, "list-panes", "-F", "#{pane_pid}"], capture_output=True, text=True)
        view = find_dashboard(int(pane.stdout.split()[0]), 30.0)
        time.sleep(warmup_s)
        start = view.cpu_times()
        time.sleep(seconds)
        end = view.cpu_times()
        used = (end.user - start.user) + (end.system - start.system)
        return 100.0 * used / seconds
    finally:
        for proc in psutil.process_iter():
            if "fleet" in " ".join(_cmdline(proc)) and url in " ".join(_cmdline(proc)):
                end_process(proc)
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def _cmdline(proc: psutil.Process) -> List[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--chips", type=int, default=16)
    parser.add_argument("--view-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    binary = shutil.which("prometheus")
    if binary is None:
        print("benchmarks/fleet.py: needs prometheus on PATH (apt-get install prometheus)", file=sys.stderr)
        return 1
    server = serve_expositions(args.chips)
    root = Path(tempfile.mkdtemp(prefix="npuwatch-fleet-bench-"))
    (root / "prometheus.yml").write_text(
        prometheus_config(f"127.0.0.1:{server.server_address[1]}", args.nodes)
    )
    port = free_port()
    prometheus = subprocess.Popen(
        [binary, "--config.file=prometheus.yml", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        count = wait_scraped(url, args.nodes * args.chips, 180.0)
        print(f"{args.nodes} nodes × {args.chips} chips scraped ({count} chips); load {psutil.getloadavg()}")
        time.sleep(20.0)  # a second scrape of every target
        for line in refreshes(url):
            print(line)
        cpu = view_cpu_percent(url, args.view_seconds)
        print(
            "live view: tmux missing"
            if cpu is None
            else f"live view at a 5 s refresh: {cpu:.1f} % of one core"
        )
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(30)
        except subprocess.TimeoutExpired:
            prometheus.kill()
        server.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
