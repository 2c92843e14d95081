"""Crafted fleets for the fleet views' tests: FleetSnapshots built from captured node snapshots,
judged by the judge, and a fake fleet feed (no network, deterministic).

``python -m tests.fleet_views.fakes [--slow S]`` runs the live fleet view on the fake feed (the
tmux tests start it this way).
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional, Sequence, Tuple

from npuwatch.fleet.model import Exporter, FleetChip, FleetNode, FleetSnapshot, worst_first
from npuwatch.judge import judge_snapshot
from npuwatch.model import Health, Level, Snapshot, Workload, WorkloadClass, worst
from tests.widgets.fakes import capture_snapshot

AT = datetime(2026, 1, 1, 9, 30, 0, tzinfo=timezone.utc)
SOURCE = "prometheus:http://prometheus.example:9090"


def workloads(snapshot: Snapshot, kinds: Sequence[WorkloadClass]) -> Snapshot:
    """``snapshot`` with its chips' workload classes set, in chip order (cycling ``kinds``)."""
    chips = tuple(
        replace(chip, workload=Workload(kind=kinds[i % len(kinds)], summary="", next_step=""))
        for i, chip in enumerate(snapshot.chips)
    )
    return replace(snapshot, chips=chips)


def busy(snapshot: Snapshot, aicore: Sequence[int]) -> Snapshot:
    """``snapshot`` with its chips' AI Core % set, in chip order (cycling ``aicore``)."""
    chips = tuple(
        replace(chip, aicore_percent=aicore[i % len(aicore)]) for i, chip in enumerate(snapshot.chips)
    )
    return replace(snapshot, chips=chips)


def fleet_node(
    name: str,
    snapshot: Snapshot,
    *,
    stale: Optional[str] = None,
    age_s: float = 2.0,
    instance: Optional[str] = None,
) -> FleetNode:
    """A node holding ``snapshot``'s chips, each judged by the judge; ``stale``: why it stopped."""
    judged = judge_snapshot(snapshot)
    chips = tuple(
        FleetChip(chip, judged[chip.identity.key].level, judged[chip.identity.key].texts)
        for chip in sorted(snapshot.chips, key=lambda c: c.identity.key)
    )
    level = worst(chip.level for chip in chips)
    if stale is not None:
        level = worst((level, Level.UNKNOWN))
    bad = sorted((c for c in chips if c.level is not Level.OK), key=lambda c: -c.level.rank)
    reasons = tuple(f"{chip.label}: {text}" for chip in bad for text in chip.reasons)
    return FleetNode(
        node=name,
        instance=instance or f"{name}:9109",
        chips=chips,
        level=level,
        reasons=reasons,
        stale=stale is not None,
        stale_reason=stale,
        taken_at=snapshot.taken_at,
        age_s=age_s,
        exporter=Exporter.NPUWATCH,
        snapshot=replace(snapshot, source=f"prometheus:{name}"),
    )


def alarm_snapshot() -> Snapshot:
    """Eight 910B2 chips, NPU 3 in Alarm."""
    return capture_snapshot("001", health={(3, 0): Health.ALARM})


def crafted_fleet(*, error: Optional[str] = None, shift_s: float = 0.0) -> FleetSnapshot:
    """Four nodes: ``node-ok`` (8 chips, 6 compute · 2 input), ``node-alarm`` (NPU 3 Alarm),
    ``node-a3`` (an A3, 2 cards of 2 chips), ``node-gone`` (stale: stopped reporting)."""
    at = AT + timedelta(seconds=shift_s)
    compute, inp = WorkloadClass.COMPUTE_BOUND, WorkloadClass.INPUT_BOUND
    ok = busy(workloads(capture_snapshot("001"), [compute, compute, compute, inp]), [95, 91, 88, 12])
    nodes = [
        fleet_node("node-ok", replace(ok, taken_at=at)),
        fleet_node("node-alarm", replace(alarm_snapshot(), taken_at=at)),
        fleet_node("node-a3", replace(capture_snapshot("043"), taken_at=at)),
        fleet_node(
            "node-gone",
            replace(capture_snapshot("008"), taken_at=AT - timedelta(seconds=95)),
            stale="no scrape for 95 s (up == 0)",
            age_s=95.0 + shift_s,
        ),
    ]
    if error is not None:
        nodes = [
            replace(
                n, stale=True, stale_reason=n.stale_reason or error, level=worst((n.level, Level.UNKNOWN))
            )
            for n in nodes
        ]
    return FleetSnapshot(taken_at=at, source=SOURCE, nodes=worst_first(tuple(nodes)), error=error)


class FakeFleetFeed:
    """A fleet feed over crafted fleets: each ``sample()`` moves the clock on by the interval;
    ``slow_s`` makes each refresh take that long (a slow Prometheus); ``errors`` maps a refresh's
    number (1-based) to the source error it reports."""

    def __init__(self, interval_s: float = 1.0, slow_s: float = 0.0, errors: Optional[Dict[int, str]] = None):
        self.interval_s = interval_s
        self.slow_s = slow_s
        self.errors = errors or {}
        self.label = SOURCE
        self.samples = 0
        self.closed = False
        self._lock = threading.Lock()

    def sample(self) -> FleetSnapshot:
        with self._lock:
            self.samples += 1
            count = self.samples
        if self.slow_s:
            time.sleep(self.slow_s)
        return crafted_fleet(error=self.errors.get(count), shift_s=count * self.interval_s)

    def close(self) -> None:
        self.closed = True


def main(argv: Optional[List[str]] = None) -> int:
    from npuwatch.widgets.fleet.app import run_fleet_app

    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--error-from", type=int, default=0, help="refreshes from this one fail")
    args = parser.parse_args(argv)
    errors: Dict[int, str] = {}
    if args.error_from:
        errors = {n: "Prometheus unreachable: connection refused" for n in range(args.error_from, 10_000)}
    feed = FakeFleetFeed(args.interval, args.slow, errors)
    try:
        return run_fleet_app(feed)
    finally:
        feed.close()


def _names(fleet: FleetSnapshot) -> Tuple[str, ...]:
    return tuple(node.node for node in fleet.nodes)


if __name__ == "__main__":
    raise SystemExit(main())
