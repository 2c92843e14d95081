"""Provides the npu-smi chip sources: live `npu-smi info` (NpuSmiSource) and a saved capture (CaptureSource).

Both hand on the seam's backend-neutral records (``npuwatch.chip_source``): a ``ChipReading``
built from the parsed table, or a ``SourceFailure`` built from the explained ``NpuSmiFailure``.
The sampler, ``npuwatch check`` and the doctor read npu-smi only through these.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple, Union

from npuwatch.chip_source import ChipReading, SourceReading
from npuwatch.model import ChipError, ChipIdentity, Health
from npuwatch.probes.npu_smi import (
    FailureKind,
    NpuSmi,
    NpuSmiError,
    NpuSmiFailure,
    NpuSmiOutput,
    classify,
)
from npuwatch.probes.npu_smi.table import TABLE_METRICS
from npuwatch.probes.runner import RunResult
from npuwatch.source_info import SourceInfo

if TYPE_CHECKING:
    from npuwatch.chip_details import ChipDetails

#: The name of npu-smi's ProbeReport in every Snapshot (``Snapshot.chip_source_report``).
PROBE_NAME = "npu-smi"
#: What npu-smi reads: the ``info`` table's columns (power, temperature, AI Core or NPU
#: utilisation, HBM or DDR, huge pages) and its process table.  None of the driver-only metrics
#: (clocks, AI CPU, vector/cube, bandwidth, voltage, ECC): a surface that needs one of those
#: says it needs a source that reads it.  A 310P's MCU board power (``-t common``:
#: ``reports.CommonReport.board_power_w``) shows on the detail screen only, never as a chip's
#: ``power_w`` (the table prints none for a 310P), so npu-smi has no card-scope metric.
#: ``tests/core/test_source_info.py`` holds this to what npu-smi fills on every demo: the metrics
#: its table prints (``table.TABLE_METRICS``), and a process table.
SOURCE_INFO = SourceInfo(PROBE_NAME, "npu-smi", True, TABLE_METRICS)
#: How often the slow ``npu-smi info -m`` mapping (logic IDs) is asked again.
MAPPING_REFRESH_S = 300.0
#: How often the error codes of a chip that stays not OK are asked again (a new fault may add one).
ERRORS_REFRESH_S = 60.0
#: How many identities with their logic IDs are remembered (a machine has at most a few hundred chips).
_MAX_IDENTITIES = 4096
#: Under a time budget, a query needs at least this much of it left to be worth starting.
_MIN_QUERY_S = 0.05


class NpuSmiSource:
    """Live data: one ``npu-smi info`` call per read (the only per-tick subprocess).

    The logic IDs, which the table does not print, come from ``npu-smi info -m``: a slow
    fact, asked once and then every ``MAPPING_REFRESH_S``, and only after a good table
    (``logic_ids=False``: never, as ``npuwatch check`` and the doctor read).  Chips not OK get
    their error codes (``with_error_codes``); ``errors_budget_s`` bounds those queries together.
    """

    probe_name = PROBE_NAME
    source_info = SOURCE_INFO
    provides_details = True
    provides_processes = SOURCE_INFO.process_table

    def __init__(
        self,
        npu_smi: NpuSmi,
        label: str = "npu-smi",
        clock: Callable[[], float] = time.monotonic,
        *,
        logic_ids: bool = True,
        error_codes: bool = True,
        errors_budget_s: Optional[float] = None,
    ) -> None:
        self.npu_smi = npu_smi
        self.label = label
        self.provides_logic_ids = logic_ids
        self.error_codes = error_codes
        self.errors_budget_s = errors_budget_s
        self._clock = clock
        self._mapping: Optional[Tuple[Dict[Tuple[int, int], int], float]] = None
        # Each printed identity with its logic ID set, built once per mapping (the table's
        # identities repeat every tick).
        self._with_ids: Dict[ChipIdentity, ChipIdentity] = {}
        # Per chip not OK: the health its codes were asked for, when, and the codes.
        self._errors: Dict[Tuple[int, int], Tuple[Health, float, Tuple[ChipError, ...]]] = {}
        #: The last ``npu-smi info`` call as it came: its output, or the explained failure (the
        #: doctor explains raw failures and reads the raw text).
        self.last_call: Union[NpuSmiOutput, NpuSmiFailure, None] = None

    def read(self) -> SourceReading:
        return with_info(self._read())

    def _read(self) -> SourceReading:
        started = time.monotonic()
        try:
            output = self.npu_smi.info()
        except NpuSmiError as exc:
            self.last_call = exc.failure
            return SourceReading(None, exc.failure.to_source_failure(), time.monotonic() - started)
        self.last_call = output
        from npuwatch.probes.npu_smi.table import parse_info  # not imported until npu-smi is read

        table = parse_info(output.text)
        if table.empty:
            # No table at all (junk, a truncated header): a failed read, so the chips PCI shows stay.
            return SourceReading(None, no_table(output.text).to_source_failure(), output.duration_s)
        reading = table.to_reading()
        if output.note:  # not npu-smi's answer now (a tree's saved output): the snapshot says so
            reading = replace(reading, warnings=(*reading.warnings, output.note))
        if self.provides_logic_ids:
            reading = self._with_logic_ids(reading)
        if self.error_codes:
            reading = self.with_error_codes(reading, self.errors_budget_s)
        return SourceReading(reading, None, output.duration_s)

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """``npu-smi info -t board|usages|common|health`` for one chip, one query after another."""
        from npuwatch.probes.npu_smi.details import fetch_chip_details  # the report parsers, on demand

        return fetch_chip_details(self.npu_smi, npu_id, chip_id).to_chip_details()

    def with_error_codes(self, reading: ChipReading, budget_s: Optional[float] = None) -> ChipReading:
        """Chips not OK get their error codes from ``npu-smi info -t health``: asked when a chip
        turns not OK (or changes state), then every ``ERRORS_REFRESH_S``; healthy chips cost nothing.

        ``budget_s`` bounds all the queries together (each gets what is left of it, and a query
        that fails stops the rest: a driver that fails one fails the next); ``None``: each query
        has the ``NpuSmi``'s own timeout.
        """
        sick = [chip for chip in reading.chips if chip.health is not Health.OK]
        keys = {chip.identity.key for chip in sick}
        self._errors = {key: known for key, known in self._errors.items() if key in keys}
        if not sick:
            return reading
        from npuwatch.probes.npu_smi.details import ask_chip_errors  # the report parsers, only when needed

        now = self._clock()
        deadline = None if budget_s is None else time.monotonic() + budget_s
        for chip in sick:
            key = chip.identity.key
            known = self._errors.get(key)
            if known is not None and known[0] is chip.health and now - known[1] < ERRORS_REFRESH_S:
                continue
            npu_smi = self.npu_smi
            if deadline is not None:
                left_s = min(npu_smi.timeout_s, deadline - time.monotonic())
                if left_s <= _MIN_QUERY_S:
                    break
                npu_smi = npu_smi.with_timeout(left_s)
            errors, failure = ask_chip_errors(npu_smi, *key)
            self._errors[key] = (chip.health, now, errors)
            if failure is not None and deadline is not None:
                break
        chips = tuple(
            replace(chip, errors=self._errors[chip.identity.key][2])
            if chip.identity.key in self._errors
            else chip
            for chip in reading.chips
        )
        return replace(reading, chips=chips)

    def _with_logic_ids(self, reading: ChipReading) -> ChipReading:
        now = self._clock()
        if self._mapping is None or now - self._mapping[1] >= MAPPING_REFRESH_S:
            self._mapping = (self._logic_ids(), now)
            self._with_ids = {}
        ids = self._mapping[0]
        if not ids:
            return reading
        chips = tuple(
            replace(chip, identity=self._with_id(chip.identity, ids[chip.identity.key]))
            if chip.identity.key in ids
            else chip
            for chip in reading.chips
        )
        return replace(reading, chips=chips)

    def _with_id(self, identity: ChipIdentity, logic_id: int) -> ChipIdentity:
        known = self._with_ids.get(identity)
        if known is None or known.logic_id != logic_id:
            if len(self._with_ids) >= _MAX_IDENTITIES:
                self._with_ids = {}
            known = self._with_ids[identity] = replace(identity, logic_id=logic_id)
        return known

    def _logic_ids(self) -> Dict[Tuple[int, int], int]:
        from npuwatch.probes.npu_smi.lists import parse_mapping

        try:
            mapping = parse_mapping(self.npu_smi.call(("info", "-m")).text)
        except NpuSmiError:  # older drivers or restricted users: logic IDs stay unknown
            return {}
        return {
            (row.npu_id, row.chip_id): row.chip_logic_id
            for row in mapping.chips
            if row.chip_id is not None and row.chip_logic_id is not None
        }


def no_table(text: str, exit_code: Optional[int] = 0) -> NpuSmiFailure:
    """The failure of an ``npu-smi info`` that exited 0 but printed no chip table."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    shown = first if len(first) <= 80 else first[:79] + "…"
    return NpuSmiFailure(
        FailureKind.FAILED,
        f"npu-smi printed no chip table: {shown!r}" if shown else "npu-smi printed no chip table",
        "run `npu-smi info` by hand: it should print the chip table; then run `npuwatch doctor`",
        exit_code=exit_code,
        output=text[:4096],
    )


def with_info(outcome: SourceReading) -> SourceReading:
    """``outcome`` carrying npu-smi's ``SourceInfo`` for its tick: a process table when the
    table printed one (a layout or a failure without one: none)."""
    reading = outcome.reading
    read_table = reading is not None and reading.process_table
    return replace(outcome, source_info=SOURCE_INFO.for_tick(read_table))


class CaptureUsageError(ValueError):
    """The ``--replay`` file is not a saved ``npu-smi info`` output (the CLI's exit 64)."""


class CaptureSource:
    """A saved ``npu-smi info`` text, parsed exactly as the live path parses it (``--replay``).

    It reads once and answers the same reading every time; it has no npu-smi to ask details,
    error codes or logic IDs of.
    """

    probe_name = PROBE_NAME
    source_info = SOURCE_INFO
    provides_details = False
    provides_processes = SOURCE_INFO.process_table
    provides_logic_ids = False

    def __init__(self, path: Path, text: Optional[str] = None) -> None:
        """``text``: the capture already read (``npuwatch check --replay`` reads the file itself)."""
        self.path = path
        self.label = f"replay:{path.name}"
        self._text = text
        self._reading: Optional[SourceReading] = None

    @classmethod
    def open(cls, path: Path) -> CaptureSource:
        """Read ``path`` now; ``CaptureUsageError`` when it holds neither an ``npu-smi info``
        table nor an npu-smi error text (a binary file, some other text)."""
        source = cls(path)
        outcome = source.read()
        failure = outcome.failure
        if failure is not None and failure.kind != FailureKind.NOT_FOUND.value:
            return source  # a saved npu-smi error text: explained as it would be live
        reading = outcome.reading
        if reading is not None and (reading.chips or reading.versions.npu_smi):
            return source
        if failure is not None:
            raise CaptureUsageError(f"--replay {path}: {failure.message}")
        raise CaptureUsageError(
            f"--replay {path}: neither a recording made by `npuwatch record` (NDJSON, or gzip) "
            "nor a saved `npu-smi info` output (no chip table in it)"
        )

    def read(self) -> SourceReading:
        if self._reading is None:
            self._reading = with_info(self._load())
        return self._reading

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        """None: a capture has no npu-smi to ask."""
        return None

    def _load(self) -> SourceReading:
        started = time.monotonic()
        text = self._text
        if text is None:
            try:
                text = self.path.read_bytes().decode("utf-8", errors="replace")
            except OSError as exc:
                failure = NpuSmiFailure(
                    FailureKind.NOT_FOUND,
                    f"cannot read the capture {self.path}: {exc.strerror or exc}",
                    "check the path given to --replay",
                )
                return SourceReading(None, failure.to_source_failure(), time.monotonic() - started)
        # A saved error text (`dcmi module initialize failed. ret is -8005`) is explained
        # exactly as it would be live.
        explained = classify(RunResult(("npu-smi", "info"), 0, text, "", 0.0))
        if explained is not None:
            return SourceReading(None, explained.to_source_failure(), time.monotonic() - started)
        from npuwatch.probes.npu_smi.table import parse_info

        return SourceReading(parse_info(text).to_reading(), None, time.monotonic() - started)
