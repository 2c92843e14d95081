"""``%npuwatch --demo`` in a real Jupyter kernel (nbclient): outputs, fallbacks and widget state."""

from __future__ import annotations

import json
import re

import pytest

from tests.notebook.helpers import cell_stream, run_in_kernel

FROZEN_SIM_S = "300"

CELLS = [
    "%load_ext npuwatch",
    "%npuwatch --demo --interval 0.3",
    """\
import json, time
view = _
first = view.updated.value
deadline = time.monotonic() + 60
while view.updated.value in (first, "--:--:--") and time.monotonic() < deadline:
    time.sleep(0.05)
state = view.state()
state["first_updated"] = first
state["thread_name"] = view.thread.name
state["fallback_text"] = view._repr_mimebundle_()["text/plain"]
print("STATE " + json.dumps(state))
""",
    """\
view.stop()
deadline = time.monotonic() + 60
while view.thread.is_alive() and time.monotonic() < deadline:
    time.sleep(0.05)
print("STOPPED", view.thread.is_alive(), view.status)
""",
]


@pytest.fixture
def executed(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUWATCH_SIM_NOW", FROZEN_SIM_S)  # the kernel inherits it: fixed demo values
    return run_in_kernel(CELLS, tmp_path)


def test_live_view_in_a_real_kernel(executed):
    from npuwatch import notebook as api

    view_cell = executed.cells[1]
    results = [o for o in view_cell.outputs if o.output_type == "execute_result"]
    assert len(results) == 1, view_cell.outputs
    data = results[0]["data"]
    model_id = data["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert "npuwatch" in data["text/plain"]
    assert 'class="npuwatch-live"' in data["text/html"]

    line = next(x for x in cell_stream(executed.cells[2]).splitlines() if x.startswith("STATE "))
    state = json.loads(line[len("STATE ") :])
    assert state["status"] == "live"
    assert state["root_classes"] == ["npuwatch-live"]
    assert state["updated_classes"] == ["npuwatch-updated"]
    assert re.fullmatch(r"\d\d:\d\d:\d\d", state["updated"])
    assert state["updated"] != state["first_updated"]  # the clock moved with the samples
    assert state["thread_alive"]

    reference = api.snapshot(demo=True).snapshot  # same frozen simulator clock as the kernel
    assert len(state["chips"]) == len(reference.chips)
    for shown, chip in zip(state["chips"], reference.chips):
        assert (shown["npu_id"], shown["chip_id"]) == chip.identity.key
        assert shown["metrics"]["temperature"] == f"{chip.temperature_c} °C"
        assert shown["metrics"]["util"] == f"{chip.aicore_percent}%"
        used, total = chip.hbm_used_mib / 1024, chip.hbm_total_mib / 1024
        assert shown["metrics"]["memory"] == f"{used:.1f}/{total:.1f} GiB"
    # The fallback the kernel sent carries the same numbers: it waited up to 1 s for the first
    # sample, so on a loaded machine it may still say "sampling…"; once sampled it always has them.
    sent = data["text/plain"]
    assert f"{reference.chips[0].temperature_c} °C" in sent or "sampling…" in sent
    assert f"{reference.chips[0].temperature_c} °C" in state["fallback_text"]

    stopped = cell_stream(executed.cells[3])
    assert "STOPPED False stopped" in stopped

    # The widget state the kernel produced, as nbclient saved it in the notebook.
    widget_state = executed.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    root = widget_state[model_id]["state"]
    assert root["_dom_classes"] == ["npuwatch-live"]
    models = [m["state"] for m in widget_state.values()]
    updated = [m for m in models if "npuwatch-updated" in m.get("_dom_classes", [])]
    assert len(updated) == 1 and re.fullmatch(r"\d\d:\d\d:\d\d", updated[0]["value"])
    chips = [m for m in models if 'class="npuwatch-chip ' in str(m.get("value", ""))]
    assert len(chips) == 1
    assert chips[0]["value"].count('class="npuwatch-chip ') == len(reference.chips)
    # 8 chips: cards by default, and the cards/table toggle in the view says so.
    assert state["layout"] == "cards" and 'class="npuwatch-chips npuwatch-layout-cards"' in chips[0]["value"]
    toggles = [m for m in models if "npuwatch-layout-toggle" in m.get("_dom_classes", [])]
    assert len(toggles) == 1
    assert toggles[0]["_options_labels"] == ["cards", "table"] and toggles[0]["index"] == 0
