"""Parses npu-smi's key/value outputs (``npu-smi info -t board|usages|common|…``) into records.

Every ``-t <type>`` query prints ``<key padded to 30 or 40> : <value>`` lines, indented by a TAB
(printf ``"\\t%-30s : %s"``; captures copied from web pages show 8 spaces, one space or none).
The real layouts are in ``tests/data/npu_smi/`` (010-013, 017, 030, 031, 046, 061-065, 079-081).

``-t memory`` and ``-t ecc`` have no capture.  Their keys come from the printf calls in the
npu-smi source (hicann/driver ``src/custom/dev_prod/user/npucli/src/npu_info_print.c``:
``print_ddr_info``/``print_hbm_info`` and ``printf_ddr_ecc_info``/``printf_hbm_ecc_info``) and
the hiascend npu-smi reference (Atlas 200I A2 "查询指定芯片内存信息" / "查询指定芯片ECC错误计数"):

- memory: ``DDR Capacity(MB)``, ``DDR Clock Speed(MHz)``, ``HBM Capacity(MB)``,
  ``HBM Clock Speed(MHz)``, ``HBM Temperature(C)``, ``HBM Manufacturer ID`` (``0x..``);
  310/310B print ``Total Capacity(MB)``, ``Capacity(MB)``, ``Clock Speed(MHz)``; 310P adds
  ``Total DDR Capacity(MB)``.
- ecc (``%-40s``): ``{DDR|HBM} {Single|Double} Bit Error Count``, ``… Aggregate Total Err Cnt``,
  ``… Isolated Pages Count``, ``… Next-Isolated Pages Count``; 310/310B print
  ``Single-bit Error Count`` / ``Double-bit Error Count`` (DDR).

Unknown keys are kept in each record's ``fields``, so a new driver's lines are never lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from npuwatch.model import Health

#: Values npu-smi prints where it has no value (DESIGN §2.2: placeholders become None).
PLACEHOLDERS = frozenset({"", "NA", "N/A", "-", "--", "Failed", "NOT SUPPORT"})

#: Keys that describe the whole query (one NPU), not one chip.
HEADER_KEYS = ("NPU ID", "Chip Count", "Total Count", "Card Count")

_INT_RE = re.compile(r"^[+-]?\d+(?:\.0+)?$")
_HEX_RE = re.compile(r"^0[xX][0-9a-fA-F]+$")
_FLOAT_RE = re.compile(r"^[+-]?\d+(?:\.\d+)?$")
# proc-mem lines use bare colons (046): "Process id:3229095 Process name:  Process memory(MB):48".
_PROCESS_RE = re.compile(
    r"^Process id\s*:\s*(?P<pid>\S*)\s+Process name\s*:(?P<name>.*?)"
    r"\s*Process memory\(MB\)\s*:\s*(?P<mem>\S*)\s*$"
)


# ---------------------------------------------------------------- value helpers


def split_key_value(line: str) -> Optional[Tuple[str, str]]:
    """Split ``key : value`` at the first colon; ``None`` for a line without one."""
    stripped = line.strip()
    # A proc-mem process line has several colons and is read whole by parse_proc_mem (046).
    if ":" not in stripped or stripped.startswith("Process id"):
        return None
    key, _, value = stripped.partition(":")
    return key.strip(), value.strip()


def to_text(value: Optional[str]) -> Optional[str]:
    """The value, or ``None`` for a placeholder such as ``NA``."""
    if value is None:
        return None
    value = value.strip()
    return None if value in PLACEHOLDERS else value


def to_int(value: Optional[str]) -> Optional[int]:
    """An integer (decimal, or ``0x`` hex as npu-smi prints IDs); ``None`` otherwise."""
    text = to_text(value)
    if text is None:
        return None
    if _HEX_RE.match(text):
        return int(text, 16)
    if _INT_RE.match(text):
        return int(text.split(".")[0])
    return None


def to_float(value: Optional[str]) -> Optional[float]:
    """A decimal number such as ``93.4``; ``None`` for placeholders and anything else."""
    text = to_text(value)
    if text is None or not _FLOAT_RE.match(text):
        return None
    return float(text)


def _norm(key: str) -> str:
    # "NPU Temperature (C)" (080) vs "Temperature(C)" (031): compare keys without spaces or case.
    return re.sub(r"\s+", "", key).lower()


# ---------------------------------------------------------------- generic parse


@dataclass(frozen=True)
class KeyValueBlock:
    """One chip's (or the MCU's) key/value lines, raw and in printed order."""

    chip_id: Optional[int] = None
    chip_name: Optional[str] = None
    is_mcu: bool = False
    fields: Mapping[str, str] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()  # lines with no key (046: "No process in device.", process rows)

    def get(self, *keys: str) -> Optional[str]:
        """The raw value of the first of ``keys`` present (spacing and case ignored)."""
        wanted = {_norm(key): index for index, key in enumerate(keys)}
        found: Dict[int, str] = {}
        for key, value in self.fields.items():
            index = wanted.get(_norm(key))
            if index is not None and index not in found:
                found[index] = value
        return found[min(found)] if found else None


@dataclass(frozen=True)
class KeyValueReport:
    """A whole ``npu-smi info -t …`` output: the NPU it is about and one block per chip."""

    npu_id: Optional[int] = None
    chip_count: Optional[int] = None
    blocks: Tuple[KeyValueBlock, ...] = ()
    header: Mapping[str, str] = field(default_factory=dict)  # NPU ID, Chip Count, Total Count…
    warnings: Tuple[str, ...] = ()

    @property
    def chips(self) -> Tuple[KeyValueBlock, ...]:
        """The NPU chip blocks (MCU blocks left out)."""
        return tuple(block for block in self.blocks if not block.is_mcu)

    @property
    def mcus(self) -> Tuple[KeyValueBlock, ...]:
        """The MCU blocks (``Chip Name : mcu``, 031/061/080)."""
        return tuple(block for block in self.blocks if block.is_mcu)


class _Builder:
    """A block being read; frozen into a KeyValueBlock when it ends."""

    def __init__(self) -> None:
        self.chip_id: Optional[int] = None
        self.chip_id_seen = False
        self.chip_name: Optional[str] = None
        self.fields: Dict[str, str] = {}
        self.notes: List[str] = []
        self.last_key: Optional[str] = None

    @property
    def empty(self) -> bool:
        return not (self.chip_id_seen or self.fields or self.notes)

    def freeze(self) -> KeyValueBlock:
        name = to_text(self.chip_name)
        return KeyValueBlock(
            chip_id=self.chip_id,
            chip_name=name,
            is_mcu=(name or "").lower() == "mcu",
            fields=dict(self.fields),
            notes=tuple(self.notes),
        )


def _groups(text: str) -> List[List[str]]:
    groups: List[List[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            groups[-1].append(line)
        elif groups[-1]:
            groups.append([])
    return [group for group in groups if group]


def _starts_with_chip_id(lines: Sequence[str]) -> bool:
    # "Chip ID" comes BEFORE a chip's values in -t common (017, 031) and board -c (011) but
    # AFTER them in usages/power/temp/proc-mem (012, 030, 046, 080, 081): the first line of
    # the group that is not a header line tells which.
    for line in lines:
        pair = split_key_value(line)
        if pair is not None and pair[0] in HEADER_KEYS:
            continue
        return pair is not None and pair[0] == "Chip ID"
    return False


def _read_group(
    lines: Sequence[str],
    header: Dict[str, str],
    blocks: List[KeyValueBlock],
    warnings: List[str],
) -> None:
    leading = _starts_with_chip_id(lines)
    current = _Builder()

    def flush() -> None:
        nonlocal current
        if not current.empty:
            blocks.append(current.freeze())
        current = _Builder()

    for line in lines:
        pair = split_key_value(line)
        if pair is None:
            current.notes.append(line.strip())
            continue
        key, value = pair
        if not key:
            # Error Information continues on lines with a blank key (print_diagnosis_info).
            if current.last_key is not None:
                current.fields[current.last_key] += "\n" + value
            else:
                current.notes.append(line.strip())
            continue
        if key in HEADER_KEYS:
            if key in header and header[key] != value:
                warnings.append(f"{key} printed twice ({header[key]!r}, {value!r}); kept the first")
            header.setdefault(key, value)
            continue
        if key == "Chip ID":
            if leading or current.chip_id_seen:
                flush()
            current.chip_id_seen = True
            current.chip_id = to_int(value)
            if current.chip_id is None:
                warnings.append(f"unreadable Chip ID {value!r}")
            if not leading:
                flush()
            continue
        if key in current.fields:
            warnings.append(f"{key!r} repeated without a Chip ID line; read as a new block")
            flush()
        current.fields[key] = value
        current.last_key = key
        if key == "Chip Name":
            # MCU blocks carry no Chip ID, only "Chip Name : mcu" (031, 061) or "MCU" after
            # their values (080).
            current.chip_name = value
    flush()


def _merge_lone_chip_ids(blocks: List[KeyValueBlock]) -> List[KeyValueBlock]:
    # With -c, "NPU ID"/"Chip ID" may stand in their own group above the values (as the fake
    # npu-smi prints them): a block holding only a Chip ID names the id-less block after it.
    merged: List[KeyValueBlock] = []
    for block in blocks:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and previous.chip_id is not None
            and not previous.fields
            and not previous.notes
            and block.chip_id is None
            and not block.is_mcu
        ):
            merged[-1] = replace(block, chip_id=previous.chip_id)
        else:
            merged.append(block)
    return merged


def parse_key_values(text: str) -> KeyValueReport:
    """Read any ``npu-smi info -t <type>`` key/value output into blocks; never raises."""
    header: Dict[str, str] = {}
    blocks: List[KeyValueBlock] = []
    warnings: List[str] = []
    for group in _groups(text):
        _read_group(group, header, blocks, warnings)
    blocks = _merge_lone_chip_ids(blocks)
    if not blocks and not header:
        warnings.append("no key/value lines found")
    npu_id = to_int(header.get("NPU ID"))
    if "NPU ID" in header and npu_id is None:
        warnings.append(f"unreadable NPU ID {header['NPU ID']!r}")
    return KeyValueReport(
        npu_id=npu_id,
        chip_count=to_int(header.get("Chip Count")),
        blocks=tuple(blocks),
        header=dict(header),
        warnings=tuple(warnings),
    )


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


# ---------------------------------------------------------------- memory


@dataclass(frozen=True)
class ChipMemory:
    """One chip of ``npu-smi info -t memory`` (format: module docstring)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    ddr_capacity_mib: Optional[int] = None  # 310/310B: "Capacity(MB)"
    ddr_total_capacity_mib: Optional[int] = None  # 310P/310B only
    ddr_clock_mhz: Optional[int] = None
    hbm_capacity_mib: Optional[int] = None
    hbm_clock_mhz: Optional[int] = None
    hbm_temperature_c: Optional[int] = None
    hbm_manufacturer_id: Optional[int] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryReport:
    """``npu-smi info -t memory -i N [-c M]``."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipMemory, ...] = ()
    warnings: Tuple[str, ...] = ()


def parse_memory(text: str) -> MemoryReport:
    """Read ``-t memory``."""
    report = parse_key_values(text)
    chips = tuple(
        ChipMemory(
            npu_id=report.npu_id,
            chip_id=block.chip_id,
            ddr_capacity_mib=to_int(block.get("DDR Capacity(MB)", "Capacity(MB)")),
            ddr_total_capacity_mib=to_int(block.get("Total DDR Capacity(MB)", "Total Capacity(MB)")),
            ddr_clock_mhz=to_int(block.get("DDR Clock Speed(MHz)", "Clock Speed(MHz)")),
            hbm_capacity_mib=to_int(block.get("HBM Capacity(MB)")),
            hbm_clock_mhz=to_int(block.get("HBM Clock Speed(MHz)")),
            hbm_temperature_c=to_int(block.get("HBM Temperature(C)")),
            hbm_manufacturer_id=to_int(block.get("HBM Manufacturer ID")),
            fields=block.fields,
        )
        for block in report.chips
    )
    return MemoryReport(report.npu_id, chips, report.warnings)


# ---------------------------------------------------------------- ecc


@dataclass(frozen=True)
class EccCounts:
    """ECC counters of one memory (DDR or HBM), as dcmi_ecc_info reports them."""

    single_bit_errors: Optional[int] = None
    double_bit_errors: Optional[int] = None
    single_bit_aggregate_total: Optional[int] = None
    double_bit_aggregate_total: Optional[int] = None
    single_bit_isolated_pages: Optional[int] = None
    double_bit_isolated_pages: Optional[int] = None
    single_bit_next_isolated_pages: Optional[int] = None
    double_bit_next_isolated_pages: Optional[int] = None


@dataclass(frozen=True)
class ChipEcc:
    """One chip of ``npu-smi info -t ecc``; ``None`` for a memory npu-smi did not print."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    ddr: Optional[EccCounts] = None
    hbm: Optional[EccCounts] = None
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EccReport:
    """``npu-smi info -t ecc -i N [-c M]``."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipEcc, ...] = ()
    warnings: Tuple[str, ...] = ()


def _ecc_counts(block: KeyValueBlock, memory: str) -> Optional[EccCounts]:
    names = [
        ("Single Bit Error Count", "Single-bit Error Count"),
        ("Double Bit Error Count", "Double-bit Error Count"),
        ("Single Bit Aggregate Total Err Cnt",),
        ("Double Bit Aggregate Total Err Cnt",),
        ("Single Bit Isolated Pages Count",),
        ("Double Bit Isolated Pages Count",),
        ("Single Bit Next-Isolated Pages Count",),
        ("Double Bit Next-Isolated Pages Count",),
    ]
    raw = []
    for spellings in names:
        keys = [f"{memory} {spelling}" for spelling in spellings]
        if memory == "DDR":
            # 310/310B print DDR counts without the "DDR " prefix (printf_ddr_ecc_info).
            keys += list(spellings[1:])
        raw.append(block.get(*keys))
    if all(value is None for value in raw):
        return None
    values = [to_int(value) for value in raw]
    return EccCounts(*values)


def parse_ecc(text: str) -> EccReport:
    """Read ``-t ecc``."""
    report = parse_key_values(text)
    chips = tuple(
        ChipEcc(
            report.npu_id,
            block.chip_id,
            _ecc_counts(block, "DDR"),
            _ecc_counts(block, "HBM"),
            block.fields,
        )
        for block in report.chips
    )
    return EccReport(report.npu_id, chips, report.warnings)


# ---------------------------------------------------------------- proc-mem


@dataclass(frozen=True)
class ProcessMemory:
    """One process holding NPU memory in ``-t proc-mem``."""

    pid: int
    name: Optional[str]  # None when npu-smi prints it blank (046, containers)
    memory_mib: Optional[int]


@dataclass(frozen=True)
class ChipProcesses:
    """The processes on one chip (``No process in device.`` gives an empty tuple)."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    processes: Tuple[ProcessMemory, ...] = ()


@dataclass(frozen=True)
class ProcMemReport:
    """``npu-smi info -t proc-mem -i N`` (046)."""

    npu_id: Optional[int] = None
    chips: Tuple[ChipProcesses, ...] = ()
    warnings: Tuple[str, ...] = ()


def parse_proc_mem(text: str) -> ProcMemReport:
    """Read ``-t proc-mem``: process lines and ``No process in device.`` per chip."""
    report = parse_key_values(text)
    warnings = list(report.warnings)
    chips = []
    for block in report.chips:
        processes = []
        for note in block.notes:
            match = _PROCESS_RE.match(note)
            if match is None:
                if not note.lower().startswith("no process"):
                    warnings.append(f"unrecognised proc-mem line {note!r}")
                continue
            pid = to_int(match.group("pid"))
            if pid is None:
                warnings.append(f"unreadable process id in {note!r}")
                continue
            name = match.group("name").strip() or None
            processes.append(ProcessMemory(pid, name, to_int(match.group("mem"))))
        chips.append(ChipProcesses(report.npu_id, block.chip_id, tuple(processes)))
    return ProcMemReport(report.npu_id, tuple(chips), tuple(warnings))
