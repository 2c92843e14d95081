"""`npuwatch fleet` on bad input: each a clear one-line message and exit 1 (64 for a bad option), never a
traceback; only the query API is ever asked (nothing is written to Prometheus or the nodes)."""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from npuwatch import snapshot_json
from npuwatch.cli import EXIT_USAGE, main
from npuwatch.model import ChipIdentity, ChipSample, Health, Snapshot
from tests.fleet.cluster import LoopbackServer, free_port, run_fleet

Reply = Tuple[int, str, bytes, float]  # status, content type, body, delay before answering


class FakeServer(LoopbackServer):
    """Answers every request with ``reply(method, path)``; records what it was asked."""

    def __init__(self, reply: Callable[[str, str], Reply], date_offset_s: float = 0.0) -> None:
        self.asked: List[Tuple[str, str, Optional[str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.asked.append(
                    (self.command, self.path.split("?")[0], self.headers.get("Authorization"))
                )
                status, kind, body, delay = reply(self.command, self.path)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", kind)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Date", formatdate(time.time() + date_offset_s, usegmt=True))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def do_GET(self) -> None:
                self.answer()

            def do_POST(self) -> None:
                self.answer()

            def do_PUT(self) -> None:
                self.answer()

            def date_time_string(self, timestamp: Optional[float] = None) -> str:
                return formatdate(time.time() + date_offset_s, usegmt=True)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(Handler, daemon_threads=True)


@pytest.fixture
def serve_fake() -> Iterator[Callable[..., FakeServer]]:
    made: List[FakeServer] = []

    def start(reply: Callable[[str, str], Reply], date_offset_s: float = 0.0) -> FakeServer:
        server = FakeServer(reply, date_offset_s)
        made.append(server)
        return server

    yield start
    for server in made:
        server.stop()


def fixed(status: int, body: bytes, kind: str = "application/json", delay: float = 0.0) -> Callable:
    return lambda method, path: (status, kind, body, delay)


def one_line(result) -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("npuwatch fleet: ")
    return lines[0]


def run_fleet_env(env: Dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "npuwatch", "fleet", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_prometheus_unreachable():
    url = f"http://127.0.0.1:{free_port()}"
    result = run_fleet("--prometheus", url, "--json")
    assert (result.returncode, result.stdout) == (1, "")
    assert (
        one_line(result)
        == f"npuwatch fleet: cannot reach Prometheus at {url}: connection refused (is it running?)"
    )


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (404, b"404 page not found\n", "text/plain"),
        (200, b"<html><title>Grafana</title></html>", "text/html"),
        (200, b'{"hello": "world"}', "application/json"),
    ],
)
def test_a_url_that_is_not_a_prometheus_api(serve_fake, status, body, kind):
    server = serve_fake(fixed(status, body, kind))
    result = run_fleet("--prometheus", server.url + "/", "--json")
    assert (result.returncode, result.stdout) == (1, "")
    line = one_line(result)
    assert f"{server.url} is not a Prometheus API: POST /api/v1/query answered HTTP {status}" in line
    assert "give the server's base URL" in line


def test_401_asks_for_credentials_and_403_says_they_were_refused(serve_fake, tmp_path: Path):
    server = serve_fake(fixed(401, b"Unauthorized\n", "text/plain"))
    result = run_fleet("--prometheus", server.url, "--json")
    assert result.returncode == 1
    assert "HTTP 401 Unauthorized): give --basic-auth USER:PASSWORD or --bearer-token-file FILE" in one_line(
        result
    )
    assert server.asked[-1][2] is None
    refused = serve_fake(fixed(403, b"Forbidden\n", "text/plain"))
    result = run_fleet("--prometheus", refused.url, "--json", "--basic-auth", "ops:s3cret:x")
    assert "HTTP 403 Forbidden): the credentials were refused" in one_line(result)
    assert refused.asked[-1][2] == "Basic " + base64.b64encode(b"ops:s3cret:x").decode()
    quiet = run_fleet_env(
        {"NPUWATCH_PROMETHEUS_PASSWORD": "from-env"},
        "--prometheus",
        refused.url,
        "--json",
        "--basic-auth",
        "ops",
    )
    assert quiet.returncode == 1
    assert refused.asked[-1][2] == "Basic " + base64.b64encode(b"ops:from-env").decode()
    token = tmp_path / "token"
    token.write_text("abc.def\n")
    result = run_fleet("--prometheus", refused.url, "--json", "--bearer-token-file", str(token))
    assert result.returncode == 1
    assert refused.asked[-1][2] == "Bearer abc.def"


def test_a_query_timeout_either_way(serve_fake):
    slow = serve_fake(fixed(200, b"{}", delay=5.0))
    started = time.monotonic()
    result = run_fleet("--prometheus", slow.url, "--json", "--timeout", "1")
    assert time.monotonic() - started < 4.5
    assert one_line(result) == (
        f"npuwatch fleet: Prometheus at {slow.url} did not answer within 1 s (--timeout): "
        "no answer to the query time(), not waited for"
    )
    gave_up = json.dumps(
        {"status": "error", "errorType": "timeout", "error": "query timed out in expression"}
    )
    server = serve_fake(fixed(503, gave_up.encode()))
    result = run_fleet("--prometheus", server.url, "--json")
    assert result.returncode == 1
    assert one_line(result).endswith("gave up on the query (timeout): query timed out in expression")


def test_only_the_query_api_is_asked(serve_fake):
    empty = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    server = serve_fake(fixed(200, empty))
    result = run_fleet("--prometheus", server.url, "--json", "--selector", '{job="npu"}')
    assert result.returncode == 1
    assert 'has no NPU series matching {job="npu"} in the last 300 s' in one_line(result)
    assert {(method, path) for method, path, _ in server.asked} == {("POST", "/api/v1/query")}


def snapshot_document(taken_at: datetime) -> bytes:
    chips = (
        ChipSample(ChipIdentity(0, 0, name="910B3"), health=Health.OK, temperature_c=40, aicore_percent=10),
    )
    snapshot = Snapshot(taken_at=taken_at, source="demo:x", chips=chips)
    return snapshot_json.dumps(snapshot).encode()


def test_hosts_a_node_whose_clock_is_off_is_named(serve_fake):
    ahead = 3600.0
    body = snapshot_document(datetime.fromtimestamp(time.time() + ahead, timezone.utc))
    server = serve_fake(fixed(200, body), date_offset_s=ahead)
    result = run_fleet("--hosts", server.address, "--json")
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(f"npuwatch fleet: {server.address}: its clock is ")
    # 3600 s within the Date header's whole second:
    assert re.search(r"clock is (3599|3600|3601) s ahead of this machine's \(fix NTP on the node\)$", line)
    (node,) = json.loads(result.stdout)["nodes"]
    assert (node["stale"], node["chips_total"], node["level"]) == (False, 1, "ok")
    assert node["clock_offset_s"] == pytest.approx(ahead, abs=2)
    assert {(method, path) for method, path, _ in server.asked} == {("GET", "/snapshot")}


def test_hosts_a_slow_node_and_a_stranger_cost_the_others_nothing(serve_fake):
    good = serve_fake(fixed(200, snapshot_document(datetime.now(timezone.utc))))
    slow = serve_fake(fixed(200, b"{}", delay=8.0))
    stranger = serve_fake(fixed(404, b"not found", "text/plain"))
    started = time.monotonic()
    result = run_fleet(
        "--hosts", f"{good.address},{slow.address},{stranger.address}", "--json", "--timeout", "1"
    )
    assert time.monotonic() - started < 6
    assert result.returncode == 1
    nodes = {n["instance"]: n for n in json.loads(result.stdout)["nodes"]}
    assert nodes[good.address]["stale"] is False and nodes[good.address]["chips_total"] == 1
    assert nodes[slow.address]["stale_reason"] == "no answer within 1 s"
    assert nodes[stranger.address]["stale_reason"] == "not npuwatch serve: GET /snapshot answered HTTP 404"
    assert len(result.stderr.splitlines()) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "fleet: give one of --prometheus URL, --hosts host:port,… or --replay FILE"),
        (["--prometheus", "http://p:9090", "--hosts", "a:1"], "(got --prometheus, --hosts)"),
        (["--prometheus", "http://p:9090", "--selector", "up"], "fleet --selector: not a series selector"),
        (["--prometheus", "http://p:9090", "--basic-auth", "nocolon"], "expected USER:PASSWORD"),
        (["--prometheus", "ftp://p"], "fleet --prometheus: not an http(s) URL"),
        (["--hosts", "a:b:c:x"], "fleet --hosts: not a host:port"),
        (["--hosts", "@/nonexistent/hosts.txt"], "cannot read the hosts file"),
        (["--hosts", "a:1", "--json", "--record", "x"], "--json and --record do not go together"),
        (["--replay", "/nonexistent.ndjson"], "fleet --replay: cannot read the recording"),
    ],
)
def test_bad_options_are_usage_errors(capsys, argv, message):
    assert main(["fleet", *argv]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_without_the_live_view_a_clear_message_and_exit_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "npuwatch.widgets.fleet.app", None)
    assert main(["fleet", "--hosts", f"127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("npuwatch fleet: the live fleet view is not available")
    assert "--json" in err


#: A self-signed certificate for 127.0.0.1 (valid until 2126) and its key: test data only.
CERT = Path(__file__).parent / "data" / "loopback-test-cert.pem"
KEY = Path(__file__).parent / "data" / "loopback-test-key.pem"


def test_tls_is_verified_unless_told_otherwise(serve_fake, tmp_path: Path):
    cert, key = CERT, KEY
    empty = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
    server = serve_fake(fixed(200, empty))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.httpd.socket = context.wrap_socket(server.httpd.socket, server_side=True)
    url = f"https://{server.address}"
    untrusted = run_fleet("--prometheus", url, "--json")
    assert untrusted.returncode == 1
    line = one_line(untrusted)
    assert "its TLS certificate is not trusted" in line and "give --ca-file FILE, or --insecure" in line
    assert server.asked == []
    for trust in (["--ca-file", str(cert)], ["--insecure"]):
        trusted = run_fleet("--prometheus", url, "--json", *trust)
        assert "has no NPU series" in one_line(trusted)  # through: Prometheus answered


def test_hosts_lists_and_files(tmp_path: Path):
    from npuwatch.fleet.hosts import parse_hosts

    listed = tmp_path / "hosts.txt"
    text = "# lab\nnode1  node2:9000 # the odd one\n\nhttp://[::1]:9492/,node1\n"
    listed.write_text(text, encoding="utf-8")
    assert parse_hosts(f"@{listed}") == ("node1:9492", "node2:9000", "[::1]:9492")
    assert parse_hosts("a, b:1,::1") == ("a:9492", "b:1", "[::1]:9492")
    for bad in ("", " , ", "a:x", "a:70000", "[::1", "[zz::1]:9"):
        with pytest.raises(ValueError, match=r"names no host|not a host:port|not a port"):
            parse_hosts(bad)


@pytest.fixture
def not_http() -> Iterator[str]:
    """A loopback port that answers every connection with a line that is not HTTP, then closes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                asked = b""
                while b"\r\n\r\n" not in asked:  # the whole request first: the answer is what is wrong
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    asked += chunk
                head, _, body = asked.partition(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                while length and len(body) < int(length.group(1)):
                    body += conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=10)
    listener.close()


def test_a_port_that_does_not_speak_http(not_http: str):
    result = run_fleet("--prometheus", f"http://{not_http}", "--json")
    assert (result.returncode, result.stdout) == (1, "")
    assert f"cannot query Prometheus at http://{not_http}" in one_line(result)
    hosts = run_fleet("--hosts", not_http, "--json")
    assert hosts.returncode == 1
    assert f"{not_http} is stale: cannot read /snapshot" in one_line(hosts)


def test_hostile_json_is_one_line(serve_fake):
    deep = b"[" * 200_000 + b"]" * 200_000
    server = serve_fake(fixed(200, deep))
    result = run_fleet("--prometheus", server.url, "--json")
    assert (result.returncode, result.stdout) == (1, "")
    assert "is not a Prometheus API" in one_line(result)
    hosts = run_fleet("--hosts", server.address, "--json")
    assert hosts.returncode == 1
    assert f"{server.address} is stale: not npuwatch serve: /snapshot is not JSON" in one_line(hosts)
    nested = (
        b'{"schema": "npuwatch/snapshot/v1", "taken_at": "2026-11-24T12:00:00+00:00", "chips": ' + deep + b"}"
    )
    odd = serve_fake(fixed(200, nested))
    hosts = run_fleet("--hosts", odd.address, "--json")
    assert hosts.returncode == 1
    assert f"{odd.address} is stale: not npuwatch serve: /snapshot is not JSON" in one_line(hosts)
