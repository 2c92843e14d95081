"""Tests for the detail screen's on-demand npu-smi queries: captures, the simulator, failures."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from npuwatch.chip_details import ChipDetails
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.model import Health
from npuwatch.probes.npu_smi import FailureKind, NpuSmi
from npuwatch.probes.npu_smi.details import fetch_chip_details
from npuwatch.probes.npu_smi.source import CaptureSource
from npuwatch.probes.simulator import Simulation
from npuwatch.sampler import Sampler
from tests.conftest import CAPTURES

HANG = "hang"
NO_CHIP_OPTION = "no-c"


def fake_npu_smi(tmp_path: Path, answers: Dict[str, str]) -> Path:
    """An npu-smi answering ``info ARGS`` with a capture number, a hang or a refused ``-c``.

    Unlisted commands print nothing and fail; every call is logged to ``calls.log``.
    """
    log = tmp_path / "calls.log"
    cases = []
    for args, answer in answers.items():
        if answer == HANG:
            action = "exec sleep 30"
        elif answer == NO_CHIP_OPTION:
            action = "echo 'Error parameter of -c'; exit 255"
        else:
            capture = next(CAPTURES.glob(f"{answer}_*.txt"))
            code = 255 if answer == "070" else 0  # "does not support querying"
            action = f"cat {shlex.quote(str(capture))}; exit {code}"
        cases.append(f'  "info {args}") {action} ;;\n')
    tool = tmp_path / "npu-smi"
    tool.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {shlex.quote(str(log))}\n'
        'case "$*" in\n' + "".join(cases) + "  *) exit 1 ;;\nesac\n"
    )
    tool.chmod(0o755)
    return tool


def calls(tmp_path: Path) -> List[str]:
    return (tmp_path / "calls.log").read_text().splitlines()


def test_910_doc_captures_fill_every_report_and_field(tmp_path):
    tool = fake_npu_smi(
        tmp_path,
        {
            "-t board -i 0": "010",
            "-t board -i 0 -c 0": "011",
            "-t usages -i 0 -c 0": "012",
            "-t common -i 0 -c 0": "017",
            "-t health -i 0 -c 0": "013",
        },
    )
    details = fetch_chip_details(NpuSmi(tool), 0, 0)

    assert calls(tmp_path) == [
        "info -t board -i 0",
        "info -t board -i 0 -c 0",
        "info -t usages -i 0 -c 0",
        "info -t common -i 0 -c 0",
        "info -t health -i 0 -c 0",
    ]
    assert [q.failure for q in details.queries] == [None] * 5
    assert all(q.duration_s is not None and q.duration_s >= 0 for q in details.queries)
    assert details.board_chip.command == "npu-smi info -t board -i 0 -c 0"

    board = details.board
    assert board is not None
    # Card-level facts (010) and chip-level ones (011) in one record.
    assert (board.software_version, board.firmware_version, board.compatibility) == (
        "23.0.5",
        "7.1.0.7.220",
        "OK",
    )
    assert (board.pci_vendor_id, board.pci_device_id, board.chip_count) == (0x19E5, 0xD801, 1)
    assert board.pcb_id == "A"  # NA at chip level, A at card level
    assert (board.chip_type, board.chip_name, board.chip_version) == ("Ascend", "xxx", "V1")
    assert board.vdie_id == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert board.ndie_id == "27216594 20401010 4E10C8D4 14CC040A A4102003"
    assert board.serial_number is None  # the old card-level layout prints none

    usages = details.chip_usages
    assert usages is not None
    assert (usages.npu_id, usages.chip_id) == (0, 0)
    assert (usages.ddr_capacity_mib, usages.ddr_usage_percent) == (13553, 6)
    assert (usages.hbm_capacity_mib, usages.hbm_usage_percent, usages.aivector_percent) == (32768, 0, None)

    common = details.chip_common
    assert common is not None
    assert (common.aicore_freq_mhz, common.aicore_count) == (900, 30)
    assert (common.temperature_c, common.power_w) == (41, 71.7)

    health = details.chip_health
    assert health is not None
    assert (health.npu_id, health.chip_id) == (0, 0)  # 013 prints neither
    assert (health.health, health.error_codes, health.error_information) == (Health.OK, (), ())

    # Every raw key npu-smi printed, those the records do not know included.
    assert ("Class ID", "NA") in details.board_card.fields
    assert ("Chip Count", "1") in details.board_card.fields
    assert details.board_chip.fields[:3] == (("NPU ID", "0"), ("Chip ID", "0"), ("Chip Type", "Ascend"))
    assert details.usages.fields[-1] == ("HBM Bandwidth Usage Rate(%)", "0")
    assert ("Chip ID", "0") in details.usages.fields
    assert details.health.fields == (
        ("Health Status", "OK"),
        ("Error Code", "NA"),
        ("Error Information", "NA"),
    )


def test_910b_captures_with_an_mcu_block_and_unsupported_queries(tmp_path):
    tool = fake_npu_smi(
        tmp_path,
        {
            "-t board -i 1": "079",
            "-t board -i 1 -c 0": "070",
            "-t usages -i 1 -c 0": "030",
            "-t common -i 1 -c 0": "031",
            "-t health -i 1 -c 0": "070",
        },
    )
    details = fetch_chip_details(NpuSmi(tool), 1, 0)

    for query in (details.board_chip, details.health):
        assert query.failure is not None
        assert query.failure.kind is FailureKind.NOT_SUPPORTED
        assert query.report is None
        assert query.fields == ()
    assert details.chip_health is None

    assert details.board == details.board_card.report  # the card level alone
    board = details.board
    assert board is not None
    assert (board.product_name, board.serial_number, board.software_version) == (
        "IT21HMDC_Bin5",
        "1025C9048791",
        "25.5.1",
    )
    assert (board.pci_device_id, board.subsystem_device_id) == (0xD802, 0x3003)

    usages = details.chip_usages
    assert usages is not None
    assert (usages.hbm_capacity_mib, usages.hbm_usage_percent, usages.aivector_percent) == (65536, 4, 0)

    common = details.chip_common
    assert common is not None
    assert (common.aicore_freq_mhz, common.aicore_current_freq_mhz, common.aicore_count) == (1800, 800, 24)
    assert (common.temperature_c, common.power_w) == (46, 93.4)
    assert details.common.report is not None
    assert details.common.report.mcu_temperature_c == 38
    assert details.common.fields[-1] == ("MCU Temperature(C)", "38")


def test_a_refused_chip_option_is_asked_again_at_card_level(tmp_path):
    tool = fake_npu_smi(
        tmp_path,
        {
            "-t board -i 0": "010",
            "-t board -i 0 -c 0": "011",
            "-t usages -i 0 -c 0": NO_CHIP_OPTION,
            "-t usages -i 0": "012",
            "-t common -i 0 -c 0": "017",
            "-t health -i 0 -c 0": "013",
        },
    )
    details = fetch_chip_details(NpuSmi(tool), 0, 0)

    assert "info -t usages -i 0" in calls(tmp_path)
    assert details.usages.failure is None
    assert details.usages.args == ("info", "-t", "usages", "-i", "0")
    assert details.chip_usages is not None
    assert details.chip_usages.hbm_capacity_mib == 32768


def test_a_hung_query_times_out_without_raising(tmp_path):
    tool = fake_npu_smi(
        tmp_path,
        {
            "-t board -i 0": "010",
            "-t board -i 0 -c 0": "011",
            "-t usages -i 0 -c 0": "012",
            "-t common -i 0 -c 0": "017",
            "-t health -i 0 -c 0": HANG,
        },
    )
    details = fetch_chip_details(NpuSmi(tool, timeout_s=0.5), 0, 0)

    assert details.health.failure is not None
    assert details.health.failure.kind is FailureKind.TIMEOUT
    assert details.health.report is None
    assert [q.failure for q in details.queries[:4]] == [None] * 4
    assert details.chip_common is not None


def test_after_a_timeout_the_remaining_queries_are_not_asked(tmp_path):
    tool = fake_npu_smi(
        tmp_path,
        {
            "-t board -i 0": "010",
            "-t board -i 0 -c 0": "011",
            "-t usages -i 0 -c 0": HANG,
            "-t common -i 0 -c 0": "017",
            "-t health -i 0 -c 0": "013",
        },
    )
    details = fetch_chip_details(NpuSmi(tool, timeout_s=0.5), 0, 0)

    assert calls(tmp_path)[-1] == "info -t usages -i 0 -c 0"
    assert details.usages.failure is not None
    assert details.usages.failure.kind is FailureKind.TIMEOUT
    for query in (details.common, details.health):
        assert query.failure is not None
        assert query.failure.kind is FailureKind.TIMEOUT
        assert query.failure.message.startswith("not asked: `npu-smi info -t usages -i 0 -c 0` timed out")
        assert query.duration_s is None
    assert details.board is not None


@pytest.mark.parametrize("path", [None, Path("/nonexistent/npu-smi")])
def test_a_missing_npu_smi_is_explained_per_query(path):
    details = fetch_chip_details(NpuSmi(path), 0, 0)
    assert {q.failure.kind for q in details.queries if q.failure is not None} == {FailureKind.NOT_FOUND}
    assert len([q for q in details.queries if q.failure is not None]) == 5
    assert details.board is None


@pytest.fixture
def simulation(request):
    sim = Simulation.start(request.param)
    yield sim
    sim.close()


@pytest.mark.parametrize("simulation", ["910b-training"], indirect=True)
def test_simulated_910b3(simulation):
    details = fetch_chip_details(NpuSmi(simulation.npu_smi), 0, 0)
    assert [q.failure for q in details.queries] == [None] * 5
    assert [q.warnings for q in details.queries] == [()] * 5
    board = details.board
    assert board is not None
    assert (board.product_name, board.chip_name, board.chip_count) == ("IT21HMDC_Bin5", "910B3", 1)
    assert (board.pcie_bus_info, board.software_version) == ("0000:C1:00.0", "24.1.rc2")
    usages = details.chip_usages
    assert usages is not None
    assert (usages.hbm_capacity_mib, usages.ddr_capacity_mib) == (65536, 0)
    common = details.chip_common
    assert common is not None
    assert (common.aicore_freq_mhz, common.aicore_count) == (1800, 20)
    assert details.chip_health is not None
    assert details.chip_health.health is Health.OK


@pytest.mark.parametrize("simulation", ["a3"], indirect=True)
def test_simulated_a3_second_chip(simulation):
    details = fetch_chip_details(NpuSmi(simulation.npu_smi), 0, 1)
    board = details.board
    assert board is not None
    # The chip's own Bus-Id (chip level) wins over the card's first one.
    assert details.board_card.report is not None
    assert details.board_card.report.pcie_bus_info == "0000:9D:00.0"
    assert (board.chip_id, board.chip_position_id, board.pcie_bus_info) == (1, 1, "0000:9F:00.0")
    assert (board.chip_name, board.chip_count) == ("Ascend910", 2)
    common = details.chip_common
    assert common is not None
    assert (common.chip_id, common.aicore_count) == (1, 24)


@pytest.mark.parametrize("simulation", ["310p-duo"], indirect=True)
def test_simulated_310p_duo_sparse_ids(simulation):
    details = fetch_chip_details(NpuSmi(simulation.npu_smi), 5, 1)
    assert [q.failure for q in details.queries] == [None] * 5
    board = details.board
    assert board is not None
    assert (board.npu_id, board.chip_id, board.chip_name, board.chip_count) == (5, 1, "310P3", 2)
    usages = details.chip_usages
    assert usages is not None
    assert (usages.npu_id, usages.chip_id) == (5, 1)
    assert usages.hbm_capacity_mib is None  # DDR only on 310P
    assert usages.ddr_capacity_mib is not None
    assert usages.dvpp_vdec_percent == 0
    assert ("DVPP JPEGD Usage Rate(%)", "0") in details.usages.fields


@pytest.mark.parametrize("simulation", ["chip-alarm"], indirect=True)
def test_simulated_chip_in_alarm(simulation):
    health = fetch_chip_details(NpuSmi(simulation.npu_smi), 3, 0).chip_health
    assert health is not None
    assert health.health is Health.ALARM
    assert health.error_codes == ("80E01801",)
    assert health.error_information == ("HBM multi-bit ECC error",)


@pytest.mark.parametrize("simulation", ["910b-training"], indirect=True)
def test_a_chip_the_npu_does_not_have(simulation):
    details = fetch_chip_details(NpuSmi(simulation.npu_smi), 0, 5)
    assert details.board_chip.failure is not None
    assert details.board_chip.failure.kind is FailureKind.BAD_ARGUMENT
    # The card-level retry answers, but about chip 0 only.
    assert details.usages.failure is None
    assert details.usages.warnings == ("npu-smi printed no block for chip 5",)
    assert details.chip_usages is None


def test_a_replay_sampler_has_no_details():
    capture = next(CAPTURES.glob("022_*.txt"))
    with open_feed(FeedOptions(replay=str(capture))) as sampler:
        assert sampler.chip_details(0, 0) is None


def test_a_demo_sampler_fetches_details_through_its_source():
    with open_feed(FeedOptions(demo="310p-duo", host=False)) as sampler:
        sampler.sample()
        details = sampler.chip_details(5, 1)
    assert isinstance(details, ChipDetails)  # the seam's plain record: views import no probe
    commands = [section.command for section in details.sections]
    assert commands == [
        "npu-smi info -t board -i 5",
        "npu-smi info -t board -i 5 -c 1",
        "npu-smi info -t usages -i 5 -c 1",
        "npu-smi info -t common -i 5 -c 1",
        "npu-smi info -t health -i 5 -c 1",
    ]
    assert all(section.failure is None for section in details.sections)
    assert ("Chip Name", "310P3") in details.sections[1].fields


def test_a_failed_query_reaches_the_view_as_a_source_failure():
    details = fetch_chip_details(NpuSmi(None), 0, 0).to_chip_details()
    assert details.sections[0].failure == "npu-smi was not found"


class _LockSpy(CaptureSource):
    provides_details = True

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.sampler: Optional[Sampler] = None
        self.seen: List[Tuple[int, int, bool]] = []

    def chip_details(self, npu_id: int, chip_id: int) -> Optional[ChipDetails]:
        assert self.sampler is not None
        self.seen.append((npu_id, chip_id, self.sampler._lock.locked()))
        return fetch_chip_details(NpuSmi(None), npu_id, chip_id).to_chip_details()


def test_the_sampler_holds_its_lock_while_fetching():
    source = _LockSpy(next(CAPTURES.glob("022_*.txt")))
    sampler = Sampler(source, None)
    source.sampler = sampler
    assert sampler.chip_details(2, 1) is not None
    assert source.seen == [(2, 1, True)]
