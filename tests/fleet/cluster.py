"""A small cluster on loopback for the tests that need a real Prometheus (tests/fleet,
tests/fleet_views, tests/deploy): `npuwatch serve` demos, npu-exporter fixtures served by a tiny
http.server, and a real Prometheus (Debian's `prometheus`) scraping them every second.

Everything started here is stopped by ``Cluster.close()`` (``running_cluster`` calls it), or by
leaving a ``PrometheusServer``'s ``with`` block, and every wait is bounded."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Type

from tests.conftest import REPO, need

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
EXPORTER_FIXTURE = Path(__file__).parent / "data" / "npu_exporter.prom"
STARTED = re.compile(r"listening on http://127\.0\.0\.1:(\d+) ")
#: The frozen simulator clock of every demo: their values do not move between scrapes.
SIM_NOW = "40"


def need_prometheus() -> None:
    """Skip the test where Prometheus is not installed."""
    need(os.path.exists(PROMETHEUS), "prometheus is not installed (Debian: apt-get install prometheus)")


def stop_process(process: subprocess.Popen) -> None:
    """End ``process`` (SIGTERM, then SIGKILL for one that ignores it) and reap it."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


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
        stop_process(self.process)


class LoopbackServer:
    """An http.server on a free loopback port answering with ``handler`` on a daemon thread until
    ``stop()``; ``daemon_threads``: stopping does not wait for requests still being answered."""

    def __init__(self, handler: Type[BaseHTTPRequestHandler], daemon_threads: bool = False) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = daemon_threads
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class ExpositionServer(LoopbackServer):
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

        super().__init__(Handler)


class PrometheusServer:
    """A real Prometheus on a free loopback port, its config, storage and log under ``root``:
    scraping ``jobs`` (name → targets) every second, or run on ``config`` (prometheus.yml's text)
    with ``files`` (name → text, e.g. a rules file) beside it.  Stopped by ``stop()`` or on leaving
    its ``with`` block."""

    def __init__(
        self,
        root: Path,
        jobs: Optional[Dict[str, List[str]]] = None,
        *,
        config: Optional[str] = None,
        files: Mapping[str, str] = {},
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (root / name).write_text(text, encoding="utf-8")
        if config is None:
            config = scrape_config(jobs or {})
        (root / "prometheus.yml").write_text(config, encoding="utf-8")
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

    def api(self, path: str) -> Any:
        """The ``data`` of ``/api/v1/PATH``; ``None`` while Prometheus does not answer yet."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=10) as response:
                return json.load(response)["data"]
        except OSError:
            return None

    def query(self, promql: str) -> List[Dict[str, Any]]:
        """The instant vector ``promql`` gives now; [] while Prometheus does not answer yet."""
        data = self.api("query?" + urllib.parse.urlencode({"query": promql}))
        return [] if data is None else list(data["result"])

    def assert_running(self) -> None:
        """Fail with the end of Prometheus' log when it exited."""
        assert self.process.poll() is None, self.log.read_text()[-2000:]

    def targets_up(self) -> Dict[str, float]:
        """instance → the latest ``up``."""
        return {r["metric"]["instance"]: float(r["value"][1]) for r in self.query("up")}

    def wait_up(self, instances: List[str], deadline_s: float = 60.0) -> None:
        def all_up() -> bool:
            self.assert_running()
            up = self.targets_up()
            return all(up.get(i) == 1 for i in instances)

        wait_until(all_up, deadline_s, f"Prometheus scraping {instances}")

    def stop(self) -> None:
        stop_process(self.process)

    def __enter__(self) -> PrometheusServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def scrape_config(jobs: Dict[str, List[str]]) -> str:
    """prometheus.yml scraping each job's static targets every second."""
    lines = [
        "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}",
        "scrape_configs:",
    ]
    for job, targets in jobs.items():
        quoted = ", ".join(f"'{t}'" for t in targets)
        lines += [f"  - job_name: '{job}'", f"    static_configs: [{{targets: [{quoted}]}}]"]
    return "\n".join(lines) + "\n"


class Cluster:
    """``npuwatch serve`` demos and exposition servers by name, and the Prometheus scraping them."""

    def __init__(self) -> None:
        self.serves: Dict[str, Serve] = {}
        self.expositions: Dict[str, ExpositionServer] = {}
        self.prometheus: PrometheusServer

    def close(self) -> None:
        """Stop everything started (whatever failed while starting)."""
        for serve in self.serves.values():
            serve.stop()
        for server in self.expositions.values():
            server.stop()
        if hasattr(self, "prometheus"):
            self.prometheus.stop()


@contextlib.contextmanager
def running_cluster(
    root: Path,
    scenarios: Tuple[str, ...],
    expositions: Mapping[str, Callable[[], ExpositionServer]] = {},
    settle_s: float = 0.0,
) -> Iterator[Cluster]:
    """A demo serve per scenario (job ``npu``), an exposition server per name (its own job), and a
    Prometheus scraping them all, every target up (then ``settle_s`` more for a few scrapes);
    all of it stopped, and checked stopped, on the way out."""
    need_prometheus()
    made = Cluster()
    try:
        for scenario in scenarios:
            made.serves[scenario] = Serve(scenario, root / scenario)
        for name, start in expositions.items():
            made.expositions[name] = start()
        jobs = {"npu": [serve.started() for serve in made.serves.values()]}
        jobs.update({job: [server.address] for job, server in made.expositions.items()})
        made.prometheus = PrometheusServer(root / "prometheus", jobs)
        made.prometheus.wait_up([t for targets in jobs.values() for t in targets])
        time.sleep(settle_s)
        yield made
    finally:
        made.close()
    assert all(serve.process.returncode is not None for serve in made.serves.values())
    assert made.prometheus.process.returncode is not None


def exporter_body(drop_labels: Tuple[str, ...] = ()) -> str:
    """The npu-exporter fixture, optionally with some labels removed from every series."""
    text = EXPORTER_FIXTURE.read_text(encoding="utf-8")
    for label in drop_labels:
        text = re.sub(rf'(?<![A-Za-z0-9_]){label}="[^"]*",?', "", text)
    return text.replace(",}", "}")


def first_line_json(result: subprocess.CompletedProcess) -> Optional[Dict]:
    return json.loads(result.stdout) if result.stdout.strip() else None
