"""Provides Exporter: the HTTP server of ``npuwatch serve`` and its background sampling thread.

One thread calls the feed's ``sample()`` every ``interval_s`` and publishes the result with its
``/metrics`` text already rendered; request threads only read the latest publication, so a
scrape never starts an npu-smi run and a hundred scrapers cost what one does.  Read-only: no
path changes anything on the machine.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import socket
import socketserver
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Callable, Collection, Dict, Optional, Tuple
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from npuwatch import __version__, snapshot_json
from npuwatch.exporter.healthz import HealthzAnswer, judge_healthz, stale_after_s
from npuwatch.exporter.metrics import ExporterView, render, render_age
from npuwatch.model import MetricStatus
from npuwatch.poller import FailureLog, Poller
from npuwatch.text_safety import inert

if TYPE_CHECKING:
    from npuwatch.feed import SnapshotFeed

_log = logging.getLogger("npuwatch")

#: Text format 0.0.4: every Prometheus since 2.0 reads it (prometheus_client's newer default,
#: ``version=1.0.0``, only matters for names outside the classic character set, which we never use).
METRICS_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
INDEX = (
    "npuwatch {version} exporter (read-only)\n"
    "  /metrics   Prometheus text format, npu-exporter metric names\n"
    "  /healthz   200 when the latest sample is fresh and every chip is OK, else 503 and the reason\n"
    "  /snapshot  the latest sample as npuwatch/snapshot/v1 JSON\n"
)
#: How long an idle keep-alive connection keeps its thread (Prometheus reconnects at will).
IDLE_CONNECTION_S = 60.0


@dataclass(frozen=True)
class _Published:
    """The latest sample with its exposition rendered; replaced whole, read without a lock."""

    view: ExporterView
    body: bytes
    started_at: Optional[float] = None  # monotonic time the sample started (the data's age)


class Exporter:
    """Serves ``/metrics``, ``/healthz`` and ``/snapshot`` for ``feed`` on ``host:port``.

    The socket is bound here (``OSError`` when the port is taken or the address is not this
    machine's); ``start()`` starts the sampling and serving threads, ``stop()`` ends both.
    The feed stays the caller's to close.  ``host`` ``""`` means every interface (IPv6 and
    IPv4 where the kernel has IPv6); port 0 picks a free port (see ``address``).
    """

    def __init__(
        self,
        feed: SnapshotFeed,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        timeout_s: float = 5.0,
        max_age_s: Optional[float] = None,
        devices: Optional[Collection[int]] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.feed = feed
        self.max_age_s = stale_after_s(feed.interval_s, timeout_s) if max_age_s is None else max_age_s
        self.devices = None if devices is None else frozenset(devices)
        self._clock = clock
        self._published = _Published(ExporterView(), render(ExporterView()))
        self._probe_errors: Dict[str, int] = {}
        self._restarts: Dict[str, int] = {}  # the most restarts each probe reported
        self._json_lock = threading.Lock()
        self._json: Optional[Tuple[_Published, bytes]] = None
        self._failures = FailureLog("npuwatch serve")
        self._stop = threading.Event()
        self._poller = Poller(
            self.sample_now,
            lambda: self.feed.interval_s,
            name="npuwatch-serve-sampler",
            stop_event=self._stop,
            failures=self._failures,
            clock=clock,
        )
        self._threads: Tuple[threading.Thread, ...] = ()
        self._server = _bind(host, port)
        self._server.exporter = self

    @property
    def address(self) -> Tuple[str, int]:
        """The bound host and port (the real port when 0 was asked for)."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:9492``, ``http://[::1]:9492``: where to point a browser or Prometheus."""
        host, port = self.address
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def view(self) -> ExporterView:
        """What the latest sample published (an empty view before the first)."""
        return self._published.view

    @property
    def stopping(self) -> threading.Event:
        """Set once ``stop()`` is called (waits in the serving loop end on it)."""
        return self._stop

    def start(self) -> None:
        """Start sampling and serving, each in its own daemon thread."""
        _load_thread_exit_library()
        server = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="npuwatch-serve-http"
        )
        server.daemon = True
        self._threads = (self._poller.start(), server)
        server.start()

    def stop(self, join_s: float = 10.0) -> None:
        """Stop serving, then stop sampling (a sample under way may finish, up to ``join_s``)."""
        self._stop.set()
        if self._threads:
            self._server.shutdown()  # blocks until serve_forever returns: only once it runs
        self._server.server_close()
        for thread in self._threads:
            thread.join(join_s)
        self._threads = ()

    def __enter__(self) -> Exporter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what request threads read -------------------------------------------------------------

    def metrics_body(self) -> bytes:
        """The cached exposition of the latest sample, and the sample's age now."""
        published = self._published
        return published.body + render_age(self._age_s(published))

    def healthz(self) -> HealthzAnswer:
        """``/healthz``'s answer for the latest sample."""
        published = self._published
        return judge_healthz(published.view, self._age_s(published), self.max_age_s, self.devices)

    def snapshot_body(self) -> Optional[bytes]:
        """The latest snapshot as schema v1 JSON (rendered once per sample, on first ask)."""
        published = self._published
        snapshot = published.view.snapshot
        if snapshot is None:
            return None
        with self._json_lock:
            if self._json is None or self._json[0] is not published:
                self._json = (published, (snapshot_json.dumps(snapshot) + "\n").encode("utf-8"))
            return self._json[1]

    def _age_s(self, published: _Published) -> Optional[float]:
        return None if published.started_at is None else max(0.0, self._clock() - published.started_at)

    # --- the sampling thread (a Poller calling sample_now every interval) -------------------------

    def sample_now(self) -> None:
        """Take one sample and publish it (the poller's tick; tests call it directly)."""
        started = self._clock()
        try:
            snapshot = self.feed.sample()
        except Exception as exc:  # the thread must outlive any failure: report it, keep sampling
            message = f"{type(exc).__name__}: {exc}"
            self._failures.warn(message, exc)
            self._probe_errors["sampler"] = self._probe_errors.get("sampler", 0) + 1
            previous = self._published.view.snapshot
            view = ExporterView(
                previous, self._clock() - started, message, dict(self._probe_errors), dict(self._restarts)
            )
            self._publish(view, self._published.started_at)
            return
        for report in snapshot.probes:
            failed = report.status is not MetricStatus.OK
            self._probe_errors[report.name] = self._probe_errors.get(report.name, 0) + int(failed)
            if report.restarts is not None:  # a counter: kept while another backend reads
                whose = report.restarts_of or report.name
                self._restarts[whose] = max(self._restarts.get(whose, 0), report.restarts)
        view = ExporterView(
            snapshot, self._clock() - started, None, dict(self._probe_errors), dict(self._restarts)
        )
        self._publish(view, started)

    def _publish(self, view: ExporterView, started_at: Optional[float]) -> None:
        try:
            body = render(view)
        except Exception as exc:  # a rendering bug: keep serving the previous bytes
            self._failures.warn(f"rendering /metrics failed: {exc!r}", exc)
            return
        self._published = _Published(view, body, started_at)

    def log_once(self, message: str, exc: Optional[BaseException] = None) -> None:
        """Log ``message`` as a warning the first time it comes (a traceback only for a bug)."""
        self._failures.warn(message, exc)


#: accept() errors that mean "no descriptor for the connection now", not a broken socket.
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_MIN_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


def _descriptor_limit() -> str:
    try:
        import resource

        return str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ImportError, OSError, ValueError):
        return "unknown"


def _load_thread_exit_library() -> None:
    """Load libgcc_s now: glibc loads it when a thread first ends, and out of descriptors that
    load fails and aborts the whole process ("libgcc_s.so.1 must be installed")."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):  # musl or a static build: no such load at thread exit
        ctypes.CDLL("libgcc_s.so.1")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    _backoff_s = 0.0
    allow_reuse_address = True  # restart right after a stop (TIME_WAIT), but never share a port:
    allow_reuse_port = False  # SO_REUSEPORT would let a second exporter bind the same port silently
    exporter: Exporter

    def __init__(self, address: Tuple[str, int], family: int, dual_stack: bool) -> None:
        self.address_family = family
        self._dual_stack = dual_stack
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks socket.getfqdn(), a reverse DNS lookup that can stall for
        # seconds on a node without DNS; nothing here needs the name.
        if self._dual_stack:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)

    def get_request(self) -> Tuple[socket.socket, object]:
        """Accept one connection; out of descriptors, wait before the next try instead of spinning.

        The listening socket stays readable while ``accept()`` fails with EMFILE, so the serving
        loop would retry at once, forever, at full CPU.  The wait doubles up to a second and ends
        at once on ``stop()``; the condition is logged once.
        """
        try:
            request = super().get_request()
        except OSError as exc:
            if exc.errno in _OUT_OF_DESCRIPTORS:
                self._back_off(exc)
            raise
        self._backoff_s = 0.0
        return request

    def _back_off(self, exc: OSError) -> None:
        self._backoff_s = min(_MAX_BACKOFF_S, max(_MIN_BACKOFF_S, 2 * self._backoff_s))
        self.exporter.log_once(
            f"out of file descriptors ({exc.strerror}): new connections wait until some close "
            f"(open connections hold one each; raise `ulimit -n`, now {_descriptor_limit()})"
        )
        self.exporter.stopping.wait(self._backoff_s)

    def handle_error(self, request: object, client_address: object) -> None:
        # A scraper that hangs up mid-answer is routine: no traceback on stderr.
        _log.debug("npuwatch serve: request from %s failed", client_address, exc_info=True)


def _bind(host: str, port: int) -> _Server:
    """A bound, listening server for ``host:port`` (``""``: every interface)."""
    if host == "":
        if socket.has_ipv6:
            try:
                return _Server(("::", port), socket.AF_INET6, dual_stack=True)
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                    raise
                # IPv6 disabled in this kernel or container: every IPv4 interface instead.
        return _Server(("0.0.0.0", port), socket.AF_INET, dual_stack=False)
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0]
    return _Server((str(sockaddr[0]), int(sockaddr[1])), family, dual_stack=False)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Prometheus and the benchmark reuse connections
    server_version = f"npuwatch/{__version__}"
    timeout = IDLE_CONNECTION_S
    # The headers and the body leave in two writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers, 40 ms per keep-alive request on Linux.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def __getattr__(self, name: str) -> Callable[[], None]:
        # http.server looks up ``do_<METHOD>``: every method but GET and HEAD is refused with 405.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def version_string(self) -> str:
        """``npuwatch/0.1.0``: no Python version in the ``Server`` header."""
        return self.server_version

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: no line per request on stderr."""

    def _not_allowed(self) -> None:
        self.close_connection = True  # the request may carry a body we will not read
        body = f"{self.command} is not allowed: npuwatch serve is read-only (GET, HEAD)\n".encode()
        self._send(405, "text/plain; charset=utf-8", body, head=False, extra={"Allow": "GET, HEAD"})

    def _answer(self, head: bool) -> None:
        exporter = self.server.exporter
        path = urlsplit(self.path).path
        text = "text/plain; charset=utf-8"
        if path == "/metrics":
            self._send(200, METRICS_CONTENT_TYPE, exporter.metrics_body(), head)
        elif path == "/healthz":
            answer = exporter.healthz()
            # The line quotes chip names and the source's messages: inert, as on every surface
            # (a raw ESC or a byte that is not UTF-8 would reach the probe, or fail to encode).
            self._send(answer.status, text, (inert(answer.line) + "\n").encode("utf-8"), head)
        elif path == "/snapshot":
            body = exporter.snapshot_body()
            if body is None:
                self._send(503, "application/json", b'{"error": "no sample yet"}\n', head)
            else:
                self._send(200, "application/json", body, head)
        else:
            self._send(404, text, INDEX.format(version=__version__).encode("utf-8"), head)

    def _send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        head: bool,
        extra: Optional[Dict[str, str]] = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not head:
            self.wfile.write(body)
