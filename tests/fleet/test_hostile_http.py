"""`npuwatch fleet` against a misbehaving server, real HTTP on loopback: one that trickles a byte a
second (the refresh still ends within --timeout), one that answers hundreds of MB (memory stays
bounded, the fleet says what was cut), one that redirects to another origin (the credentials never
get there) and one that redirects within its own (still works)."""

from __future__ import annotations

import base64
import json
import re
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.parse
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

import pytest

from tests.conftest import REPO
from tests.fleet.cluster import LoopbackServer, run_fleet
from tests.fleet.test_bad_input import snapshot_document

# --- servers ------------------------------------------------------------------------------------


class Asked(NamedTuple):
    method: str
    path: str
    form: Dict[str, str]
    authorization: Optional[str]


class Answer(NamedTuple):
    status: int
    body: Iterable[bytes]
    headers: Tuple[Tuple[str, str], ...] = ()
    #: The body's length to declare (``None``: no Content-Length, the body ends at the close).
    length: Optional[int] = None


Route = Callable[[Asked], Answer]


class ScriptedServer(LoopbackServer):
    """Answers each request with ``route(asked)``; records every request (its form and credentials)."""

    def __init__(self, route: Route) -> None:
        self.asked: List[Asked] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def answer(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path, _, query = self.path.partition("?")
                form = dict(urllib.parse.parse_qsl(raw.decode() or query))
                asked = Asked(self.command, path, form, self.headers.get("Authorization"))
                server.asked.append(asked)
                reply = route(asked)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    if reply.length is not None:
                        self.send_header("Content-Length", str(reply.length))
                    self.end_headers()
                    for chunk in reply.body:
                        self.wfile.write(chunk)
                except OSError:  # the client stopped reading: what these tests want
                    pass

            def do_GET(self) -> None:
                self.answer()

            def do_POST(self) -> None:
                self.answer()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(Handler, daemon_threads=True)


@pytest.fixture
def serve() -> Iterator[Callable[[Route], ScriptedServer]]:
    made: List[ScriptedServer] = []

    def start(route: Route) -> ScriptedServer:
        made.append(ScriptedServer(route))
        return made[-1]

    yield start
    for server in made:
        server.stop()


class TrickleServer:
    """A raw HTTP server on ``ports`` loopback ports: reads each request whole, then sends
    ``prompt(request body)`` at once and ``trickled`` one byte a second until the client hangs up
    or the test ends."""

    def __init__(
        self,
        prompt: Callable[[bytes], bytes],
        trickled: bytes,
        ports: int = 1,
        tls: Optional[ssl.SSLContext] = None,
    ) -> None:
        self.prompt = prompt
        self.trickled = trickled
        self.tls = tls
        self.stopping = threading.Event()
        self.listeners = []
        for _ in range(ports):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            self.listeners.append(listener)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def addresses(self) -> List[str]:
        return [f"127.0.0.1:{listener.getsockname()[1]}" for listener in self.listeners]

    @property
    def address(self) -> str:
        return self.addresses[0]

    def _accept(self) -> None:
        while not self.stopping.is_set():
            ready, _, _ = select.select(self.listeners, [], [], 0.2)
            for listener in ready:
                conn, _ = listener.accept()
                threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                if self.tls is not None:
                    conn = self.tls.wrap_socket(conn, server_side=True)
                asked = b""
                while b"\r\n\r\n" not in asked:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    asked += chunk
                head, _, body = asked.partition(b"\r\n\r\n")
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                while length and len(body) < int(length.group(1)):
                    body += conn.recv(65536)
                conn.sendall(self.prompt(body))
                for byte in self.trickled:
                    if self.stopping.wait(1.0):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)
        for listener in self.listeners:
            listener.close()


@pytest.fixture
def trickle() -> Iterator[Callable[..., TrickleServer]]:
    made: List[TrickleServer] = []

    def start(
        prompt: Callable[[bytes], bytes],
        trickled: bytes,
        ports: int = 1,
        tls: Optional[ssl.SSLContext] = None,
    ) -> TrickleServer:
        made.append(TrickleServer(prompt, trickled, ports, tls))
        return made[-1]

    yield start
    for server in made:
        server.stop()


# --- a one-node fleet as Prometheus answers it ---------------------------------------------------

NOW = 1_800_000_000.0
CHIP = {"instance": "n1:9492", "job": "npu", "npu_id": "0", "chip_id": "0", "id": "0"}
#: The value of the series each query of a refresh finds for the one chip (others: none).
VALUES = {  # the first key a query holds wins
    "timestamp(npu_chip_info_health_status": NOW - 5,
    "last_over_time(npu_chip_info_health_status": 1.0,
    "npu_chip_info_hbm_used_memory": 50000.0,  # held: with no process listed, a warning
    "npu_chip_info_hbm_total_memory": 65536.0,
    "timestamp(up": NOW - 5,
    "up{": 1.0,
}


def vector(samples: List[Tuple[Dict[str, str], float]]) -> bytes:
    result = [{"metric": labels, "value": [NOW, repr(value)]} for labels, value in samples]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def fleet_answer(asked: Asked) -> Answer:
    """Prometheus' answer to one query of a refresh, for a fleet of one node with one chip."""
    query = asked.form.get("query")
    if query is None:  # what Prometheus says to a request without one
        body = b'{"status":"error","errorType":"bad_data","error":"invalid parameter \\"query\\""}'
        return Answer(400, [body], length=len(body))
    if query == "time()":
        body = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [NOW, str(NOW)]}})
        return Answer(200, [body.encode()], length=len(body))
    found = [value for key, value in VALUES.items() if key in query]
    labels = CHIP if "up{" not in query and "timestamp(up" not in query else {"instance": "n1:9492"}
    body = vector([(labels, found[0])] if found else [])
    return Answer(200, [body], length=len(body))


# --- (a) a byte a second -------------------------------------------------------------------------

TIMEOUT_S = 3.0


def http_head(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickling_prometheus_ends_within_the_timeout(trickle, where: str):
    body = vector([(CHIP, 1.0)]) + b" " * 100_000
    if where == "headers":  # a status line, then a header that never ends
        server = trickle(lambda asked: b"HTTP/1.1 200 OK\r\n", b"X-Pad: " + b"a" * 100_000)
    else:  # whole headers, then the body a byte a second
        server = trickle(lambda asked: http_head(body), body)
    started = time.monotonic()
    result = run_fleet(
        "--prometheus", f"http://{server.address}", "--json", "--timeout", f"{TIMEOUT_S:g}",
        timeout_s=TIMEOUT_S + 20,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + 2, f"{elapsed:.1f} s at --timeout {TIMEOUT_S:g}"
    assert (result.returncode, result.stdout) == (1, "")
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"npuwatch fleet: Prometheus at http://{server.address} did not answer within {TIMEOUT_S:g} s "
        "(--timeout): no answer to the query time(), not waited for"
    )


def test_a_trickling_tls_answer_ends_within_the_clients_timeout(trickle):
    """The same over https (the deadline holds on a TLS socket too), through the client itself."""
    from npuwatch.fleet.prometheus import Prometheus, QueryTimeoutError
    from tests.fleet.test_bad_input import CERT, KEY

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT, KEY)
    body = vector([(CHIP, 1.0)]) + b" " * 100_000
    server = trickle(lambda asked: http_head(body), body, tls=context)
    client = Prometheus(f"https://{server.address}", timeout_s=TIMEOUT_S, ca_file=str(CERT))
    raised: List[BaseException] = []

    def ask() -> None:
        try:
            client.query("up")
        except BaseException as exc:  # what the test looks at
            raised.append(exc)

    asking = threading.Thread(target=ask, daemon=True)  # a hang fails the test, not the run
    started = time.monotonic()
    asking.start()
    asking.join(TIMEOUT_S + 10)
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + 2, f"{elapsed:.1f} s at a {TIMEOUT_S:g} s timeout"
    assert len(raised) == 1 and isinstance(raised[0], QueryTimeoutError), raised
    assert "did not answer within 3 s (--timeout)" in str(raised[0])


def test_a_refresh_has_one_budget_and_names_the_queries_not_answered(trickle):
    """time() answers late but within --timeout; every other query trickles: the whole refresh still
    ends within --timeout (before, each phase had its own), naming what did not answer."""
    timeout_s = 4.0
    now = json.dumps({"status": "success", "data": {"resultType": "scalar", "result": [NOW, str(NOW)]}})

    def prompt(asked: bytes) -> bytes:
        if b"query=time%28%29" in asked:
            time.sleep(0.6 * timeout_s)
            return http_head(now.encode()) + now.encode()
        return b"HTTP/1.1 200 OK\r\n"

    server = trickle(prompt, b"X-Pad: " + b"a" * 100_000)
    started = time.monotonic()
    result = run_fleet(
        "--prometheus", f"http://{server.address}", "--json", "--timeout", f"{timeout_s:g}",
        timeout_s=timeout_s + 20,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed < timeout_s + 2, f"{elapsed:.1f} s at --timeout {timeout_s:g}"
    assert result.returncode == 1
    line = result.stderr.strip()
    assert re.fullmatch(
        rf"npuwatch fleet: Prometheus at http://{server.address} did not answer within 4 s \(--timeout\): "
        r"no answer to (\d+) of \1 queries \(npu_chip_info_health_status, npu_chip_info_power, "
        r"npu_chip_info_temperature and \d+ more\), not waited for",
        line,
    ), line


def test_trickling_nodes_cost_the_hosts_refresh_no_more_than_the_timeout(trickle, serve):
    """More slow nodes than are asked at once: the refresh still ends within --timeout (before,
    each batch of nodes had its own), the slow nodes stale with why (the last one never asked),
    the good one current."""
    from npuwatch.fleet.hosts import MAX_PARALLEL

    good_body = snapshot_document(datetime.now(timezone.utc))
    good = serve(lambda asked: Answer(200, [good_body], length=len(good_body)))
    body = good_body + b" " * 100_000
    slow = trickle(lambda asked: http_head(body), body, ports=MAX_PARALLEL + 1)
    started = time.monotonic()
    result = run_fleet(
        "--hosts", ",".join([good.address, *slow.addresses]), "--json", "--timeout", f"{TIMEOUT_S:g}",
        timeout_s=TIMEOUT_S + 30,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed < TIMEOUT_S + 2, f"{elapsed:.1f} s at --timeout {TIMEOUT_S:g}"
    assert result.returncode == 1
    nodes = {n["instance"]: n for n in json.loads(result.stdout)["nodes"]}
    assert nodes.pop(good.address)["stale"] is False
    reasons = {n["stale_reason"] for n in nodes.values()}
    assert reasons == {
        f"no answer within {TIMEOUT_S:g} s",
        f"not asked within the refresh's {TIMEOUT_S:g} s: other nodes were slow",
    }
    assert len(result.stderr.splitlines()) == MAX_PARALLEL + 1


# --- (b) hundreds of MB --------------------------------------------------------------------------

BIG_BYTES = 200 << 20
MIB = 1 << 20


def big_vector(total_bytes: int) -> Iterator[bytes]:
    """A valid vector answer of about ``total_bytes``, streamed 1 MiB at a time."""
    sample = json.dumps({"metric": CHIP, "value": [NOW, "1"]}).encode() + b","
    block = sample * (MIB // len(sample))
    yield b'{"status":"success","data":{"resultType":"vector","result":['
    for _ in range(total_bytes // len(block)):
        yield block
    yield json.dumps({"metric": CHIP, "value": [NOW, "1"]}).encode() + b"]}}"


@pytest.mark.parametrize("declared", [False, True], ids=["streamed", "content-length"])
def test_an_oversized_answer_is_cut_in_bounded_memory(serve, declared: bool):
    from npuwatch.fleet.prometheus import AnswerTooLargeError, Prometheus

    server = serve(lambda asked: Answer(200, big_vector(BIG_BYTES), length=BIG_BYTES if declared else None))
    client = Prometheus(server.url, timeout_s=60)
    tracemalloc.start()
    try:
        with pytest.raises(AnswerTooLargeError) as raised:
            client.query("up")
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < BIG_BYTES / 2, (
        f"peak {peak_bytes / MIB:.0f} MiB for a {BIG_BYTES / MIB:.0f} MiB answer"
    )
    assert str(raised.value).startswith("Prometheus answer larger than 64 MiB: cut; the answer was not read")


def test_the_fleet_says_which_query_was_cut_and_reads_the_rest(serve, tmp_path: Path):
    """The process query answers 200 MB: the refresh reads the others in bounded memory, the node is
    there, the warning says what was cut, and missing processes are not read as "no process"."""

    def route(asked: Asked) -> Answer:
        if "npu_chip_info_process_info" in asked.form.get("query", ""):
            return Answer(200, big_vector(BIG_BYTES))
        return fleet_answer(asked)

    def fleet_rss(url: str) -> Tuple[subprocess.CompletedProcess, int]:
        """``npuwatch fleet --prometheus URL --json`` and its peak RSS in bytes."""
        script = (
            "import resource, sys\nfrom npuwatch.cli import main\nrc = main(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(rc)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", script, "fleet", "--prometheus", url, "--json"],
            capture_output=True, text=True, timeout=120, cwd=REPO,
        )  # fmt: skip
        return result, int(result.stderr.splitlines()[-1]) * 1024

    normal, baseline_bytes = fleet_rss(serve(fleet_answer).url)
    assert normal.returncode == 0, normal.stderr
    server = serve(route)
    result, peak_bytes = fleet_rss(server.url)
    lines = result.stderr.splitlines()[:-1]
    assert result.returncode == 1, result.stderr
    grew = peak_bytes - baseline_bytes
    assert grew < BIG_BYTES / 2, f"peak RSS {grew / MIB:.0f} MiB above a small fleet's for a 200 MiB answer"
    cut = (
        "Prometheus answer larger than 64 MiB: cut; the query npu_chip_info_process_info was not read "
        f"(from {server.url}: narrow the fleet with --selector)"
    )
    assert lines == [f"npuwatch fleet: {cut}"]
    document = json.loads(result.stdout)
    assert document["warnings"] == [cut]
    (node,) = document["nodes"]
    assert (node["node"], node["stale"], node["chips_total"]) == ("n1:9492", False, 1)
    assert node["level"] == "ok" and not any("no process" in r for r in node["reasons"]), node["reasons"]


# --- (c) and (d) redirects -----------------------------------------------------------------------

TOKEN = "s3cr3t.t0ken"


def credentials(kind: str, tmp_path: Path) -> Tuple[List[str], str]:
    """The options giving credentials of ``kind``, and the Authorization header they make."""
    if kind == "bearer":
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        return ["--bearer-token-file", str(token_file)], f"Bearer {TOKEN}"
    return ["--basic-auth", f"ops:{TOKEN}"], "Basic " + base64.b64encode(f"ops:{TOKEN}".encode()).decode()


@pytest.mark.parametrize(("code", "kind"), [(302, "bearer"), (307, "basic"), (308, "bearer")])
def test_a_redirect_to_another_origin_is_refused_and_gets_no_credentials(serve, tmp_path, code, kind):
    elsewhere = serve(fleet_answer)  # a working "Prometheus" that must never see the token
    redirecting = serve(
        lambda asked: Answer(code, [b""], (("Location", f"{elsewhere.url}{asked.path}"),), length=0)
    )
    options, header = credentials(kind, tmp_path)
    result = run_fleet("--prometheus", redirecting.url, "--json", *options)
    assert (result.returncode, result.stdout) == (1, "")
    assert redirecting.asked and all(a.authorization == header for a in redirecting.asked)
    assert elsewhere.asked == []  # not asked at all, so never given the credentials
    assert result.stderr.strip() == (
        f"npuwatch fleet: Prometheus at {redirecting.url} redirected to another origin, "
        f"{elsewhere.url}/api/v1/query: not followed (credentials are never sent there; give "
        "--prometheus the URL it redirects to)"
    )


def test_another_port_or_host_name_is_another_origin(serve, tmp_path):
    target = serve(fleet_answer)
    port = target.address.rsplit(":", 1)[1]
    redirecting = serve(
        lambda asked: Answer(302, [b""], (("Location", f"http://localhost:{port}{asked.path}"),), length=0)
    )
    options, _ = credentials("bearer", tmp_path)
    result = run_fleet("--prometheus", redirecting.url, "--json", *options)
    assert result.returncode == 1
    assert (
        f"redirected to another origin, http://localhost:{port}/api/v1/query: not followed" in result.stderr
    )
    assert target.asked == []
    hosts = run_fleet("--hosts", redirecting.address, "--json")
    assert hosts.returncode == 1
    assert f"not npuwatch serve: /snapshot it redirected to another origin (http://localhost:{port}" in (
        hosts.stderr
    )
    assert target.asked == []


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_within_the_origin_still_works(serve, tmp_path, code):
    """A proxy that moved Prometheus under /prom: followed with the same query and credentials."""

    def route(asked: Asked) -> Answer:
        if not asked.path.startswith("/prom/"):
            return Answer(code, [b""], (("Location", f"/prom{asked.path}"),), length=0)
        return fleet_answer(asked)

    server = serve(route)
    options, header = credentials("bearer", tmp_path)
    result = run_fleet("--prometheus", server.url, "--json", *options)
    assert result.returncode == 0, result.stderr
    (node,) = json.loads(result.stdout)["nodes"]
    assert (node["node"], node["stale"], node["chips_total"]) == ("n1:9492", False, 1)
    moved = [a for a in server.asked if a.path.startswith("/prom/")]
    assert moved and all(a.authorization == header and a.form.get("query") for a in moved)
    assert {a.method for a in moved} == ({"GET"} if code == 303 else {"POST"})
