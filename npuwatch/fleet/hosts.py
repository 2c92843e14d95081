"""Provides HostsSource: the fleet read from each node's ``npuwatch serve`` ``/snapshot`` (``--hosts``).

For small labs without Prometheus.  Every refresh asks every node at once, each in its own thread,
all by one deadline (``timeout_s`` for the whole refresh, ``npuwatch.fleet.bounded_http``): a node
that is down, slow or not ``npuwatch serve`` becomes a stale row with its reason and its last data,
and delays no other.  Only ``GET /snapshot`` is sent.
A node's levels and workload classes are the ones its own judge wrote into the snapshot.  Its clock
is compared with ours through the HTTP ``Date`` header of its answer.
"""

from __future__ import annotations

import email.utils
import http.client
import ipaddress
import json
import socket
import threading
import time
import urllib.error
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from npuwatch import snapshot_json
from npuwatch.fleet import bounded_http
from npuwatch.fleet.fleet_json import judgement_from, workload_from
from npuwatch.fleet.model import Exporter, FleetChip, FleetNode, FleetSnapshot, worst_first
from npuwatch.judge.rules import judge_snapshot
from npuwatch.model import Level, Snapshot, worst

DEFAULT_PORT = 9492
#: Largest /snapshot accepted (a 16-chip node's is ~20 KB; 10 000 processes ~3 MB).
MAX_SNAPSHOT_BYTES = 32 << 20
#: A node clock this far from ours is reported (seconds).
CLOCK_TOLERANCE_S = 30.0
DEFAULT_STALE_AFTER_S = 60.0
#: Most nodes asked at the same time.
MAX_PARALLEL = 64


def parse_hosts(text: str) -> Tuple[str, ...]:
    """``host:port,host2`` or ``@file`` (one or more per line, ``#`` comments) → ``host:port`` addresses
    (port 9492 when none is given); ``ValueError`` saying what is wrong."""
    if text.startswith("@"):
        path = Path(text[1:]).expanduser()
        try:
            content = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ValueError(f"cannot read the hosts file {path}: {exc.strerror or exc}") from None
        words = [w for line in content.splitlines() for w in line.split("#", 1)[0].replace(",", " ").split()]
    else:
        words = [w for w in text.replace(",", " ").split() if w]
    if not words:
        raise ValueError("--hosts names no host")
    return tuple(dict.fromkeys(_address(word) for word in words))


def _address(word: str) -> str:
    text = word.strip()
    for prefix in ("http://", "https://"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.split("/", 1)[0]
    if text.startswith("["):  # [::1]:9492
        end = text.find("]")
        if end < 0:
            raise ValueError(f"not a host:port: {word!r}")
        host, rest = text[: end + 1], text[end + 1 :]
    elif text.count(":") > 1:  # a bare IPv6 address
        host, rest = f"[{text}]", ""
    else:
        host, _, port_text = text.partition(":")
        rest = f":{port_text}" if port_text else ""
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"not a host:port: {word!r}") from None
    port_text = rest[1:] if rest.startswith(":") else ""
    if not host or (rest and not rest.startswith(":")) or (port_text and not port_text.isdigit()):
        raise ValueError(f"not a host:port: {word!r}")
    port = int(port_text) if port_text else DEFAULT_PORT
    if not 0 < port < 65536:
        raise ValueError(f"not a port: {word!r}")
    return f"{host}:{port}"


@dataclass(frozen=True)
class Answer:
    """One node's answer: its snapshot JSON (parsed), or why there is none; its clock offset."""

    address: str
    document: Optional[Dict[str, Any]] = None
    error: Optional[str] = None
    clock_offset_s: Optional[float] = None
    received_at: float = 0.0


def fetch(address: str, timeout_s: float, deadline: Optional[float] = None) -> Answer:
    """``GET http://<address>/snapshot``, the whole answer within ``timeout_s`` (and by ``deadline``,
    ``time.monotonic()``, when given)."""
    url = f"http://{address}/snapshot"
    started = time.time()
    limit = time.monotonic() + timeout_s
    try:
        reply = bounded_http.fetch(
            url,
            deadline=limit if deadline is None else min(deadline, limit),
            max_bytes=MAX_SNAPSHOT_BYTES,
            headers={"Accept": "application/json"},
        )
    except bounded_http.DeadlineError:
        return Answer(address, error=f"no answer within {timeout_s:g} s")
    except bounded_http.AnswerTooLargeError:
        return Answer(address, error=f"/snapshot is larger than {MAX_SNAPSHOT_BYTES >> 20} MiB: not read")
    except bounded_http.RedirectRefusedError as exc:
        return Answer(address, error=f"not npuwatch serve: /snapshot {_one_line(exc)}")
    except urllib.error.URLError as exc:
        return Answer(address, error=_reason(exc.reason, timeout_s))
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return Answer(address, error=f"cannot read /snapshot: {_one_line(exc) or type(exc).__name__}")
    received = time.time()
    if reply.status == 503:
        return Answer(address, error="npuwatch serve has no sample yet (HTTP 503)")
    if not 200 <= reply.status < 300:
        return Answer(address, error=f"not npuwatch serve: GET /snapshot answered HTTP {reply.status}")
    try:
        document = json.loads(reply.body)
    except (ValueError, RecursionError):
        return Answer(address, error="not npuwatch serve: /snapshot is not JSON")
    if not isinstance(document, dict) or document.get("schema") != snapshot_json.SCHEMA:
        return Answer(address, error=f"not npuwatch serve: /snapshot is not {snapshot_json.SCHEMA}")
    clock_offset = _clock_offset(reply.headers.get("date"), started, received)
    return Answer(address, document, None, clock_offset, received)


def _reason(reason: object, timeout_s: float) -> str:
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout_s:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is `npuwatch serve` running there?)"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({_one_line(reason)})"
    return f"cannot connect: {_one_line(reason)}"


def _clock_offset(date: Optional[str], started: float, received: float) -> Optional[float]:
    """The node's clock minus ours from its ``Date`` header (1 s resolution), or ``None``."""
    if not date:
        return None
    try:
        when = email.utils.parsedate_to_datetime(date)
    except (TypeError, ValueError, IndexError):
        return None
    node_s = when.timestamp()
    # The node's clock read [node_s, node_s + 1) while ours read [started, received].
    low, high = node_s - received, node_s + 1.0 - started
    if low <= 0.0 <= high:
        return 0.0
    return low if low > 0.0 else high


def _one_line(value: object) -> str:
    return " ".join(str(value).split())[:200]


class HostsSource:
    """Reads every host's ``/snapshot`` concurrently; keeps each node's last answer for when it fails."""

    def __init__(
        self,
        hosts: Sequence[str],
        *,
        timeout_s: float = 5.0,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
    ) -> None:
        self.hosts = tuple(hosts)
        self.timeout_s = timeout_s
        self.stale_after_s = stale_after_s
        self._last: Dict[str, Tuple[Snapshot, Dict[str, Any]]] = {}

    @property
    def label(self) -> str:
        """``hosts:<n>``."""
        return f"hosts:{len(self.hosts)}"

    def read(self) -> FleetSnapshot:
        """Every node now (worst first), within one ``timeout_s`` for the whole refresh; a node that
        does not answer by then is stale with its last data (it is not waited for)."""
        answers = self._ask_all(time.monotonic() + self.timeout_s)
        now = time.time()
        late = Answer("", error=f"no answer within {self.timeout_s:g} s")
        nodes = tuple(
            self._node(answers.get(host) or replace(late, address=host), now) for host in self.hosts
        )
        return FleetSnapshot(
            taken_at=datetime.fromtimestamp(now, timezone.utc), source=self.label, nodes=worst_first(nodes)
        )

    def _ask_all(self, deadline: float) -> Dict[str, Answer]:
        answers: Dict[str, Answer] = {}
        lock = threading.Lock()
        gate = threading.BoundedSemaphore(MAX_PARALLEL)
        budget = f"{self.timeout_s:g} s"
        unasked = Answer("", error=f"not asked within the refresh's {budget}: other nodes were slow")

        def ask(host: str) -> None:
            with gate:
                if time.monotonic() >= deadline:
                    answer = replace(unasked, address=host)
                else:
                    try:
                        answer = fetch(host, self.timeout_s, deadline)
                    except Exception as exc:  # a hostile node must not end the poller
                        answer = Answer(host, error=f"cannot read /snapshot: {type(exc).__name__}")
            with lock:
                answers[host] = answer

        threads = [
            threading.Thread(target=ask, args=(h,), name=f"fleet-{h}", daemon=True) for h in self.hosts
        ]
        for thread in threads:
            thread.start()
        for thread in threads:  # each request gave up at the deadline: a moment to hand its answer over
            thread.join(max(0.0, deadline + bounded_http.HANDOVER_S - time.monotonic()))
        with lock:
            return dict(answers)

    def _node(self, answer: Answer, now: float) -> FleetNode:
        host = answer.address
        document = answer.document
        if document is not None:
            try:
                snapshot = snapshot_json.from_dict(document)
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
                answer = Answer(host, error=f"/snapshot is not a valid snapshot ({_one_line(exc)[:80]})")
            else:
                self._last[host] = (snapshot, document)
        last = self._last.get(host)
        if last is None:
            reason = answer.error or "no answer"
            return FleetNode(
                node=host,
                instance=host,
                level=Level.UNKNOWN,
                reasons=(f"stale: {reason}",),
                stale=True,
                stale_reason=reason,
                exporter=Exporter.NONE,
            )
        return _node_from(host, last[0], last[1], answer, now, self.stale_after_s)

    def close(self) -> None:
        """Nothing to release (threads are per refresh)."""


def _node_from(
    host: str, snapshot: Snapshot, document: Dict[str, Any], answer: Answer, now: float, stale_after_s: float
) -> FleetNode:
    judged = judge_snapshot(snapshot)
    raw_chips: List[Any] = document.get("chips") or []
    chips: List[FleetChip] = []
    samples = []
    for index, sample in enumerate(snapshot.chips):
        raw = raw_chips[index] if index < len(raw_chips) and isinstance(raw_chips[index], dict) else {}
        sample = sample.with_workload(workload_from(raw.get("workload")))
        if isinstance(raw.get("judgement"), dict):  # the node's own judge's verdict
            level, reasons = judgement_from(raw)
        else:
            judgement = judged[sample.identity.key]
            level, reasons = judgement.level, judgement.texts
        chips.append(FleetChip(sample, level, reasons))
        samples.append(sample)
    clock = answer.clock_offset_s
    warnings = [] if clock is None or abs(clock) <= CLOCK_TOLERANCE_S else [_clock_line(clock)]
    # The sample's age on the node's own clock when we know the offset, else on ours.
    age = max(0.0, now + (clock or 0.0) - snapshot.taken_at.timestamp())
    stale_reason = answer.error
    if stale_reason is None and age > stale_after_s:
        stale_reason = (
            f"its latest sample is {age:.0f} s old (limit {stale_after_s:g} s): its sampler is stuck"
        )
    level = worst(chip.level for chip in chips)
    by_level = sorted(chips, key=lambda c: -c.level.rank)
    reasons_all = [f"{chip.label}: {text}" for chip in by_level for text in chip.reasons]
    if stale_reason is not None:
        level = worst((level, Level.UNKNOWN))
        reasons_all.insert(0, f"stale: {stale_reason}")
    return FleetNode(
        node=host,
        instance=host,
        chips=tuple(chips),
        level=level,
        reasons=tuple(reasons_all),
        stale=stale_reason is not None,
        stale_reason=stale_reason,
        taken_at=snapshot.taken_at,
        age_s=age,
        exporter=Exporter.SNAPSHOT,
        snapshot=replace(snapshot, chips=tuple(samples)),
        clock_offset_s=clock,
        warnings=tuple(warnings),
    )


def _clock_line(offset: float) -> str:
    way = "ahead of" if offset > 0 else "behind"
    return f"its clock is {abs(offset):.0f} s {way} this machine's (fix NTP on the node)"
