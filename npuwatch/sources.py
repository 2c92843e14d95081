"""Provides the chip-data sources a Sampler reads: live npu-smi, or a captured npu-smi text."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Dict, Optional, Protocol, Tuple

from npuwatch.chip_details import fetch_chip_errors
from npuwatch.model import ChipError, Health
from npuwatch.probes.npu_smi import FailureKind, NpuSmi, NpuSmiError, NpuSmiFailure, classify
from npuwatch.probes.npu_smi.lists import parse_mapping
from npuwatch.probes.npu_smi.table import InfoTable, parse_info
from npuwatch.probes.runner import RunResult

#: How often the slow ``npu-smi info -m`` mapping (logic IDs) is asked again.
MAPPING_REFRESH_S = 300.0
#: How often the error codes of a chip that stays not OK are asked again (a new fault may add one).
ERRORS_REFRESH_S = 60.0


@dataclass(frozen=True)
class SourceReading:
    """One read of a source: the parsed table, or the failure that prevented it."""

    table: Optional[InfoTable]
    failure: Optional[NpuSmiFailure]
    duration_s: float


class ChipSource(Protocol):
    """Anything that yields one ``npu-smi info`` table per call."""

    label: str

    def read(self) -> SourceReading:
        """Read the chips once; never raises for an environment problem."""
        ...


class NpuSmiSource:
    """Live data: one ``npu-smi info`` call per read (the only per-tick subprocess).

    The logic IDs, which the table does not print, come from ``npu-smi info -m``: a slow
    fact, asked once and then every ``MAPPING_REFRESH_S``, and only after a good table.
    """

    def __init__(
        self, npu_smi: NpuSmi, label: str = "npu-smi", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.npu_smi = npu_smi
        self.label = label
        self._clock = clock
        self._mapping: Optional[Tuple[Dict[Tuple[int, int], int], float]] = None
        # Per chip not OK: the health its codes were asked for, when, and the codes.
        self._errors: Dict[Tuple[int, int], Tuple[Health, float, Tuple[ChipError, ...]]] = {}

    def read(self) -> SourceReading:
        started = time.monotonic()
        try:
            output = self.npu_smi.info()
        except NpuSmiError as exc:
            return SourceReading(None, exc.failure, time.monotonic() - started)
        parsed = parse_info(output.text)
        if not parsed.chips and not parsed.npu_smi_version:
            # No table at all (junk, a truncated header): a failed read, so the chips PCI shows stay.
            return SourceReading(None, no_table(output.text), output.duration_s)
        table = self._with_errors(self._with_logic_ids(parsed))
        return SourceReading(table, None, output.duration_s)

    def _with_errors(self, table: InfoTable) -> InfoTable:
        """Chips not OK get their error codes from ``npu-smi info -t health``: asked when a chip
        turns not OK (or changes state), then every ``ERRORS_REFRESH_S``; healthy chips cost nothing."""
        sick = [chip for chip in table.chips if chip.health is not Health.OK]
        keys = {chip.identity.key for chip in sick}
        self._errors = {key: known for key, known in self._errors.items() if key in keys}
        if not sick:
            return table
        now = self._clock()
        for chip in sick:
            key = chip.identity.key
            known = self._errors.get(key)
            if known is None or known[0] is not chip.health or now - known[1] >= ERRORS_REFRESH_S:
                self._errors[key] = (chip.health, now, fetch_chip_errors(self.npu_smi, *key))
        chips = tuple(
            replace(chip, errors=self._errors[chip.identity.key][2])
            if chip.identity.key in self._errors
            else chip
            for chip in table.chips
        )
        return replace(table, chips=chips)

    def _with_logic_ids(self, table: InfoTable) -> InfoTable:
        now = self._clock()
        if self._mapping is None or now - self._mapping[1] >= MAPPING_REFRESH_S:
            self._mapping = (self._logic_ids(), now)
        ids = self._mapping[0]
        if not ids:
            return table
        chips = tuple(
            replace(chip, identity=replace(chip.identity, logic_id=ids[chip.identity.key]))
            if chip.identity.key in ids
            else chip
            for chip in table.chips
        )
        return replace(table, chips=chips)

    def _logic_ids(self) -> Dict[Tuple[int, int], int]:
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


class CaptureUsageError(ValueError):
    """The ``--replay`` file is not a saved ``npu-smi info`` output (the CLI's exit 64)."""


class CaptureSource:
    """A saved ``npu-smi info`` text, parsed exactly as the live path parses it (``--replay``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = f"replay:{path.name}"
        self._reading: Optional[SourceReading] = None

    @classmethod
    def open(cls, path: Path) -> CaptureSource:
        """Read ``path`` now; ``CaptureUsageError`` when it holds neither an ``npu-smi info``
        table nor an npu-smi error text (a binary file, some other text)."""
        source = cls(path)
        reading = source.read()
        if reading.failure is not None and reading.failure.kind is not FailureKind.NOT_FOUND:
            return source  # a saved npu-smi error text: explained as it would be live
        table = reading.table
        if table is not None and (table.chips or table.npu_smi_version):
            return source
        if reading.failure is not None:
            raise CaptureUsageError(f"--replay {path}: {reading.failure.message}")
        raise CaptureUsageError(
            f"--replay {path}: neither a recording made by `npuwatch record` (NDJSON, or gzip) "
            "nor a saved `npu-smi info` output (no chip table in it)"
        )

    def read(self) -> SourceReading:
        if self._reading is None:
            self._reading = self._load()
        return self._reading

    def _load(self) -> SourceReading:
        started = time.monotonic()
        try:
            text = self.path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            failure = NpuSmiFailure(
                FailureKind.NOT_FOUND,
                f"cannot read the capture {self.path}: {exc.strerror or exc}",
                "check the path given to --replay",
            )
            return SourceReading(None, failure, time.monotonic() - started)
        # A saved error text (`dcmi module initialize failed. ret is -8005`) is explained
        # exactly as it would be live.
        explained = classify(RunResult(("npu-smi", "info"), 0, text, "", 0.0))
        if explained is not None:
            return SourceReading(None, explained, time.monotonic() - started)
        return SourceReading(parse_info(text), None, time.monotonic() - started)
