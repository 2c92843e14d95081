"""Provides Prometheus: a read-only client of the Prometheus HTTP API (instant and range queries).

Standard library only (``urllib``): POST ``/api/v1/query`` and ``/api/v1/query_range`` with form
data, as the API allows, so a query of any length fits; nothing else is ever sent, so nothing is
written.  TLS certificates are verified unless ``insecure``; ``ca_file`` adds a CA bundle.  Each
request ends by its deadline, reads at most ``max_answer_bytes`` and follows redirects only within
the URL's origin (``npuwatch.fleet.bounded_http``).  Every failure is a ``PrometheusError`` whose
message is one line saying what happened and what to try.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import socket
import ssl
import time
import urllib.error
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from npuwatch.fleet import bounded_http

#: How much of one answer is read at most.  The largest answer of a refresh, the health gauge with
#: every label, was 212 bytes a chip from a real Prometheus (100 generated nodes × 16 chips), so a
#: 4,000-node × 16-chip fleet's is ~14 MB; parsed, an answer costs about ten times its size.
MAX_ANSWER_BYTES = 64 << 20


class PrometheusError(Exception):
    """A query that could not be answered; the message is one line for the user."""


class AccessDeniedError(PrometheusError):
    """HTTP 401 or 403: credentials missing or refused."""


class NotPrometheusError(PrometheusError):
    """The URL answers, but not as a Prometheus query API."""


class QueryTimeoutError(PrometheusError):
    """No answer within the timeout, or Prometheus gave up on the query."""


class NoAnswerError(QueryTimeoutError):
    """No whole answer by the query's deadline (not Prometheus giving up)."""


class UnreachableError(PrometheusError):
    """No connection: refused, unknown host, network down, TLS refused, a redirect to elsewhere."""


class AnswerTooLargeError(PrometheusError):
    """An answer larger than the client's cap: cut, none of it read."""

    def __init__(self, url: str, limit_bytes: int) -> None:
        self.url = url
        self.limit_bytes = limit_bytes
        super().__init__(self.line("the answer"))

    def line(self, what: str) -> str:
        """The one line saying ``what`` was not read."""
        return (
            f"Prometheus answer larger than {self.limit_bytes / (1 << 20):g} MiB: cut; {what} was not read "
            f"(from {self.url}: narrow the fleet with --selector)"
        )


class Sample(NamedTuple):
    """One series of an instant vector: its labels (``__name__`` included when kept), value and
    timestamp (seconds since the epoch, on Prometheus' clock).  A named tuple: a 500-node fleet's
    refresh reads ~120 000 of them."""

    labels: Mapping[str, str]
    value: float
    timestamp: float

    @property
    def name(self) -> str:
        """The metric name (empty when the query dropped it)."""
        return self.labels.get("__name__", "")


@dataclass(frozen=True)
class Series:
    """One series of a range query: labels and (timestamp, value) points, oldest first."""

    labels: Mapping[str, str]
    points: Tuple[Tuple[float, float], ...]


@dataclass(frozen=True)
class Auth:
    """How to authenticate: HTTP basic (user, password) or a bearer token; neither by default."""

    basic: Optional[Tuple[str, str]] = None
    bearer_token: Optional[str] = None

    def header(self) -> Optional[str]:
        """The ``Authorization`` header's value, if any."""
        if self.basic is not None:
            raw = f"{self.basic[0]}:{self.basic[1]}".encode()
            return "Basic " + base64.b64encode(raw).decode("ascii")
        if self.bearer_token is not None:
            return f"Bearer {self.bearer_token}"
        return None


def normalise_url(url: str) -> str:
    """``prom:9090`` → ``http://prom:9090``; no trailing slash; a pasted ``…/graph`` or
    ``…/api/v1/query`` cut back to the server's base."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"not an http(s) URL: {url!r}")
    path = parsed.path.rstrip("/")
    for tail in ("/api/v1/query_range", "/api/v1/query", "/api/v1", "/graph"):
        if path.endswith(tail):
            path = path[: -len(tail)]
            break
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, "", ""))


class Prometheus:
    """Queries one Prometheus (or a compatible API: Thanos, VictoriaMetrics, Mimir) read-only."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 10.0,
        auth: Auth = Auth(),
        ca_file: Optional[str] = None,
        insecure: bool = False,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.url = normalise_url(url)
        self.timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes
        self._auth = auth.header()
        self._context: Optional[ssl.SSLContext] = None
        if self.url.startswith("https:"):
            context = ssl.create_default_context(cafile=ca_file)
            if insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._context = context

    def query(
        self, expr: str, at: Optional[float] = None, deadline: Optional[float] = None
    ) -> Tuple[List[Sample], float]:
        """An instant query: its vector, and the evaluation time (Prometheus' clock); answered by
        ``deadline`` (``time.monotonic()``) when given, and within ``timeout_s`` in any case."""
        form: Dict[str, str] = {"query": expr}
        if at is not None:
            form["time"] = f"{at:.3f}"
        data = self._call("query", form, deadline)
        kind = data.get("resultType")
        result = data.get("result")
        if kind == "scalar" and isinstance(result, list):
            return [], _number(result[0])
        if kind != "vector" or not isinstance(result, list):
            raise NotPrometheusError(f"{self.url}: a query answered a {kind!r} result, not a vector")
        samples = [_sample(item) for item in result]
        evaluated = samples[0].timestamp if samples else (at if at is not None else math.nan)
        return samples, evaluated

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> List[Series]:
        """A range query from ``start`` to ``end`` every ``step_s`` seconds."""
        form = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        data = self._call("query_range", form, None)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise NotPrometheusError(f"{self.url}: a range query answered no matrix")
        return [_series(item) for item in result]

    def _call(self, endpoint: str, form: Mapping[str, str], deadline: Optional[float]) -> Dict[str, Any]:
        """POST the form to ``/api/v1/<endpoint>`` by ``deadline`` (``time.monotonic()``; at most
        ``timeout_s`` from now); the ``data`` of a success."""
        limit = time.monotonic() + self.timeout_s
        deadline = limit if deadline is None else min(deadline, limit)
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))  # Prometheus gives up by then too
        body = urllib.parse.urlencode({**form, "timeout": f"{left_ms}ms"}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        if self._auth is not None:
            headers["Authorization"] = self._auth
        try:
            reply = bounded_http.fetch(
                f"{self.url}/api/v1/{endpoint}",
                deadline=deadline,
                max_bytes=self.max_answer_bytes,
                data=body,
                headers=headers,
                context=self._context,
            )
        except bounded_http.DeadlineError:
            raise NoAnswerError(
                f"Prometheus at {self.url} did not answer within {self.timeout_s:g} s (--timeout)"
            ) from None
        except bounded_http.AnswerTooLargeError as exc:
            raise AnswerTooLargeError(self.url, exc.limit_bytes) from None
        except bounded_http.RedirectRefusedError as exc:
            raise UnreachableError(
                f"Prometheus at {self.url} redirected to another origin, {_one_line(exc.location)}: not "
                "followed (credentials are never sent there; give --prometheus the URL it redirects to)"
            ) from None
        except urllib.error.URLError as exc:
            raise _unreachable(self.url, exc.reason, self.timeout_s) from None
        except (OSError, ValueError, http.client.HTTPException) as exc:  # a reset, not HTTP, a bad header
            raise UnreachableError(f"cannot query Prometheus at {self.url}: {_one_line(exc)}") from None
        return self._answer(endpoint, reply.status, reply.body)

    def _answer(self, endpoint: str, status: int, raw: bytes) -> Dict[str, Any]:
        if status in (401, 403):
            what = "Unauthorized" if status == 401 else "Forbidden"
            hint = (
                "the credentials were refused"
                if self._auth is not None
                else "give --basic-auth USER:PASSWORD or --bearer-token-file FILE"
            )
            raise AccessDeniedError(
                f"Prometheus at {self.url} refused the query (HTTP {status} {what}): {hint}"
            )
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
            document = None
        if not isinstance(document, dict) or document.get("status") not in ("success", "error"):
            raise NotPrometheusError(
                f"{self.url} is not a Prometheus API: POST /api/v1/{endpoint} answered HTTP {status} "
                f"{'with no JSON' if document is None else 'with other JSON'} (give the server's base "
                "URL, e.g. http://prometheus:9090)"
            )
        if document["status"] == "error":
            kind = str(document.get("errorType", "error"))
            message = _one_line(str(document.get("error", "")))
            if kind in ("timeout", "canceled") or status == 503:
                raise QueryTimeoutError(f"Prometheus at {self.url} gave up on the query ({kind}): {message}")
            raise PrometheusError(f"Prometheus at {self.url} rejected the query ({kind}): {message}")
        data = document.get("data")
        if not isinstance(data, dict):
            raise NotPrometheusError(f"{self.url}: the answer has no data")
        return data


def _unreachable(url: str, reason: object, timeout_s: float) -> PrometheusError:
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return NoAnswerError(f"Prometheus at {url} did not answer within {timeout_s:g} s (--timeout)")
    if isinstance(reason, ssl.SSLCertVerificationError):
        return UnreachableError(
            f"cannot reach Prometheus at {url}: its TLS certificate is not trusted "
            f"({_one_line(reason.verify_message or reason)}): give --ca-file FILE, or --insecure"
        )
    if isinstance(reason, ConnectionRefusedError):
        return UnreachableError(f"cannot reach Prometheus at {url}: connection refused (is it running?)")
    if isinstance(reason, socket.gaierror):
        return UnreachableError(f"cannot reach Prometheus at {url}: unknown host ({_one_line(reason)})")
    return UnreachableError(f"cannot reach Prometheus at {url}: {_one_line(reason)}")


def _sample(item: Any) -> Sample:
    try:
        labels, (at, value) = item["metric"], item["value"]
        if type(labels) is not dict or not all(type(v) is str for v in labels.values()):
            raise TypeError
        return Sample(labels, _number(value), _number(at))  # JSON's keys are strings already
    except (KeyError, TypeError, ValueError):
        raise NotPrometheusError("a result entry has no metric or value") from None


def _series(item: Any) -> Series:
    if not isinstance(item, dict) or not isinstance(item.get("values"), list):
        raise NotPrometheusError("a range result entry has no values")
    labels = item.get("metric")
    points: Sequence[Any] = item["values"]
    return Series(
        {str(k): str(v) for k, v in (labels or {}).items()},
        tuple((_number(p[0]), _number(p[1])) for p in points if isinstance(p, list) and len(p) == 2),
    )


def _number(value: Any) -> float:
    try:
        return float(value)  # "NaN", "+Inf" and "-Inf" included
    except (TypeError, ValueError):
        raise NotPrometheusError(f"not a number in the answer: {value!r}") from None


def _one_line(value: object) -> str:
    return " ".join(str(value).split())[:300]
