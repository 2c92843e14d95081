"""Provides a workload's evidence: the window's running sums of each class's inputs, and their
means as the ``evidence`` mapping a ``Workload`` carries (``npuwatch.judge.workload``)."""

from __future__ import annotations

from typing import Dict, Iterator, List, Mapping, Optional, Tuple

from npuwatch.judge.workload_observe import INPUTS, Observation
from npuwatch.model import EvidenceValue

#: Every input an observation carries, in the order the window's sums keep them.
ALL_INPUTS: Tuple[str, ...] = (*INPUTS, "host_cpu_percent")


class Sums:
    """The running totals of one class's observations in the window, so a mean costs no loop."""

    __slots__ = ("count", "counts", "totals")

    def __init__(self) -> None:
        self.count = 0
        self.totals = [0.0] * len(ALL_INPUTS)
        self.counts = [0] * len(ALL_INPUTS)

    def add(self, seen: Observation, sign: int) -> None:
        self.count += sign
        for i, value in enumerate(map(seen.inputs.get, ALL_INPUTS)):
            if value is not None:
                self.totals[i] += sign * value
                self.counts[i] += sign

    def evidence(self) -> Evidence:
        """The window's means as evidence (worked out when read: most ticks nobody reads them)."""
        return Evidence(list(self.totals), list(self.counts), {})


_INDEX = {name: i for i, name in enumerate(ALL_INPUTS)}


class Evidence(Mapping[str, EvidenceValue]):
    """A workload's evidence: the means of its inputs (each rounded to 0.1 when read) and the extra
    facts of its class.  Frozen once the judge hands it out."""

    __slots__ = ("_counts", "_extra", "_totals")

    def __init__(self, totals: List[float], counts: List[int], extra: Dict[str, EvidenceValue]) -> None:
        self._totals, self._counts, self._extra = totals, counts, extra

    @classmethod
    def of(cls, inputs: Mapping[str, Optional[float]]) -> Evidence:
        """One observation's inputs as evidence."""
        values = [inputs.get(name) for name in ALL_INPUTS]
        return cls([v or 0.0 for v in values], [0 if v is None else 1 for v in values], {})

    def __getitem__(self, name: str) -> EvidenceValue:
        i = _INDEX.get(name)
        if i is None:
            return self._extra[name]
        count = self._counts[i]
        return round(self._totals[i] / count, 1) if count else None

    def __iter__(self) -> Iterator[str]:
        yield from ALL_INPUTS
        yield from self._extra

    def __len__(self) -> int:
        return len(ALL_INPUTS) + len(self._extra)

    def __repr__(self) -> str:
        return repr(dict(self))
