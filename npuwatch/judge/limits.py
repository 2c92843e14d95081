"""Provides the judge's tunable thresholds; the per-family limits are the chip-family table's.

Temperature limits, rated power, shared-memory SoCs and idle memory are rows of
``npuwatch.chip_families`` (one row per family, found by PCI ID or chip name); the README's
limits table is written from it (``tests/core/test_judge.py`` keeps them equal).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, NamedTuple, Optional, Tuple

from npuwatch.chip_families import CRITICAL_OVER_C, ChipFamily, family_of
from npuwatch.chip_families import idle_allowance_mib as family_idle_allowance_mib
from npuwatch.model import Snapshot
from npuwatch.source_info import SCOPE_CARD, SCOPE_CHIP


def limits_for(model_name: Optional[str]) -> ChipFamily:
    """The family row of a chip a source names ``model_name`` (``chip_families.family_of``);
    ``chip_families.OTHER`` when none matches."""
    return family_of(model_name)


class PowerRating(NamedTuple):
    """What a chip's power reading is compared with: a rating and what it covers."""

    watts: Optional[float]  # None: none published (views show watts without a ratio)
    scope: str  # ``chip``, or ``card``: the reading is the whole card's (a 310P Duo's board power)


def power_rating(model_name: Optional[str], scope: str = SCOPE_CHIP, chips_on_card: int = 1) -> PowerRating:
    """The rating a power reading of ``scope`` on a chip named ``model_name`` compares with: the
    card's rating when the source or the family says the reading is the card's (an Atlas 300I Duo's
    board power with its 150 W, never one chip's 72 W).  The one rule of the throttle judge, the
    power bar and the detail screen."""
    family = family_of(model_name)
    if scope == SCOPE_CARD or family.power_scope == SCOPE_CARD:
        return PowerRating(family.rated_power_for_w(SCOPE_CARD, chips_on_card), SCOPE_CARD)
    return PowerRating(family.rated_power_w, SCOPE_CHIP)


def power_ratings(snapshot: Snapshot) -> Dict[Tuple[int, int], PowerRating]:
    """Every chip's ``power_rating`` in ``snapshot``: the scope its source gave the reading, and
    the chips its card carries (the chips listed under one NPU ID)."""
    on_card = Counter(chip.identity.npu_id for chip in snapshot.chips)
    described = snapshot.described
    return {
        chip.identity.key: power_rating(
            chip.identity.name,
            described.scope_of(chip.identity.key, "power_w"),
            on_card[chip.identity.npu_id],
        )
        for chip in snapshot.chips
    }


@dataclass(frozen=True)
class Thresholds:
    """The tunable part of the rules; the defaults are what every surface uses.

    ``temperature_warning_c`` / ``temperature_critical_c`` replace every model's row when set
    (``npuwatch check --max-temp`` sets the critical one).
    """

    temperature_warning_c: Optional[float] = None
    temperature_critical_c: Optional[float] = None
    #: What an idle chip may hold when its family has no measured idle figure (the family
    #: table's ``idle_memory_mib``): max(floor, total × fraction).  Our default.
    hbm_idle_floor_mib: int = 4096
    hbm_idle_fraction: float = 1 / 16
    #: Memory counts as held with no process when it exceeds the idle allowance by this much.
    hbm_held_min_mib: int = 2048
    #: The workload judge's (``npuwatch.judge.workload``): what each decides is ``WORKLOAD_ROWS``.
    #: A signal that hovers at a threshold enters at one value and leaves at another (``_exit``).
    aicore_low_percent: float = 30.0
    aicore_low_exit_percent: float = 20.0
    aicore_busy_percent: float = 70.0
    aicore_busy_exit_percent: float = 60.0
    aicore_idle_percent: float = 5.0
    aicore_idle_exit_percent: float = 10.0
    hbm_bandwidth_high_percent: float = 70.0
    hbm_bandwidth_exit_percent: float = 60.0
    aicpu_busy_percent: float = 50.0
    aicpu_busy_exit_percent: float = 40.0
    host_busy_percent: float = 80.0
    host_busy_exit_percent: float = 60.0
    host_loader_percent: float = 150.0
    host_saturated_percent: float = 90.0
    host_saturated_exit_percent: float = 75.0
    active_window_s: float = 60.0
    workload_window_s: float = 10.0
    settle_samples: int = 2
    settle_s: float = 1.0
    held_settle_samples: int = 4
    held_settle_s: float = 5.0
    throttle_freq_margin: float = 0.05
    throttle_freq_exit_margin: float = 0.02
    throttle_near_limit_c: float = 5.0
    throttle_power_share: float = 0.95
    throttle_unreported_margin: float = 0.15
    throttle_settle_samples: int = 3
    throttle_window_s: float = 30.0
    throttle_clear_s: float = 15.0
    #: A chip source slower than this per read is worth a warning (the driver is busy).
    source_slow_s: float = 2.0
    #: Where a usage bar turns amber and red (our defaults): memory at 80 % and 95 % of its
    #: total, power at 90 % of the model's rating.  A full HBM (frameworks reserve it) or a chip at
    #: its rated power is not a fault, so these colour the bar, never the chip's level.
    memory_busy_share: float = 0.8
    memory_full_share: float = 0.95
    power_high_share: float = 0.9
    #: A link below its maximum speed counts against a chip whose AI Core (NPU Util on the 950)
    #: is at or above this; below it the chip is idle and a slow link is link power saving (PCIe
    #: ASPM/L1 and lower speeds at idle are by design).  Our default.
    link_busy_aicore_percent: float = 10.0

    def temperature_limits_c(self, model_name: Optional[str]) -> Tuple[float, float]:
        """(warning, critical) in °C for a chip npu-smi names ``model_name``: the model's row, or
        the overrides (a warning set alone keeps critical 10 °C above it; a critical set alone
        pulls the warning down to it when lower)."""
        row = family_of(model_name)
        warning, critical = row.temperature_warning_c, row.temperature_critical_c
        if self.temperature_warning_c is not None:
            warning = self.temperature_warning_c
            critical = warning + CRITICAL_OVER_C
        if self.temperature_critical_c is not None:
            critical = self.temperature_critical_c
            warning = min(warning, critical)
        return warning, critical

    def idle_allowance_mib(self, total_mib: int, family: Optional[ChipFamily] = None) -> int:
        """What an idle chip with ``total_mib`` of memory may hold: its family's measured idle
        figure (``chip_families.idle_allowance_mib``) when ``family`` is given and has one, else
        max(floor, total × fraction)."""
        measured = None if family is None else family_idle_allowance_mib(family, total_mib)
        if measured is not None:
            return measured
        return int(max(self.hbm_idle_floor_mib, total_mib * self.hbm_idle_fraction))


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class ThresholdRow:
    """One workload threshold as the README states it: what it decides and where it comes from."""

    name: str  # a field of ``Thresholds``
    unit: str
    decides: str
    source: str = "our default"


#: The workload judge's thresholds (``npuwatch.judge.workload``); the README's "What is my NPU
#: limited by?" table is written from these rows and ``DEFAULT_THRESHOLDS``
#: (``tests/core/test_workload_readme.py`` keeps them equal).  Huawei publishes no such figures.
WORKLOAD_ROWS: Tuple[ThresholdRow, ...] = (
    ThresholdRow(
        "aicore_low_percent",
        "%",
        "AI Core at or above it: compute-bound (busy); below it the class says what holds the chip back",
    ),
    ThresholdRow("aicore_low_exit_percent", "%", "… a busy chip stays busy until AI Core is below this"),
    ThresholdRow("aicore_busy_percent", "%", "memory-bound needs AI Core below it …"),
    ThresholdRow("aicore_busy_exit_percent", "%", "… or, once AI Core reached it, below this"),
    ThresholdRow(
        "aicore_idle_percent",
        "%",
        "AI Core below it is no work (leaves at `aicore_idle_exit_percent`); with a process and no "
        "busy sample for `active_window_s`: allocated-idle",
    ),
    ThresholdRow("aicore_idle_exit_percent", "%", "… no work ends at or above this"),
    ThresholdRow(
        "hbm_bandwidth_high_percent", "%", "HBM bandwidth at or above it, AI Core below busy: memory-bound"
    ),
    ThresholdRow("hbm_bandwidth_exit_percent", "%", "… and memory-bound's bandwidth stays high down to this"),
    ThresholdRow("aicpu_busy_percent", "%", "AI CPU at or above it, AI Core low: aicpu-bound"),
    ThresholdRow("aicpu_busy_exit_percent", "%", "… and AI CPU stays busy down to this"),
    ThresholdRow(
        "host_busy_percent",
        "% of a core",
        "the job's host side (its process and children) at or above it after a drop in AI Core: input-bound",
    ),
    ThresholdRow("host_busy_exit_percent", "% of a core", "… and the host side stays busy down to this"),
    ThresholdRow(
        "host_loader_percent",
        "% of a core",
        "a host side at or above it (more than one spinning thread), or children at `host_busy_percent`: "
        "loading, input-bound without a drop",
    ),
    ThresholdRow(
        "host_saturated_percent",
        "% of all cores",
        "the host's CPU at or above it, AI Core low: input-bound (leaves at `host_saturated_exit_percent`)",
    ),
    ThresholdRow("host_saturated_exit_percent", "% of all cores", "… the host stays saturated down to this"),
    ThresholdRow(
        "active_window_s",
        "s",
        "a drop is AI Core low after a busy sample within this; none in it and no work: allocated-idle",
    ),
    ThresholdRow(
        "workload_window_s",
        "s",
        "the evidence is the mean over this window of the samples that read the class",
    ),
    ThresholdRow("settle_samples", "samples", "a new class shows after this many samples in a row …"),
    ThresholdRow("settle_s", "s", "… spanning at least this long (so fast sampling does not flicker either)"),
    ThresholdRow(
        "held_settle_samples",
        "samples",
        "idle-holding-hbm (and its alert) shows after this many samples …",
    ),
    ThresholdRow(
        "held_settle_s",
        "s",
        "… spanning at least this long: a job's exit frees its HBM over two or three samples",
    ),
    ThresholdRow(
        "throttle_freq_margin",
        "× rated",
        "throttling: AI Core busy at a frequency more than this below its rated one …",
    ),
    ThresholdRow(
        "throttle_freq_exit_margin",
        "× rated",
        "… and a throttled clock counts as recovered only within this of rated",
    ),
    ThresholdRow(
        "throttle_near_limit_c",
        "°C",
        "… cause thermal: the temperature within this of the family's warning limit (table above)",
    ),
    ThresholdRow(
        "throttle_power_share",
        "× rated",
        "… cause power: power at this share of the rating (the card's when the reading is the card's) …",
    ),
    ThresholdRow(
        "throttle_unreported_margin",
        "× rated",
        "… with neither cause in the readings, a throttle only when the clock is more than this below "
        "rated (cause not reported)",
    ),
    ThresholdRow(
        "throttle_settle_samples",
        "samples",
        "throttling shows once this many samples within `throttle_window_s` read it …",
    ),
    ThresholdRow("throttle_window_s", "s", "… (the shown cause is the commonest in this window)"),
    ThresholdRow(
        "throttle_clear_s",
        "s",
        "… and clears after this long with no throttled sample (a hunting clock stays)",
    ),
)


def workload_table() -> str:
    """The README's table of ``WORKLOAD_ROWS`` with their default values (Markdown)."""
    lines = ["| threshold | default | decides | source |", "|---|---|---|---|"]
    for row in WORKLOAD_ROWS:
        value = getattr(DEFAULT_THRESHOLDS, row.name)
        lines.append(f"| `{row.name}` | {value:g} {row.unit} | {row.decides} | {row.source} |")
    return "\n".join(lines)
