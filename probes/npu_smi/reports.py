"""Provides typed records for ``npu-smi info -t board|usages|common|health|temp|power``.

Each parser reads the generic key/value blocks (``npu_smi.kv.parse_key_values``) and picks the
fields it knows; unknown keys stay in ``fields``.  Real layouts: captures 010-013, 017, 030,
031, 061-065, 079-081 in ``tests/data/npu_smi/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Tuple

from npuwatch.model import Health
from npuwatch.probes.npu_smi.kv import KeyValueBlock, parse_key_values
from npuwatch.probes.values import to_float, to_int, to_text

# ---------------------------------------------------------------- board


@dataclass(frozen=True)
class BoardInfo:
    """``npu-smi info -t board -i N [-c M]``: card-level (010, 079) or chip-level (011, 065)."""

    npu_id: Optional[int] = None
    chip_id: Optional[int] = None
    is_mcu: bool = False
    product_name: Optional[str] = None
    model: Optional[str] = None
    manufacturer: Optional[str] = None
    serial_number: Optional[str] = None
    software_version: Optional[str] = None
    firmware_version: Optional[str] = None
    compatibility: Optional[str] = None
    board_id: Optional[int] = None
    pcb_id: Optional[str] = None
    bom_id: Optional[int] = None
    pcie_bus_info: Optional[str] = None
    slot_id: Optional[int] = None
    pci_vendor_id: Optional[int] = None
    pci_device_id: Optional[int] = None
    subsystem_vendor_id: Optional[int] = None
    subsystem_device_id: Optional[int] = None
    chip_count: Optional[int] = None
    chip_type: Optional[str] = None
    chip_name: Optional[str] = None
    chip_version: Optional[str] = None
    chip_position_id: Optional[int] = None
    die_id: Optional[str] = None
    vdie_id: Optional[str] = None
    ndie_id: Optional[str] = None
    ddie_id: Optional[str] = None
    fields: Mapping[str, str] = field(default_factory=dict)
    warnings: Tuple[str, ...] = ()


def parse_board(text: str) -> BoardInfo:
    """Read ``-t board``; the first chip block wins when several are printed."""
    report = parse_key_values(text)
    chips = report.chips or report.blocks
    block = chips[0] if chips else KeyValueBlock()
    get = block.get
    return BoardInfo(
        npu_id=report.npu_id,
        chip_id=block.chip_id,
        is_mcu=block.is_mcu,
        product_name=to_text(get("Product Name")),
        model=to_text(get("Model")),
        manufacturer=to_text(get("Manufacturer")),
        serial_number=to_text(get("Serial Number")),
        software_version=to_text(get("Software Version")),
        firmware_version=to_text(get("Firmware Version")),
        compatibility=to_text(get("Compatibility")),
        board_id=to_int(get("Board ID")),
        pcb_id=to_text(get("PCB ID")),
        bom_id=to_int(get("BOM ID")),
        pcie_bus_info=to_text(get("PCIe Bus Info")),
        slot_id=to_int(get("Slot ID")),
        # 950 UB boards print "Vendor ID"/"Device ID" instead of the PCI names (print_card_ub_info).
        pci_vendor_id=to_int(get("PCI Vendor ID", "Vendor ID")),
        pci_device_id=to_int(get("PCI Device ID", "Device ID")),
        subsystem_vendor_id=to_int(get("Subsystem Vendor ID", "Module Vendor ID")),
        subsystem_device_id=to_int(get("Subsystem Device ID", "Module ID")),
        chip_count=report.chip_count,
        chip_type=to_text(get("Chip Type")),
        chip_name=to_text(get("Chip Name")),
        chip_version=to_text(get("Chip Version")),
        chip_position_id=to_int(get("Chip Position ID")),
        die_id=to_text(get("Die ID")),
        vdie_id=to_text(get("VDie ID")),
        ndie_id=to_text(get("NDie ID")),
        ddie_id=to_text(get("DDie ID")),
        fields=block.fields,
        warnings=report.warnings,
    )


# ---------------------------------------------------------------- usages


@dataclass(frozen=True)
class ChipUsages:
    """One chip of ``npu-smi info -t usages`` (012, 030, 063)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    ddr_capacity_mib: Optional[int] = None
    ddr_usage_percent: Optional[int] = None
    ddr_hugepages_total: Optional[int] = None
    ddr_hugepages_usage_percent: Optional[int] = None
    hbm_capacity_mib: Optional[int] = None
    hbm_usage_percent: Optional[int] = None
    aicore_percent: Optional[int] = None
    aivector_percent: Optional[int] = None
    aicube_percent: Optional[int] = None
    vectorcore_percent: Optional[int] = None
    aicpu_percent: Optional[int] = None
    ctrlcpu_percent: Optional[int] = None
    ddr_bandwidth_percent: Optional[int] = None
    hbm_bandwidth_percent: Optional[int] = None
    npu_util_percent: Optional[int] = None
    dvpp_vdec_percent: Optional[int] = None
    dvpp_vpc_percent: Optional[int] = None
    dvpp_venc_percent: Optional[int] = None
    dvpp_jpege_percent: Optional[int] = None
    dvpp_jpegd_percent: Optional[int] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UsagesReport:
    """``npu-smi info -t usages -i N``."""

    npu_id: Optional[int] = None
    chip_count: Optional[int] = None
    chips: Tuple[ChipUsages, ...] = ()
    warnings: Tuple[str, ...] = ()


def parse_usages(text: str) -> UsagesReport:
    """Read ``-t usages``; 310/310B name DDR ``Memory`` (print_chip_memory_usages_info)."""
    report = parse_key_values(text)
    chips = []
    for block in report.chips:
        get = block.get
        chips.append(
            ChipUsages(
                npu_id=report.npu_id,
                chip_id=block.chip_id,
                ddr_capacity_mib=to_int(get("DDR Capacity(MB)", "Memory Capacity(MB)")),
                ddr_usage_percent=to_int(get("DDR Usage Rate(%)", "Memory Usage Rate(%)")),
                ddr_hugepages_total=to_int(get("DDR Hugepages Total(page)", "Hugepages Total(page)")),
                ddr_hugepages_usage_percent=to_int(
                    get("DDR Hugepages Usage Rate(%)", "Hugepages Usage Rate(%)")
                ),
                hbm_capacity_mib=to_int(get("HBM Capacity(MB)")),
                hbm_usage_percent=to_int(get("HBM Usage Rate(%)")),
                aicore_percent=to_int(get("Aicore Usage Rate(%)")),
                aivector_percent=to_int(get("Aivector Usage Rate(%)")),
                aicube_percent=to_int(get("Aicube Usage Rate(%)")),
                vectorcore_percent=to_int(get("Vectorcore Usage Rate(%)")),
                aicpu_percent=to_int(get("Aicpu Usage Rate(%)")),
                ctrlcpu_percent=to_int(get("Ctrlcpu Usage Rate(%)")),
                ddr_bandwidth_percent=to_int(
                    get("DDR Bandwidth Usage Rate(%)", "Memory Bandwidth Usage Rate(%)")
                ),
                hbm_bandwidth_percent=to_int(get("HBM Bandwidth Usage Rate(%)")),
                npu_util_percent=to_int(get("NPU Utilization(%)")),
                dvpp_vdec_percent=to_int(get("DVPP VDEC Usage Rate(%)")),
                dvpp_vpc_percent=to_int(get("DVPP VPC Usage Rate(%)")),
                dvpp_venc_percent=to_int(get("DVPP VENC Usage Rate(%)")),
                dvpp_jpege_percent=to_int(get("DVPP JPEGE Usage Rate(%)")),
                dvpp_jpegd_percent=to_int(get("DVPP JPEGD Usage Rate(%)")),
                fields=block.fields,
            )
        )
    return UsagesReport(report.npu_id, report.chip_count, tuple(chips), report.warnings)


# ---------------------------------------------------------------- common


_TEMPERATURE_KEYS = ("Temperature(C)", "NPU Temperature (C)")
_POWER_KEYS = ("NPU Real-time Power(W)", "Power Dissipation(W)", "Rated Power Dissipation(W)")


@dataclass(frozen=True)
class ChipCommon:
    """One chip of ``npu-smi info -t common`` (017, 031, 061)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    memory_usage_percent: Optional[int] = None
    hbm_usage_percent: Optional[int] = None
    aicore_percent: Optional[int] = None
    aicore_freq_mhz: Optional[int] = None
    aicore_current_freq_mhz: Optional[int] = None
    aicore_count: Optional[int] = None
    temperature_c: Optional[int] = None
    power_w: Optional[float] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CommonReport:
    """``npu-smi info -t common -i N``, with the MCU's temperature and board power if printed."""

    npu_id: Optional[int] = None
    chip_count: Optional[int] = None
    chips: Tuple[ChipCommon, ...] = ()
    mcu_temperature_c: Optional[int] = None
    board_power_w: Optional[float] = None  # 310P prints the card's power in the MCU block (061)
    warnings: Tuple[str, ...] = ()


def parse_common(text: str) -> CommonReport:
    """Read ``-t common``."""
    report = parse_key_values(text)
    chips = tuple(
        ChipCommon(
            npu_id=report.npu_id,
            chip_id=block.chip_id,
            memory_usage_percent=to_int(block.get("Memory Usage Rate(%)")),
            hbm_usage_percent=to_int(block.get("HBM Usage Rate(%)")),
            aicore_percent=to_int(block.get("Aicore Usage Rate(%)")),
            aicore_freq_mhz=to_int(block.get("Aicore Freq(MHZ)")),
            aicore_current_freq_mhz=to_int(block.get("Aicore curFreq(MHZ)")),
            aicore_count=to_int(block.get("Aicore Count")),
            temperature_c=to_int(block.get(*_TEMPERATURE_KEYS)),
            power_w=to_float(block.get(*_POWER_KEYS)),
            fields=block.fields,
        )
        for block in report.chips
    )
    mcu = report.mcus[0] if report.mcus else None
    return CommonReport(
        npu_id=report.npu_id,
        chip_count=report.chip_count,
        chips=chips,
        mcu_temperature_c=to_int(mcu.get(*_TEMPERATURE_KEYS)) if mcu else None,
        board_power_w=to_float(mcu.get(*_POWER_KEYS)) if mcu else None,
        warnings=report.warnings,
    )


# ---------------------------------------------------------------- health


@dataclass(frozen=True)
class ChipHealth:
    """One chip of ``npu-smi info -t health`` (013)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    health: Health = Health.UNKNOWN
    error_codes: Tuple[str, ...] = ()  # hex as printed (``80E01801``); () when NA
    error_information: Tuple[str, ...] = ()  # one text per error code
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HealthReport:
    """``npu-smi info -t health -i N [-c M]``."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipHealth, ...] = ()
    mcu_health: Optional[Health] = None
    warnings: Tuple[str, ...] = ()


def _health_of(block: KeyValueBlock) -> Health:
    # "Health Status" in -t health (013); show_ascend_chip_health_state prints plain "Health".
    return Health.parse(to_text(block.get("Health Status", "Health")))


def parse_health(text: str) -> HealthReport:
    """Read ``-t health``; error information may continue on blank-key lines."""
    report = parse_key_values(text)
    chips = []
    for block in report.chips:
        codes = to_text(block.get("Error Code"))
        info = to_text(block.get("Error Information"))
        chips.append(
            ChipHealth(
                npu_id=report.npu_id,
                chip_id=block.chip_id,
                health=_health_of(block),
                error_codes=tuple(codes.split()) if codes else (),
                error_information=tuple(part.strip() for part in (info or "").split("\n") if to_text(part)),
                fields=block.fields,
            )
        )
    mcu = report.mcus[0] if report.mcus else None
    return HealthReport(
        npu_id=report.npu_id,
        chips=tuple(chips),
        mcu_health=_health_of(mcu) if mcu else None,
        warnings=report.warnings,
    )


# ---------------------------------------------------------------- temp and power


@dataclass(frozen=True)
class ChipTemperature:
    """One chip of ``npu-smi info -t temp`` (080)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    temperature_c: Optional[int] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TempReport:
    """``npu-smi info -t temp -i N``: chip temperatures and the MCU's board sensors."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipTemperature, ...] = ()
    mcu_sensors_c: Mapping[str, Optional[int]] = field(default_factory=dict)  # LM75A_TE → 36
    warnings: Tuple[str, ...] = ()


def parse_temp(text: str) -> TempReport:
    """Read ``-t temp``: ``NPU Temperature (C)`` on servers, ``Temperature (C)`` on cards."""
    report = parse_key_values(text)
    chips = tuple(
        ChipTemperature(report.npu_id, block.chip_id, to_int(block.get(*_TEMPERATURE_KEYS)), block.fields)
        for block in report.chips
    )
    sensors: Dict[str, Optional[int]] = {}
    for mcu in report.mcus:
        for key, value in mcu.fields.items():
            # print_chip_temperature_for_outband: "%-8s%-22s" of name and " (C)" (080).
            if key.endswith("(C)"):
                sensors[key[: -len("(C)")].strip()] = to_int(value)
    return TempReport(report.npu_id, chips, sensors, report.warnings)


@dataclass(frozen=True)
class ChipPower:
    """One chip of ``npu-smi info -t power`` (081)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    power_w: Optional[float] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PowerReport:
    """``npu-smi info -t power -i N``."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipPower, ...] = ()
    mcu_power_w: Optional[float] = None
    warnings: Tuple[str, ...] = ()


def parse_power(text: str) -> PowerReport:
    """Read ``-t power`` (``NPU Real-time Power(W)``; 310 ``Rated Power Dissipation(W)``)."""
    report = parse_key_values(text)
    chips = tuple(
        ChipPower(report.npu_id, block.chip_id, to_float(block.get(*_POWER_KEYS)), block.fields)
        for block in report.chips
    )
    mcu = report.mcus[0] if report.mcus else None
    return PowerReport(
        report.npu_id, chips, to_float(mcu.get(*_POWER_KEYS)) if mcu else None, report.warnings
    )
