"""Provides SourceInfo: what the chip source of a reading or a snapshot is and what it read.

Every reading and every snapshot carries one, and the JSON keeps it, so a replay and the fleet
judge by the same facts the live run had.  Code above the chip-source seam asks it — did this
source read a process table this tick, can it read AI CPU, is this chip's power the whole
card's — and never which backend it was.

This module is in the model layer: it imports only the standard library and the metric table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import FrozenSet, Iterable, Tuple

from npuwatch.metrics_table import METRICS

#: What a metric covers when it is not the chip it is shown on.
SCOPE_CHIP = "chip"
SCOPE_CARD = "card"  # the whole card's (board) reading, shown on the card's first chip
#: Every scope a ``MetricScope`` may name (the JSON's ``source_info.scopes[].scope``).
SCOPES: Tuple[str, ...] = (SCOPE_CHIP, SCOPE_CARD)


#: The titles the backends declare (their ``SOURCE_INFO.title``), for a snapshot or a report that
#: holds a probe name only (a snapshot built by hand; ``health``'s messages);
#: ``tests/core/test_source_info.py`` checks each against the backend's own declaration.
_TITLES = {"dcmi": "DCMI"}


def title_for(name: str) -> str:
    """How sentences name the chip source whose probe name is ``name`` when no ``SourceInfo``
    says: ``DCMI`` for ``dcmi``, any other name as it is.  Prefer ``SourceInfo.title``."""
    return _TITLES.get(name, name)


def needs_text(metrics: Iterable[str]) -> str:
    """``needs a source that reads AI CPU utilisation and HBM bandwidth utilisation`` for those
    chip metrics (their ``metrics_table`` titles); ``""`` for none."""
    titles = [_METRIC_TITLES.get(name, name) for name in metrics]
    if not titles:
        return ""
    said = titles[0] if len(titles) == 1 else f"{', '.join(titles[:-1])} and {titles[-1]}"
    return f"needs a source that reads {said}"


_METRIC_TITLES = {row.name: row.title for row in METRICS}


@dataclass(frozen=True)
class MetricScope:
    """One chip's metric whose reading covers more than the chip (a 310P Duo's board power)."""

    npu_id: int
    chip_id: int
    metric: str  # a ``CHIP_METRICS`` name: ``power_w``
    scope: str  # ``SCOPE_CARD``


@dataclass(frozen=True)
class SourceInfo:
    """What read the chips, and what it could read.

    A source declares one (``ChipSource.source_info``); each of its readings carries it for that
    tick (``SourceReading.source_info``: ``for_tick``), and the sampler puts it on the snapshot.

    ``name`` is the source's probe name (``npu-smi``, ``dcmi``), ``title`` how sentences say it
    (``npu-smi``, ``DCMI``).  ``metrics`` are the chip metrics (``CHIP_METRICS`` names) the
    source can read at all; a metric outside it is "not read by this source", never "zero".
    """

    name: str
    title: str
    #: In a declaration (``ChipSource.source_info``): the source reads a process table at all; in
    #: a reading or a snapshot: it read one this tick, so "no process listed" means none.
    process_table: bool
    metrics: FrozenSet[str]
    scopes: Tuple[MetricScope, ...] = ()

    def reads(self, metric: str) -> bool:
        """True when this source can read ``metric``."""
        return metric in self.metrics

    def unread(self, metrics: Iterable[str]) -> Tuple[str, ...]:
        """Those of ``metrics`` this source cannot read, in order: what a verdict that needs them
        says it lacks ("needs a source that reads aicpu_percent")."""
        return tuple(metric for metric in metrics if metric not in self.metrics)

    def needs(self, metrics: Iterable[str]) -> str:
        """What a verdict that needs ``metrics`` says when this source cannot read some of them:
        ``needs a source that reads AI CPU utilisation`` (never "needs DCMI"); ``""`` when it
        reads them all."""
        return needs_text(self.unread(metrics))

    def for_tick(self, process_table: bool, scopes: Tuple[MetricScope, ...] = ()) -> SourceInfo:
        """This declaration as one tick read it: whether it read a process table, and the metrics
        whose reading covered more than their chip."""
        return replace(self, process_table=process_table, scopes=scopes)

    def names_itself(self, text: str) -> bool:
        """True when ``text`` names this source as a word (``DCMI error -8005``, ``npu-smi did
        not answer``), not merely inside another word (``dcmi_init failed``)."""
        word = rf"(?<![\w-]){re.escape(self.title)}(?![\w-])"
        return re.search(word, text, re.IGNORECASE) is not None

    def failure_text(self, message: str) -> str:
        """``message`` (why this source gave no reading) as a sentence that names the source:
        as it is when it names it, else ``<title> failed: <message>`` — so a DCMI failure never
        reads as another source's (``DCMI failed: dcmi_init failed with -8002``)."""
        return message if self.names_itself(message) else f"{self.title} failed: {message}"

    def scope_of(self, key: Tuple[int, int], metric: str) -> str:
        """What ``metric`` covers on the chip ``key`` (``SCOPE_CHIP`` unless the source said)."""
        for scope in self.scopes:
            if (scope.npu_id, scope.chip_id) == key and scope.metric == metric:
                return scope.scope
        return SCOPE_CHIP
