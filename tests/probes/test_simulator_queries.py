"""Tests of the simulator's key/value queries, its sysroot tree, process lookup and dynamics."""

from __future__ import annotations

from typing import Iterator, List

import pytest

from npuwatch.probes.container import detect_container
from npuwatch.probes.devices import scan_dev
from npuwatch.probes.host import HostProbe
from npuwatch.probes.npu_smi import FailureKind, NpuSmi, NpuSmiError
from npuwatch.probes.npu_smi import lists as npu_smi_lists
from npuwatch.probes.npu_smi import memory_reports as npu_smi_memory_reports
from npuwatch.probes.npu_smi import reports as npu_smi_reports
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.pci import scan_pci
from npuwatch.probes.runner import run
from npuwatch.probes.simulator import Simulation
from npuwatch.probes.simulator.catalog import SCENARIOS
from npuwatch.probes.simulator.dynamics import machine_state, process_cpu_percent
from npuwatch.probes.simulator.fake_npu_smi import watch_rows
from npuwatch.probes.simulator.render_kv import render_list, render_mapping, render_query
from npuwatch.probes.sysroot import Sysroot
from tests.conftest import capture_text

NOW_S = 100.0
TRAINING = SCENARIOS["910b-training"]


@pytest.fixture(scope="module")
def training() -> Iterator[Simulation]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NPUWATCH_SIM_NOW", str(NOW_S))
        with Simulation.start("910b-training") as sim:
            yield sim


def test_queries_through_npu_smi_parse_to_the_state(training: Simulation) -> None:
    smi = NpuSmi(training.npu_smi)
    state = machine_state(TRAINING, NOW_S, training.seed)
    chip = state.chips[2]
    usages = npu_smi_reports.parse_usages(smi.query("usages", 2).text)
    assert (usages.npu_id, usages.chip_count) == (2, 1)
    assert usages.chips[0].aicore_percent == chip.aicore_percent
    assert usages.chips[0].hbm_capacity_mib == 65536
    power = npu_smi_reports.parse_power(smi.query("power", 2).text)
    assert power.chips[0].power_w == chip.power_w
    temp = npu_smi_reports.parse_temp(smi.query("temp", 2).text)
    assert temp.chips[0].temperature_c == chip.temperature_c
    common = npu_smi_reports.parse_common(smi.query("common", 2).text)
    assert (common.chips[0].temperature_c, common.chips[0].power_w) == (chip.temperature_c, chip.power_w)
    assert common.mcu_temperature_c is not None
    board = npu_smi_reports.parse_board(smi.query("board", 2).text)
    assert (board.pcie_bus_info, board.pci_device_id, board.chip_count) == ("0000:81:00.0", 0xD802, 1)
    procs = npu_smi_memory_reports.parse_proc_mem(smi.query("proc-mem", 2).text)
    wanted = [p for p in state.processes if p.spec.npu_id == 2]
    assert [(p.pid, p.memory_mib) for p in procs.chips[0].processes] == [
        (p.spec.pid, p.npu_memory_mib) for p in wanted
    ]
    memory = npu_smi_memory_reports.parse_memory(smi.query("memory", 2).text)
    assert memory.chips[0].hbm_capacity_mib == 65536


def test_list_and_mapping_parse(training: Simulation) -> None:
    smi = NpuSmi(training.npu_smi)
    listed = npu_smi_lists.parse_list(smi.call(["info", "-l"]).text)
    assert (listed.total_count, [c.npu_id for c in listed.cards]) == (8, list(range(8)))
    mapping = npu_smi_lists.parse_mapping(smi.call(["info", "-m"]).text)
    assert [(r.npu_id, r.chip_logic_id, r.chip_name) for r in mapping.chips][:2] == [
        (0, 0, "Ascend 910B3"),
        (1, 1, "Ascend 910B3"),
    ]
    assert len(mapping.rows) == 16 and mapping.warnings == ()


def test_list_and_mapping_copy_captures_023_024() -> None:
    state = machine_state(SCENARIOS["idle"], 10.0)
    assert render_list(state) == capture_text("024").rstrip("\n") + "\n"
    assert render_mapping(state) == capture_text("023").rstrip("\n") + "\n"


def test_a3_and_duo_queries() -> None:
    a3 = machine_state(SCENARIOS["a3"], 300.0)
    mapping = npu_smi_lists.parse_mapping(render_mapping(a3))
    assert [r.chip_phy_id for r in mapping.chips] == list(range(16))
    power = npu_smi_reports.parse_power(render_query(a3, "power", 4, None))
    assert [c.power_w is None for c in power.chips] == [False, True]
    duo = machine_state(SCENARIOS["310p-duo"], 300.0)
    listed = npu_smi_lists.parse_list(render_list(duo))
    assert [(c.npu_id, c.chip_count) for c in listed.cards] == [(2, 2), (5, 2)]
    usages = npu_smi_reports.parse_usages(render_query(duo, "usages", 5, 1))
    assert usages.chips[0].hbm_capacity_mib is None
    assert usages.chips[0].ddr_capacity_mib == 43693


def test_chip_alarm_health_query() -> None:
    state = machine_state(SCENARIOS["chip-alarm"], 60.0)
    report = npu_smi_reports.parse_health(render_query(state, "health", 3, None))
    assert report.chips[0].health.value == "Alarm"
    assert report.chips[0].error_codes == ("80E01801",)
    single = npu_smi_reports.parse_health(render_query(state, "health", 3, 0))
    assert single.chips[0].health.value == "Alarm"
    fine = npu_smi_reports.parse_health(render_query(state, "health", 2, None))
    assert (fine.chips[0].health.value, fine.chips[0].error_codes) == ("OK", ())
    table = parse_info(render_query(state, "health", 3, None))
    assert table.chips == ()


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["info", "-t", "bogus", "-i", "0"], FailureKind.BAD_ARGUMENT),
        (["info", "-t", "usages", "-i", "42"], FailureKind.BAD_ARGUMENT),
        (["info", "-t", "usages", "-i", "0", "-c", "3"], FailureKind.BAD_ARGUMENT),
        (["info", "-t", "ecc", "-i", "0"], FailureKind.NOT_SUPPORTED),
    ],
)
def test_bad_queries_fail_like_the_real_tool(
    training: Simulation, args: List[str], kind: FailureKind
) -> None:
    with pytest.raises(NpuSmiError) as info:
        NpuSmi(training.npu_smi).call(args)
    assert info.value.failure.kind is kind


def test_watch_streams_rows_until_killed(training: Simulation) -> None:
    result = run([str(training.npu_smi), "info", "watch", "-i", "1"], timeout_s=1.5)
    assert result.timed_out
    stream = npu_smi_lists.parse_watch(result.stdout)
    assert stream.rows and {r.npu_id for r in stream.rows} == {1}
    state = machine_state(TRAINING, NOW_S, training.seed)
    assert stream.rows[0].power_w == state.chips[1].power_w
    assert watch_rows(state)[0].endswith(" ")  # 054: trailing field padding


def test_tree_is_a_whole_machine(training: Simulation) -> None:
    root = training.sysroot()
    inventory = scan_pci(root)
    assert len(inventory.functions) == 8
    assert all(f.driver == "devdrv_device_driver" for f in inventory.functions)
    assert scan_dev(root).davinci_ids == tuple(range(8))
    assert detect_container(root).in_container is False
    assert detect_container(root).host_pid_namespace is True
    assert training.environ.get("ASCEND_HOME_PATH")
    assert root.read_text("/usr/local/Ascend/driver/version.info").startswith("Version=24.1.rc2")


@pytest.mark.parametrize(
    ("name", "bound", "davinci", "manager", "container"),
    [
        ("no-driver", False, (), False, False),
        ("container-missing-nodes", True, tuple(range(8)), False, True),
        ("310p-duo", True, (0, 1, 2, 3), True, False),
    ],
)
def test_broken_machines(name: str, bound: bool, davinci: tuple, manager: bool, container: bool) -> None:
    with Simulation.start(name) as sim:
        root = sim.sysroot()
        inventory = scan_pci(root)
        dev = scan_dev(root)
        found = detect_container(root)
    assert all((f.driver is not None) == bound for f in inventory.functions)
    assert dev.davinci_ids == davinci and dev.has_davinci_manager == manager
    assert found.in_container == container
    assert found.host_pid_namespace is (not container)
    if name == "310p-duo":
        assert [f.chips for f in inventory.functions] == [2, 2]


def test_degraded_link_on_npu_5() -> None:
    with Simulation.start("pcie-degraded") as sim:
        inventory = scan_pci(sim.sysroot())
    degraded = [f.bdf for f in inventory.functions if f.link.degraded]
    assert degraded == ["0000:02:00.0"]  # NPU 5's Bus-Id


def test_process_lookup_fills_host_details(training: Simulation) -> None:
    table = parse_info(NpuSmi(training.npu_smi).info().text)
    probe = HostProbe(training.process_lookup, host_pid_namespace=True)
    enriched = probe.enrich(table.processes)
    assert enriched and all(p.host is not None for p in enriched)
    first = enriched[0].host
    assert first is not None and first.user == "alice" and "train.py" in (first.command or "")
    assert first.rss_bytes and first.cpu_percent is not None
    assert isinstance(training.process_lookup.lookup(1), str)
    found = training.process_lookup.lookup(enriched[0].pid)
    assert not isinstance(found, str)
    assert found.name == "python3"


def test_training_dips_idle_the_npu_but_busy_the_host() -> None:
    worker = TRAINING.processes[0]
    profile = worker.profile
    dip_s = profile.warmup_s + profile.dip_every_s - 1.0
    steady_s = profile.warmup_s + profile.dip_every_s + 5.0
    dip, steady = machine_state(TRAINING, dip_s), machine_state(TRAINING, steady_s)
    assert dip.chips[0].aicore_percent <= 10 < 85 <= steady.chips[0].aicore_percent
    assert process_cpu_percent(worker, dip_s, 0) > 300 > process_cpu_percent(worker, steady_s, 0)
    assert dip.chips[0].power_w is not None and steady.chips[0].power_w is not None
    assert dip.chips[0].power_w < steady.chips[0].power_w - 100
    # Temperature lags power: a 4 s dip barely cools the chip.
    assert abs(dip.chips[0].temperature_c - steady.chips[0].temperature_c) <= 4


def test_hbm_grows_during_warmup_then_stays() -> None:
    used = [machine_state(TRAINING, t).chips[0].hbm_used_mib for t in (0.0, 10.0, 25.0, 60.0, 600.0)]
    assert used[0] < used[1] < used[2] < used[3] == used[4]


def test_eval_process_comes_and_goes() -> None:
    counts = [len(machine_state(TRAINING, t).processes) for t in (60.0, 90.0, 130.0, 260.0, 320.0)]
    assert counts == [8, 9, 8, 9, 8]


def test_checkpoint_pause() -> None:
    profile = TRAINING.processes[0].profile
    pause_s = profile.warmup_s + profile.checkpoint_every_s + 2.0
    state = machine_state(TRAINING, pause_s)
    evaluating = {p.spec.npu_id for p in state.processes if p.spec.user != "alice"}
    assert all(c.aicore_percent <= 3 for c in state.chips if c.spec.npu_id not in evaluating)


def test_sysroot_reads_only_the_tree(training: Simulation) -> None:
    assert Sysroot(training.root).exists("/usr/local/bin/npu-smi")
