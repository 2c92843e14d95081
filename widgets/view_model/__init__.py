"""Provides the one presentation model of the three views: a Snapshot, its History and the judge's
verdicts → plain rows of display strings, each with a level.

The dashboard (``widgets/tui``), the text views (``snapshot`` and ``--plain``, ``widgets/text.py``)
and the notebook (``widgets/notebook``) render these rows; none of them chooses a label, a scale,
a level or a process cell itself.  What a cell shows comes from the metric table
(``npuwatch.metrics_table``); every level comes from the judge (``npuwatch.judge``), a usage
bar's colour too (``memory_bar_level``, ``power_bar_level``).  Toolkit-free: Rich styles and
HTML classes are each view's small mapping from ``Level``.

One module a job: ``rows`` (the records), ``cells`` (a chip's cells from the metric table),
``workload_view`` (the workload's tag and explanation), ``build`` (snapshot → frame and rows).
Import from here: the names below are the model's public face.
"""

from __future__ import annotations

from npuwatch.widgets.view_model.build import (
    alert_row,
    badge,
    build_view,
    chip_row,
    chip_rows,
    host_row,
    process_row,
    reason_groups,
    sample_time,
    worst_health,
)
from npuwatch.widgets.view_model.cells import CellBuilder, amount, cell_columns, graph_top, rated_power_w
from npuwatch.widgets.view_model.rows import (
    AlertRow,
    ChipKey,
    ChipRow,
    EvidenceRow,
    HostRow,
    MetricCell,
    ProcessRow,
    ReasonGroup,
    ViewModel,
    WorkloadExplanation,
    WorkloadTag,
    chip_name,
)
from npuwatch.widgets.view_model.workload_view import (
    evidence_label,
    evidence_text,
    explain,
    owner_text,
    workload_tag,
)

__all__ = [
    "AlertRow",
    "CellBuilder",
    "ChipKey",
    "ChipRow",
    "EvidenceRow",
    "HostRow",
    "MetricCell",
    "ProcessRow",
    "ReasonGroup",
    "ViewModel",
    "WorkloadExplanation",
    "WorkloadTag",
    "alert_row",
    "amount",
    "badge",
    "build_view",
    "cell_columns",
    "chip_name",
    "chip_row",
    "chip_rows",
    "evidence_label",
    "evidence_text",
    "explain",
    "graph_top",
    "host_row",
    "owner_text",
    "process_row",
    "rated_power_w",
    "reason_groups",
    "sample_time",
    "workload_tag",
    "worst_health",
]
