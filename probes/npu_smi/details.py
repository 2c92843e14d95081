"""Provides fetch_chip_details(): one chip's npu-smi board, usages, common and health reports, on demand.

``NpuSmiSource.chip_details`` hands them on as the seam's plain ``ChipDetails`` (key/value
sections, ``NpuSmiDetails.to_chip_details``); the typed reports stay here for npu-smi's own use.

The detail screen shows everything ``npu-smi info -t board|usages|common|health`` prints for one
chip.  These are slow, per-chip queries, so they run only when asked (never every tick), one
after another (npu-smi calls must never overlap), each under the ``NpuSmi``'s own timeout.

Which form of each query is asked:

* ``usages``, ``common``, ``health``: always chip-level, ``-i N -c M``, single-chip NPUs
  included.  It is the only form that names one chip of a multi-chip card (A3 ×2, 310P Duo ×2,
  310 ×4), Huawei's own example asks a single-chip 910 that way (``-c 0``, capture 013), and it
  costs the same.  The answer may hold only that chip's keys (013) or ``Chip ID`` blocks (the
  matching one is taken).  Should an npu-smi refuse ``-c`` for a type (``Error parameter of
  -c``), the card-level query (the 012/017/030/031 shapes) is asked once instead and the
  chip's block picked out of it.
* ``board``: both levels, because they describe different things and neither replaces the
  other: card-level ``-i N`` (010, 079: product, serial, PCI IDs, chip count) and chip-level
  ``-i N -c M`` (011, 065: chip type and name, die IDs, position).  ``NpuSmiDetails.board``
  merges them.

A query that times out stops the ones after it (they are reported as not asked): a hung driver
would otherwise hold the sampler, which waits for this, for one timeout per query.  Nothing
here raises for an environment problem; every failure is an explained ``NpuSmiFailure``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Generic, List, Optional, Sequence, Tuple, TypeVar

from npuwatch.chip_details import ChipDetails, DetailSection
from npuwatch.model import ChipError
from npuwatch.probes.npu_smi import FailureKind, NpuSmi, NpuSmiError, NpuSmiFailure
from npuwatch.probes.npu_smi.kv import KeyValueBlock, KeyValueReport, parse_key_values
from npuwatch.probes.npu_smi.reports import (
    BoardInfo,
    ChipCommon,
    ChipHealth,
    ChipUsages,
    CommonReport,
    HealthReport,
    UsagesReport,
    parse_board,
    parse_common,
    parse_health,
    parse_usages,
)

R = TypeVar("R")
C = TypeVar("C", ChipUsages, ChipCommon, ChipHealth)
K = TypeVar("K", ChipUsages, ChipCommon, ChipHealth, KeyValueBlock)
Fields = Tuple[Tuple[str, str], ...]


@dataclass(frozen=True)
class DetailQuery(Generic[R]):
    """One ``npu-smi info -t KIND`` query: its parsed report or why there is none, and every raw field."""

    kind: str  # the npu-smi type: board, usages, common, health
    args: Tuple[str, ...]  # what was run after ``npu-smi`` (the card-level retry, if there was one)
    report: Optional[R] = None
    failure: Optional[NpuSmiFailure] = None
    fields: Fields = ()  # the chip's key/values as printed, NPU-level and MCU ones included
    duration_s: Optional[float] = None  # None when it was not asked
    warnings: Tuple[str, ...] = ()

    @property
    def command(self) -> str:
        """The command line, for display: ``npu-smi info -t board -i 0 -c 0``."""
        return " ".join(("npu-smi", *self.args))

    def to_section(self) -> DetailSection:
        """This query as the seam's plain section (what the detail screen shows)."""
        failure = None if self.failure is None else self.failure.message
        return DetailSection(self.command, self.fields, failure, self.duration_s)


@dataclass(frozen=True)
class NpuSmiDetails:
    """Everything npu-smi's per-chip queries report about one chip, fetched at ``taken_at``."""

    npu_id: int
    chip_id: int
    taken_at: datetime
    board_card: DetailQuery[BoardInfo]
    board_chip: DetailQuery[BoardInfo]
    usages: DetailQuery[UsagesReport]
    common: DetailQuery[CommonReport]
    health: DetailQuery[HealthReport]

    @property
    def queries(self) -> Tuple[DetailQuery[Any], ...]:
        """Every query in the order it ran."""
        return (self.board_card, self.board_chip, self.usages, self.common, self.health)

    @property
    def duration_s(self) -> float:
        """How long all the queries took together."""
        return sum(query.duration_s or 0.0 for query in self.queries)

    def to_chip_details(self) -> ChipDetails:
        """These reports as the seam's plain ``ChipDetails``: one key/value section per query."""
        sections = tuple(query.to_section() for query in self.queries)
        return ChipDetails(self.npu_id, self.chip_id, self.taken_at, sections)

    @property
    def board(self) -> Optional[BoardInfo]:
        """Card- and chip-level board facts in one record (the chip-level value wins where both print one)."""
        card, chip = self.board_card.report, self.board_chip.report
        if card is None or chip is None:
            return chip or card
        skip = {"fields", "warnings", "is_mcu"}
        merged: Dict[str, Any] = {}
        for item in fields(BoardInfo):
            if item.name not in skip:
                value = getattr(chip, item.name)
                merged[item.name] = value if value is not None else getattr(card, item.name)
        return replace(
            chip, **merged, fields={**card.fields, **chip.fields}, warnings=card.warnings + chip.warnings
        )

    @property
    def chip_usages(self) -> Optional[ChipUsages]:
        """This chip's ``-t usages`` record, if it was read."""
        report = self.usages.report
        return None if report is None else self._own(report.chips)

    @property
    def chip_common(self) -> Optional[ChipCommon]:
        """This chip's ``-t common`` record, if it was read."""
        report = self.common.report
        return None if report is None else self._own(report.chips)

    @property
    def chip_health(self) -> Optional[ChipHealth]:
        """This chip's ``-t health`` record, if it was read."""
        report = self.health.report
        return None if report is None else self._own(report.chips)

    def _own(self, records: Sequence[C]) -> Optional[C]:
        # A chip-level answer may print no NPU ID or Chip ID (013): the record is still this chip's.
        found = _pick(records, self.chip_id)
        return None if found is None else replace(found, npu_id=self.npu_id, chip_id=self.chip_id)


def fetch_chip_details(npu_smi: NpuSmi, npu_id: int, chip_id: int) -> NpuSmiDetails:
    """Run the detail screen's queries for one chip, one after another; never raises for the machine."""
    session = _Session(npu_smi, npu_id, chip_id)
    return NpuSmiDetails(
        npu_id=npu_id,
        chip_id=chip_id,
        taken_at=datetime.now(timezone.utc),
        board_card=session.ask("board", parse_board, chip_level=False),
        board_chip=session.ask("board", parse_board, chip_level=True, card_retry=False),
        usages=session.ask("usages", parse_usages, chip_level=True),
        common=session.ask("common", parse_common, chip_level=True),
        health=session.ask("health", parse_health, chip_level=True),
    )


def fetch_chip_errors(npu_smi: NpuSmi, npu_id: int, chip_id: int) -> Tuple[ChipError, ...]:
    """The error codes ``npu-smi info -t health`` gives one chip, with their meanings; ``()`` when
    it gives none or fails.  The detail screen's own query (card-level when ``-c`` is refused)."""
    return ask_chip_errors(npu_smi, npu_id, chip_id)[0]


def ask_chip_errors(
    npu_smi: NpuSmi, npu_id: int, chip_id: int
) -> Tuple[Tuple[ChipError, ...], Optional[NpuSmiFailure]]:
    """``fetch_chip_errors``, and the failure of the query when it failed (a budget stops there)."""
    query = _Session(npu_smi, npu_id, chip_id).ask("health", parse_health, chip_level=True)
    found = None if query.report is None else _pick(query.report.chips, chip_id)
    return (() if found is None else chip_errors(found)), query.failure


def chip_errors(health: ChipHealth) -> Tuple[ChipError, ...]:
    """A health record's codes, each with its line of Error Information (npu-smi prints one per code)."""
    meanings = [text for text in health.error_information if text.upper() != "NA"]
    codes = [code for code in health.error_codes if code.upper() != "NA"]
    return tuple(
        ChipError(code, meanings[index] if index < len(meanings) else None)
        for index, code in enumerate(codes)
    )


class _Session:
    """The queries of one fetch: remembers a timeout so later queries are not asked."""

    def __init__(self, npu_smi: NpuSmi, npu_id: int, chip_id: int) -> None:
        self.npu_smi = npu_smi
        self.npu_id = npu_id
        self.chip_id = chip_id
        self.stalled: Optional[str] = None  # the command that timed out

    def ask(
        self, kind: str, parse: Callable[[str], R], *, chip_level: bool, card_retry: bool = True
    ) -> DetailQuery[R]:
        chip = self.chip_id if chip_level else None
        args = _args(kind, self.npu_id, chip)
        if self.stalled is not None:
            return DetailQuery(kind, args, failure=_not_asked(self.stalled))
        started = time.monotonic()
        text, failure = self._call(kind, chip)
        if (
            chip is not None
            and card_retry
            and failure is not None
            and failure.kind is FailureKind.BAD_ARGUMENT
        ):
            args = _args(kind, self.npu_id, None)
            text, failure = self._call(kind, None)
        duration_s = time.monotonic() - started
        if failure is not None:
            if failure.kind is FailureKind.TIMEOUT:
                self.stalled = " ".join(("npu-smi", *args))
            return DetailQuery(kind, args, failure=failure, duration_s=duration_s)
        raw = parse_key_values(text)
        # A card-level board is about the card: its one block is read whatever its Chip ID.
        block = _block(raw, chip if kind == "board" else self.chip_id)
        warnings = list(raw.warnings)
        if block is None:
            warnings.append(f"npu-smi printed no block for chip {self.chip_id}")
        return DetailQuery(kind, args, parse(text), None, _fields(raw, block), duration_s, tuple(warnings))

    def _call(self, kind: str, chip: Optional[int]) -> Tuple[str, Optional[NpuSmiFailure]]:
        try:
            return self.npu_smi.query(kind, self.npu_id, chip).text, None
        except NpuSmiError as exc:
            return "", exc.failure


def _args(kind: str, npu_id: int, chip_id: Optional[int]) -> Tuple[str, ...]:
    chip = ("-c", str(chip_id)) if chip_id is not None else ()
    return ("info", "-t", kind, "-i", str(npu_id), *chip)


def _not_asked(stalled: str) -> NpuSmiFailure:
    return NpuSmiFailure(
        FailureKind.TIMEOUT,
        f"not asked: `{stalled}` timed out just before, so npu-smi is hung or very slow",
        "check `dmesg` for davinci/devdrv errors and `npuwatch doctor`; open the details again "
        "once npu-smi answers",
    )


def _pick(records: Sequence[K], chip_id: Optional[int]) -> Optional[K]:
    """The record of ``chip_id``; a lone record without a Chip ID (013) is that chip's."""
    if chip_id is None:
        return records[0] if records else None
    for record in records:
        if record.chip_id == chip_id:
            return record
    if len(records) == 1 and records[0].chip_id is None:
        return records[0]
    return None


def _block(report: KeyValueReport, chip_id: Optional[int]) -> Optional[KeyValueBlock]:
    return _pick(report.chips, chip_id)


def _fields(report: KeyValueReport, block: Optional[KeyValueBlock]) -> Fields:
    """NPU-level keys, the chip's own keys, then the card MCU's (``MCU Temperature(C)``)."""
    pairs: List[Tuple[str, str]] = list(report.header.items())
    if block is not None:
        if block.chip_id is not None:
            pairs.append(("Chip ID", str(block.chip_id)))
        pairs.extend(block.fields.items())
    for mcu in report.mcus:
        pairs.extend((f"MCU {key}", value) for key, value in mcu.fields.items() if key != "Chip Name")
    return tuple(pairs)
