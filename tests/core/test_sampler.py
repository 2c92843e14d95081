"""Tests for the Sampler: fresh, stale and failed ticks; PCIe merge; devices; history; no overlap."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import List, Optional

import pytest

from npuwatch.chip_source import SourceReading
from npuwatch.chip_state import STALE_AFTER_S
from npuwatch.model import Health, MetricStatus, PcieLink
from npuwatch.probes.npu_smi import FailureKind, NpuSmiFailure
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.sampler import PCI_REFRESH_S, Sampler
from tests.conftest import capture_text as capture

TIMEOUT = NpuSmiFailure(FailureKind.TIMEOUT, "npu-smi did not answer within 5.0 s", "check dmesg")


class ScriptedSource:
    """Returns the given readings in turn (the last one repeats)."""

    label = "npu-smi"
    probe_name = "npu-smi"
    provides_details = False
    provides_processes = True
    provides_logic_ids = False

    def __init__(self, readings: List[SourceReading], delay_s: float = 0.0) -> None:
        self.readings = readings
        self.calls = 0
        self.delay_s = delay_s
        self.running = 0
        self.max_running = 0

    def read(self) -> SourceReading:
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        time.sleep(self.delay_s)
        reading = self.readings[min(self.calls, len(self.readings) - 1)]
        self.calls += 1
        self.running -= 1
        return reading

    def chip_details(self, npu_id: int, chip_id: int) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def good(name: str = "001") -> SourceReading:
    return SourceReading(parse_info(capture(name)).to_reading(), None, 0.2)


def failed(failure: Optional[NpuSmiFailure] = None) -> SourceReading:
    return SourceReading(None, (failure or TIMEOUT).to_source_failure(), 5.0)


def make(tmp_path, readings, **kw) -> tuple:
    clock = Clock()
    source = ScriptedSource(readings)
    sampler = Sampler(source, Sysroot(tmp_path, environ={}), None, clock=clock, monotonic=clock, **kw)
    return sampler, clock, source


def test_fresh_sample_carries_the_table(tmp_path):
    sampler, _, _ = make(tmp_path, [good()])
    snap = sampler.sample()
    assert len(snap.chips) == 8
    assert snap.chips[0].hbm_used_mib == 33126
    assert snap.versions.npu_smi == "25.2.0"
    assert snap.versions.driver == "25.2.0"  # no version.info in the tree: the header's Version:
    assert snap.probe("npu-smi").status is MetricStatus.OK
    assert snap.source == "npu-smi"
    # no host probe: each process says why it has no host details
    assert all(p.host is None and p.host_unavailable for p in snap.processes)


def test_failure_within_ten_seconds_keeps_values_marked_stale(tmp_path):
    sampler, clock, _ = make(tmp_path, [good(), failed()])
    sampler.sample()
    clock.now += 3
    snap = sampler.sample()
    chip = snap.chips[0]
    assert chip.power_w == 135.9
    assert chip.notes["power_w"].status is MetricStatus.STALE
    assert "3 s ago" in chip.notes["power_w"].reason
    assert "power_w" not in chip.unavailable()  # stale values are numbers, not gaps
    assert snap.probe("npu-smi").status is MetricStatus.TIMEOUT
    assert any("did not answer" in w for w in snap.warnings)


def test_failure_after_ten_seconds_gives_nulls_with_the_failure_status(tmp_path):
    sampler, clock, _ = make(tmp_path, [good(), failed()])
    sampler.sample()
    clock.now += STALE_AFTER_S + 1
    snap = sampler.sample()
    chip = snap.chips[0]
    assert chip.identity.bus_id == "0000:C1:00.0"  # identity survives
    assert chip.health is Health.UNKNOWN
    assert chip.power_w is None
    assert chip.notes["power_w"].status is MetricStatus.TIMEOUT
    assert chip.unavailable()["hbm_used_mib"].startswith("npu-smi did not answer")
    assert snap.processes == ()


def test_failure_with_no_history_and_no_pci_has_no_chips(tmp_path):
    failure = NpuSmiFailure(
        FailureKind.DCMI, "npu-smi failed with DCMI error -8005", "mount the nodes", dcmi_code=-8005
    )
    sampler, _, _ = make(tmp_path, [failed(failure)])
    snap = sampler.sample()
    assert snap.chips == ()
    assert snap.probe("npu-smi").status is MetricStatus.ERROR
    assert "mount the nodes" in snap.warnings[0]


def test_pcie_link_is_merged_by_bus_id(tmp_path):
    builder = SysrootBuilder(tmp_path)
    builder.add_pci_function("0000:c1:00.0", device_id=0xD802, current_width=8, max_width=16)
    sampler, _, _ = make(tmp_path, [good()])
    snap = sampler.sample()
    first = snap.chip(0)
    assert first is not None and first.pcie is not None
    assert (first.pcie.current_width, first.pcie.max_width, first.pcie.degraded) == (8, 16, True)
    assert snap.chip(1).pcie is None  # not in the tree


def test_devices_filter_keeps_only_those_npus(tmp_path):
    sampler, _, _ = make(tmp_path, [good()], devices=frozenset({1, 3}))
    snap = sampler.sample()
    assert [c.identity.npu_id for c in snap.chips] == [1, 3]
    assert {p.npu_id for p in snap.processes} == {1, 3}


def test_history_records_each_chip(tmp_path):
    sampler, clock, _ = make(tmp_path, [good(), good("022")])
    sampler.sample()
    clock.now += 1
    sampler.sample()
    assert sampler.history.values((0, 0), "hbm_used_mib") == [33126.0, 2654.0]
    assert sampler.history.values((0, 0), "npu_util_percent") == [None, None]
    assert len(sampler.history.chips()) == 8


def test_concurrent_samples_never_overlap_npu_smi_calls(tmp_path):
    source = ScriptedSource([good()], delay_s=0.05)
    sampler = Sampler(source, Sysroot(tmp_path, environ={}), None)
    threads = [threading.Thread(target=sampler.sample) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert source.calls == 4
    assert source.max_running == 1


def test_versions_come_from_install_files(tmp_path):
    builder = SysrootBuilder(tmp_path)
    builder.install_driver("24.1.rc1")
    sampler, _, _ = make(tmp_path, [good()])
    snap = sampler.sample()
    assert snap.versions.driver == "24.1.rc1"  # version.info wins over the table header
    assert snap.versions.npu_smi == "25.2.0"


def test_failure_with_no_history_lists_pci_chips_with_the_failure_status(tmp_path):
    builder = SysrootBuilder(tmp_path)
    builder.add_pci_function("0000:c1:00.0", device_id=0xD802)
    builder.add_pci_function("0000:01:00.0", device_id=0xD500, subsystem_device_id=0x0110)  # a 310P Duo
    sampler, _, _ = make(tmp_path, [failed()])
    snap = sampler.sample()
    assert [(c.identity.npu_id, c.identity.chip_id, c.identity.bus_id) for c in snap.chips] == [
        (0, 0, "0000:01:00.0"),
        (0, 1, "0000:01:00.0"),
        (1, 0, "0000:C1:00.0"),
    ]
    chip = snap.chips[2]
    assert chip.identity.name == "Ascend 910B"
    assert chip.health is Health.UNKNOWN
    assert {note.status for note in chip.notes.values()} == {MetricStatus.TIMEOUT}
    assert "PCI bus order" in chip.unavailable()["power_w"]
    assert any("listed from sysfs" in w for w in snap.warnings)


def test_a_chip_that_vanishes_stays_listed_with_the_reason(tmp_path):
    builder = SysrootBuilder(tmp_path)
    builder.add_pci_function("0000:c2:00.0", device_id=0xD802, present=False)
    table = parse_info(capture("001"))
    chips = tuple(c for c in table.chips if c.identity.npu_id != 1)
    without_npu_1 = SourceReading(replace(table, chips=chips).to_reading(), None, 0.2)
    sampler, clock, _ = make(tmp_path, [good(), without_npu_1])
    sampler.sample()
    clock.now += 1
    snap = sampler.sample()
    gone = snap.chip(1)
    assert gone is not None
    assert gone.power_w is None
    assert gone.notes["power_w"].status is MetricStatus.ERROR
    assert "no longer lists this chip" in gone.notes["power_w"].reason
    assert "fell off the bus" in gone.notes["power_w"].reason  # config space reads ff ff
    assert [c.identity.npu_id for c in snap.chips] == list(range(8))
    assert any("NPU 1" in w and "no longer lists" in w for w in snap.warnings)


@pytest.mark.parametrize(("probe_name", "said"), [("dcmi", "DCMI"), ("npu-smi", "npu-smi")])
def test_a_vanished_chip_is_said_missing_from_the_source_that_read_the_chips(tmp_path, probe_name, said):
    table = parse_info(capture("001"))
    chips = tuple(c for c in table.chips if c.identity.npu_id != 1)
    without_npu_1 = SourceReading(replace(table, chips=chips).to_reading(), None, 0.2)
    sampler, clock, source = make(tmp_path, [good(), without_npu_1])
    source.probe_name = probe_name
    sampler.sample()
    clock.now += 1
    gone = sampler.sample().chip(1)
    assert gone is not None and gone.lost_reason is not None
    assert gone.lost_reason.startswith(f"{said} no longer lists this chip")


def test_a_link_that_trains_down_shows_on_its_chip_at_the_next_pci_refresh(tmp_path):
    builder = SysrootBuilder(tmp_path)
    builder.add_pci_function("0000:c1:00.0", device_id=0xD802)  # NPU 0 of capture 001
    sampler, clock, _ = make(tmp_path, [good()] * 3)
    assert sampler.sample().chip(0).pcie.current_width == 16
    builder.add_pci_function("0000:c1:00.0", device_id=0xD802, current_width=4)
    clock.now += PCI_REFRESH_S / 2
    assert sampler.sample().chip(0).pcie.current_width == 16  # sysfs is read every PCI_REFRESH_S
    clock.now += PCI_REFRESH_S / 2
    link = sampler.sample().chip(0).pcie
    assert (link.current_width, link.degraded) == (4, True)


def test_replay_reads_nothing_of_this_machine(tmp_path):
    sampler = Sampler(ScriptedSource([good()]), None, None)
    snap = sampler.sample()
    assert snap.versions.driver == "25.2.0"  # from the capture's header only
    assert snap.chip(0).pcie is None
    assert snap.probe("sysfs") is None


def test_a_crashing_probe_becomes_an_error_report_not_a_lost_tick(tmp_path, monkeypatch):
    def boom(_sysroot, _previous=None):
        raise PermissionError(13, "Permission denied", "/sys/bus/pci/devices")

    monkeypatch.setattr("npuwatch.sampler.scan_pci", boom)
    sampler, _, _ = make(tmp_path, [good()])
    snap = sampler.sample()
    assert len(snap.chips) == 8
    report = snap.probe("sysfs")
    assert report.status is MetricStatus.ERROR
    assert "Permission denied" in report.message


def test_stale_values_are_gaps_in_the_history(tmp_path):
    sampler, clock, _ = make(tmp_path, [good(), failed()])
    sampler.sample()
    clock.now += 1
    sampler.sample()
    assert sampler.history.values((0, 0), "power_w") == [135.9, None]


def test_history_covers_ten_minutes_at_short_intervals(tmp_path):
    sampler, _, _ = make(tmp_path, [good()], interval_s=0.2)
    assert sampler.history.capacity * 0.2 >= 600


def test_sampler_pauses_polling_while_a_selftest_measures(tmp_path):
    from npuwatch import polling_pause
    from npuwatch.feeds import FeedOptions, open_feed
    from npuwatch.sampler import PAUSED_WARNING

    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    with open_feed(FeedOptions(demo="910b-training")) as sampler:
        first = sampler.sample()
        calls = []
        original = sampler.source.read
        sampler.source.read = lambda: calls.append(1) or original()  # type: ignore[method-assign]
        old = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = str(tmp_path)
        try:
            with polling_pause.pause(30.0, environ=env):
                paused = sampler.sample()
            resumed = sampler.sample()
        finally:
            if old is None:
                del os.environ["XDG_RUNTIME_DIR"]
            else:
                os.environ["XDG_RUNTIME_DIR"] = old
    assert PAUSED_WARNING in paused.warnings
    assert paused.chips == first.chips
    assert calls == [1]  # npu-smi was read only after the pause ended
    assert PAUSED_WARNING not in resumed.warnings


def test_the_feeds_fast_copies_equal_dataclasses_replace_and_leave_the_chip_as_it_was():
    chip = parse_info(capture("001")).chips[0]
    link = PcieLink(current_speed_gt_s=8.0, max_speed_gt_s=16.0, current_width=16, max_width=16)
    with_link = chip.with_pcie(link)
    assert with_link == replace(chip, pcie=link)
    assert with_link.pcie is link and chip.pcie is None
    with_both = with_link.with_workload(None)
    assert with_both == replace(chip, pcie=link, workload=None)
    assert with_both is not with_link
