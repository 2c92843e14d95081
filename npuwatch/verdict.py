"""Provides the records of ``npuwatch check``'s verdict: its problems, its chips and the one line.

``npuwatch.health`` makes a verdict (``check_health``); ``/healthz`` makes one from the latest
sample.  A chip's ``ok`` is the judge's level (``npuwatch.judge``): not critical, not unknown.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npuwatch.judge.rules import OK as JUDGED_OK
from npuwatch.judge.rules import Judgement, ReasonKind
from npuwatch.model import Health

SCHEMA = "npuwatch/check/v1"
_LINE_PROBLEMS = 3  # problems named in the one-line verdict; the rest are counted


class Reason(enum.Enum):
    """What a problem is about; stable words for ``--json``."""

    CONFIG = "config"  # npuwatch's own options or environment variables
    DEVICE_NODES = "device-nodes"
    NPU_SMI = "npu-smi"
    #: The DCMI chip source failed (``--backend dcmi``; ``auto`` reads npu-smi then).
    DCMI = "dcmi"
    NO_CHIPS = "no-chips"
    #: An NPU asked for with --devices, or a chip the machine has (PCI, /dev/davinciN), that npu-smi
    #: does not list.
    CHIP_MISSING = "chip-missing"
    CHIP_HEALTH = "chip-health"
    TEMPERATURE = "temperature"
    SELFTEST = "selftest"

    @classmethod
    def of_source(cls, name: str) -> Reason:
        """The reason word of the chip source called ``name`` failing: its own name (``dcmi``,
        ``npu-smi``; ``SourceInfo.name``); ``npu-smi`` for a source without a word of its own."""
        return cls.DCMI if name == cls.DCMI.value else cls.NPU_SMI


@dataclass(frozen=True)
class Problem:
    """One reason the machine is unhealthy: a short message for the line, and what to do."""

    reason: Reason
    message: str
    hint: str = ""
    npu_id: Optional[int] = None
    chip_id: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        """The ``--json`` form."""
        return {
            "reason": self.reason.value,
            "message": self.message,
            "hint": self.hint or None,
            "npu_id": self.npu_id,
            "chip_id": self.chip_id,
        }


@dataclass(frozen=True)
class ChipCheck:
    """One visible chip as the check judged it: the judge's level and reasons (``npuwatch.judge``)."""

    npu_id: int
    chip_id: int
    name: Optional[str]
    health: Health
    temperature_c: Optional[int]
    max_temp_c: float  # the critical limit it was judged against
    error_codes: Tuple[str, ...] = ()  # from `npu-smi info -t health`, asked only when not OK
    judgement: Judgement = JUDGED_OK

    @property
    def label(self) -> str:
        """``NPU 3 chip 0``: always with the chip, so multi-chip cards read the same."""
        return f"NPU {self.npu_id} chip {self.chip_id}"

    @property
    def too_hot(self) -> bool:
        """Whether the chip is at or past its critical temperature (an unknown one is not judged)."""
        return any(r.kind is ReasonKind.TEMPERATURE and r.level.unhealthy for r in self.judgement.reasons)

    @property
    def ok(self) -> bool:
        """Not ``critical`` and not ``unknown``: a warning (hot, a minor alarm) is still healthy."""
        return not self.judgement.level.unhealthy

    def to_dict(self) -> Dict[str, Any]:
        """The ``--json`` form."""
        return {
            "npu_id": self.npu_id,
            "chip_id": self.chip_id,
            "name": self.name,
            "health": self.health.value,
            "temperature_c": self.temperature_c,
            "max_temp_c": self.max_temp_c,
            "error_codes": list(self.error_codes),
            "ok": self.ok,
            "level": self.judgement.level.value,
            "reasons": list(self.judgement.texts),
        }


@dataclass(frozen=True)
class HealthVerdict:
    """The check's answer: healthy or not, why, and the one line that says it."""

    problems: Tuple[Problem, ...] = ()
    chips: Tuple[ChipCheck, ...] = ()
    source: str = "npu-smi"
    selftest: Optional[Mapping[str, Any]] = None  # the self-test's npuwatch/selftest/v1 report when it ran
    duration_s: Optional[float] = None
    notes: Tuple[str, ...] = field(default=())  # parse warnings and the like, for --json
    #: The backend that read the chips (``dcmi`` or ``npu-smi``; ``None``: no chip source ran), and
    #: why it is not the one chosen (``auto`` read npu-smi because DCMI failed): as the snapshot's.
    backend: Optional[str] = None
    backend_note: Optional[str] = None

    @property
    def healthy(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems

    @property
    def exit_code(self) -> int:
        """0 healthy, 1 unhealthy: never 2, which Docker reserves."""
        return 0 if self.healthy else 1

    @property
    def chips_total(self) -> int:
        """The chips judged (those ``--devices`` selects)."""
        return len(self.chips)

    @property
    def chips_ok(self) -> int:
        """The judged chips that are ``OK`` and under their temperature limit."""
        return sum(1 for chip in self.chips if chip.ok)

    @property
    def max_temperature_c(self) -> Optional[int]:
        """The hottest judged chip's temperature, when any is known."""
        known = [chip.temperature_c for chip in self.chips if chip.temperature_c is not None]
        return max(known) if known else None

    @property
    def line(self) -> str:
        """``healthy: 8/8 chips OK, max 61 °C`` or
        ``unhealthy: NPU 3 chip 0 Alarm (80E01801 → restart-business) — 7/8 …``."""
        facts: List[str] = []
        if self.chips:
            facts.append(f"{self.chips_ok}/{self.chips_total} chips OK")
            hottest = self.max_temperature_c
            if hottest is not None:
                facts.append(f"max {hottest} °C")
        if self.selftest is not None and self.healthy:
            warned = self.selftest.get("status") == "warn"
            facts.append("self-test passed with warnings" if warned else "self-test passed")
        if self.healthy:
            return "healthy: " + (", ".join(facts) or "no chip to check")
        named = [p.message for p in self.problems[:_LINE_PROBLEMS]]
        rest = len(self.problems) - len(named)
        if rest:
            named.append(f"+{rest} more")
        return "unhealthy: " + "; ".join(named) + (f" — {', '.join(facts)}" if facts else "")

    @property
    def hint(self) -> Optional[str]:
        """What to do about the first problem that says."""
        return next((p.hint for p in self.problems if p.hint), None)

    def to_dict(self) -> Dict[str, Any]:
        """The ``--json`` document (schema ``npuwatch/check/v1``)."""
        return {
            "schema": SCHEMA,
            "healthy": self.healthy,
            "exit_code": self.exit_code,
            "line": self.line,
            "source": self.source,
            "chips_ok": self.chips_ok,
            "chips_total": self.chips_total,
            "max_temperature_c": self.max_temperature_c,
            "problems": [p.to_dict() for p in self.problems],
            "chips": [c.to_dict() for c in self.chips],
            "selftest": None if self.selftest is None else dict(self.selftest),
            "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
            "notes": list(self.notes),
            "backend": self.backend,
            "backend_note": self.backend_note,
        }
