"""A power reading that covers the whole card (an Atlas 300I Duo's board power, read by DCMI on the
card's first chip) is compared with the card's rating everywhere: the power bar, the detail screen
and the throttle judge (``judge.limits.power_rating``), so a healthy busy Duo shows nothing amber."""

from __future__ import annotations

import pytest

import npuwatch
from npuwatch.history import History
from npuwatch.judge.limits import power_ratings
from npuwatch.model import Level, Throttling
from npuwatch.source_info import SCOPE_CARD
from npuwatch.widgets.tui.detail_screen import metric_rows
from npuwatch.widgets.view_model import build_view


@pytest.fixture(scope="module")
def duo():
    return npuwatch.snapshot(demo="310p-duo", backend="dcmi")


def test_a_duo_cards_board_power_is_compared_with_the_cards_rating(duo):
    firsts = [chip for chip in duo.chips if chip.identity.chip_id == 0]
    assert [duo.described.scope_of(chip.identity.key, "power_w") for chip in firsts] == [SCOPE_CARD] * 2
    view = build_view(duo, History())
    for row in view.chips:
        if row.key[1] == 0:
            power = row.cell("power")
            assert power.value is not None and power.value > 72  # more than one chip's 72 W
            assert (power.ceiling, power.text.endswith("/150 W")) == (150.0, True)
            assert power.level is Level.OK  # busy and healthy: nothing amber
    ratings = power_ratings(duo)
    (shown,) = [
        r.value for r in metric_rows(firsts[0], ratings[firsts[0].identity.key]) if r.label == "Power"
    ]
    assert shown is not None and shown.endswith("(the card's, rated ≈150 W)")
    assert all(
        chip.workload is None or chip.workload.throttling is not Throttling.POWER for chip in duo.chips
    )
