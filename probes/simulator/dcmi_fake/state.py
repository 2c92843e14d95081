"""Provides refresh() and render(): the fake DCMI library's state file, written from the simulator.

``render(machine_state)`` is the whole file (format: the top of ``fake_dcmi.c``) for one instant
of a demo: the same ``dynamics.machine_state`` the fake npu-smi prints, so both backends show
the same temperature, power, AI Core %, HBM and DDR, hugepages, health, processes (MiB → bytes)
and error codes, plus what only DCMI has (frequencies, the other units' load, HBM bandwidth and
temperature, voltage, ECC), and the scenario's faults (``DcmiSpec``).

``refresh()`` (no arguments) is what the DCMI worker calls before each tick when
``NPUWATCH_FAKE_DCMI_REFRESH`` names it: it finds the state file (``NPUWATCH_FAKE_DCMI_STATE``),
the demo beside it (the fake npu-smi's ``npu-smi.json``: scenario, start, seed), the time
(``elapsed_s``, which honours ``NPUWATCH_SIM_NOW``) and rewrites the file (write, then rename)
when its text changed.  Cheap: the simulator's small modules only, the demo file read once.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from npuwatch.probes.simulator.catalog import get_scenario
from npuwatch.probes.simulator.dynamics import ChipReading, MachineState, aicore_count, machine_state
from npuwatch.probes.simulator.fake_npu_smi import STATE_FILE as DEMO_FILE
from npuwatch.probes.simulator.fake_npu_smi import elapsed_s
from npuwatch.probes.simulator.scenarios import ChipSpec, DcmiFault, Layout, Scenario

#: The state file the library reads (the C code and the stand-in read this variable).
STATE_VARIABLE = "NPUWATCH_FAKE_DCMI_STATE"
#: The "module:function" the DCMI worker calls before each tick (demos only).
REFRESH_VARIABLE = "NPUWATCH_FAKE_DCMI_REFRESH"
REFRESH_FUNCTION = "npuwatch.probes.simulator.dcmi_fake.state:refresh"
#: The state file's name, beside the fake npu-smi's ``npu-smi.json``.
STATE_FILE = "fake-dcmi.state"

_HEALTH = {"OK": 0, "Warning": 1, "Alarm": 2, "Critical": 3}
#: ``dcmi_get_product_type`` per layout: our demo values.
_PRODUCT = {
    Layout.A2: "Atlas 800T A2",
    Layout.A2_WIDE: "Atlas 800T A2",
    Layout.A3: "Atlas 900 A3 SuperPoD",
    Layout.P310: "Atlas 300I Duo",
    Layout.A5: "Atlas 950 SuperPoD",
}
_HBM_MHZ = 1600  # npu-smi -t memory "HBM Clock Speed(MHz)" (render_kv._memory)
_DDR_MHZ = 3200  # npu-smi -t memory "DDR Clock Speed(MHz)" on a 310P (render_kv._memory)
_CTRLCPU_MHZ = 1900  # our demo value
_HUGEPAGE_KB = 2048
_VDIE_TAIL = (0x2140A100, 0xE54BDDD4, 0x07CC040A, 0x9B00301F)  # npu-smi -t board "Die ID" (render_kv)
_NDIE_TAIL = (0x5A17C0DE, 0x00010002, 0x3C4D5E6F, 0x0000A5A5)  # our demo value
ECC_DDR, ECC_HBM = 0, 2


def _percent(used: int, total: int) -> int:
    return 0 if total <= 0 else round(100 * used / total)


def _utilisation(layout: Layout, chip: ChipReading) -> Dict[int, int]:
    """``util.<type>`` per chip family: 910B/A3 answer 2, 3, 4, 6, 10, 12, 13; the 950 adds 14
    (driver-interfaces.md §6.6); a 310P answers its DDR types 1 and 5 instead of HBM's."""
    spec = chip.spec
    found = {2: chip.aicore_percent, 3: chip.aicpu_percent, 4: chip.ctrlcpu_percent, 12: chip.vector_percent}
    if spec.hbm_total_mib:
        found[6] = _percent(chip.hbm_used_mib, spec.hbm_total_mib)
        found[10] = chip.hbm_bandwidth_percent or 0
        found[13] = chip.aicore_percent
    else:
        found[1] = _percent(chip.memory_used_mib, spec.memory_total_mib)
        found[5] = chip.ddr_bandwidth_percent or 0
    if chip.cube_percent is not None:
        found[14] = chip.cube_percent
    return found


def _frequency(layout: Layout, chip: ChipReading) -> Dict[int, int]:
    """``freq.<type>``: the 910B doc lists 2, 6, 7, 9; the 950 adds 12 (Vector current), a 310P 1 (DDR)."""
    found = {2: _CTRLCPU_MHZ, 7: chip.aicore_freq_mhz, 9: chip.aicore_rated_freq_mhz}
    if chip.spec.hbm_total_mib:
        found[6] = _HBM_MHZ
    else:
        found[1] = _DDR_MHZ
    if layout is Layout.A5:
        found[12] = chip.aicore_freq_mhz
    return found


def _npu_name(spec: ChipSpec) -> str:
    return spec.name if spec.name.startswith("Ascend") else f"Ascend {spec.name}"


def _pci_lines(scenario: Scenario, spec: ChipSpec) -> Iterator[Tuple[str, int]]:
    """The chip's PCI function as the sysfs tree has it (the 950 prints Bus-Id NA: its tree's BDF)."""
    pci = next(
        (p for p in scenario.pci if p.bdf == spec.bus_id.lower()),
        scenario.pci[min(len(scenario.pci) - 1, spec.phy_id)],
    )
    domain, bus, rest = pci.bdf.split(":")
    device, function = rest.split(".")
    yield from (
        ("pci.vendor", 0x19E5),
        ("pci.subvendor", 0x0200),
        ("pci.device", pci.device_id),
        ("pci.subdevice", pci.subsystem_device_id),
        ("pci.domain", int(domain, 16)),
        ("pci.bus", int(bus, 16)),
        ("pci.dev", int(device, 16)),
        ("pci.func", int(function, 16)),
    )


def _chip_integers(state: MachineState, chip: ChipReading) -> Iterator[Tuple[str, int]]:
    """The values that move with the load: rewritten every tick."""
    spec, layout = chip.spec, state.scenario.layout
    yield "health", _HEALTH.get(chip.health, 3)
    yield "temp", chip.temperature_c
    if chip.power_w is not None:  # A3 chip 1 and a 310P: NOT_SUPPORT, as npu-smi's `-`/`NA`
        yield "power", round(chip.power_w * 10)
    yield "voltage", round(chip.voltage_v * 100)
    yield from ((f"util.{k}", v) for k, v in sorted(_utilisation(layout, chip).items()))
    yield from ((f"freq.{k}", v) for k, v in sorted(_frequency(layout, chip).items()))
    if spec.hbm_total_mib:  # a 310P has no HBM: NOT_SUPPORT (GPUStack falls back on it)
        yield from (
            ("hbm.used", chip.hbm_used_mib),
            ("hbm.temp", chip.hbm_temperature_c or 0),
            ("hbm.bw", chip.hbm_bandwidth_percent or 0),
        )
    free_pages = spec.hugepages_total - chip.hugepages_used
    yield from (
        ("mem.avail", spec.memory_total_mib - chip.memory_used_mib + free_pages * _HUGEPAGE_KB // 1024),
        ("mem.hpfree", free_pages),
        ("mem.util", _percent(chip.memory_used_mib, spec.memory_total_mib)),
        ("ecc.single", chip.ecc_single_bit_errors),
        ("ecc.double", chip.ecc_double_bit_errors),
        ("ecc.total_single", chip.ecc_single_bit_errors),
        ("ecc.total_double", chip.ecc_double_bit_errors),
        ("ecc.iso_single", 0),
        ("ecc.iso_double", chip.ecc_isolated_pages),
    )


def _fixed_integers(scenario: Scenario, spec: ChipSpec) -> Iterator[Tuple[str, int]]:
    """What a chip keeps while the demo runs: identity, sizes, PCI, dies (written from a cache)."""
    yield "aicore_cnt", aicore_count(spec)
    if spec.hbm_total_mib:
        yield from (("hbm.total", spec.hbm_total_mib), ("hbm.freq", _HBM_MHZ))
    yield from (
        ("mem.total", spec.memory_total_mib),
        ("mem.freq", 0 if spec.hbm_total_mib else _DDR_MHZ),
        ("mem.hpsize", _HUGEPAGE_KB),
        ("mem.hptotal", spec.hugepages_total),
        ("board.board_id", 0x64),
        ("board.pcb_id", 1),
        ("board.bom_id", 1),
        ("board.slot_id", spec.npu_id),
    )
    yield from _pci_lines(scenario, spec)
    for kind, words in (
        (1, (0x409921D4 + spec.phy_id, *_VDIE_TAIL)),
        (0, (0x1E000000 + spec.phy_id, *_NDIE_TAIL)),
    ):
        yield from ((f"die.{kind}.{index}", word) for index, word in enumerate(words))
    yield from (("ecc.type", ECC_HBM if spec.hbm_total_mib else ECC_DDR), ("ecc.enable", 1))


#: Each chip's fixed lines, by (scenario, chip): the refresh runs every tick in the DCMI worker.
_FIXED: Dict[Tuple[str, ChipSpec], Tuple[str, ...]] = {}


def _fixed_lines(scenario: Scenario, spec: ChipSpec) -> Tuple[str, ...]:
    key = (scenario.name, spec)
    known = _FIXED.get(key)
    if known is None:
        if len(_FIXED) > 4096:
            _FIXED.clear()
        where = f"{spec.npu_id} {spec.chip_id}"
        texts = (
            ("chip_type", "Ascend"),
            ("chip_name", spec.name),
            ("chip_ver", "V1"),
            ("npu_name", _npu_name(spec)),
            ("product_type", _PRODUCT[scenario.layout]),
        )
        known = _FIXED[key] = (
            *(f"i {where} {name} {_number(name, value)}" for name, value in _fixed_integers(scenario, spec)),
            *(f"s {where} {name} {text}" for name, text in texts),
        )
    return known


def _number(key: str, value: int) -> str:
    """Identifiers in hexadecimal (as lspci and npu-smi print them), measures in decimal."""
    return f"0x{value:X}" if key.startswith(("pci.", "die.", "board.board_id")) and value >= 0 else str(value)


def _fault_line(fault: DcmiFault) -> str:
    where = f"{fault.function} {fault.card} {fault.device}"
    if fault.crash:
        return f"crash {where}"
    if fault.hang_s is not None:
        return f"hang {where} {math.ceil(fault.hang_s) if fault.hang_s > 0 else 0}"
    return f"rc {where} {fault.code if fault.code is not None else 0}"


def render(state: MachineState) -> str:
    """The state file for ``state`` (a scenario at one instant), with its DCMI faults."""
    scenario = state.scenario
    versions = scenario.versions
    lines: List[str] = [
        f"# npuwatch fake DCMI state: demo {scenario.name} at {state.elapsed_s:.1f} s (format: fake_dcmi.c)",
        f"s -1 -1 dcmi_version {versions.driver}",
        f"s -1 -1 driver_version {versions.driver}",
    ]
    lines += [f"omit {name}" for name in scenario.dcmi.omit]
    lines += [_fault_line(fault) for fault in scenario.dcmi.faults]
    for npu_id in scenario.npu_ids:
        count = sum(1 for c in scenario.chips if c.npu_id == npu_id)
        lines.append(f"card {npu_id} {count} {count} {count if scenario.dcmi.mcu else -1} -1")
    lines += [f"i {npu_id} -1 mcu_power {round(watts * 10)}" for npu_id, watts in state.board_power_w]
    for logic_id, chip in enumerate(state.chips):
        spec = chip.spec
        where = f"{spec.npu_id} {spec.chip_id}"
        lines.append(f"chip {where} {logic_id} {spec.phy_id}")
        lines += [f"i {where} {key} {value}" for key, value in _chip_integers(state, chip)]
        lines += _fixed_lines(scenario, spec)
        override = chip.fault
        if override is not None:
            lines.append(f"err {where} 0x{int(override.error_code, 16):08X} {override.error_info}")
    for process in state.processes:
        p = process.spec
        lines.append(f"proc {p.npu_id} {p.chip_id} {p.pid} {process.npu_memory_mib * 1024 * 1024}")
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    """Replace the file at ``path`` with ``text`` at once (write a sibling, then rename)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def write_for(scenario: Scenario, path: Path, started_at: float, seed: int) -> None:
    """The state of ``scenario`` now (``elapsed_s``: the frozen ``NPUWATCH_SIM_NOW`` if set)."""
    write(path, render(machine_state(scenario, elapsed_s(started_at), seed)))


#: Per state path: the demo file's identity, and the scenario, start and seed it gave.
_DEMOS: Dict[str, Tuple[Tuple[int, int, int], Scenario, float, int]] = {}
#: Per state path: the text last written (a frozen clock writes nothing new).
_WRITTEN: Dict[str, str] = {}


def _demo(path: str) -> Optional[Tuple[Scenario, float, int]]:
    demo = os.path.join(os.path.dirname(path), DEMO_FILE)
    info = os.stat(demo)
    identity = (info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _DEMOS.get(path)
    if cached is not None and cached[0] == identity:
        return cached[1], cached[2], cached[3]
    with open(demo, encoding="utf-8") as handle:
        data = json.load(handle)
    scenario = get_scenario(str(data["scenario"]))
    started_at, seed = float(data.get("started_at", 0.0)), int(data.get("seed", 0))
    _DEMOS[path] = (identity, scenario, started_at, seed)
    return scenario, started_at, seed


def refresh() -> None:
    """Rewrite the state file for this instant of the demo beside it; nothing when unset or gone.

    Never raises for a missing or damaged demo: the library then answers from the last file
    written (or, without one, as a machine without a driver: ``-8005``).
    """
    path = os.environ.get(STATE_VARIABLE, "")
    if not path:
        return
    try:
        found = _demo(path)
        if found is None:
            return
        scenario, started_at, seed = found
        text = render(machine_state(scenario, elapsed_s(started_at), seed))
        if _WRITTEN.get(path) != text:
            write(Path(path), text)
            _WRITTEN[path] = text
    except (OSError, ValueError, KeyError, TypeError):
        return
