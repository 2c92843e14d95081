"""Tests of the demo simulator: every scenario runs through the real npu-smi path and parses back."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import psutil
import pytest

from npuwatch.probes.npu_smi import FailureKind, NpuSmi, NpuSmiError
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.simulator import Simulation, list_scenarios
from npuwatch.probes.simulator.catalog import SCENARIOS
from npuwatch.probes.simulator.dynamics import MachineState, machine_state
from npuwatch.probes.simulator.render import render_info
from npuwatch.probes.simulator.scenarios import Layout, NpuSmiMode, Scenario
from tests.conftest import capture_text

NORMAL = [s.name for s in SCENARIOS.values() if s.npu_smi_mode is NpuSmiMode.NORMAL]
ERRORS = [s.name for s in SCENARIOS.values() if s.npu_smi_mode is NpuSmiMode.ERROR]
TIMES_S = (0.0, 3.0, 21.0, 38.0, 69.0, 100.0, 127.5, 271.0, 1000.0, 86_400.0)
REQUIRED = (
    "910b-training",
    "a3",
    "310p-duo",
    "no-driver",
    "container-missing-nodes",
    "npu-smi-hang",
    "chip-alarm",
    "pcie-degraded",
)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "100")


@pytest.fixture
def training(frozen: None) -> Iterator[Simulation]:
    with Simulation.start("910b-training") as sim:
        yield sim


def test_list_scenarios_has_the_required_ones_default_first() -> None:
    names = [name for name, _ in list_scenarios()]
    assert names[0] == "910b-training"
    assert set(REQUIRED) <= set(names)
    assert all(description and "\n" not in description for _, description in list_scenarios())


def test_unknown_scenario_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="910b-training") as info:
        Simulation.start("no-such-machine")
    assert "a3" in str(info.value)


def _expected_identity(scenario: Scenario) -> list:
    return [
        (
            c.npu_id,
            c.chip_id,
            c.name,
            None if c.bus_id == "NA" else c.bus_id,
            c.phy_id if scenario.layout is Layout.A3 else None,
            c.phy_id if scenario.layout is Layout.P310 else None,
        )
        for c in scenario.chips
    ]


@pytest.mark.parametrize("name", NORMAL)
def test_fake_npu_smi_parses_to_the_scenario_chips(name: str, frozen: None) -> None:
    with Simulation.start(name) as sim:
        assert sim.npu_smi.is_file()
        text = NpuSmi(sim.npu_smi).info().text
    table = parse_info(text)
    assert table.warnings == ()
    got = [
        (i.npu_id, i.chip_id, i.name, i.bus_id, i.phy_id, i.device_id)
        for i in (c.identity for c in table.chips)
    ]
    assert got == _expected_identity(sim.scenario)
    assert table.npu_smi_version == sim.scenario.versions.npu_smi
    assert len({len(line) for line in text.splitlines()}) == 1  # every line the same width


def _check_parsed(state: MachineState) -> None:
    table = parse_info(render_info(state))
    assert table.warnings == ()
    layout = state.scenario.layout
    assert len(table.chips) == len(state.chips)
    for parsed, made in zip(table.chips, state.chips):
        spec = made.spec
        assert parsed.health.value == made.health
        assert parsed.power_w == made.power_w
        assert parsed.temperature_c == made.temperature_c
        if layout is Layout.A5:
            assert (parsed.npu_util_percent, parsed.aicore_percent) == (made.aicore_percent, None)
        else:
            assert (parsed.aicore_percent, parsed.npu_util_percent) == (made.aicore_percent, None)
        if spec.hbm_total_mib:
            assert (parsed.hbm_used_mib, parsed.hbm_total_mib) == (made.hbm_used_mib, spec.hbm_total_mib)
        else:
            assert parsed.hbm_used_mib is None and "hbm_used_mib" in parsed.unavailable()
        assert parsed.memory_used_mib == made.memory_used_mib
        assert parsed.memory_total_mib == spec.memory_total_mib
        assert (parsed.hugepages_used, parsed.hugepages_total) == (made.hugepages_used, spec.hugepages_total)
    got = [(p.npu_id, p.chip_id, p.pid, p.name, p.npu_memory_mib) for p in table.processes]
    made_rows = sorted(
        state.processes, key=lambda p: (state.scenario.npu_ids.index(p.spec.npu_id), p.spec.chip_id)
    )
    want = [(p.spec.npu_id, p.spec.chip_id, p.spec.pid, p.spec.name, p.npu_memory_mib) for p in made_rows]
    assert got == want
    busy = {p.spec.npu_id for p in state.processes}
    assert set(table.idle_npus) == set(state.scenario.npu_ids) - busy


@pytest.mark.parametrize("name", NORMAL)
def test_rendered_table_parses_to_exactly_the_generated_values(name: str) -> None:
    for elapsed_s in TIMES_S:
        for seed in (0, 7):
            _check_parsed(machine_state(SCENARIOS[name], elapsed_s, seed))


_CAPTURE_LINES = {  # layout → (capture, line numbers that are fixed text)
    Layout.A2: ("001", (3, 4, 5, 6, 31, 32, 33)),
    Layout.A3: ("007", (3, 4, 5, 6, 13, 14, 15)),
    Layout.A2_WIDE: ("008", (3, 4, 5, 6, 31, 32, 33)),
    Layout.P310: ("044", (3, 4, 5, 6, 19, 20, 21)),
}


@pytest.mark.parametrize("layout", list(_CAPTURE_LINES))
def test_fixed_lines_are_the_captures_byte_for_byte(layout: Layout) -> None:
    scenario = next(s for s in SCENARIOS.values() if s.layout is layout)
    lines = render_info(machine_state(scenario, 50.0)).splitlines()
    number, wanted = _CAPTURE_LINES[layout]
    capture = capture_text(number).splitlines()
    for line_no in wanted:
        assert capture[line_no - 1] in lines, f"capture {number} line {line_no}"
    assert len(lines[0]) == len(capture[0])


def test_950_lines_match_capture_037() -> None:
    lines = render_info(machine_state(SCENARIOS["950"], 50.0)).splitlines()
    capture = capture_text("037").splitlines()
    for line_no in (1, 2, 3, 4, 7, 29, 30, 31):
        assert capture[line_no - 1] in lines, f"capture 037 line {line_no}"


def test_idle_scenario_matches_capture_022_shape() -> None:
    text = render_info(machine_state(SCENARIOS["idle"], 500.0))
    assert (
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          2654 / 32768         |"
        in text
    )
    assert text.count("No running processes found in NPU") == 8


def test_a3_chip_one_prints_a_dash_for_power() -> None:
    table = parse_info(render_info(machine_state(SCENARIOS["a3"], 200.0)))
    assert [c.identity.phy_id for c in table.chips] == list(range(16))
    assert all((c.power_w is None) == (c.identity.chip_id == 1) for c in table.chips)
    assert "power_w" in table.chips[1].unavailable()


def test_310p_duo_chips_share_a_bus_id_with_sparse_npu_ids() -> None:
    table = parse_info(render_info(machine_state(SCENARIOS["310p-duo"], 200.0)))
    assert sorted({c.identity.npu_id for c in table.chips}) == [2, 5]
    assert len({c.identity.bus_id for c in table.chips}) == 2
    assert all(c.power_w is None and c.hbm_total_mib is None for c in table.chips)


def test_hang_times_out_and_leaves_no_process() -> None:
    me = psutil.Process()
    with Simulation.start("npu-smi-hang") as sim:
        with pytest.raises(NpuSmiError) as info:
            NpuSmi(sim.npu_smi, timeout_s=1).info()
        assert info.value.failure.kind is FailureKind.TIMEOUT
        assert me.children(recursive=True) == []
        leftovers = [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if any(str(sim.npu_smi) in part for part in (p.info["cmdline"] or []))
        ]
        assert leftovers == []


@pytest.mark.parametrize("name", ERRORS)
def test_error_scenarios_fail_with_dcmi_8005(name: str) -> None:
    with Simulation.start(name) as sim, pytest.raises(NpuSmiError) as info:
        NpuSmi(sim.npu_smi).info()
    failure = info.value.failure
    assert (failure.kind, failure.dcmi_code) == (FailureKind.DCMI, -8005)
    assert failure.exit_code not in (0, None)
    assert failure.output.strip() == capture_text("035").strip()


def test_values_stay_within_physical_bounds_and_move() -> None:
    for scenario in SCENARIOS.values():
        seen_aicore = set()
        for step in range(0, 1200, 7):
            state = machine_state(scenario, float(step), seed=3)
            for chip in state.chips:
                spec = chip.spec
                seen_aicore.add(chip.aicore_percent)
                assert 0 <= chip.aicore_percent <= 100
                if chip.power_w is not None:
                    assert spec.idle_power_w <= chip.power_w <= spec.max_power_w
                assert 0 <= chip.hbm_used_mib <= spec.hbm_total_mib
                assert 0 <= chip.memory_used_mib <= spec.memory_total_mib
                # Only a throttling chip reaches its model's limit (910B: 85 °C), and hovers there.
                hottest = 80 if scenario.throttle_of(spec.npu_id, spec.chip_id) is None else 90
                assert 25 <= chip.temperature_c <= hottest
        if scenario.processes:
            assert len(seen_aicore) > 10, scenario.name


def test_frozen_time_gives_identical_output(training: Simulation, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = NpuSmi(training.npu_smi)
    first, second = smi.info().text, smi.info().text
    assert first == second
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "137")
    assert smi.info().text != first


def test_tree_is_removed_on_close() -> None:
    sim = Simulation.start("idle")
    root = sim.root
    assert (root / "sys/bus/pci/devices").is_dir()
    sim.close()
    assert not root.exists()
    sim.close()  # twice is harmless


def test_workdir_is_kept(tmp_path: Path) -> None:
    with Simulation.start("idle", workdir=tmp_path / "machine") as sim:
        assert sim.root == tmp_path / "machine"
    assert (tmp_path / "machine/usr/local/bin/npu-smi").is_file()
