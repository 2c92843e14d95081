"""One chip, one workload: for each "limited by" demo, one sample through the product's feed gives
every chip the same class and throttling flag in snapshot --json, /metrics, the dashboard's and
the notebook's rows, the notebook card and the text table (issue 17's "Done when")."""

from __future__ import annotations

import json
import re
from typing import Dict, Optional, Tuple

import pytest

from npuwatch import snapshot_json
from npuwatch.exporter.metrics import ExporterView, render
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.history import History
from npuwatch.model import Snapshot
from npuwatch.widgets.notebook import live_html
from npuwatch.widgets.text import render_snapshot
from npuwatch.widgets.view_model import build_view

ChipKey = Tuple[int, int]

#: scenario → (a chip, its class, its throttling) well after the condition's onset.
EXPECTED = {
    "throttling": ((2, 0), "compute-bound", "thermal"),
    "memory-bound": ((0, 0), "memory-bound", None),
    "aicpu-fallback": ((0, 0), "aicpu-bound", None),
    "input-bound": ((0, 0), "input-bound", None),
    "hbm-leak": ((0, 0), "idle-holding-hbm", None),
    "910b-training": ((0, 0), "compute-bound", None),
}
SERIES = re.compile(r"^npuwatch_chip_(workload|throttling)\{([^}]*)\} (\S+)$", re.M)


def one_sample(scenario: str, monkeypatch: pytest.MonkeyPatch) -> Snapshot:
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "60")
    with open_feed(FeedOptions(demo=scenario, interval_s=1.0)) as feed:
        return feed.sample()


def from_metrics(snapshot: Snapshot) -> Dict[ChipKey, Tuple[str, Optional[str]]]:
    body = render(ExporterView(snapshot, 0.1)).decode()
    classes: Dict[ChipKey, str] = {}
    throttled: Dict[ChipKey, str] = {}
    for family, labels, value in SERIES.findall(body):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        key = (int(pairs["npu_id"]), int(pairs["chip_id"]))
        if float(value) == 1.0:
            (classes if family == "workload" else throttled)[key] = pairs.get("class") or pairs["reason"]
    return {key: (kind, throttled.get(key)) for key, kind in classes.items()}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_every_surface_says_the_same_class(scenario, monkeypatch):
    snapshot = one_sample(scenario, monkeypatch)
    key, kind, throttling = EXPECTED[scenario]
    doc = json.loads(snapshot_json.dumps(snapshot))
    from_json = {
        (c["npu_id"], c["chip_id"]): (c["workload"]["class"], c["workload"]["throttling"])
        for c in doc["chips"]
    }
    assert from_json[key] == (kind, throttling)
    chosen = next(c["workload"] for c in doc["chips"] if (c["npu_id"], c["chip_id"]) == key)
    assert chosen["evidence"]["aicore_percent"] is not None and chosen["next_step"]
    assert from_metrics(snapshot) == from_json
    history = History(60)
    history.add(snapshot)
    view = build_view(snapshot, history, window="1 min")
    from_rows = {row.key: (row.workload.kind, row.workload.throttling or None) for row in view.chips}
    assert from_rows == from_json
    row = next(r for r in view.chips if r.key == key)
    card = live_html.chip_html(row, "1 min", 60)
    assert f'data-class="{kind}"' in card
    assert re.search(rf"\b{kind}\b", render_snapshot(snapshot))
