"""Provides fetch(): one HTTP request that ends by a deadline, reads at most a cap, stays in its origin.

``npuwatch fleet`` asks servers it does not control (a Prometheus, each node's ``npuwatch serve``).
A socket timeout bounds one read, so a server sending a byte a second held a 5 s ``--timeout`` for
minutes; here every read and write of a request (connect, TLS handshake, request, headers, body)
gets only what is left of one deadline.  The answer is read in chunks and refused past ``max_bytes``
(a declared ``Content-Length`` past it is refused before reading), so memory stays bounded whatever
the server sends.  A redirect is followed only within the origin of the URL asked (same scheme,
host and port), with the same request; urllib's own handler would copy every header, the
``Authorization`` of ``--bearer-token-file`` and ``--basic-auth`` included, to whatever host a
redirect names.  Proxies from the environment still apply (urllib's opener does the rest).
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

#: Bytes read from the socket at a time.
CHUNK_BYTES = 1 << 20
#: How long past a deadline the threads that run requests are given to hand over what they read
#: (their sockets gave up at the deadline; parsing what came in time takes a moment).
HANDOVER_S = 0.5


class DeadlineError(Exception):
    """The deadline passed before the whole answer arrived."""


class AnswerTooLargeError(Exception):
    """The answer is larger than the cap: nothing of it is kept."""

    def __init__(self, limit_bytes: int, declared_bytes: Optional[int] = None) -> None:
        super().__init__(f"the answer is larger than {limit_bytes >> 20} MiB")
        self.limit_bytes = limit_bytes
        self.declared_bytes = declared_bytes


class RedirectRefusedError(Exception):
    """A redirect to another origin: not followed, nothing sent there."""

    def __init__(self, location: str) -> None:
        super().__init__(f"it redirected to another origin ({location}): not followed")
        self.location = location


@dataclass(frozen=True)
class Reply:
    """A complete answer (any HTTP status): its status, headers (names in lower case) and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def origin(url: str) -> Tuple[str, str, int]:
    """(scheme, host, port) of ``url``, the port filled in from the scheme."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def fetch(
    url: str,
    *,
    deadline: float,
    max_bytes: int,
    data: Optional[bytes] = None,
    headers: Optional[Mapping[str, str]] = None,
    context: Optional[ssl.SSLContext] = None,
) -> Reply:
    """``GET`` (or ``POST`` of ``data``) ``url``, the whole of it done by ``deadline``
    (``time.monotonic()``).  ``DeadlineError``, ``AnswerTooLargeError``, ``RedirectRefusedError``;
    otherwise urllib's and http.client's own exceptions (``URLError``, ``OSError``, ``HTTPException``)."""
    method = "POST" if data is not None else "GET"
    request = urllib.request.Request(url, data=data, headers=dict(headers or {}), method=method)
    opener = urllib.request.build_opener(
        _HTTPHandler(deadline),
        _HTTPSHandler(deadline, context),
        _SameOriginRedirects(origin(url)),
    )
    try:
        try:
            answer = opener.open(request, timeout=_left(deadline))
        except urllib.error.HTTPError as exc:  # an answer all the same: read it as one
            answer = exc
        with answer:
            status = answer.status if isinstance(answer, http.client.HTTPResponse) else answer.code
            body = _read_capped(answer, max_bytes)
            return Reply(int(status or 0), {k.lower(): v for k, v in answer.headers.items()}, body)
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, (socket.timeout, TimeoutError)):
            raise DeadlineError(str(exc.reason)) from None
        raise
    except (socket.timeout, TimeoutError) as exc:
        raise DeadlineError(str(exc)) from None


def _left(deadline: float) -> float:
    """Seconds left before ``deadline``; ``socket.timeout`` when none."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout("the deadline passed")
    return left


def _read_capped(answer: Any, max_bytes: int) -> bytes:
    declared = answer.headers.get("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
        raise AnswerTooLargeError(max_bytes, int(declared))
    chunks: List[bytes] = []  # joined once at the end: a growing buffer would be copied as it grows
    size = 0
    while True:
        chunk = answer.read(min(CHUNK_BYTES, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise AnswerTooLargeError(max_bytes)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to ``allowed`` (scheme, host, port), with the same method, body and
    headers (303: a ``GET`` with the form as its query, as HTTP says); any other is refused."""

    def __init__(self, allowed: Tuple[str, str, int]) -> None:
        super().__init__()
        self._allowed = allowed

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> Optional[urllib.request.Request]:
        fp.close()  # its body is not wanted either way
        if origin(newurl) != self._allowed:
            raise RedirectRefusedError(newurl)
        data, method = req.data, req.get_method()
        if code == 303 and data is not None:
            query = data.decode("ascii", "replace") if isinstance(data, bytes) else ""
            newurl = f"{newurl}{'&' if '?' in newurl else '?'}{query}"
            data, method = None, "GET"
        moved: Dict[str, str] = dict(req.headers)  # what the caller added; urllib adds Host and the rest
        if data is None:
            moved = {k: v for k, v in moved.items() if k.lower() not in ("content-type", "content-length")}
        return urllib.request.Request(newurl, data=data, headers=moved, method=method)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: float) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_Connection, deadline=self._deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: float, context: Optional[ssl.SSLContext]) -> None:
        super().__init__(context=context)
        self._deadline = deadline
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        making = functools.partial(_TLSConnection, deadline=self._deadline)
        return self.do_open(making, req, context=self._tls)


class _DeadlineMixin:
    """Connects within what is left of the deadline, then hands http.client a socket whose every
    read and write gets only what is left."""

    sock: Any
    timeout: Optional[float]
    _deadline: float

    def connect(self) -> None:
        self.timeout = _left(self._deadline)  # the TCP connect; the TLS handshake is one deadline too
        super().connect()  # type: ignore[misc]
        self.sock = _DeadlineSocket(self.sock, self._deadline)


class _Connection(_DeadlineMixin, http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline


class _TLSConnection(_DeadlineMixin, http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline


class _DeadlineSocket:
    """A connected socket (plain or TLS) whose reads and writes end by the deadline.  http.client
    reads through ``makefile()``; the socket is closed once it and every file made from it are."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline
        self._files = 0
        self._closed = False

    def sendall(self, data: bytes) -> None:
        self._sock.settimeout(_left(self._deadline))
        self._sock.sendall(data)  # one deadline for the whole send (CPython's sendall)

    def recv_into(self, buffer: Any) -> int:
        self._sock.settimeout(_left(self._deadline))
        return self._sock.recv_into(buffer)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        self._files += 1
        return io.BufferedReader(_Reader(self))

    def file_closed(self) -> None:
        self._files -= 1
        if self._closed and self._files == 0:
            self._sock.close()

    def close(self) -> None:
        self._closed = True
        if self._files == 0:
            self._sock.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Reader(io.RawIOBase):
    def __init__(self, owner: _DeadlineSocket) -> None:
        self._owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._owner.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._owner.file_closed()
        super().close()
