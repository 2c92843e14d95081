"""A small cluster on loopback for the fleet tests: `npuwatch serve` demos, npu-exporter fixtures
served by a tiny http.server, and a real Prometheus (Debian's `prometheus`) scraping them every second.

Everything started here is stopped by ``Cluster.close()`` (the fixtures call it), and every wait is
bounded."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from tests.conftest import REPO

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
EXPORTER_FIXTURE = Path(__file__).parent / "data" / "npu_exporter.prom"
STARTED = re.compile(r"listening on http://127\.0\.0\.1:(\d+) ")
#: The frozen simulator clock of every demo: their values do not move between scrapes.
SIM_NOW = "40"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(predicate: Callable[[], bool], deadline_s: float, what: str) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, f"not reached within {deadline_s:g} s: {what}"
        time.sleep(0.2)


def get_json(url: str) -> Dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        loaded: Dict = json.load(response)
        return loaded


def run_fleet(*argv: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    """``python -m npuwatch fleet ARGV`` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "npuwatch", "fleet", *argv],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("NPUWATCH_")},
    )


class Serve:
    """One ``npuwatch serve --demo SCENARIO`` on a loopback port."""

    def __init__(self, scenario: str, root: Path) -> None:
        self.scenario = scenario
        root.mkdir(parents=True)
        (root / "tmp").mkdir()
        self.out = root / "out.txt"
        env = {**os.environ, "TMPDIR": str(root / "tmp"), "NPUWATCH_SIM_NOW": SIM_NOW}
        with open(self.out, "wb") as stdout, open(root / "err.txt", "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "npuwatch", "serve", "--demo", scenario, "--listen", "127.0.0.1:0"],
                stdout=stdout,
                stderr=stderr,
                env=env,
                cwd=REPO,
            )
        self.port = 0

    def started(self, deadline_s: float = 60.0) -> str:
        def listening() -> bool:
            assert self.process.poll() is None, f"serve {self.scenario} exited with {self.process.returncode}"
            found = STARTED.search(self.out.read_text())
            if found:
                self.port = int(found.group(1))
            return found is not None

        wait_until(listening, deadline_s, f"serve --demo {self.scenario} listening")
        return self.address

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def snapshot(self) -> Dict:
        return get_json(f"http://{self.address}/snapshot")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


class ExpositionServer:
    """Serves npu-exporter's exposition (the fixture) at /metrics, stamping each sample with the
    time now plus ``clock_offset_s`` as npu-exporter stamps its cached samples with its own clock."""

    def __init__(self, body: str, clock_offset_s: float = 0.0, status: int = 200) -> None:
        self.body = body
        self.clock_offset_s = clock_offset_s
        self.status = status
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stamp = str(int((time.time() + server.clock_offset_s) * 1000))
                data = server.body.replace("TIMESTAMP_MS", stamp).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Date", formatdate(time.time() + server.clock_offset_s, usegmt=True))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class PrometheusServer:
    """A real Prometheus on a free loopback port scraping ``jobs`` (name → targets) every second."""

    def __init__(self, root: Path, jobs: Dict[str, List[str]]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        lines = [
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}",
            "scrape_configs:",
        ]
        for job, targets in jobs.items():
            quoted = ", ".join(f"'{t}'" for t in targets)
            lines += [f"  - job_name: '{job}'", f"    static_configs: [{{targets: [{quoted}]}}]"]
        (root / "prometheus.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.port = free_port()
        self.log = root / "prometheus.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    "--config.file=prometheus.yml",
                    f"--storage.tsdb.path={root / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                cwd=root,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def targets_up(self) -> Dict[str, float]:
        """instance → the latest ``up``."""
        try:
            body = urllib.request.urlopen(f"{self.url}/api/v1/query?query=up", timeout=5).read()
        except OSError:
            return {}
        result = json.loads(body)["data"]["result"]
        return {r["metric"]["instance"]: float(r["value"][1]) for r in result}

    def wait_up(self, instances: List[str], deadline_s: float = 60.0) -> None:
        def all_up() -> bool:
            assert self.process.poll() is None, self.log.read_text()[-2000:]
            up = self.targets_up()
            return all(up.get(i) == 1 for i in instances)

        wait_until(all_up, deadline_s, f"Prometheus scraping {instances}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a Prometheus that ignores SIGTERM
                self.process.kill()
                self.process.wait(timeout=30)


def exporter_body(drop_labels: Tuple[str, ...] = ()) -> str:
    """The npu-exporter fixture, optionally with some labels removed from every series."""
    text = EXPORTER_FIXTURE.read_text(encoding="utf-8")
    for label in drop_labels:
        text = re.sub(rf'(?<![A-Za-z0-9_]){label}="[^"]*",?', "", text)
    return text.replace(",}", "}")


def first_line_json(result: subprocess.CompletedProcess) -> Optional[Dict]:
    return json.loads(result.stdout) if result.stdout.strip() else None
