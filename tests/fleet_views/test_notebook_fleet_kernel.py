"""``%npuwatch fleet`` in a real Jupyter kernel (nbclient), on a fleet recording: the widget and
its fallbacks come out of the cell, the table refreshes on the view's thread, stop ends it."""

from __future__ import annotations

import json

import pytest

from tests.fleet_views.fakes import crafted_fleet
from tests.notebook.helpers import cell_stream, run_in_kernel


@pytest.fixture
def executed(tmp_path):
    from npuwatch.fleet.feed import FleetRecordingWriter

    recording = tmp_path / "fleet.ndjson"
    with FleetRecordingWriter(recording) as writer:
        for shift in range(5):
            writer.write_fleet(crafted_fleet(shift_s=shift))
    cells = [
        "%load_ext npuwatch",
        f"%npuwatch fleet --replay {recording} --interval 0.3",
        """\
import json, time
view = _
deadline = time.monotonic() + 60
while view.updates < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
view.node_picker.value = "node-alarm"
print("STATE " + json.dumps({k: v for k, v in view.state().items() if k != "table_html"}))
""",
        """\
view.widget.close()
deadline = time.monotonic() + 60
while view.thread.is_alive() and time.monotonic() < deadline:
    time.sleep(0.05)
print("STOPPED", view.thread.is_alive(), view.status)
""",
    ]
    return run_in_kernel(cells, tmp_path)


@pytest.mark.slow
def test_fleet_view_in_a_real_kernel(executed):
    results = [o for o in executed.cells[1].outputs if o.output_type == "execute_result"]
    assert len(results) == 1, executed.cells[1].outputs
    data = results[0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in data
    assert 'class="npuwatch-fleet-live"' in data["text/html"]
    assert "node-alarm" in data["text/plain"]  # it returned after the first refresh
    line = next(line for line in cell_stream(executed.cells[2]).splitlines() if line.startswith("STATE "))
    state = json.loads(line[len("STATE ") :])
    assert state["nodes"] == ["node-alarm", "node-gone", "node-a3", "node-ok"]
    assert state["stale"] == ["node-gone"]
    assert state["updates"] >= 2 and state["thread_alive"]
    assert state["node"] == "node-alarm" and "NPU 3: Alarm" in state["node_html"]
    assert "STOPPED False stopped" in cell_stream(executed.cells[3])
