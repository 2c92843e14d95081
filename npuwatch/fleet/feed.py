"""Provides FleetFeed: a fleet source polled like a node's feed, with history, record and replay.

``FleetFeed.sample()`` reads the source (Prometheus, ``--hosts`` or a fleet recording) and returns a
``FleetSnapshot``; when the source fails (Prometheus unreachable, 401, a timeout) it returns the last
nodes marked stale, with the failure as the snapshot's ``error``, so a live view keeps its data.
``node_history(name)`` gives a node's chip history (a ``npuwatch.history.History``) from Prometheus
range queries (the last 15 minutes), or from what was recorded up to the replay's position.

A fleet recording is NDJSON like a node recording (``npuwatch/recording.py``: every line handed to the
OS as written, gzip flushed line by line), one ``npuwatch/fleet/v1`` document per line, so a node
replay refuses it by its schema and ``npuwatch fleet --replay`` refuses a node recording.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Deque, Dict, List, Optional, Protocol, Sequence, Tuple, Union

from npuwatch.fleet import fleet_json
from npuwatch.fleet.bounded_http import HANDOVER_S
from npuwatch.fleet.model import FleetNode, FleetSnapshot, worst_first
from npuwatch.fleet.prometheus import (
    AnswerTooLargeError,
    NoAnswerError,
    Prometheus,
    PrometheusError,
    Sample,
)
from npuwatch.fleet.series import (
    DEFAULT_LOOKBACK_S,
    DEFAULT_STALE_AFTER_S,
    EXPORTED_CHIP_METRICS,
    HEALTH,
    fleet_queries,
    last_seen_query,
    read_nodes,
)
from npuwatch.history import HISTORY_METRICS, History
from npuwatch.model import ChipIdentity, ChipSample, Level, Snapshot, worst
from npuwatch.recording import RecordingError, RecordingWriter, read_documents

#: Queries of one refresh run this many at a time.
PARALLEL_QUERIES = 8
#: How far back a node's history reaches when a view opens it.
HISTORY_SPAN_S = 900.0


class EmptyFleetError(PrometheusError):
    """Prometheus answers, but holds no NPU series for the selector."""


class FleetSource(Protocol):
    """What a FleetFeed reads: ``read()`` the fleet now (raising ``PrometheusError`` when it cannot)."""

    @property
    def label(self) -> str: ...

    def read(self) -> FleetSnapshot: ...

    def close(self) -> None: ...


class PrometheusSource:
    """The fleet in a Prometheus: one instant query a refresh (``npuwatch.fleet.series``)."""

    def __init__(
        self,
        client: Prometheus,
        *,
        matchers: str = "",
        lookback_s: float = DEFAULT_LOOKBACK_S,
        stale_after_s: float = DEFAULT_STALE_AFTER_S,
        node_label: Optional[str] = None,
    ) -> None:
        self.client = client
        self.matchers = matchers
        self.lookback_s = lookback_s
        self.stale_after_s = stale_after_s
        self.node_label = node_label
        self._queries = fleet_queries(matchers, lookback_s)

    @property
    def label(self) -> str:
        """``prometheus:<url>``."""
        return f"prometheus:{self.client.url}"

    def read(self) -> FleetSnapshot:
        """The fleet now, within one ``timeout_s`` for the whole refresh; ``PrometheusError`` when
        Prometheus cannot say (a query not answered by then names which), ``EmptyFleetError`` when it
        holds no NPU series.  An answer past the client's cap is not read: a warning says which."""
        deadline = time.monotonic() + self.client.timeout_s
        try:
            _, evaluated = self.client.query("time()", deadline=deadline)  # every query at this instant
        except NoAnswerError:
            raise NoAnswerError(self._late_line(["time()"], 1)) from None
        if not math.isfinite(evaluated):
            evaluated = time.time()
        samples, cut = self._ask_all(evaluated, deadline)
        warnings = [line for _, line in cut]
        unread = [tag for tag, _ in cut]
        reading = self._read(samples, evaluated, None, unread)
        if reading.unseen:
            step = max(1.0, self.lookback_s / 60.0)
            query = last_seen_query(self.matchers, reading.unseen, self.lookback_s, step)
            try:
                seen, _ = self.client.query(query, at=evaluated, deadline=deadline)
            except NoAnswerError:
                raise NoAnswerError(self._late_line(["when the stale nodes were last seen"], 1)) from None
            except AnswerTooLargeError as exc:
                seen = []
                warnings.append(exc.line("when the stale nodes were last seen"))
            last = {s.labels.get("instance", ""): s.value for s in seen if math.isfinite(s.value)}
            reading = self._read(samples, evaluated, last, unread)
        warnings.extend(reading.warnings)
        if not reading.nodes:
            raise EmptyFleetError(self._empty_line(warnings))
        return FleetSnapshot(
            taken_at=datetime.fromtimestamp(evaluated, timezone.utc),
            source=self.label,
            nodes=reading.nodes,
            warnings=tuple(warnings),
        )

    def _ask_all(self, at: float, deadline: float) -> Tuple[List[Tuple[str, Sample]], List[Tuple[str, str]]]:
        """Every query of a refresh side by side, all answered by ``deadline`` or the refresh fails
        naming those that were not (they are not waited for); the answers, and (tag, line) of each
        answer cut for its size."""
        pool = ThreadPoolExecutor(max_workers=PARALLEL_QUERIES, thread_name_prefix="fleet-query")
        try:
            query = self.client.query
            futures = [(tag, pool.submit(query, expr, at, deadline)) for tag, expr in self._queries]
            wait([f for _, f in futures], timeout=max(0.0, deadline - time.monotonic()) + HANDOVER_S)
            samples: List[Tuple[str, Sample]] = []
            cut: List[Tuple[str, str]] = []
            late: List[str] = []
            for tag, future in futures:
                if not future.done():
                    late.append(tag)
                    continue
                try:
                    answer, _ = future.result()
                except NoAnswerError:
                    late.append(tag)
                except AnswerTooLargeError as exc:
                    cut.append((tag, exc.line(f"the query {tag}")))
                else:
                    samples.extend((tag, sample) for sample in answer)
            if late:
                raise NoAnswerError(self._late_line(late, len(futures)))
            return samples, cut
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _late_line(self, late: Sequence[str], asked: int) -> str:
        named = ", ".join(late[:3]) + (f" and {len(late) - 3} more" if len(late) > 3 else "")
        which = f"{len(late)} of {asked} queries ({named})" if asked > 1 else f"the query {named}"
        return (
            f"Prometheus at {self.client.url} did not answer within {self.client.timeout_s:g} s "
            f"(--timeout): no answer to {which}, not waited for"
        )

    def _read(
        self,
        samples: Sequence[Any],
        evaluated: float,
        last: Optional[Dict[str, float]],
        unread: Sequence[str],
    ) -> Any:
        return read_nodes(
            samples,
            evaluated,
            unread=unread,
            with_up_only=bool(self.matchers),
            stale_after_s=self.stale_after_s,
            last_seen=last,
            node_label=self.node_label,
        )

    def _empty_line(self, warnings: Sequence[str]) -> str:
        where = f" matching {{{self.matchers}}}" if self.matchers else ""
        if warnings:
            return f"Prometheus at {self.client.url} has NPU series{where}, but none usable: {warnings[0]}"
        return (
            f"Prometheus at {self.client.url} has no NPU series{where} in the last {self.lookback_s:g} s "
            f"({HEALTH} and the other npu-exporter names): check that it scrapes `npuwatch serve` or "
            "npu-exporter on the nodes (its Targets page), and the --selector"
        )

    def node_history(
        self, instance: str, span_s: float = HISTORY_SPAN_S, step_s: float = 5.0
    ) -> List[Snapshot]:
        """A node's chips over the last ``span_s`` seconds, one Snapshot per ``step_s`` (range queries)."""
        names = [name for name, field in EXPORTED_CHIP_METRICS.items() if field in HISTORY_METRICS]
        inner = ", ".join(m for m in (self.matchers, f'instance="{_quoted(instance)}"') if m)
        expr = " or ".join(f'label_replace({n}{{{inner}}}, "npuwatch_metric", "{n}", "", "")' for n in names)
        end = time.time()
        series = self.client.query_range(expr, end - span_s, end, step_s)
        by_time: Dict[float, Dict[Tuple[int, int], Dict[str, float]]] = {}
        names_of: Dict[Tuple[int, int], Optional[str]] = {}
        for each in series:
            key = _chip_key(each.labels)
            field = EXPORTED_CHIP_METRICS.get(each.labels.get("npuwatch_metric", ""))
            if key is None or field is None:
                continue
            names_of.setdefault(key, each.labels.get("model_name") or None)
            for t, value in each.points:
                if math.isfinite(value):
                    by_time.setdefault(t, {}).setdefault(key, {})[field] = value
        return [_history_snapshot(t, chips, names_of, instance) for t, chips in sorted(by_time.items())]

    def close(self) -> None:
        """Nothing to release."""


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _chip_key(labels: Any) -> Optional[Tuple[int, int]]:
    npu_id = labels.get("npu_id", "")
    if npu_id.isdigit():
        chip_id = labels.get("chip_id", "0")
        return int(npu_id), int(chip_id) if chip_id.isdigit() else 0
    phy = labels.get("id", "")
    return (int(phy), 0) if phy.isdigit() else None


def _history_snapshot(
    t: float,
    chips: Dict[Tuple[int, int], Dict[str, float]],
    names: Dict[Tuple[int, int], Optional[str]],
    node: str,
) -> Snapshot:
    samples = []
    for key, values in sorted(chips.items()):
        fields = {k: (v if k in ("power_w", "voltage_v") else round(v)) for k, v in values.items()}
        samples.append(ChipSample(ChipIdentity(key[0], key[1], name=names.get(key)), **fields))  # type: ignore[arg-type]
    return Snapshot(
        taken_at=datetime.fromtimestamp(t, timezone.utc), source=f"prometheus:{node}", chips=tuple(samples)
    )


#: The per-node figures ``FleetHistory`` keeps (``FleetNode`` properties).
NODE_FIGURES: Tuple[str, ...] = ("chips_ok", "aicore_mean", "aicore_min", "hbm_used_mib", "power_w")


class FleetHistory:
    """Each node's row figures over the last ``capacity`` refreshes (for a node row's sparkline);
    a stale node adds gaps (``None``).  Thread-safe."""

    def __init__(self, capacity: int = 180) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._rows: Dict[str, Deque[Tuple[float, Tuple[Optional[float], ...]]]] = {}

    def add(self, fleet: FleetSnapshot) -> None:
        """One point per node of ``fleet``; nodes no longer listed are forgotten."""
        t = fleet.taken_at.timestamp()
        with self._lock:
            present = set()
            for node in fleet.nodes:
                present.add(node.node)
                row = self._rows.setdefault(node.node, deque(maxlen=self.capacity))
                figures = tuple(None if node.stale else _figure(node, name) for name in NODE_FIGURES)
                row.append((t, figures))
            for gone in set(self._rows) - present:
                del self._rows[gone]

    def values(self, node: str, figure: str, last: Optional[int] = None) -> List[Optional[float]]:
        """The node's ``figure`` (one of ``NODE_FIGURES``), oldest first, the newest ``last`` of them."""
        index = NODE_FIGURES.index(figure)
        with self._lock:
            row = list(self._rows.get(node, ()))
        points = [figures[index] for _, figures in row]
        return points if last is None else points[-last:]


def _figure(node: FleetNode, name: str) -> Optional[float]:
    value = getattr(node, name)
    return None if value is None else float(value)


class FleetFeed:
    """A fleet source polled every ``interval_s``: ``sample()`` never raises for the source's failures;
    ``history`` keeps each node's row figures."""

    def __init__(self, source: FleetSource, interval_s: float = 5.0) -> None:
        self.source = source
        self.interval_s = interval_s
        self.history = FleetHistory()
        self._lock = threading.Lock()
        self._last: Optional[FleetSnapshot] = None

    @property
    def label(self) -> str:
        """Where the fleet comes from."""
        return self.source.label

    @property
    def last(self) -> Optional[FleetSnapshot]:
        """The latest sample, if any."""
        return self._last

    def sample(self) -> FleetSnapshot:
        """The fleet now; when the source fails, the last nodes marked stale with the failure as ``error``."""
        with self._lock:
            try:
                fleet = self.source.read()
            except PrometheusError as exc:
                fleet = self._failed(str(exc))
            self._last = fleet
            self.history.add(fleet)
            return fleet

    def _failed(self, error: str) -> FleetSnapshot:
        now = datetime.now(timezone.utc)
        last = self._last
        if last is None:
            return FleetSnapshot(taken_at=now, source=self.label, error=error)
        nodes = tuple(_marked_stale(node, error, now) for node in last.nodes)
        return FleetSnapshot(now, self.label, worst_first(nodes), last.warnings, error)

    def node_history(self, name: str) -> Optional[History]:
        """The node's chip history from the source (range queries, or a recording up to now);
        ``None`` when the source keeps none (``--hosts``: the view accumulates it)."""
        node = self._last.node(name) if self._last is not None else None
        reader = getattr(self.source, "node_history", None)
        if node is None or reader is None:
            return None
        try:
            snapshots: List[Snapshot] = reader(node.instance, step_s=max(1.0, self.interval_s))
        except PrometheusError:
            return None
        history = History.for_span(self.interval_s)
        for snapshot in snapshots:
            history.add(snapshot)
        return history

    def close(self) -> None:
        """Release the source."""
        self.source.close()

    def __enter__(self) -> FleetFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _marked_stale(node: FleetNode, error: str, now: datetime) -> FleetNode:
    if node.stale:
        return node
    age = None if node.taken_at is None else max(0.0, (now - node.taken_at).total_seconds())
    reasons = (f"stale: {error}", *node.reasons)
    level = worst((node.level, Level.UNKNOWN))
    return replace(node, stale=True, stale_reason=error, reasons=reasons, level=level, age_s=age)


# --- record and replay -------------------------------------------------------------------------


class FleetRecordingWriter(RecordingWriter):
    """Appends fleet snapshots to a new NDJSON file (gzip when ``.gz``), as ``RecordingWriter`` does."""

    def write_fleet(self, fleet: FleetSnapshot) -> None:
        """Append one fleet snapshot as one line."""
        self.write_encoded(self.encode_text(fleet_json.dumps(fleet, indent=None)))


def read_fleet_recording(path: Union[str, Path]) -> Tuple[Tuple[FleetSnapshot, ...], Tuple[str, ...]]:
    """Every valid fleet snapshot of a fleet recording, in time order, and what was skipped;
    ``RecordingError`` when none is valid (a node recording says so)."""
    path = Path(path)
    fleets, warnings = read_documents(path, fleet_json.from_dict, "a fleet snapshot")
    if not fleets:
        node = any("npuwatch/snapshot/v1" in w for w in warnings)
        hint = ": it is a node recording (replay it with `npuwatch --replay`)" if node else ""
        first = f": {warnings[0]}" if warnings and not hint else ""
        raise RecordingError(f"{path} holds no fleet snapshot{hint}{first}")
    return tuple(sorted(fleets, key=lambda f: f.taken_at)), tuple(warnings)


class ReplaySource:
    """A fleet recording played back with its original timing times ``speed``; the last snapshot
    stays at the end."""

    def __init__(self, path: Union[str, Path], speed: float = 1.0) -> None:
        self.path = Path(path)
        self.fleets, self.warnings = read_fleet_recording(self.path)
        self.speed = speed
        self._started = time.monotonic()
        self._position = 0

    @property
    def label(self) -> str:
        """``replay:<file>``."""
        return f"replay:{self.path.name}"

    @property
    def duration_s(self) -> float:
        """Seconds from the first fleet snapshot to the last."""
        return (self.fleets[-1].taken_at - self.fleets[0].taken_at).total_seconds()

    @property
    def ended(self) -> bool:
        """True once the last snapshot was played."""
        return self._position >= len(self.fleets) - 1

    def read(self) -> FleetSnapshot:
        """The snapshot recorded at the replay's position now."""
        played = (time.monotonic() - self._started) * self.speed
        start = self.fleets[0].taken_at
        while (
            self._position + 1 < len(self.fleets)
            and (self.fleets[self._position + 1].taken_at - start).total_seconds() <= played
        ):
            self._position += 1
        return self.fleets[self._position]

    def node_history(self, instance: str, step_s: float = 1.0) -> List[Snapshot]:
        """The node's recorded snapshots up to the position (every one: ``step_s`` is not used)."""
        out: List[Snapshot] = []
        for fleet in self.fleets[: self._position + 1]:
            node = next((n for n in fleet.nodes if n.instance == instance), None)
            if node is not None and node.snapshot is not None and not node.stale:
                out.append(node.snapshot)
        return out

    def close(self) -> None:
        """Nothing to release."""
