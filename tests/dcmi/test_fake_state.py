"""The fake DCMI library in the demo machines: state written from the simulator, the build cache,
the library a Simulation places, and the same numbers through DCMI as through the fake npu-smi."""

from __future__ import annotations

import ctypes
import os
import re
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from npuwatch.probes.dcmi import abi
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.simulator import Simulation
from npuwatch.probes.simulator.catalog import SCENARIOS
from npuwatch.probes.simulator.dcmi_fake import build, standin
from npuwatch.probes.simulator.dcmi_fake import state as fake_state
from npuwatch.probes.simulator.dcmi_fake.install import CHOICE_VARIABLE, LIBRARY_PATH, STANDIN
from npuwatch.probes.simulator.dynamics import ChipReading, MachineState, machine_state
from npuwatch.probes.simulator.render import render_info
from npuwatch.probes.simulator.render_kv import render_query
from npuwatch.probes.simulator.scenarios import Layout, NpuSmiMode
from tests.conftest import need

NOW_S = "100"
TIMES_S = (0.0, 38.0, 127.5, 271.0, 1000.0)
NORMAL = [s.name for s in SCENARIOS.values() if s.npu_smi_mode is NpuSmiMode.NORMAL]
HEALTH = {"OK": 0, "Warning": 1, "Alarm": 2, "Critical": 3}


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPUWATCH_SIM_NOW", NOW_S)
    monkeypatch.delenv(CHOICE_VARIABLE, raising=False)


@pytest.fixture
def training(frozen: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Simulation]:
    with Simulation.start("910b-training") as sim:
        for key, value in sim.environ.items():
            if key.startswith("NPUWATCH_FAKE_DCMI"):
                monkeypatch.setenv(key, value)
        yield sim


def _stand_in() -> standin.StandIn:
    handle = standin.load()
    handle.npuwatch_fake_reset()  # type: ignore[attr-defined]
    assert handle.dcmi_init() == 0  # type: ignore[attr-defined]
    return handle


def _scalar(
    handle: object, name: str, card: int, dev: int, kind: type = ctypes.c_int, *before: int
) -> Optional[int]:
    out = kind(0)
    code = getattr(handle, name)(card, dev, *before, ctypes.pointer(out))
    return out.value if code == 0 else None


# ---------------------------------------------------------------- the library a demo places


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_demo_places_its_library_and_names_its_state(name: str, frozen: None) -> None:
    with Simulation.start(name) as sim:
        scenario = sim.scenario
        if not scenario.dcmi.present:
            assert (sim.dcmi_library, sim.dcmi_kind) == (
                None,
                f"none: this machine has no libdcmi.so (scenario {name})",
            )
            assert not (sim.root / "usr/local/dcmi").exists()
            assert fake_state.STATE_VARIABLE not in sim.environ
            return
        state_path = Path(sim.environ[fake_state.STATE_VARIABLE])
        assert state_path.parent == sim.npu_smi.parent  # beside npu-smi.json
        assert sim.environ[fake_state.REFRESH_VARIABLE] == "npuwatch.probes.simulator.dcmi_fake.state:refresh"
        assert state_path.read_text() == fake_state.render(machine_state(scenario, float(NOW_S), sim.seed))
        if sim.dcmi_library == STANDIN:
            assert sim.dcmi_kind.startswith("fake DCMI (pure-Python stand-in: ")
        else:
            assert sim.dcmi_library == str(sim.root / LIBRARY_PATH)
            assert sim.dcmi_kind.startswith("fake libdcmi.so (C, built with ")
            assert hasattr(ctypes.CDLL(sim.dcmi_library), "dcmi_init")


def test_a_demo_runs_the_stand_in_when_asked_or_without_a_compiler(
    frozen: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(CHOICE_VARIABLE, "python")
    with Simulation.start("idle") as sim:
        assert (sim.dcmi_library, sim.dcmi_kind) == (
            STANDIN,
            f"fake DCMI (pure-Python stand-in: {CHOICE_VARIABLE}=python)",
        )
    monkeypatch.delenv(CHOICE_VARIABLE)
    missing = tmp_path / "no-such-cc"
    monkeypatch.setenv("CC", str(missing))
    with Simulation.start("idle") as sim:
        assert sim.dcmi_library == STANDIN
        assert (
            sim.dcmi_kind == f"fake DCMI (pure-Python stand-in: no C compiler ({missing} not found; set CC))"
        )


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("dcmi-permission", "rc dcmi_init -1 -1 -8002"),
        ("dcmi-hang", "hang dcmi_get_device_temperature -1 -1 0"),
        ("dcmi-crash", "crash dcmi_get_device_power_info -1 -1"),
        ("no-driver", "rc dcmi_init -1 -1 -8005"),
        ("container-missing-nodes", "rc dcmi_init -1 -1 -8005"),
        ("npu-smi-hang", "hang dcmi_get_card_list -1 -1 0"),
    ],
)
def test_failure_scenarios_write_their_faults(name: str, line: str) -> None:
    text = fake_state.render(machine_state(SCENARIOS[name], 50.0))
    assert line in text.splitlines()
    assert sum(1 for x in text.splitlines() if x.startswith(("rc ", "hang ", "crash "))) == 1


def test_working_scenarios_write_no_faults() -> None:
    for scenario in SCENARIOS.values():
        if scenario.dcmi.faults:
            continue
        text = fake_state.render(machine_state(scenario, 50.0))
        assert not [x for x in text.splitlines() if x.startswith(("rc ", "hang ", "crash ", "omit "))]


def test_the_permission_demo_fails_init_with_8002(frozen: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with Simulation.start("dcmi-permission") as sim:
        monkeypatch.setenv(fake_state.STATE_VARIABLE, sim.environ[fake_state.STATE_VARIABLE])
        handle = standin.load()
        handle.npuwatch_fake_reset()  # type: ignore[attr-defined]
        assert handle.dcmi_init() == abi.OPER_NOT_PERMITTED  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the build cache


def test_the_build_is_cached_and_never_rebuilt(tmp_path: Path) -> None:
    first = build.build(cache_dir=tmp_path)
    need(first.path is not None, f"building the fake needs a C compiler: {first.reason}")
    assert first.path is not None and not first.cached
    stamp = first.path.stat().st_mtime_ns
    again = build.build(cache_dir=tmp_path)
    assert (again.path, again.cached) == (first.path, True)
    assert first.path.stat().st_mtime_ns == stamp
    variant = build.build(("dcmi_get_device_hbm_info",), cache_dir=tmp_path)
    assert variant.path is not None and variant.path.parent != first.path.parent
    assert [p.name for p in first.path.parent.iterdir()] == [build.LIBRARY_NAME]  # no temporary left


def test_no_compiler_is_a_reason_not_an_error(tmp_path: Path) -> None:
    result = build.build(environ={"CC": "no-such-compiler-here", "PATH": str(tmp_path)}, cache_dir=tmp_path)
    assert (result.path, result.reason) == (None, "no C compiler (no-such-compiler-here not found; set CC)")


def test_a_failing_compiler_is_a_reason_and_leaves_nothing(tmp_path: Path) -> None:
    result = build.build(environ=dict(os.environ, CC="false"), cache_dir=tmp_path)
    assert result.path is None and result.reason.startswith("false failed (exit 1)")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_an_unwritable_cache_falls_back_to_a_private_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    result = build.build(environ=dict(os.environ, XDG_CACHE_HOME=str(blocker)))
    need(result.path is not None, f"building the fake needs a C compiler: {result.reason}")
    assert result.path is not None
    folder = result.path.parent.parent
    assert folder == tmp_path / f"npuwatch-fake-dcmi-{os.getuid()}"
    assert folder.stat().st_mode & 0o077 == 0


def test_a_shared_temp_folder_is_never_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need(build.compiler_command() is not None, "this refusal comes after finding a C compiler")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"npuwatch-fake-dcmi-{os.getuid()}").mkdir(mode=0o777)
    os.chmod(tmp_path / f"npuwatch-fake-dcmi-{os.getuid()}", 0o777)  # someone else could plant a library
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    result = build.build(environ=dict(os.environ, XDG_CACHE_HOME=str(blocker)))
    assert (result.path, result.reason) == (None, "no writable cache folder for the fake library")


def test_omitting_an_unknown_function_is_refused() -> None:
    with pytest.raises(ValueError, match="dcmi_no_such_call"):
        build.build(("dcmi_no_such_call",))


# ---------------------------------------------------------------- refresh


def test_refresh_writes_the_demo_at_this_instant(
    training: Simulation, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = Path(training.environ[fake_state.STATE_VARIABLE])
    handle = _stand_in()
    first = machine_state(training.scenario, 100.0, training.seed)
    assert _scalar(handle, "dcmi_get_device_temperature", 0, 0) == first.chips[0].temperature_c
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "1000")
    fake_state.refresh()
    later = machine_state(training.scenario, 1000.0, training.seed)
    assert path.read_text() == fake_state.render(later)
    assert [_scalar(handle, "dcmi_get_device_power_info", c.spec.npu_id, 0) for c in later.chips] == [
        round((c.power_w or 0) * 10) for c in later.chips
    ]
    inode = path.stat().st_ino
    fake_state.refresh()  # the same instant: nothing rewritten
    assert path.stat().st_ino == inode


def test_refresh_does_nothing_without_its_variable_or_its_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(fake_state.STATE_VARIABLE, raising=False)
    fake_state.refresh()
    monkeypatch.setenv(fake_state.STATE_VARIABLE, str(tmp_path / "fake-dcmi.state"))
    fake_state.refresh()  # no npu-smi.json beside it
    (tmp_path / "npu-smi.json").write_text("{not json")
    fake_state.refresh()
    assert list(tmp_path.iterdir()) == [tmp_path / "npu-smi.json"]


# ---------------------------------------------------------------- the same numbers as npu-smi


def _without_faults(text: str) -> str:
    """The machine's values without the scenario's DCMI faults (hangs, crashes, init failures)."""
    return "".join(x for x in text.splitlines(keepends=True) if not x.startswith(("rc ", "hang ", "crash ")))


def _dcmi_view(handle: object, chip: ChipReading) -> Dict[str, object]:
    card, dev = chip.spec.npu_id, chip.spec.chip_id
    hbm = abi.output_buffer()
    hbm_code = handle.dcmi_get_device_hbm_info(card, dev, hbm)  # type: ignore[attr-defined]
    memory = abi.output_buffer()
    assert handle.dcmi_get_device_memory_info_v3(card, dev, memory) == 0  # type: ignore[attr-defined]
    mem = abi.read_struct(memory, abi.MemoryInfoV3)
    power = _scalar(handle, "dcmi_get_device_power_info", card, dev)
    hbm_info = abi.read_struct(hbm, abi.HbmInfo)
    return {
        "health": _scalar(handle, "dcmi_get_device_health", card, dev, ctypes.c_uint),
        "temperature_c": _scalar(handle, "dcmi_get_device_temperature", card, dev),
        "power_w": None if power is None else power / 10,
        "aicore_percent": _scalar(
            handle, "dcmi_get_device_utilization_rate", card, dev, ctypes.c_uint, abi.UTIL_AICORE
        ),
        "hbm": None if hbm_code != 0 else (hbm_info.memory_usage, hbm_info.memory_size),
        "memory": (mem.memory_size - mem.memory_available, mem.memory_size),
        "hugepages": (mem.hugepages_total - mem.hugepages_free, mem.hugepages_total),
    }


def _processes(handle: object, card: int, dev: int) -> List[Tuple[int, int]]:
    rows, count = (abi.ProcMemInfo * abi.MAX_PROCESSES)(), ctypes.c_int(0)
    assert handle.dcmi_get_device_resource_info(card, dev, rows, ctypes.pointer(count)) == 0  # type: ignore[attr-defined]
    return [(r.proc_id, r.proc_mem_usage) for r in rows[: count.value]]


@pytest.mark.parametrize("name", NORMAL)
def test_dcmi_and_npu_smi_show_the_same_numbers(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fake-dcmi.state"
    monkeypatch.setenv(fake_state.STATE_VARIABLE, str(path))
    for elapsed in TIMES_S:
        state: MachineState = machine_state(SCENARIOS[name], elapsed, 3)
        fake_state.write(path, _without_faults(fake_state.render(state)))
        handle = _stand_in()
        table = parse_info(render_info(state))
        assert len(table.chips) == len(state.chips)
        for parsed, made in zip(table.chips, state.chips):
            seen = _dcmi_view(handle, made)
            busy = parsed.npu_util_percent if state.scenario.layout is Layout.A5 else parsed.aicore_percent
            assert seen["health"] == HEALTH[parsed.health.value]
            assert (seen["temperature_c"], seen["power_w"], seen["aicore_percent"]) == (
                parsed.temperature_c,
                parsed.power_w,
                busy,
            )
            want_hbm = None if parsed.hbm_total_mib is None else (parsed.hbm_used_mib, parsed.hbm_total_mib)
            assert seen["hbm"] == want_hbm
            assert seen["memory"] == (parsed.memory_used_mib, parsed.memory_total_mib)
            assert seen["hugepages"] == (parsed.hugepages_used, parsed.hugepages_total)
        for made in state.chips:
            card, dev = made.spec.npu_id, made.spec.chip_id
            listed = [
                (p.pid, p.npu_memory_mib * 1024 * 1024)
                for p in table.processes
                if (p.npu_id, p.chip_id) == (card, dev)
            ]
            assert _processes(handle, card, dev) == listed


def _kv(text: str, key: str) -> Optional[int]:
    found = re.search(rf"^\s*{re.escape(key)}\s*: (\d+)$", text, re.MULTILINE)
    return None if found is None else int(found.group(1))


@pytest.mark.parametrize("name", ["910b-training", "310p-duo", "950", "chip-alarm", "a3"])
def test_the_new_metrics_are_what_npu_smi_details_print(name: str) -> None:
    """``-t usages``, ``common`` and ``memory`` print the numbers dynamics gives DCMI."""
    state = machine_state(SCENARIOS[name], 127.5, 1)
    for chip in state.chips:
        card, dev = chip.spec.npu_id, chip.spec.chip_id
        usages = render_query(state, "usages", card, dev)
        common = render_query(state, "common", card, dev)
        memory = render_query(state, "memory", card, dev)
        vector_key = "Aivector Usage Rate(%)" if chip.spec.hbm_total_mib else "Vectorcore Usage Rate(%)"
        assert _kv(usages, vector_key) == chip.vector_percent
        assert _kv(usages, "Aicpu Usage Rate(%)") == chip.aicpu_percent
        assert _kv(usages, "Ctrlcpu Usage Rate(%)") == chip.ctrlcpu_percent
        assert _kv(usages, "HBM Bandwidth Usage Rate(%)") == chip.hbm_bandwidth_percent
        assert _kv(common, "Aicore Freq(MHZ)") == chip.aicore_rated_freq_mhz
        assert _kv(common, "Aicore curFreq(MHZ)") == chip.aicore_freq_mhz
        assert _kv(memory, "HBM Temperature(C)") == chip.hbm_temperature_c


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_new_metrics_stay_within_physical_bounds(name: str) -> None:
    scenario = SCENARIOS[name]
    for step in range(0, 1200, 37):
        for chip in machine_state(scenario, float(step), seed=5).chips:
            percents = [chip.vector_percent, chip.aicpu_percent, chip.ctrlcpu_percent]
            percents += [
                p
                for p in (chip.cube_percent, chip.hbm_bandwidth_percent, chip.ddr_bandwidth_percent)
                if p is not None
            ]
            assert all(0 <= p <= 100 for p in percents)
            assert 0 < chip.aicore_freq_mhz <= chip.aicore_rated_freq_mhz
            assert 0.8 <= chip.voltage_v <= 0.9
            assert (chip.cube_percent is not None) == (scenario.layout is Layout.A5)
            assert (chip.hbm_temperature_c is None) == (chip.spec.hbm_total_mib == 0)
            healthy = scenario.health_of(chip.spec.npu_id, chip.spec.chip_id, float(step)) is None
            ecc = (chip.ecc_single_bit_errors, chip.ecc_double_bit_errors, chip.ecc_isolated_pages)
            if healthy:
                assert ecc == (0, 0, 0)
            elif name == "chip-alarm":  # its alarm is an HBM multi-bit ECC error: counted
                assert ecc != (0, 0, 0)
