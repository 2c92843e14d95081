"""The text form of a snapshot (``npuwatch snapshot``): what it says about chips that need attention."""

from __future__ import annotations

from npuwatch.widgets.text import render_snapshot
from tests.widgets.fakes import simulated_snapshots


def test_a_degraded_pcie_link_is_in_the_text_snapshot() -> None:
    snapshot = simulated_snapshots("pcie-degraded", 1)[0]
    text = render_snapshot(snapshot)
    lines = [line for line in text.splitlines() if "PCIe" in line]
    assert len(lines) == 1, text
    assert "NPU 5" in lines[0] and "PCIe Gen4 x8 of Gen5 x16" in lines[0] and "narrow" in lines[0]
    bus_id = snapshot.chip(5).identity.bus_id  # type: ignore[union-attr]
    assert bus_id and bus_id in lines[0]


def test_links_at_their_maximum_are_not_mentioned() -> None:
    text = render_snapshot(simulated_snapshots("910b-training", 1)[0])
    assert "PCIe" not in text


def test_an_alarm_names_its_error_code_in_the_text_snapshot() -> None:
    text = render_snapshot(simulated_snapshots("chip-alarm", 1)[0])
    lines = [line for line in text.splitlines() if "80E01801" in line]
    assert len(lines) == 1, text
    assert lines[0].startswith("✖ NPU 3 (") and "Alarm 80E01801 HBM multi-bit ECC error" in lines[0]


def _dcmi_snapshot():  # type: ignore[no-untyped-def]
    from dataclasses import replace

    snapshot = simulated_snapshots("910b-training", 1)[0]
    first, second, *rest = snapshot.chips
    first = replace(
        first,
        aicore_freq_mhz=1300,
        aicore_rated_freq_mhz=1800,
        vector_percent=45,
        hbm_bandwidth_percent=60,
        hbm_temperature_c=41,
        voltage_v=0.85,
        ecc_single_bit_errors=2,
        ecc_double_bit_errors=0,
        ecc_isolated_pages=1,
    )
    second = replace(second, aicore_freq_mhz=1800, aicore_rated_freq_mhz=1800)
    return replace(snapshot, chips=(first, second, *rest), chip_source="dcmi")


def test_the_driver_only_metrics_are_a_second_table_of_the_chips_reporting_them() -> None:
    lines = render_snapshot(_dcmi_snapshot()).splitlines()
    start = lines.index(
        "NPU  Chip  Freq           Vector  HBM BW  HBM temp  Voltage  ECC 1-bit  ECC 2-bit  ECC pages"
    )
    assert lines[start - 1] == ""
    assert lines[start + 1 : start + 4] == [
        "0    0     1300/1800 MHz  45%     60%     41 °C     0.85 V   2 errors   0 errors   1 page",
        "1    0     1800/1800 MHz  -       -       -         -        -          -          -",
        "",
    ]


def test_npu_smi_data_prints_no_second_table_and_no_note_about_the_driver_only_metrics() -> None:
    from npuwatch.probes.npu_smi.table import NOT_IN_TABLE

    snapshot = simulated_snapshots("910b-training", 1)[0]
    assert all(set(NOT_IN_TABLE) <= set(chip.notes) for chip in snapshot.chips)  # the reasons are there
    text = render_snapshot(snapshot)
    assert "Freq" not in text and "DCMI" not in text and "vector" not in text
    assert text.count("\nNPU  Chip") == 2  # the chip table and the process table, as before


def test_a_sample_the_chosen_backend_did_not_read_says_why_under_the_header() -> None:
    from dataclasses import replace

    snapshot = simulated_snapshots("910b-training", 1)[0]
    note = "dcmi failed (no such device): this tick read through npu-smi"
    lines = render_snapshot(replace(snapshot, backend_note=note, chip_source="npu-smi")).splitlines()
    assert lines[2] == f"backend: {note}"
    assert not any(line.startswith("backend:") for line in render_snapshot(snapshot).splitlines())
