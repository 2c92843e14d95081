"""The PCIe peak a copy is compared to: lane rates, which link is the device's, and the verdict."""

from __future__ import annotations

import pytest

from npuwatch.probes.runtime.protocol import Step, StepStatus
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.selftest import run_selftest
from npuwatch.selftest.link import find_link, lane_gb_s
from tests.selftest.helpers import fake_env


@pytest.mark.parametrize(
    ("speed", "width", "peak"),
    [
        (2.5, 1, 0.25),
        (5.0, 4, 2.0),
        (8.0, 16, 15.75),
        (16.0, 16, 31.51),
        (32.0, 16, 63.02),
        (64.0, 16, 121.0),
    ],
)
def test_theoretical_rate_per_generation(speed, width, peak):
    # runtime-and-doctor.md §6.6: Gen3 ≈ 0.985, Gen4 ≈ 1.97, Gen5 ≈ 3.94 GB/s per lane.
    assert lane_gb_s(speed) * width == pytest.approx(peak, rel=2e-3)


def _machine(tmp_path, *links):
    builder = SysrootBuilder(tmp_path / "root")
    for index, (speed, width) in enumerate(links):
        builder.add_pci_function(
            f"0000:{0x41 + index:02x}:00.0", 0xD802, current_speed=speed, current_width=width
        )
    return builder.sysroot()


def test_identical_links_need_no_mapping(tmp_path):
    sysroot = _machine(tmp_path, ("16.0 GT/s PCIe", 16), ("16.0 GT/s PCIe", 16))
    link, why = find_link(sysroot, 1, {"ASCEND_VISIBLE_DEVICES": "3"})
    assert why == "" and link is not None
    assert (link.label, link.peak_gb_s) == ("PCIe Gen4 x16", 31.51)
    assert "every Ascend link (2)" in link.basis


def test_different_links_map_in_bus_order_through_visible_devices(tmp_path):
    sysroot = _machine(tmp_path, ("16.0 GT/s PCIe", 16), ("8.0 GT/s PCIe", 8))
    link, _ = find_link(sysroot, 0, {"ASCEND_RT_VISIBLE_DEVICES": "1"})
    assert link is not None and link.label == "PCIe Gen3 x8" and link.degraded
    assert "assumed" in link.basis
    none, why = find_link(sysroot, 0, {"ASCEND_VISIBLE_DEVICES": "1"})
    assert none is None and "ASCEND_VISIBLE_DEVICES" in why


def test_no_sysfs_no_ratio(tmp_path):
    link, why = find_link(SysrootBuilder(tmp_path / "empty").sysroot(), 0, {})
    assert link is None and "no Ascend PCIe link" in why


def test_slow_copies_warn_with_the_ratio(tmp_path):
    sysroot = _machine(tmp_path, ("16.0 GT/s PCIe", 16))
    env = fake_env(tmp_path / "ledger", NPUWATCH_FAKE_GBPS="h2d=3,d2h=3")
    report = run_selftest([0], environ=env, timeout_s=30, sysroot=sysroot)
    h2d = report.runs[0].result(Step.COPY_H2D)
    assert h2d.status is StepStatus.WARN
    assert h2d.metrics["link"]["label"] == "PCIe Gen4 x16" and h2d.metrics["link"]["peak_gb_s"] == 31.51
    assert h2d.metrics["ratio_to_link"] == pytest.approx(h2d.metrics["best_gb_s"] / 31.51, abs=1e-3)
    assert h2d.metrics["ratio_to_link"] < 0.5
    assert "of the 31.51 GB/s PCIe Gen4 x16 carries" in h2d.warnings[0]
    assert report.exit_code == 1


def test_copies_faster_than_the_link_are_suspect(tmp_path):
    sysroot = _machine(tmp_path, ("2.5 GT/s PCIe", 1))
    report = run_selftest([0], environ=fake_env(tmp_path / "ledger"), timeout_s=30, sysroot=sysroot)
    h2d = report.runs[0].result(Step.COPY_H2D)
    assert h2d.status is StepStatus.WARN and "more than PCIe Gen1 x1 can carry" in h2d.warnings[0]
