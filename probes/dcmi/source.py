"""Provides the DCMI chip source: ``DcmiSource`` reads every chip through ``libdcmi.so`` in its worker.

It fills the chip-source seam (``npuwatch.chip_source``) as the npu-smi source does: a
``ChipReading`` of ``ChipSample``s, or a ``SourceFailure``.  The calls run in the worker process
(``worker.Worker``: deadlines, restarts); this module turns its records into the model, with one
status per missing metric from the one code mapping (``status``).  Chips are enumerated once, and
again after a worker restart, when a chip is gone (health ``0xFFFFFFFF``, ``-8008``), when a card
could not be listed, and every ``REENUMERATE_S`` (a chip that appeared).

Choices: a chip whose health reads ``0xFFFFFFFF`` (the device does not exist) is *lost*
(``ChipSample.lost_reason``, health unknown, every metric an error with that reason), the
model's fact for a gone chip; the chips are identified as npu-smi prints them (NPU ID = card ID,
Chip = device ID in the card, Bus-Id upper-case ``0000:C1:00.0``).
"""

from __future__ import annotations

import dataclasses
import time
import typing
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple

from npuwatch.chip_source import ChipReading, SourceFailure, SourceReading
from npuwatch.metrics_table import MAX_CHIP_MEMORY_MIB
from npuwatch.model import (
    CHIP_METRICS,
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    MetricNote,
    MetricStatus,
    NpuProcess,
    Versions,
)
from npuwatch.probes.dcmi import records, status
from npuwatch.probes.dcmi.worker import DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S  # re-exported
from npuwatch.probes.dcmi.worker import LIBRARY_VARIABLE as LIBRARY_VARIABLE  # re-exported
from npuwatch.probes.dcmi.worker import (
    Worker,
    WorkerFailure,
    WorkerTick,
    start_worker,
)
from npuwatch.source_info import SCOPE_CARD, MetricScope, SourceInfo

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails

#: The name of the DCMI source's ProbeReport in every Snapshot.
PROBE_NAME = "dcmi"
#: What DCMI reads: every metric of the table (``npuwatch.metrics_table``: the driver-only ones
#: are DCMI's) and a process table per chip; a 310P's board power is the card's
#: (``records.ChipTick.board_power``), said per tick by a ``MetricScope``.
#: ``tests/core/test_source_info.py`` holds this to what DCMI fills on every demo.
SOURCE_INFO = SourceInfo(PROBE_NAME, "DCMI", True, frozenset(CHIP_METRICS))
#: How often the chips are listed again when nothing asks sooner (a chip that appeared).
REENUMERATE_S = 300.0
#: How often, at most, a gone chip or an unlisted card makes the chips listed again.
REENUMERATE_SOON_S = 10.0

_HEALTH = {0: Health.OK, 1: Health.WARNING, 2: Health.ALARM, 3: Health.CRITICAL}
_FAILURE_STATUS = {
    "permission": MetricStatus.PERMISSION,
    "timeout": MetricStatus.TIMEOUT,
}
#: A metric the library gave no value and no code for: the reader does not read it on this chip.
NOT_READ = MetricNote(MetricStatus.UNSUPPORTED, "not read through DCMI on this chip")


class DcmiSource:
    """The chips read through DCMI in one long-lived worker process (``worker.Worker``).

    ``read()`` never raises for anything the library or the worker does: a hang is a ``timeout``
    failure (the worker is killed and replaced), a crash a ``crash`` failure.  Details on demand
    come from npu-smi (``provides_details`` is False).  ``close()`` ends the worker.
    """

    probe_name = PROBE_NAME
    source_info = SOURCE_INFO
    provides_details = False
    provides_processes = SOURCE_INFO.process_table
    provides_logic_ids = True

    def __init__(
        self, worker: Worker, label: str = "dcmi", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.worker = worker
        self.label = label
        self._clock = clock
        self._enumerated_at: Optional[float] = None
        self._soon_at: Optional[float] = None  # a re-enumeration is wanted from then on
        self._identities: Dict[records.ChipRef, ChipIdentity] = {}
        self._facts: Dict[records.ChipRef, records.ChipFacts] = {}
        self._versions = Versions()
        #: The last read's worker timings (``startup_s``, ``inventory_s``, ``tick_s``, a demo's
        #: ``refresh_cpu_s``), for benchmarks.
        self.last_timings: Mapping[str, float] = {}

    def read(self) -> SourceReading:
        started = time.monotonic()
        answer = self.worker.tick(reenumerate=self._reenumeration_due())
        restarts = self.worker.restarts
        if isinstance(answer, WorkerFailure):
            self.last_timings = {}
            failure = source_failure(answer)
            info = SOURCE_INFO.for_tick(False)
            return SourceReading(
                None, failure, time.monotonic() - started, restarts=restarts, source_info=info
            )
        self.last_timings = answer.timings
        if answer.enumerated:
            self._take_inventory(answer.inventory)
        reading, gone = self._reading(answer)
        if (gone or answer.inventory.card_codes) and self._soon_at is None:
            self._soon_at = self._clock()
        info = SOURCE_INFO.for_tick(reading.process_table, card_scopes(reading.chips, answer.chips))
        return SourceReading(reading, None, time.monotonic() - started, restarts=restarts, source_info=info)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """None: DCMI has no equivalent of npu-smi's ``-t board|usages|common|health`` blocks."""
        return None

    def close(self) -> None:
        """End the worker (and all it started).  Idempotent."""
        self.worker.close()

    # --- enumeration ----------------------------------------------------------------------------

    def _reenumeration_due(self) -> bool:
        now = self._clock()
        if self._enumerated_at is None:
            return False  # the worker enumerates at start by itself
        if self._soon_at is not None and now >= self._soon_at:
            return now - self._enumerated_at >= REENUMERATE_SOON_S
        return now - self._enumerated_at >= REENUMERATE_S

    def _take_inventory(self, inventory: records.Inventory) -> None:
        self._enumerated_at = self._clock()
        self._soon_at = None
        self._facts = {facts.ref: facts for facts in inventory.chips}
        self._identities = {facts.ref: identity(facts) for facts in inventory.chips}
        self._versions = versions(inventory)

    # --- one reading ----------------------------------------------------------------------------

    def _reading(self, answer: WorkerTick) -> Tuple[ChipReading, bool]:
        chips: List[ChipSample] = []
        processes: List[NpuProcess] = []
        warnings: List[str] = list(answer.warnings)
        unlisted: List[Tuple[ChipIdentity, int]] = []
        gone = False
        for tick in answer.chips:
            chip_identity = self._identities.get(tick.ref) or identity(records.ChipFacts(tick.ref))
            sample = chip_sample(chip_identity, self._facts.get(tick.ref), tick)
            gone = gone or sample.lost_reason is not None
            chips.append(sample)
            if tick.processes is None:
                unlisted.append((chip_identity, tick.codes.get("processes", 0)))
            else:
                processes.extend(npu_processes(chip_identity, tick.processes))
            if tick.health is None and "health" in tick.codes:
                warnings.append(
                    f"{chip_identity.label}: health unread: {status.reason(tick.codes['health'])}"
                )
        if unlisted:
            first, code = unlisted[0]
            what = status.reason(code) if code else "no answer"
            warnings.append(
                f"DCMI could not list the processes of {len(unlisted)} chip(s) ({first.label}: {what})"
            )
        for card, code in sorted(answer.inventory.card_codes.items()):
            warnings.append(f"NPU {card}: its chips could not be listed: {status.reason(code)}")
        card_list = answer.inventory.codes.get("card_list")
        if card_list is not None:
            warnings.append(f"DCMI could not list the cards: {status.reason(card_list)}")
        reading = ChipReading(
            versions=self._versions,
            chips=tuple(chips),
            processes=tuple(processes),
            process_table=bool(chips) and not unlisted,
            warnings=tuple(warnings),
        )
        return reading, gone


def open_dcmi_source(
    library: Optional[str],
    root: str = "/",
    label: str = "dcmi",
    timeout_s: Optional[float] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> DcmiSource:
    """A ``DcmiSource`` whose worker starts now (it loads, initialises and enumerates while the
    caller does other things), so the first ``read()`` finds most of that done.

    The arguments are ``worker.start_worker``'s.
    """
    return DcmiSource(start_worker(library, root, timeout_s, environ), label)


# --- records → model ---------------------------------------------------------------------------


def card_scopes(
    chips: Tuple[ChipSample, ...], ticks: Tuple[records.ChipTick, ...]
) -> Tuple[MetricScope, ...]:
    """The chips whose ``power_w`` is their card's (a 310P's board power from the MCU, on the
    card's first chip): kept as a fact of the reading, so the judge compares it with the card's
    rating, not the chip's.  ``chips`` are the samples of ``ticks``, in order."""
    return tuple(
        MetricScope(chip.identity.npu_id, chip.identity.chip_id, "power_w", SCOPE_CARD)
        for chip, tick in zip(chips, ticks)
        if tick.board_power and chip.power_w is not None
    )


def source_failure(failure: WorkerFailure) -> SourceFailure:
    """The worker's failure as the seam's record (its kind is kept: ``timeout``, ``crash`` …)."""
    return SourceFailure(
        kind=failure.kind,
        message=failure.message,
        hint=failure.hint,
        metric_status=_FAILURE_STATUS.get(failure.kind, MetricStatus.ERROR),
        error_code=failure.code,
        output=failure.output,
    )


def identity(facts: records.ChipFacts) -> ChipIdentity:
    """The chip as npu-smi prints it: NPU ID = card ID, Chip = device ID, Bus-Id upper-case."""
    ref = facts.ref
    return ChipIdentity(
        npu_id=ref.card_id,
        chip_id=ref.device_id,
        name=facts.chip_name or None,
        bus_id=facts.bus_id.upper() if facts.bus_id else None,
        phy_id=ref.phy_id,
        logic_id=ref.logic_id,
    )


def versions(inventory: records.Inventory) -> Versions:
    """The driver's version and the library's (``Versions.dcmi``, where the model has it)."""
    found = {"driver": inventory.driver_version, "dcmi": inventory.dcmi_version}
    return Versions(**{name: value for name, value in found.items() if name in _VERSION_FIELDS})


def chip_sample(
    chip_identity: ChipIdentity, facts: Optional[records.ChipFacts], tick: records.ChipTick
) -> ChipSample:
    """One chip's sample: its health, every value the library gave, a note for every other metric."""
    lost = lost_reason(tick)
    if lost is not None:
        note = MetricNote(MetricStatus.ERROR, lost)
        return ChipSample(
            identity=chip_identity,
            health=Health.UNKNOWN,
            notes={metric: note for metric in CHIP_METRICS},
            lost_reason=lost,
        )
    values: Dict[str, object] = {}
    codes: Dict[str, int] = dict(tick.codes)
    if facts is not None:
        if facts.aicore_rated_freq_mhz is not None:
            values["aicore_rated_freq_mhz"] = facts.aicore_rated_freq_mhz
        elif "aicore_rated_freq_mhz" in facts.codes:
            codes.setdefault("aicore_rated_freq_mhz", facts.codes["aicore_rated_freq_mhz"])
    values.update(tick.values)
    fields: Dict[str, object] = {}
    for name, value in values.items():
        convert = _CONVERTERS.get(name)
        if convert is None:
            continue
        kind = type(value)
        if (kind is int or kind is float) and value == value:  # the worker's plain numbers, not NaN
            fields[name] = convert(value)  # type: ignore[arg-type]
        else:
            converted = _converted(name, value)
            if converted is not None:
                fields[name] = converted
    note_of = status.note
    notes: Dict[str, MetricNote] = {}
    for metric in CHIP_METRICS:
        if metric not in fields:
            code = codes.get(metric)
            notes[metric] = NOT_READ if code is None else note_of(code)
    health = Health.UNKNOWN if tick.health is None else _HEALTH.get(tick.health, Health.UNKNOWN)
    return ChipSample(
        identity=chip_identity,
        health=health,
        notes=notes,
        errors=tuple(chip_error(record) for record in tick.error_codes),
        **fields,  # type: ignore[arg-type]
    )


def lost_reason(tick: records.ChipTick) -> Optional[str]:
    """Why the chip is gone, when the library says so: health ``0xFFFFFFFF`` or ``-8008``/``-8007``."""
    if tick.health == records.HEALTH_ABSENT:
        return "DCMI says the device does not exist (health 0xFFFFFFFF): it is gone; check `dmesg`"
    code = tick.codes.get("health")
    if tick.health is None and code in status.GONE_CODES:
        return f"DCMI says the device does not exist ({status.code_text(code)}): it is gone; check `dmesg`"
    return None


def chip_error(record: records.ErrorCodeRecord) -> ChipError:
    """An error code as npu-smi prints it (``80E01801``) with the library's text for it."""
    return ChipError(status.error_code_text(record.code), record.text.strip() or None)


def npu_processes(
    chip_identity: ChipIdentity, found: Tuple[records.ProcessRecord, ...]
) -> Tuple[NpuProcess, ...]:
    """The chip's processes: PID and device memory (bytes → MiB, rounded down as npu-smi does).

    A row with no real PID (0 or negative: a garbled list) is left out; a memory no chip can have
    (past ``MAX_CHIP_MEMORY_MIB``) is ``None``.
    """
    return tuple(
        NpuProcess(
            npu_id=chip_identity.npu_id,
            chip_id=chip_identity.chip_id,
            pid=record.pid,
            npu_memory_mib=_process_mib(record.memory_bytes),
        )
        for record in found
        if record.pid > 0
    )


def _process_mib(memory_bytes: int) -> Optional[int]:
    mib = memory_bytes // 2**20
    return mib if 0 <= mib <= MAX_CHIP_MEMORY_MIB else None


def _field_kinds() -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """The ChipSample fields that hold an ``int`` metric and those that hold a ``float`` one."""
    hints = typing.get_type_hints(ChipSample)
    ints = frozenset(name for name, hint in hints.items() if hint == Optional[int])
    floats = frozenset(name for name, hint in hints.items() if hint == Optional[float])
    return ints & set(CHIP_METRICS), floats & set(CHIP_METRICS)


_INT_FIELDS, _FLOAT_FIELDS = _field_kinds()
#: Each number field's conversion to its own type (``_converted``'s, for plain ints and floats).
_CONVERTERS: Mapping[str, Callable[[float], object]] = {
    **{name: round for name in _INT_FIELDS},
    **{name: float for name in _FLOAT_FIELDS},
}
_VERSION_FIELDS = frozenset(item.name for item in dataclasses.fields(Versions))


def _converted(name: str, value: object) -> Optional[float]:
    """``value`` in the field's own type; ``None`` for a field this model lacks or a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    if name in _INT_FIELDS:
        return round(value)
    if name in _FLOAT_FIELDS:
        return float(value)
    return None
