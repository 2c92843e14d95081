"""Provides Plan (copy sizes, repetitions, kernel size per level), the data patterns, the rate arithmetic."""

from __future__ import annotations

import functools
import statistics
from array import array
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from npuwatch.probes.runtime.protocol import Level
from npuwatch.probes.runtime.recorder import StepFailedError, StepOutcome

MIB = 1 << 20

#: What to do when data comes back different from what was written (no runtime code says why).
CORRUPTION_HINT = (
    "data was corrupted on its way: check `dmesg` for PCIe AER and driver errors, the link and chip "
    "health (`npuwatch doctor`, `npu-smi info -t health -i <NPU ID>`); drain the node if it repeats"
)

#: Pattern period for the kernel's inputs: small integers, exact in float32 and in their sum.
_KERNEL_PERIOD = 1024


@dataclass(frozen=True)
class Plan:
    """What one level measures on one chip."""

    level: Level
    copy_sizes_bytes: Tuple[int, ...]  # each a whole number of MiB, ascending
    repeats: int  # timed repetitions per size, after one warm-up
    kernel_elements: int  # float32 elements per aclnnAdd operand, a multiple of _KERNEL_PERIOD
    event_samples: int  # back-to-back event pairs timed for the resolution

    @property
    def largest_copy_bytes(self) -> int:
        """The biggest copy, which sizes the buffers."""
        return self.copy_sizes_bytes[-1]

    def capped(self, budget_bytes: int) -> Plan:
        """The same plan with copy sizes that fit two buffers in ``budget_bytes`` (at least 1 MiB)."""
        fitting = tuple(size for size in self.copy_sizes_bytes if 2 * size <= budget_bytes)
        return Plan(self.level, fitting or (MIB,), self.repeats, self.kernel_elements, self.event_samples)


def plan_for(level: Level) -> Plan:
    """``quick``: one 16 MiB size, a 1 Mi-element add; ``full``: 1 MiB…256 MiB, a 16 Mi-element add."""
    if level is Level.FULL:
        sizes = tuple(MIB << shift for shift in (0, 2, 4, 6, 8))
        return Plan(level, sizes, repeats=5, kernel_elements=16 << 20, event_samples=32)
    return Plan(level, (16 * MIB,), repeats=3, kernel_elements=1 << 20, event_samples=16)


def copy_block(index: int) -> bytes:
    """The 1 MiB of the copy pattern at MiB ``index``: aperiodic words, the index stamped in front."""
    return index.to_bytes(8, "little") + _base_block()[8:]


@functools.lru_cache(maxsize=1)
def _base_block() -> bytes:
    # Knuth's multiplicative hash of the word index: no short period, so a shifted or repeated
    # chunk never compares equal.
    words = array("I", ((i * 2654435761) & 0xFFFFFFFF for i in range(MIB // 4)))
    return words.tobytes()


def kernel_inputs(elements: int) -> Tuple[bytes, bytes, bytes]:
    """(a, b, a + b) as float32 bytes; exact, so the device's result must match bit for bit."""
    repeat = elements // _KERNEL_PERIOD
    a = array("f", (float(i) for i in range(_KERNEL_PERIOD)))
    b = array("f", (float((3 * i) % _KERNEL_PERIOD) for i in range(_KERNEL_PERIOD)))
    total = array("f", (x + y for x, y in zip(a, b)))
    return a.tobytes() * repeat, b.tobytes() * repeat, total.tobytes() * repeat


def rate_summary(size_bytes: int, samples_ms: Sequence[float]) -> Dict[str, object]:
    """Best and median GB/s (10⁹ bytes/s) of the timed repetitions of one size."""
    usable = [ms for ms in samples_ms if ms > 0]
    rates = sorted((size_bytes / (ms / 1e3) / 1e9 for ms in usable), reverse=True)
    return {
        "size_bytes": size_bytes,
        "samples_ms": [round(ms, 6) for ms in samples_ms],
        "best_gb_s": round(rates[0], 3) if rates else None,
        "median_gb_s": round(statistics.median(rates), 3) if rates else None,
    }


def headline(per_size: List[Dict[str, object]]) -> Dict[str, object]:
    """The step's headline numbers: those of the largest size (the least overhead-bound)."""
    last = per_size[-1] if per_size else {}
    return {
        "bytes": last.get("size_bytes"),
        "best_gb_s": last.get("best_gb_s"),
        "median_gb_s": last.get("median_gb_s"),
        "sizes": per_size,
    }


def judge_timing(samples: Sequence[float], timings: Sequence[Tuple[float, float]], out: StepOutcome) -> None:
    """Event floor and resolution from back-to-back pairs; negative times fail, beyond wall time warn."""
    if any(ms < 0 for ms in samples):
        raise StepFailedError(f"event elapsed time went negative ({min(samples):.6f} ms)", fatal=False)
    # The smallest gap between distinct readings bounds the timer's tick; one distinct value says nothing.
    distinct = sorted({round(ms, 6) for ms in samples})
    gaps = [b - a for a, b in zip(distinct, distinct[1:])]
    resolution_ms = round(min(gaps), 6) if gaps else None
    out.metrics.update(
        empty_interval_min_ms=min(samples),
        empty_interval_median_ms=statistics.median(samples),
        resolution_ms=resolution_ms,
        samples=len(samples),
    )
    # An event clock in the wrong unit or running fast shows as device time longer than the host's
    # own wall time around the same work.
    suspect = [(ms, wall) for ms, wall in timings if ms > wall * 1.05 + 0.05]
    if suspect:
        ms, wall = suspect[0]
        out.warn(
            f"event time {ms:.3f} ms exceeds the host's wall time {wall:.3f} ms around it: timing suspect"
        )
    resolution = f"{resolution_ms * 1e3:.2f} µs" if resolution_ms is not None else "unresolved (all equal)"
    floor = (
        f"empty interval {min(samples) * 1e3:.1f} µs min, {statistics.median(samples) * 1e3:.1f} µs median"
    )
    agree = "event times agree with host wall time" if not suspect else "event times disagree with wall time"
    out.detail = f"{floor}; resolution {resolution}; {agree}"
