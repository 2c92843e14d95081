"""Provides the chip-source seam: what any chip backend (npu-smi, later DCMI, a saved capture) hands on.

A ``ChipSource`` reads every chip once per ``read()`` and answers a ``SourceReading``: either a
``ChipReading`` (versions, chips, processes, warnings) or a ``SourceFailure`` (kind, message,
hint, the metric status it gives every blocked metric).  Nothing here names a backend: the
sampler, ``npuwatch check``, the doctor and the detail screen read chips through this seam,
and the snapshot names the source by its ``probe_name`` (``Snapshot.chip_source_report``).

Sources declare what they provide, the way harlequin's adapters declare capabilities
(``provides_details``, ``provides_processes``, ``provides_logic_ids``), and what they are and
read (``source_info``: ``npuwatch.source_info.SourceInfo``, which each reading carries for its
tick and the sampler puts on the snapshot): a consumer asks the declaration, never the
backend's name.  On-demand details (``chip_details``) come back as
plain key/value sections a view can show without knowing which tool printed them
(``npuwatch.chip_details``, apart so that ``npuwatch check`` does not load them).

This module is in the model layer: it imports only ``npuwatch.model``, ``npuwatch.source_info`` and
the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Optional, Protocol, Tuple

from npuwatch.model import CHIP_METRICS, ChipSample, MetricStatus, NpuProcess, Versions
from npuwatch.source_info import SourceInfo, title_for

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails


@dataclass(frozen=True)
class ChipReading:
    """What one good read of a chip source says, whichever backend read it."""

    #: What the source itself reports (npu-smi's header: its own version and the driver's);
    #: the sampler merges it with the install files' versions.
    versions: Versions = field(default_factory=Versions)
    chips: Tuple[ChipSample, ...] = ()
    processes: Tuple[NpuProcess, ...] = ()
    #: True when the source read a process table (so "no process on this chip" is known, not assumed).
    process_table: bool = False
    warnings: Tuple[str, ...] = ()  # what the source could not read cleanly (a damaged row)


@dataclass(frozen=True)
class SourceFailure:
    """Why a chip source gave no reading: what happened, what to do, and what it does to metrics."""

    kind: str  # a stable word, the backend's own: ``timeout``, ``permission``, ``not-found``, ``dcmi`` …
    message: str
    hint: str
    metric_status: MetricStatus = MetricStatus.ERROR  # the status every metric it blocks gets
    exit_code: Optional[int] = None  # the tool's exit code, when a tool ran
    error_code: Optional[int] = None  # the driver's error code (DCMI ``-8005``), when one was given
    output: str = ""  # what the tool printed, for the doctor, --verbose and bug reports

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SourceReading:
    """One read of a source: the reading, or the failure that prevented it, and how long it took."""

    reading: Optional[ChipReading]
    failure: Optional[SourceFailure]
    duration_s: float
    #: Why this reading came from a fallback backend (``auto`` read npu-smi because DCMI failed):
    #: the snapshot's ``backend_note``.  ``None`` for a reading from the chosen backend.
    note: Optional[str] = None
    #: How many times the source restarted its reader process since it was opened (DCMI's worker,
    #: after a hang, a crash or a memory or CPU bound): the ProbeReport's ``restarts``, the
    #: exporter's ``npuwatch_worker_restarts_total``.  ``None``: the source runs no such process.
    restarts: Optional[int] = None
    #: Whose reader process ``restarts`` counts when it is not this reading's source's (``auto``
    #: reading through npu-smi still counts DCMI's worker restarts: ``dcmi``).
    restarts_of: Optional[str] = None
    #: The source that made this reading (or failed to), as it read this tick: whether it read a
    #: process table, each metric whose reading covers more than its chip.  ``auto``'s readings
    #: carry the info of the backend that read.  ``None`` only from a source that declares none.
    source_info: Optional[SourceInfo] = None


class ChipSource(Protocol):
    """Anything that reads every chip once per ``read()``: npu-smi, a saved capture, DCMI.

    ``probe_name`` names the source's ProbeReport in every Snapshot (``npu-smi``; ``dcmi``);
    ``label`` is the Snapshot's ``source`` (``npu-smi``, ``demo:<scenario>``, ``replay:<file>``).
    """

    @property
    def probe_name(self) -> str:
        """The name of the source's ProbeReport (``npu-smi``, ``dcmi``)."""
        ...

    @property
    def label(self) -> str:
        """The Snapshot's ``source``."""
        ...

    @property
    def source_info(self) -> SourceInfo:
        """What this source is and can read (``process_table``: it reads one at all); each reading
        carries it for its tick (``SourceReading.source_info``)."""
        ...

    @property
    def provides_details(self) -> bool:
        """``chip_details`` answers (else it returns ``None``)."""
        ...

    @property
    def provides_processes(self) -> bool:
        """Readings carry the processes on the chips (``ChipReading.process_table``)."""
        ...

    @property
    def provides_logic_ids(self) -> bool:
        """Chips carry their logic IDs (``ChipIdentity.logic_id``), the runtime's device numbers."""
        ...

    def read(self) -> SourceReading:
        """Read the chips once; never raises for an environment problem."""
        ...

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """One chip's on-demand details; ``None`` when the source provides none (``provides_details``)."""
        ...


def declared_info(source: ChipSource) -> SourceInfo:
    """What ``source`` declares (``ChipSource.source_info``); for an object that declares nothing
    (a test's stand-in), its probe name and title reading every metric, and a process table
    when it says it provides one."""
    info = getattr(source, "source_info", None)
    if isinstance(info, SourceInfo):
        return info
    name = source.probe_name
    return SourceInfo(name, source_title(name), bool(source.provides_processes), frozenset(CHIP_METRICS))


def reading_info(source: ChipSource, outcome: SourceReading) -> SourceInfo:
    """The info of the source that made ``outcome``, for its tick: the reading's own
    (``SourceReading.source_info``) or the source's declaration; a process table only when this
    tick's reading says it read one (a failure read none)."""
    info = outcome.source_info if outcome.source_info is not None else declared_info(source)
    read_table = outcome.reading is not None and outcome.reading.process_table
    return info if info.process_table == read_table else replace(info, process_table=read_table)


def source_title(probe_name: str) -> str:
    """A chip source's title from its probe name alone (``source_info.title_for``), for code that
    has no ``SourceInfo`` at hand.  Prefer ``SourceInfo.title`` (``Snapshot.described``,
    ``ChipSource.source_info``): the source's own declaration."""
    return title_for(probe_name)


class NotedSource:
    """``source`` with ``note`` on every reading that has none: why it is not the backend chosen
    (``auto`` reading npu-smi because an untrusted tree's DCMI library was held back)."""

    def __init__(self, source: ChipSource, note: str) -> None:
        self.source = source
        self.note = note

    @property
    def probe_name(self) -> str:
        return self.source.probe_name

    @property
    def label(self) -> str:
        return self.source.label

    @property
    def source_info(self) -> SourceInfo:
        return declared_info(self.source)

    @property
    def provides_details(self) -> bool:
        return self.source.provides_details

    @property
    def provides_processes(self) -> bool:
        return self.source.provides_processes

    @property
    def provides_logic_ids(self) -> bool:
        return self.source.provides_logic_ids

    def read(self) -> SourceReading:
        outcome = self.source.read()
        return outcome if outcome.note is not None else replace(outcome, note=self.note)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        return self.source.chip_details(npu_id, chip_id)

    def close(self) -> None:
        close_source(self.source)


def close_source(source: ChipSource) -> None:
    """End what ``source`` started (DCMI's worker process); nothing for a source that starts nothing."""
    close = getattr(source, "close", None)
    if callable(close):
        close()
