"""The detail screen says the judge's verdict on a chip that is not ok, with what to do."""

from __future__ import annotations

from datetime import datetime, timezone

from rich.console import Console

from npuwatch.model import ChipError, ChipIdentity, ChipSample, Health, Snapshot
from npuwatch.widgets.tui.detail_screen import chip_summary

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def text_of(chip: ChipSample) -> str:
    console = Console(width=240, record=True, color_system=None)
    console.print(chip_summary(chip, Snapshot(NOW, "test", chips=(chip,))))
    return console.export_text()


def test_an_alarm_chip_shows_its_reason_and_huawei_s_handling_of_its_code():
    chip = ChipSample(
        ChipIdentity(3, 0, "910B3"),
        health=Health.ALARM,
        errors=(ChipError("80E18005", "HBMC CA parity error"),),
    )
    shown = text_of(chip)
    assert "critical: Alarm 80E18005 HBMC CA parity error → restart-npu" in shown
    assert "Huawei's handling of it is restart-npu: stop the jobs on it and reset the chip" in shown


def test_an_ok_chip_shows_no_verdict_lines():
    shown = text_of(
        ChipSample(ChipIdentity(0, 0, "910B3"), health=Health.OK, temperature_c=40, aicore_percent=5)
    )
    assert "critical:" not in shown and "warning:" not in shown
