"""Parses npu-smi's key/value outputs (``npu-smi info -t board|usages|common|…``) into blocks.

Every ``-t <type>`` query prints ``<key padded to 30 or 40> : <value>`` lines, indented by a TAB
(printf ``"\\t%-30s : %s"``; captures copied from web pages show 8 spaces, one space or none).
The real layouts are in ``tests/data/npu_smi/`` (010-013, 017, 030, 031, 046, 061-065, 079-081).
Typed records per query type live in ``npu_smi.reports`` and ``npu_smi.memory_reports``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from npuwatch.probes.values import to_int, to_text

#: Keys that describe the whole query (one NPU), not one chip.
HEADER_KEYS = ("NPU ID", "Chip Count", "Total Count", "Card Count")

# proc-mem lines use bare colons (046): "Process id:3229095 Process name:  Process memory(MB):48".


# ---------------------------------------------------------------- value helpers


def split_key_value(line: str) -> Optional[Tuple[str, str]]:
    """Split ``key : value`` at the first colon; ``None`` for a line without one."""
    stripped = line.strip()
    # A proc-mem process line has several colons and is read whole by parse_proc_mem (046).
    if ":" not in stripped or stripped.startswith("Process id"):
        return None
    key, _, value = stripped.partition(":")
    return key.strip(), value.strip()


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
