"""Hardware checks: pci-devices, chip-health, hbm-held, pcie-link on simulated machines."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from npuwatch.chip_families import family_of
from npuwatch.doctor import facts
from npuwatch.doctor.checks import chip_health, hbm_held, pci_devices, pcie_link
from npuwatch.doctor.result import Group, Status
from npuwatch.judge import Thresholds, judge_chip
from npuwatch.judge.workload import WorkloadJudge
from npuwatch.model import Snapshot, WorkloadClass
from npuwatch.probes.npu_smi.table import parse_info
from tests.conftest import capture_text
from tests.doctor.machines import TestMachine, simulated


def set_health(text: str, npu_id: int, state: str) -> str:
    """``text`` (an ``npu-smi info`` table) with NPU ``npu_id``'s Health cell set to ``state``."""
    pattern = re.compile(rf"^(\| {npu_id}\s+\S+\s+\| )OK(\s+)\|", re.MULTILINE)
    return pattern.sub(lambda m: m.group(1) + state.ljust(2 + len(m.group(2))) + "|", text, count=1)


def set_hbm(text: str, bus_id: str, used_mib: int) -> str:
    """``text`` with the HBM used of the chip at ``bus_id`` set to ``used_mib``."""
    pattern = re.compile(rf"^(\| 0\s+\| {re.escape(bus_id)}\s+\|.*?)(\d+)\s?/ (\d+)(\s+\|)$", re.MULTILINE)
    return pattern.sub(lambda m: f"{m.group(1)}{used_mib}/ {m.group(3)}{m.group(4)}", text, count=1)


def as_user(monkeypatch, uid: int = 1000, name: str = "alice") -> None:
    identity = facts.UserIdentity(uid, name, frozenset({uid}), process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


def recording_npu_smi(tm: TestMachine) -> list:
    """Wrap the fake npu-smi in a script that logs every command line; returns a reader."""
    real = tm.npu_smi
    assert real is not None
    moved = real.with_name("npu-smi.real")
    real.rename(moved)
    log = real.with_name("calls.log")
    tm.builder.install_executable(
        "/usr/local/bin/npu-smi", f"#!/bin/sh\necho \"$*\" >> '{log}'\nexec '{moved}' \"$@\"\n"
    )
    return [log]


# ---------------------------------------------------------------- pci-devices


def test_pci_devices_passes_with_models_and_chips(tmp_path):
    finding = simulated(tmp_path).run(pci_devices.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "8 × Ascend 910B (8 chips)"
    assert any(line.startswith("0000:c1:00.0 Ascend 910B (19e5:d802)") for line in finding.details)
    assert pci_devices.CHECK.group is Group.HARDWARE


def test_pci_devices_counts_each_model_and_310p_duo_chips(tmp_path):
    tm = simulated(tmp_path, "310p-duo")
    tm.builder.add_pci_function("0000:c1:00.0", 0xD802)
    finding = tm.run(pci_devices.CHECK)
    assert finding.status is Status.PASS
    assert "2 × Ascend 310P (4 chips)" in finding.summary
    assert "1 × Ascend 910B (1 chip)" in finding.summary


def test_pci_devices_counts_virtual_functions_apart(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.add_pci_function("0000:c1:00.1", 0xD802, virtual_function=True)
    finding = tm.run(pci_devices.CHECK)
    assert finding.summary == "8 × Ascend 910B (8 chips), plus 1 virtual functions"


def test_pci_devices_fails_plainly_with_no_npu(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")
    tm.remove("/dev")
    finding = tm.run(pci_devices.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "no Ascend NPU on this machine"
    assert "lspci -d 19e5:" in finding.hint
    assert "passthrough" in finding.hint or "pass the NPU through" in finding.hint
    assert "BIOS" in finding.hint


def test_pci_devices_warns_when_only_device_nodes_exist(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")  # an SoC board (310B) or a hidden /sys
    finding = tm.run(pci_devices.CHECK)
    assert finding.status is Status.WARN
    assert "device nodes exist" in finding.summary
    assert "310B" in finding.hint
    assert "lspci -d 19e5:" in finding.hint
    assert "device nodes: /dev/davinci0" in finding.details[0]


def test_pci_devices_fails_a_function_that_fell_off_the_bus(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.add_pci_function("0000:82:00.0", 0xD802, present=False)
    finding = tm.run(pci_devices.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "1 of 8 Ascend PCI functions fell off the bus: 0000:82:00.0"
    assert "ff ff" in finding.hint
    assert "lspci -vv -s 0000:82:00.0" in finding.hint
    assert "dmesg" in finding.hint


# ---------------------------------------------------------------- chip-health


def test_chip_health_passes_when_all_chips_are_ok(tmp_path):
    finding = simulated(tmp_path).run(chip_health.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "all 8 chips are OK"
    assert chip_health.CHECK.requires == ("npu-smi",)
    assert chip_health.CHECK.runs_npu_smi


def test_chip_health_fails_an_alarm_chip_with_its_error_code(tmp_path):
    tm = simulated(tmp_path, "chip-alarm")
    finding = tm.run(chip_health.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == (
        "NPU 3 (chip 0, 0000:82:00.0) is in Alarm state: error 80E01801 HBM multi-bit ECC error"
        " (Huawei's handling: restart-business)"
    )
    assert "`npu-smi info -t health -i 3 -c 0`" in finding.hint
    # Huawei keeps the chip in service on a restart-business code: restart the job, no reset.
    assert finding.hint.startswith("Huawei's handling of the code is restart-business: restart the job")
    assert "set -t reset" not in finding.hint


def test_chip_health_on_a_restart_npu_code_recommends_the_reset(tmp_path):
    finding = simulated(tmp_path, "error-code").run(chip_health.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary.endswith("error 80E18005 HBMC CA parity error (Huawei's handling: restart-npu)")
    assert finding.hint.startswith("Huawei's handling of the code is restart-npu: stop the jobs on it")
    assert "`npu-smi set -t reset -i 6 -c 0`" in finding.hint
    assert "reboot" in finding.hint


def test_chip_health_only_recommends_a_reset_never_runs_one(tmp_path):
    tm = simulated(tmp_path, "chip-alarm")
    (log,) = recording_npu_smi(tm)
    tm.run(chip_health.CHECK)
    calls = log.read_text().splitlines()
    assert calls == ["info", "info -t health -i 3 -c 0"]


def test_chip_health_warns_on_warning_state(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(set_health(capture_text("022"), 5, "Warning"))
    finding = tm.run(chip_health.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "NPU 5 (chip 0, 0000:02:00.0) is in Warning state"
    assert "`npu-smi set -t reset -i 5 -c 0`" in finding.hint


def test_chip_health_fails_critical_and_lists_every_sick_chip(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(set_health(set_health(capture_text("022"), 2, "Warning"), 6, "Critical"))
    finding = tm.run(chip_health.CHECK)
    assert finding.status is Status.FAIL
    assert finding.summary == "2 chips are not OK: NPU 2 Warning, NPU 6 Critical"
    assert len(finding.details) == 2


def test_chip_health_names_the_processes_on_a_sick_chip(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(set_health(capture_text("001"), 1, "Alarm"))
    finding = tm.run(chip_health.CHECK)
    assert finding.status is Status.FAIL
    assert "processes on it: 314487 VLLMWorker_TP" in finding.details[0]


def test_chip_health_skips_without_a_table(tmp_path):
    tm = simulated(tmp_path, "container-missing-nodes")
    finding = tm.run(chip_health.CHECK)
    assert finding.status is Status.SKIP


# ---------------------------------------------------------------- hbm-held


def test_hbm_held_passes_on_a_training_node(tmp_path):
    finding = simulated(tmp_path).run(hbm_held.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "no memory held without a process; processes on 8 of 8 chips"


def test_hbm_held_passes_an_idle_node_at_the_driver_baseline(tmp_path):
    finding = simulated(tmp_path, "idle").run(hbm_held.CHECK)
    assert finding.status is Status.PASS


def test_hbm_held_warns_on_memory_held_with_no_process(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(set_hbm(capture_text("022"), "0000:82:00.0", 30000))
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "NPU 3 holds 30000 MiB of HBM with no process"
    assert "fuser -v /dev/davinci*" in finding.hint
    assert "`npu-smi set -t reset -i 3 -c 0`" in finding.hint
    assert "NPU 3: 30000 of 32768 MiB HBM in use with no process" in finding.details[0]


def test_hbm_held_threshold_is_more_than_the_familys_idle_memory_plus_two_gib(tmp_path):
    # The judge's rule (README: "more than 2 GiB above what an idle chip of its family holds").
    idle_mib = family_of("910B4").idle_memory_mib
    assert idle_mib is not None
    edge = idle_mib + Thresholds().hbm_held_min_mib
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(set_hbm(capture_text("022"), "0000:82:00.0", edge))
    assert tm.run(hbm_held.CHECK).status is Status.PASS
    tm.scripted_npu_smi(set_hbm(capture_text("022"), "0000:82:00.0", edge + 1))
    assert tm.run(hbm_held.CHECK).status is Status.WARN
    # 5.5 GB left on a 32 GB 910B4 is held.
    tm.scripted_npu_smi(set_hbm(capture_text("022"), "0000:82:00.0", 5632))
    assert tm.run(hbm_held.CHECK).status is Status.WARN


def set_aicore(text: str, bus_id: str, percent: int) -> str:
    """``text`` with the AI Core % of the chip at ``bus_id`` set to ``percent``."""
    pattern = re.compile(rf"^(\| 0\s+\| {re.escape(bus_id)}\s+\| )(\d+)(\s+)", re.MULTILINE)
    return pattern.sub(
        lambda m: f"{m.group(1)}{str(percent).ljust(len(m.group(2) + m.group(3)))}", text, count=1
    )


def test_hbm_held_and_the_judge_agree_a_busy_chip_with_no_process_is_in_use_elsewhere(tmp_path):
    # Another tenant's job at 90 % AI Core, its PID not listed: not memory to free, for the doctor
    # as for the judge (one rule: judge.rules.held_memory).
    text = set_aicore(set_hbm(capture_text("022"), "0000:82:00.0", 30000), "0000:82:00.0", 90)
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(text)
    assert tm.run(hbm_held.CHECK).status is Status.PASS
    table = parse_info(text)
    busy = next(c for c in table.chips if c.identity.bus_id == "0000:82:00.0")
    assert busy.aicore_percent == 90
    judged = WorkloadJudge().judge(Snapshot(datetime.now(timezone.utc), "t", chips=(busy,)))
    assert judged.chips[0].workload is not None
    assert judged.chips[0].workload.kind is WorkloadClass.IN_USE_ELSEWHERE
    assert judge_chip(judged.chips[0]).reasons == ()


def _owned_by(tm: TestMachine, pid: int, uid: int, name: str) -> None:
    tm.builder.write_file(f"/proc/{pid}/status", f"Name:\tpython3\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    tm.builder.write_file("/etc/passwd", f"{name}:x:{uid}:{uid}::/home/{name}:/bin/bash\n")


def test_hbm_held_warns_when_other_users_hold_the_chips(tmp_path, monkeypatch):
    as_user(monkeypatch, 1000, "alice")
    tm = simulated(tmp_path, "chip-alarm")
    _owned_by(tm, 48211, 1001, "bob")
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "NPU 0 in use by other users (bob; 50337 MiB held)"
    assert "use the free NPUs (NPU 3) through ASCEND_RT_VISIBLE_DEVICES" in finding.hint
    assert "ps -o user,pid,etime,cmd -p 48211" in finding.hint
    assert finding.details == ("NPU 0: PID 48211 python3 of bob, 50337 MiB",)


def test_hbm_held_own_processes_are_not_busy(tmp_path, monkeypatch):
    as_user(monkeypatch, 1001, "bob")
    tm = simulated(tmp_path)
    _owned_by(tm, 48211, 1001, "bob")
    assert tm.run(hbm_held.CHECK).status is Status.PASS


def test_hbm_held_says_every_npu_is_busy(tmp_path, monkeypatch):
    as_user(monkeypatch)
    tm = simulated(tmp_path)
    _owned_by(tm, 48211, 1001, "bob")
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.WARN
    assert finding.hint.startswith("every NPU is in use")


def test_hbm_held_does_not_judge_owners_from_a_private_pid_namespace(tmp_path, monkeypatch):
    as_user(monkeypatch)
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker", host_pid=False)
    _owned_by(tm, 48211, 1001, "bob")
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.PASS
    assert any("cannot be told from inside a container" in line for line in finding.details)


def test_hbm_held_in_a_container_names_other_containers(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.mark_container("docker")
    tm.scripted_npu_smi(set_hbm(capture_text("022"), "0000:82:00.0", 30000))
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.WARN
    assert "another container's process" in finding.hint


def test_hbm_held_skips_output_without_a_process_table(tmp_path):
    tm = simulated(tmp_path)
    tm.scripted_npu_smi(capture_text("039"))  # 310B, no process section
    finding = tm.run(hbm_held.CHECK)
    assert finding.status is Status.SKIP
    assert "no process table" in finding.summary


# ---------------------------------------------------------------- pcie-link


def test_pcie_link_passes_at_full_speed_and_width(tmp_path):
    finding = simulated(tmp_path).run(pcie_link.CHECK)
    assert finding.status is Status.PASS
    assert finding.summary == "8 links at their maximum (x16, 32 GT/s)"
    assert pcie_link.CHECK.needs_hardware


def test_pcie_link_warns_on_the_degraded_scenario(tmp_path):
    finding = simulated(tmp_path, "pcie-degraded").run(pcie_link.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == "0000:02:00.0 PCIe link runs at x8 of x16, 16 of 32 GT/s"
    assert "reseat the card" in finding.hint
    assert "BIOS" in finding.hint
    assert "`lspci -vv -s 0000:02:00.0 | grep -e LnkCap -e LnkSta`" in finding.hint


def test_pcie_link_notes_a_slot_that_limits_the_link(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.add_pci_function(
        "0000:c1:00.0",
        0xD802,
        current_speed="16.0 GT/s PCIe",
        max_speed="32.0 GT/s PCIe",
        upstream_max_speed="16.0 GT/s PCIe",
    )
    finding = tm.run(pcie_link.CHECK)
    assert finding.status is Status.WARN
    assert finding.summary == (
        "0000:c1:00.0 PCIe link runs at 16 of 32 GT/s (the slot's port 0000:c0:01.0 supports at most 16 GT/s)"
    )
    assert finding.hint.startswith("the slot, not the card, limits the link")


def test_pcie_link_speed_alone_may_be_power_saving(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.add_pci_function(
        "0000:c1:00.0", 0xD802, current_speed="2.5 GT/s PCIe", max_speed="32.0 GT/s PCIe"
    )
    finding = tm.run(pcie_link.CHECK)
    assert finding.status is Status.WARN
    assert "2.5 of 32 GT/s" in finding.summary
    assert "power saving at idle" in finding.hint


def test_pcie_link_lists_several_degraded_links(tmp_path):
    tm = simulated(tmp_path, "pcie-degraded")
    tm.builder.add_pci_function("0000:c1:00.0", 0xD802, current_width=4, max_width=16)
    finding = tm.run(pcie_link.CHECK)
    assert finding.summary.startswith("2 PCIe links below their maximum: ")
    assert "0000:c1:00.0: x4 of x16" in finding.details


def test_pcie_link_skips_without_link_attributes(tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")
    tm.builder.add_pci_function(
        "0000:c1:00.0", 0xD802, current_speed=None, current_width=None, max_width=None
    )
    finding = tm.run(pcie_link.CHECK)
    assert finding.status is Status.SKIP
