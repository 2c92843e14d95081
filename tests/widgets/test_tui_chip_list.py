"""The one-line list of a huge table (more than HUGE_CHIPS chips) judges chips as the cards do."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from npuwatch.judge import judge_snapshot
from npuwatch.model import Level, Snapshot
from npuwatch.widgets.tui.app import NpuwatchApp
from npuwatch.widgets.tui.chip_list import HUGE_CHIPS, ChipList
from tests.widgets.fakes import FakeSampler, capture_snapshot, wait_for


def _huge_busy_snapshot() -> Snapshot:
    """HUGE_CHIPS + 4 chips all holding HBM, a process listed on each of the first four."""
    base = capture_snapshot("100")
    model = next(chip for chip in base.chips if chip.hbm_used_mib and chip.hbm_used_mib > 8192)
    chips = tuple(
        replace(
            model, identity=replace(model.identity, npu_id=i, chip_id=0, bus_id=f"0000:{i % 256:02x}:00.0")
        )
        for i in range(HUGE_CHIPS + 4)
    )
    listed = tuple(replace(base.processes[0], npu_id=i, chip_id=0, pid=1000 + i) for i in range(4))
    return replace(base, chips=chips, processes=listed)


def test_the_huge_list_judges_each_chip_with_its_processes() -> None:
    """A chip whose memory a listed process holds is not 'holding memory with no process'."""
    snapshot = _huge_busy_snapshot()
    judged = judge_snapshot(snapshot)
    assert judged[(0, 0)].level is Level.OK and judged[(9, 0)].level is Level.WARNING  # the premise
    app = NpuwatchApp(FakeSampler([snapshot], interval_s=3600.0))
    levels = {}

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None, timeout_s=60), "no first sample"
            await pilot.pause()
            chip_list = app.query_one(ChipList)
            for index in (0, 3, 9):
                row = chip_list.row(index)
                levels[row.key] = (row.level, list(row.reasons))
            await pilot.press("q")

    asyncio.run(asyncio.wait_for(main(), timeout=120))
    for key, (level, codes) in levels.items():
        assert level is judged[key].level, (key, codes)
        assert codes == list(judged[key].texts), key
