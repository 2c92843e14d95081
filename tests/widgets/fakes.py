"""Fake samplers and fixed snapshots for the dashboard tests: deterministic data, no npu-smi."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence

from npuwatch.chip_details import ChipDetails
from npuwatch.history import History
from npuwatch.model import (
    Health,
    HostInfo,
    MetricStatus,
    ProbeReport,
    ProcessHostInfo,
    Snapshot,
    Versions,
)
from npuwatch.probes.npu_smi.table import parse_info
from tests.conftest import capture_text

if TYPE_CHECKING:
    from npuwatch.widgets.tui.card_paint import Card

#: Every fake snapshot is taken at this instant (UTC), so the header's clock never moves.
FIXED_AT = datetime(2026, 1, 1, 9, 30, 0, tzinfo=timezone.utc)
#: A constant host, so the host panel never shows the test machine's CPU or memory.
FIXED_HOST = HostInfo(
    hostname="ascend-node-01",
    cpu_percent=37.5,
    per_cpu_percent=tuple(float((i * 37) % 100) for i in range(32)),
    memory_used_bytes=412 * 1024**3,
    memory_total_bytes=1536 * 1024**3,
    load_average=(12.5, 11.25, 9.75),
    in_container=False,
    host_pid_namespace=True,
)
#: The login name the tests run as (the process table highlights this user's rows).
ME = "alice"
USERS = (ME, "bob", "carol")


def capture_snapshot(number: str, *, health: Optional[dict] = None) -> Snapshot:
    """A Snapshot of capture ``number`` with fixed time, host and per-process host details.

    ``health`` maps chip keys to a Health to force (an Alarm chip from an OK capture).
    """
    table = parse_info(capture_text(number))
    chips = tuple(
        replace(chip, health=(health or {}).get(chip.identity.key, chip.health)) for chip in table.chips
    )
    started = FIXED_AT.timestamp()
    processes = tuple(
        replace(
            process,
            host=ProcessHostInfo(
                user=USERS[i % len(USERS)],
                command=f"python3 train.py --rank {i}",
                cpu_percent=float(10 + 7 * i),
                rss_bytes=(1 + i) * 1024**3,
                start_time_s=started - 60 * (i + 1),
            ),
            host_unavailable=None,
        )
        for i, process in enumerate(table.processes)
    )
    return Snapshot(
        taken_at=FIXED_AT,
        source=f"replay:capture-{number}",
        versions=Versions(npu_smi=table.npu_smi_version, driver=table.driver_version),
        chips=chips,
        processes=processes,
        host=FIXED_HOST,
        warnings=table.warnings,
        probes=(ProbeReport("npu-smi", MetricStatus.OK, 0.1, found=len(chips)),),
    )


class FakeSampler:
    """A SnapshotFeed that replays fixed snapshots (the last one repeats) and counts its calls."""

    def __init__(
        self,
        snapshots: Sequence[Snapshot],
        *,
        interval_s: float = 1.0,
        label: str = "fake",
        record_history: bool = True,
    ) -> None:
        self.interval_s = interval_s
        self.history = History()
        self.snapshots: List[Snapshot] = list(snapshots)
        self.record_history = record_history
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self.details_asked: List[tuple] = []
        self._label = label
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self._label

    def sample(self) -> Snapshot:
        with self._lock:
            self.calls += 1
            call = self.calls
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            snapshot = self.produce(call)
            if self.record_history:
                self.history.add(snapshot)
            return snapshot
        finally:
            with self._lock:
                self.active -= 1

    def produce(self, call: int) -> Snapshot:
        """The snapshot of the ``call``-th sample (1-based); subclasses fail or hang here."""
        return self.snapshots[min(call, len(self.snapshots)) - 1]

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        self.details_asked.append((npu_id, chip_id))
        return None


class FailingSampler(FakeSampler):
    """Every sample raises, as a sampler bug would."""

    def produce(self, call: int) -> Snapshot:
        raise RuntimeError(f"probe exploded (call {call})")


class HungSampler(FakeSampler):
    """The first ``answer`` samples return; the next blocks until ``release`` is set (a hung npu-smi)."""

    def __init__(self, snapshots: Sequence[Snapshot], *, answer: int = 1, **kwargs: object) -> None:
        super().__init__(snapshots, **kwargs)  # type: ignore[arg-type]
        self.answer = answer
        self.release = threading.Event()
        self.hung = threading.Event()

    def produce(self, call: int) -> Snapshot:
        if call > self.answer:
            self.hung.set()
            self.release.wait()
        return super().produce(call)


def with_health(snapshot: Snapshot, key: tuple, health: Health) -> Snapshot:
    """``snapshot`` with one chip's health replaced."""
    chips = tuple(replace(c, health=health) if c.identity.key == key else c for c in snapshot.chips)
    return replace(snapshot, chips=chips)


async def wait_for(pilot: object, condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Let the app run until ``condition()`` holds (True) or ``timeout_s`` passes (False)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        await pilot.pause(0.05)  # type: ignore[attr-defined]
    return condition()


def simulated_snapshots(scenario: str, count: int, *, at_s: float = 600.0) -> List[Snapshot]:
    """``count`` snapshots of a demo scenario one simulated second apart, fully deterministic.

    The simulator's clock is frozen per sample with ``NPUWATCH_SIM_NOW`` and the sampler's
    clock is fixed, so the same call always gives the same snapshots; the host (this test
    machine's CPU and memory) and probe durations are replaced by constants.
    """
    import os

    from npuwatch.probes.host import HostProbe
    from npuwatch.probes.npu_smi import NpuSmi
    from npuwatch.probes.npu_smi.source import NpuSmiSource
    from npuwatch.probes.simulator import Simulation
    from npuwatch.probes.sysroot import Sysroot
    from npuwatch.sampler import Sampler

    epoch = FIXED_AT.timestamp() - at_s - count
    now = {"s": 0.0}
    saved = os.environ.get(SIM_NOW)
    sim = Simulation.start(scenario, started_at=epoch)
    try:
        sysroot = Sysroot(sim.root, environ=sim.environ)
        source = NpuSmiSource(NpuSmi(sim.npu_smi, timeout_s=30.0), label=f"demo:{scenario}")
        sampler = Sampler(
            source,
            sysroot,
            # The simulated processes live in "this" PID namespace, as in the demo.
            HostProbe(lookup=sim.process_lookup, in_container=False, host_pid_namespace=True),
            clock=lambda: epoch + now["s"],
            monotonic=lambda: now["s"],
        )
        out = []
        for step in range(count):
            now["s"] = at_s + step + 1
            os.environ[SIM_NOW] = str(now["s"])
            snapshot = sampler.sample()
            probes = tuple(
                replace(p, duration_s=None if p.duration_s is None else 0.1) for p in snapshot.probes
            )
            out.append(replace(snapshot, host=FIXED_HOST, probes=probes))
        return out
    finally:
        sim.close()
        if saved is None:
            os.environ.pop(SIM_NOW, None)
        else:
            os.environ[SIM_NOW] = saved


SIM_NOW = "NPUWATCH_SIM_NOW"


def chip_cards(app: object) -> List[Card]:
    """The dashboard's chip cards (one per chip, in NPU then chip order)."""
    from npuwatch.widgets.tui.chip_grid import ChipGrid

    return app.query_one(ChipGrid).cards  # type: ignore[attr-defined,no-any-return]


def card_text(app: object, card: Card) -> List[str]:
    """What a chip card shows, line by line, without styles."""
    from npuwatch.widgets.tui.chip_grid import ChipGrid

    return app.query_one(ChipGrid).card_texts(card)  # type: ignore[attr-defined,no-any-return]


def focused_card(app: object) -> Optional[Card]:
    """The card with the focus: the chip area's cursor while the chip area has the focus."""
    from npuwatch.widgets.tui.chip_grid import ChipGrid

    grid = app.query_one(ChipGrid)  # type: ignore[attr-defined]
    return grid.cursor_card if app.focused is grid else None  # type: ignore[attr-defined,no-any-return]


#: What the DCMI backend reads beyond npu-smi's table: AI Core at 1300 of its rated 1800 MHz,
#: Vector 45 %, HBM bandwidth 62 %, and the detail metrics.
DCMI_VALUES = {
    "aicore_freq_mhz": 1300,
    "aicore_rated_freq_mhz": 1800,
    "vector_percent": 45,
    "cube_percent": 12,
    "aicpu_percent": 3,
    "ctrlcpu_percent": 7,
    "hbm_bandwidth_percent": 62,
    "hbm_temperature_c": 41,
    "voltage_v": 0.85,
    "ecc_single_bit_errors": 2,
    "ecc_double_bit_errors": 0,
    "ecc_isolated_pages": 1,
}


def with_dcmi_values(snapshot: Snapshot, **values: object) -> Snapshot:
    """``snapshot`` as the DCMI backend reads it: every chip also carries ``DCMI_VALUES`` (updated
    with ``values``), without npu-smi's notes for them; the source says ``dcmi``."""
    shown = {**DCMI_VALUES, **values}
    chips = tuple(
        replace(
            chip,
            notes={name: note for name, note in chip.notes.items() if name not in shown},
            **shown,  # type: ignore[arg-type]
        )
        for chip in snapshot.chips
    )
    probes = tuple(replace(p, name="dcmi") if p.name == "npu-smi" else p for p in snapshot.probes)
    return replace(snapshot, chips=chips, probes=probes, chip_source="dcmi")
