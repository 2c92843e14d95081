"""Provides the fake npu-smi's key/value outputs: ``info -l``, ``-m`` and ``-t TYPE -i N [-c M]``.

Each line is ``<8 spaces><key padded to 30> : <value>`` as in the captures (024, 030, 031,
079-081); a query about one NPU opens with ``NPU ID`` / ``Chip Count`` and a blank line, and
each chip's block ends with its ``Chip ID`` line (030, 081) or starts with it (031).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from npuwatch.probes.simulator.dynamics import ChipReading, MachineState
from npuwatch.probes.simulator.scenarios import Layout

INDENT = " " * 8


def kv(key: str, value: object) -> str:
    """One ``key : value`` line in npu-smi's ``%-30s : %s`` form."""
    return f"{INDENT}{key:<30} : {value}"


def _lines(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def render_list(state: MachineState) -> str:
    """``npu-smi info -l`` (024): the NPU count, then each NPU's chip count."""
    lines = [kv("Total Count", len(state.scenario.npu_ids))]
    for npu_id in state.scenario.npu_ids:
        count = sum(1 for c in state.scenario.chips if c.npu_id == npu_id)
        lines += ["", kv("NPU ID", npu_id), kv("Chip Count", count)]
    return _lines(lines)


def mapping_name(name: str) -> str:
    """The ``-m`` chip name: ``Ascend 910B4`` for a table name ``910B4`` (023), else as is."""
    return name if name.startswith("Ascend") else f"Ascend {name}"


def render_mapping(state: MachineState) -> str:
    """``npu-smi info -m`` (023; A3 adds ``Chip Phy-ID`` as in 045): chips, then the card's Mcu."""
    a3 = state.scenario.layout is Layout.A3
    heads = ["NPU ID", "Chip ID", "Chip Logic ID"] + (["Chip Phy-ID"] if a3 else [])
    # Chip names print unpadded, the header's last field and `Mcu` padded to 30 (023).
    lines = [INDENT + "".join(f"{h:<30} " for h in heads) + f"{'Chip Name':<30}"]
    chips = state.scenario.chips
    for logic_id, chip in enumerate(chips):
        ids = [chip.npu_id, chip.chip_id, logic_id] + ([chip.phy_id] if a3 else [])
        lines.append(INDENT + "".join(f"{v!s:<30} " for v in ids) + mapping_name(chip.name))
        last = logic_id + 1 == len(chips) or chips[logic_id + 1].npu_id != chip.npu_id
        if last:
            mcu = [chip.npu_id, chip.chip_id + 1, "-"] + (["-"] if a3 else [])
            lines.append(INDENT + "".join(f"{v!s:<30} " for v in mcu) + f"{'Mcu':<30}")
    return _lines(lines)


def _percent(used: int, total: int) -> int:
    return 0 if total <= 0 else round(100 * used / total)


def _board(state: MachineState, chips: List[ChipReading], chip_id: Optional[int]) -> List[str]:
    spec = chips[0].spec
    versions = state.scenario.versions
    pci = next(
        (p for p in state.scenario.pci if p.bdf == spec.bus_id.lower()),
        state.scenario.pci[min(len(state.scenario.pci) - 1, spec.phy_id)],
    )
    if chip_id is not None:  # chip-level board (065)
        return [
            kv("Chip Type", "Ascend"),
            kv("Chip Name", spec.name),
            kv("Chip Version", "V1"),
            kv("Board ID", "0x64"),
            kv("Die ID", f"{0x4099_21D4 + spec.phy_id:08X} 2140A100 E54BDDD4 07CC040A 9B00301F"),
            kv("Chip Position ID", spec.chip_id),
            kv("PCIe Bus Info", spec.bus_id),
            kv("Firmware Version", versions.firmware),
        ]
    return [  # card-level board (079)
        kv("Product Name", "IT21HMDC_Bin5" if pci.device_id == 0xD802 else "NA"),
        kv("Model", "NA"),
        kv("Manufacturer", "Huawei"),
        kv("Serial Number", f"1025C90{48791 + spec.npu_id:05d}"),
        kv("Software Version", versions.driver),
        kv("Firmware Version", versions.firmware),
        kv("Compatibility", "OK"),
        kv("Board ID", "0x60"),
        kv("PCB ID", "A"),
        kv("BOM ID", "1"),
        kv("PCIe Bus Info", spec.bus_id),
        kv("Slot ID", spec.npu_id),
        kv("Class ID", "NA"),
        kv("PCI Vendor ID", "0x19E5"),
        kv("PCI Device ID", f"0x{pci.device_id:04X}"),
        kv("Subsystem Vendor ID", "0x19E5"),
        kv("Subsystem Device ID", f"0x{pci.subsystem_device_id:04X}"),
        kv("Chip Count", len(chips)),
    ]


def _usages(chip: ChipReading) -> List[str]:
    spec = chip.spec
    ddr = _percent(chip.memory_used_mib, spec.memory_total_mib)
    lines = [
        kv("DDR Capacity(MB)", spec.memory_total_mib),
        kv("DDR Usage Rate(%)", ddr),
        kv("DDR Hugepages Total(page)", spec.hugepages_total),
        kv("DDR Hugepages Usage Rate(%)", _percent(chip.hugepages_used, spec.hugepages_total)),
    ]
    if spec.hbm_total_mib:  # 030 (910B); 310P has no HBM lines (063)
        lines += [
            kv("HBM Capacity(MB)", spec.hbm_total_mib),
            kv("HBM Usage Rate(%)", _percent(chip.hbm_used_mib, spec.hbm_total_mib)),
        ]
    lines += [kv("Aicore Usage Rate(%)", chip.aicore_percent)]
    if spec.hbm_total_mib:
        lines += [kv("Aivector Usage Rate(%)", chip.vector_percent)]
    lines += [kv("Aicpu Usage Rate(%)", chip.aicpu_percent)]
    lines += [kv("Ctrlcpu Usage Rate(%)", chip.ctrlcpu_percent)]
    if not spec.hbm_total_mib:
        lines += [kv("Vectorcore Usage Rate(%)", chip.vector_percent)]
    lines += [kv("DDR Bandwidth Usage Rate(%)", chip.ddr_bandwidth_percent or 0)]
    if spec.hbm_total_mib:
        lines += [kv("HBM Bandwidth Usage Rate(%)", chip.hbm_bandwidth_percent or 0)]
    else:
        lines += [kv(f"DVPP {unit} Usage Rate(%)", 0) for unit in ("VDEC", "VPC", "VENC", "JPEGE", "JPEGD")]
    return lines


def _common(chip: ChipReading) -> List[str]:
    spec = chip.spec
    hbm = spec.hbm_total_mib
    lines = [
        kv("Chip ID", spec.chip_id),
        kv("Memory Usage Rate(%)", _percent(chip.memory_used_mib, spec.memory_total_mib)),
    ]
    if hbm:
        lines.append(kv("HBM Usage Rate(%)", _percent(chip.hbm_used_mib, hbm)))
    lines += [
        kv("Aicore Usage Rate(%)", chip.aicore_percent),
        kv("Aicore Freq(MHZ)", chip.aicore_rated_freq_mhz),
        kv("Aicore curFreq(MHZ)", chip.aicore_freq_mhz),
    ]
    if hbm:
        lines.append(kv("Aicore Count", 20 if "B3" in spec.name else 24))
    lines.append(kv("Temperature(C)", chip.temperature_c))
    if chip.power_w is not None:
        lines.append(kv("NPU Real-time Power(W)", f"{chip.power_w:.1f}"))
    return lines


def _power(chip: ChipReading) -> List[str]:
    shown = "NA" if chip.power_w is None else f"{chip.power_w:.1f}"
    return [kv("NPU Real-time Power(W)", shown)]  # 081


def _health(chip: ChipReading, state: MachineState) -> List[str]:
    override = chip.fault
    return [  # 013
        kv("Health Status", chip.health),
        kv("Error Code", override.error_code if override else "NA"),
        kv("Error Information", override.error_info if override else "NA"),
    ]


def _memory(chip: ChipReading) -> List[str]:
    spec = chip.spec
    lines = [
        kv("DDR Capacity(MB)", spec.memory_total_mib),
        kv("DDR Clock Speed(MHz)", 0 if spec.hbm_total_mib else 3200),
    ]
    if spec.hbm_total_mib:
        lines += [
            kv("HBM Capacity(MB)", spec.hbm_total_mib),
            kv("HBM Clock Speed(MHz)", 1600),
            kv("HBM Temperature(C)", chip.hbm_temperature_c),
            kv("HBM Manufacturer ID", "0x3"),
        ]
    return lines


def _proc_mem(chip: ChipReading, state: MachineState) -> List[str]:
    rows = [
        p for p in state.processes if (p.spec.npu_id, p.spec.chip_id) == (chip.spec.npu_id, chip.spec.chip_id)
    ]
    if not rows:
        return [INDENT + "No process in device."]  # 046
    return [
        f"{INDENT}Process id:{p.spec.pid} Process name:{p.spec.name:<18}Process memory(MB):{p.npu_memory_mib}"
        for p in rows
    ]


_Renderer = Callable[[ChipReading, MachineState], List[str]]
_PER_CHIP: Dict[str, _Renderer] = {
    "usages": lambda chip, state: _usages(chip),
    "power": lambda chip, state: _power(chip),
    "temp": lambda chip, state: [kv("NPU Temperature (C)", chip.temperature_c)],  # 080
    "health": _health,
    "memory": lambda chip, state: _memory(chip),
    "proc-mem": _proc_mem,
}

#: Query types the fake answers; any other word in npu-smi's type list is "not supported".
QUERY_TYPES = ("board", "common", *_PER_CHIP)


def render_query(state: MachineState, kind: str, npu_id: int, chip_id: Optional[int]) -> str:
    """``npu-smi info -t KIND -i NPU [-c CHIP]`` for a known NPU and chip (checked by the caller)."""
    chips = [c for c in state.chips if c.spec.npu_id == npu_id]
    picked = [c for c in chips if chip_id is None or c.spec.chip_id == chip_id]
    if kind == "board":
        head = [kv("NPU ID", npu_id)] + ([kv("Chip ID", chip_id)] if chip_id is not None else [])
        return _lines(head + _board(state, picked if chip_id is not None else chips, chip_id))
    if kind == "common":  # 031: Chip ID leads each block; the MCU block closes the card
        lines = [kv("NPU ID", npu_id), kv("Chip Count", len(chips))]
        for chip in picked:
            lines += ["", *_common(chip)]
        lines += ["", kv("Chip Name", "mcu"), kv("Temperature(C)", min(c.temperature_c for c in chips) - 6)]
        return _lines(lines)
    render = _PER_CHIP[kind]
    if chip_id is not None:  # one chip: only its keys (013)
        return _lines(render(picked[0], state))
    lines = [kv("NPU ID", npu_id), kv("Chip Count", len(chips))]
    for chip in picked:
        lines += ["", *render(chip, state), kv("Chip ID", chip.spec.chip_id)]
    if kind == "temp":  # 080: the MCU's sensors, its name after its values
        cool = min(c.temperature_c for c in chips) - 3
        lines += ["", kv("LM75A_TE (C)", cool), kv("LM75B_TE (C)", cool), kv("Chip Name", "MCU")]
    return _lines(lines)
