"""Independent golden tests for ``npuwatch.probes.npu_smi.table.parse_info``.

Every expected value below was read by hand from the capture text in
``tests/data/npu_smi/`` (and from MANIFEST.md's "Layout notes" for the hand-built
unseen layouts); none was produced by running the parser.  The contract is docs/design.md §2.2:
every metric is a number or ``None``; a ``None`` has its reason in ``chip.unavailable()``;
``NA`` / ``-`` become ``None``, a printed ``0`` stays ``0``; redacted values are kept as
printed; a Bus-Id ``NA`` becomes ``None``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from npuwatch.model import CHIP_METRICS as ALL_METRICS
from npuwatch.model import ChipSample
from npuwatch.probes.npu_smi.table import TABLE_METRICS, InfoTable, parse_info

#: The metrics the table prints (the golden tuples' columns); the driver-only ones are None with
#: the note naming the DCMI backend (tests/core/test_new_metrics.py).
CHIP_METRICS = tuple(m for m in ALL_METRICS if m in TABLE_METRICS)

DATA = Path(__file__).resolve().parents[1] / "data" / "npu_smi"

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

Pair = Tuple[Optional[int], Optional[int]]
NO: Pair = (None, None)  # a used/total pair the layout does not print
Z: Pair = (0, 0)  # a printed `0 / 0`

#: Order of the fields in an expected chip tuple.
CHIP_FIELDS = (
    "npu_id",
    "chip_id",
    "phy_id",
    "device_id",
    "name",
    "bus_id",
    "health",
    "power_w",
    "temperature_c",
    "aicore_percent",
    "npu_util_percent",
    "hbm_used_mib",
    "hbm_total_mib",
    "memory_used_mib",
    "memory_total_mib",
    "hugepages_used",
    "hugepages_total",
)

_INT_METRICS = tuple(m for m in CHIP_METRICS if m != "power_w")


def chip(
    npu: int,
    chip_id: int,
    name: Optional[str],
    bus: Optional[str],
    health: str,
    power: Optional[float],
    temp: Optional[int],
    aicore: Optional[int],
    util: Optional[int],
    hbm: Pair,
    mem: Pair,
    hp: Pair,
    *,
    phy: Optional[int] = None,
    dev: Optional[int] = None,
) -> tuple:
    """One expected chip, in ``CHIP_FIELDS`` order."""
    return (npu, chip_id, phy, dev, name, bus, health, power, temp, aicore, util, *hbm, *mem, *hp)


def b910(npu: int, name: str, bus: str, power: Optional[float], temp: int, hbm: Pair) -> tuple:
    """A 910B-style single-chip card: AICore 0, DDR `0 / 0`, Hugepages `0 / 0`, no NPU Util."""
    return chip(npu, 0, name, bus, "OK", power, temp, 0, None, hbm, Z, Z)


def a3(npu: int, chip_id: int, phy: int, bus: str, power: Optional[float], temp: int, hbm: int) -> tuple:
    """An A3 (Ascend910) chip: AICore 0, DDR `0 / 0`, Hugepages `0 / 0`, HBM of 65536."""
    return chip(npu, chip_id, "Ascend910", bus, "OK", power, temp, 0, None, (hbm, 65536), Z, Z, phy=phy)


def actual(sample: ChipSample) -> tuple:
    ident = sample.identity
    return (
        ident.npu_id,
        ident.chip_id,
        ident.phy_id,
        ident.device_id,
        ident.name,
        ident.bus_id,
        sample.health.value,
        *(getattr(sample, m) for m in CHIP_METRICS),
    )


def proc_tuple(p: object) -> tuple:
    return (p.npu_id, p.chip_id, p.pid, p.name, p.npu_memory_mib, p.container_pid)  # type: ignore[attr-defined]


def assert_metric_contract(table: InfoTable) -> None:
    """Every metric is a finite number or None, and every None has a non-empty reason."""
    for sample in table.chips:
        reasons = sample.unavailable()
        for metric in CHIP_METRICS:
            value = getattr(sample, metric)
            where = f"{sample.identity.key} {metric}"
            if value is None:
                assert reasons.get(metric), f"{where} is None without a reason"
            else:
                assert isinstance(value, (int, float)), where
                assert not isinstance(value, bool), where
                assert math.isfinite(value), where
                if metric in _INT_METRICS:
                    assert type(value) is int, f"{where} should be an int, got {value!r}"


def diff_chips(got: Sequence[tuple], want: Sequence[tuple]) -> List[str]:
    """Readable field-by-field differences (the assert message)."""
    out = []
    if len(got) != len(want):
        out.append(f"chip count: want {len(want)}, got {len(got)}")
    for i, (g, w) in enumerate(zip(got, want)):
        for name, gv, wv in zip(CHIP_FIELDS, g, w):
            if gv != wv:
                out.append(f"chip #{i} ({w[0]},{w[1]}) {name}: want {wv!r}, got {gv!r}")
    return out


def load(prefix: str) -> str:
    (path,) = DATA.glob(f"{prefix}_*.txt")
    return path.read_text(encoding="utf-8")


@dataclass
class Golden:
    chips: List[tuple]
    npu_smi: Optional[str]
    driver: Optional[str]
    process_table: bool
    processes: List[tuple] = field(default_factory=list)
    idle: Tuple[int, ...] = ()


def check_golden(table: InfoTable, want: Golden) -> None:
    got = [actual(c) for c in table.chips]
    problems = diff_chips(got, want.chips)
    assert not problems, "\n".join(problems)
    assert got == want.chips
    assert_metric_contract(table)
    assert [proc_tuple(p) for p in table.processes] == want.processes
    assert table.process_table is want.process_table
    assert tuple(table.idle_npus) == want.idle
    assert (table.npu_smi_version, table.driver_version) == (want.npu_smi, want.driver)


# --------------------------------------------------------------------------------------
# golden values, read by hand from each capture
# --------------------------------------------------------------------------------------

_IDLE_0_7 = tuple(range(8))

GOLDEN: Dict[str, Golden] = {
    "001": Golden(
        chips=[
            b910(0, "910B2", "0000:C1:00.0", 135.9, 39, (33126, 65536)),
            b910(1, "910B2", "0000:C2:00.0", 103.8, 37, (32639, 65536)),
            b910(2, "910B2", "0000:81:00.0", 96.3, 37, (32640, 65536)),
            b910(3, "910B2", "0000:82:00.0", 93.8, 38, (32640, 65536)),
            b910(4, "910B2", "0000:01:00.0", 101.0, 44, (32639, 65536)),
            b910(5, "910B2", "0000:02:00.0", 91.8, 43, (32639, 65536)),
            b910(6, "910B2", "0000:41:00.0", 94.2, 41, (32639, 65536)),
            b910(7, "910B2", "0000:42:00.0", 90.8, 42, (32638, 65536)),
        ],
        npu_smi="25.2.0",
        driver="25.2.0",
        process_table=True,
        processes=[
            (0, 0, 314487, "VLLMWorker_TP", 129, None),
            (0, 0, 316405, "VLLMWorker_TP", 129, None),
            (0, 0, 315924, "VLLMWorker_TP", 129, None),
            (0, 0, 315419, "VLLMWorker_TP", 129, None),
            (0, 0, 317396, "VLLMWorker_TP", 129, None),
            (0, 0, 314183, "VLLMWorker_TP", 29229, None),
            (0, 0, 314935, "VLLMWorker_TP", 129, None),
            (0, 0, 316895, "VLLMWorker_TP", 129, None),
            (1, 0, 314487, "VLLMWorker_TP", 29275, None),
            (2, 0, 314935, "VLLMWorker_TP", 29274, None),
            (3, 0, 315419, "VLLMWorker_TP", 29275, None),
            (4, 0, 315924, "VLLMWorker_TP", 29275, None),
            (5, 0, 316405, "VLLMWorker_TP", 29275, None),
            (6, 0, 316895, "VLLMWorker_TP", 29275, None),
            (7, 0, 317396, "VLLMWorker_TP", 29275, None),
        ],
    ),
    "003": Golden(
        chips=[
            b910(0, "910B1", "0000:C1:00.0", 89.1, 32, (3437, 65536)),
            b910(1, "910B1", "0000:01:00.0", 90.0, 33, (3378, 65536)),
            b910(2, "910B1", "0000:C2:00.0", 91.5, 32, (3376, 65536)),
            b910(3, "910B1", "0000:02:00.0", 91.3, 32, (3377, 65536)),
            b910(4, "910B1", "0000:81:00.0", 92.7, 31, (3377, 65536)),
            b910(5, "910B1", "0000:41:00.0", 93.0, 33, (3376, 65536)),
            b910(6, "910B1", "0000:82:00.0", 91.5, 30, (3377, 65536)),
            b910(7, "910B1", "0000:42:00.0", 91.1, 32, (3380, 65536)),
        ],
        npu_smi="24.1.0",
        driver="24.1.0",
        process_table=True,
        processes=[(0, 0, 641248, None, 113, None)],  # blank Process name → None
        idle=(1, 2, 3, 4, 5, 6, 7),
    ),
    "004": Golden(
        chips=[
            chip(0, 0, "910A", "0000:C1:00.0", "OK", 68.6, 36, 0, None, (0, 32768), (591, 14795), NO),
            chip(1, 0, "910A", "0000:81:00.0", "OK", 63.7, 31, 0, None, (0, 32768), (303, 15177), NO),
            chip(2, 0, "910A", "0000:41:00.0", "OK", 66.1, 31, 0, None, (0, 32768), (1821, 15177), NO),
            chip(3, 0, "910A", "0000:01:00.0", "OK", 65.7, 37, 0, None, (0, 32768), (3168, 15088), NO),
            chip(4, 0, "910A", "0000:C2:00.0", "OK", 66.7, 35, 0, None, (0, 32768), (295, 14795), NO),
            chip(5, 0, "910A", "0000:82:00.0", "OK", 63.7, 29, 0, None, (0, 32768), (455, 15177), NO),
            chip(6, 0, "910A", "0000:42:00.0", "OK", 66.1, 29, 0, None, (0, 32768), (1517, 15177), NO),
            chip(7, 0, "910A", "0000:02:00.0", "OK", 65.1, 36, 0, None, (0, 32768), (3319, 15088), NO),
        ],
        npu_smi="1.8.21",
        driver="20.2.2.spc001",
        process_table=False,
    ),
    "007": Golden(
        chips=[
            a3(2, 0, 4, "0000:95:00.0", 176.3, 36, 3411),
            a3(2, 1, 5, "0000:97:00.0", None, 36, 3208),
        ],
        npu_smi="24.1.rc3.7",
        driver="24.1.rc3.7",
        process_table=True,
        idle=(2,),
    ),
    "008": Golden(
        chips=[
            b910(0, "910B3", "0000:C1:00.0", 100.0, 50, (8676, 65536)),
            b910(1, "910B3", "0000:C2:00.0", 94.8, 48, (3403, 65536)),
            b910(2, "910B3", "0000:81:00.0", 90.0, 49, (3403, 65536)),
            b910(3, "910B3", "0000:82:00.0", 96.5, 48, (3407, 65536)),
            b910(4, "910B3", "0000:01:00.0", 96.5, 52, (3403, 65536)),
            b910(5, "910B3", "0000:02:00.0", 97.4, 49, (3402, 65536)),
            b910(6, "910B3", "0000:41:00.0", 97.8, 49, (3402, 65536)),
            b910(7, "910B3", "0000:42:00.0", 93.3, 51, (3403, 65536)),
        ],
        npu_smi="26.1.0",
        driver="26.1.0",
        process_table=True,
        processes=[(0, 0, 485946, "pytest", 5175, None)],  # container pid printed NA
        idle=(1, 2, 3, 4, 5, 6, 7),
    ),
    "015": Golden(  # NPU 1-6 elided with "..."
        chips=[
            chip(0, 0, "xxx", "0000:61:00.0", "OK", 73.1, 37, 0, None, (0, 32768), (920, 13553), Z),
            chip(7, 0, "xxx", "0000:3D:00.0", "OK", 67.0, 38, 0, None, (0, 32768), (2346, 15567), Z),
        ],
        npu_smi="23.0.5",
        driver="23.0.5",
        process_table=True,
        idle=(0, 7),
    ),
    "016": Golden(  # hand-edited widths; every value still readable
        chips=[
            chip(
                0,
                0,
                "xxx",
                "0000:C1:00.0",
                "OK",
                73.4,
                44,
                0,
                None,
                (30710, 32768),
                (4565, 15137),
                (1123, 1123),
            ),
            chip(
                1,
                0,
                "xxx",
                "0000:81:00.0",
                "OK",
                69.6,
                39,
                0,
                None,
                (30710, 32768),
                (4483, 15137),
                (1123, 1123),
            ),
            chip(
                2,
                0,
                "xxx",
                "0000:41:00.0",
                "OK",
                70.0,
                36,
                0,
                None,
                (30710, 32768),
                (4437, 15137),
                (1123, 1123),
            ),
            chip(
                3,
                0,
                "xxx",
                "0000:01:00.0",
                "OK",
                69.6,
                44,
                0,
                None,
                (30709, 32768),
                (3845, 15039),
                (1123, 1123),
            ),
            chip(
                4,
                0,
                "xxx",
                "0000:C2:00.0",
                "OK",
                71.3,
                40,
                0,
                None,
                (30709, 32768),
                (4296, 15137),
                (1123, 1123),
            ),
            chip(
                5,
                0,
                "xxx",
                "0000:82:00.0",
                "OK",
                67.0,
                36,
                0,
                None,
                (30709, 32768),
                (3758, 15137),
                (1123, 1123),
            ),
            chip(
                6,
                0,
                "xxx",
                "0000:42:00.0",
                "OK",
                71.7,
                37,
                0,
                None,
                (30710, 32768),
                (4581, 15137),
                (1123, 1123),
            ),
            chip(
                7,
                0,
                "xxx",
                "0000:02:00.0",
                "OK",
                69.1,
                42,
                0,
                None,
                (30710, 32768),
                (4690, 15039),
                (1123, 1123),
            ),
        ],
        npu_smi="23.0.rc3",
        driver="23.0.rc2.3",
        process_table=True,
        processes=[
            (0, 0, 139667, "python", 30780, None),
            (1, 0, 139577, "python", 30782, None),
            (2, 0, 139446, "python", 30780, None),
            (3, 0, 139372, "python", 30780, None),
            (4, 0, 139258, "python", 30780, None),
            (5, 0, 139163, "python", 30780, None),
            (6, 0, 139126, "python", 30780, None),
            (7, 0, 139090, "python", 30780, None),
        ],
    ),
    "022": Golden(
        chips=[
            b910(0, "910B4", "0000:C1:00.0", 87.2, 33, (2654, 32768)),
            b910(1, "910B4", "0000:C2:00.0", 82.7, 33, (2654, 32768)),
            b910(2, "910B4", "0000:81:00.0", 82.7, 33, (2654, 32768)),
            b910(3, "910B4", "0000:82:00.0", 89.1, 34, (2654, 32768)),
            b910(4, "910B4", "0000:01:00.0", 84.5, 39, (2654, 32768)),
            b910(5, "910B4", "0000:02:00.0", 84.8, 37, (2654, 32768)),
            b910(6, "910B4", "0000:41:00.0", 87.1, 38, (2654, 32768)),
            b910(7, "910B4", "0000:42:00.0", 81.6, 37, (2653, 32768)),
        ],
        npu_smi="25.0.rc1.1",
        driver="25.0.rc1.1",
        process_table=True,
        idle=_IDLE_0_7,
    ),
    "027": Golden(  # NPU 2-6 elided, no process section
        chips=[
            b910(0, "910B1", "0000:C1:00.0", 88.4, 46, (4175, 65536)),
            b910(1, "910B1", "0000:01:00.0", 92.1, 47, (4175, 65536)),
            b910(7, "910B1", "0000:42:00.0", 92.7, 48, (4174, 65536)),
        ],
        npu_smi="23.0.rc2",
        driver="23.0.rc2",
        process_table=False,
    ),
    "037": Golden(  # 950: no chip column → chip 0; Bus-Id NA → None; NPU Util, no AICore
        chips=[
            chip(0, 0, "Ascend950DT", None, "OK", 377.2, 48, None, 0, (4857, 98304), Z, Z),
            chip(1, 0, "Ascend950DT", None, "OK", 380.6, 50, None, 0, (4855, 98304), Z, Z),
            chip(2, 0, "Ascend950DT", None, "OK", 373.1, 49, None, 0, (4855, 98304), Z, Z),
            chip(3, 0, "Ascend950DT", None, "OK", 395.1, 48, None, 0, (4857, 98304), Z, Z),
            chip(4, 0, "Ascend950DT", None, "OK", 366.6, 49, None, 0, (4856, 98304), Z, Z),
            chip(5, 0, "Ascend950DT", None, "OK", 370.7, 49, None, 0, (4855, 98304), Z, Z),
            chip(6, 0, "Ascend950DT", None, "OK", 373.3, 49, None, 0, (4856, 98304), Z, Z),
            chip(7, 0, "Ascend950DT", None, "OK", 372.8, 49, None, 0, (4856, 98304), Z, Z),
        ],
        npu_smi=None,
        driver=None,
        process_table=True,
        idle=_IDLE_0_7,
    ),
    "039": Golden(
        chips=[chip(0, 0, "310B4", None, "OK", 7.2, 37, 0, None, NO, (1797, 3513), (15, 15), dev=0)],
        npu_smi="23.0.rc3",
        driver="23.0.rc3",
        process_table=False,
    ),
    "041": Golden(
        chips=[chip(0, 0, "310B4", None, "Alarm", 0.0, 65, 0, None, NO, (3628, 15609), (15, 15), dev=0)],
        npu_smi="23.0.0",
        driver="23.0.0",
        process_table=False,
    ),
    "042": Golden(
        chips=[
            b910(0, "910B2C", "0000:5A:00.0", 88.6, 51, (20701, 65536)),
            b910(1, "910B2C", "0000:19:00.0", 99.6, 50, (20687, 65536)),
        ],
        npu_smi="23.0.2.1",
        driver="23.0.2.1",
        process_table=True,
        processes=[(0, 0, 124528, "python3.8", 17400, None)],
    ),
    "043": Golden(
        chips=[
            a3(0, 0, 0, "0000:9C:00.0", 162.8, 37, 3133),
            a3(0, 1, 1, "0000:9E:00.0", None, 37, 2876),
            a3(1, 0, 2, "0000:37:00.0", 167.1, 38, 3116),
            a3(1, 1, 3, "0000:39:00.0", None, 38, 10568),
        ],
        npu_smi="25.2.0",
        driver="25.2.0",
        process_table=True,
        processes=[(1, 1, 990711, "python", 7746, None)],
        idle=(0,),
    ),
    "044": Golden(  # 310P3 Duo: power NA, no HBM, per-chip hugepages, shared Bus-Id
        chips=[
            chip(
                1,
                0,
                "310P3",
                "0000:01:00.0",
                "OK",
                None,
                62,
                0,
                None,
                NO,
                (16302, 44280),
                (7210, 7210),
                dev=0,
            ),
            chip(
                1,
                1,
                "310P3",
                "0000:01:00.0",
                "OK",
                None,
                62,
                0,
                None,
                NO,
                (15543, 43693),
                (7210, 7210),
                dev=1,
            ),
            chip(
                2,
                0,
                "310P3",
                "0000:02:00.0",
                "OK",
                None,
                61,
                0,
                None,
                NO,
                (35563, 44280),
                (17057, 17057),
                dev=2,
            ),
            chip(
                2,
                1,
                "310P3",
                "0000:02:00.0",
                "OK",
                None,
                61,
                0,
                None,
                NO,
                (35204, 43693),
                (16823, 16823),
                dev=3,
            ),
        ],
        npu_smi="24.1.0.1",
        driver="24.1.0.1",
        process_table=True,
        processes=[
            (1, 0, 3277562, "mindie_llm_back", 14513, None),
            (1, 1, 3277565, "mindie_llm_back", 14513, None),
            (2, 0, 3034986, "mindie_llm_back", 34207, None),
            (2, 1, 3034989, "mindie_llm_back", 33740, None),
        ],
    ),
    "049": Golden(
        chips=[chip(0, 0, "310P3", "0000:87:00.0", "OK", 17.1, 55, 0, None, NO, (927, 23054), Z, dev=0)],
        npu_smi="22.0.0",
        driver="22.0.2",
        process_table=False,
    ),
    "051": Golden(
        chips=[chip(7, 0, "310P3", "0000:00:07.0", "OK", None, 28, 0, None, NO, (1805, 21527), Z, dev=0)],
        npu_smi="22.0.4",
        driver="22.0.4",
        process_table=False,
    ),
    "052": Golden(  # damaged top border; "Version:22.0.2" without a space
        chips=[chip(0, 0, "310P3", "0000:86:00.0", "OK", 16.2, 42, 0, None, NO, (994, 21534), Z, dev=0)],
        npu_smi="22.0.0",
        driver="22.0.2",
        process_table=False,
    ),
    "082": Golden(  # 950PR 99 columns; a "No running processes" line without a process header
        chips=[chip(0, 0, "Ascend950PR", "0000:61:00.0", "OK", 195.6, 56, None, 0, (5239, 131072), Z, Z)],
        npu_smi="25.7.rc1.6",
        driver="25.7.rc1.6",
        process_table=True,
        idle=(0,),
    ),
    "088": Golden(  # head fragment: card 0 of an A3 in the 26.x wide layout
        chips=[
            a3(0, 0, 0, "0000:9D:00.0", 162.6, 34, 3419),
            a3(0, 1, 1, "0000:9F:00.0", None, 34, 2874),
        ],
        npu_smi="26.0.rc2",
        driver="26.0.rc2",
        process_table=False,
    ),
    "089": Golden(  # tail fragment: no header rows, last line cut after "NPU 2"
        chips=[a3(7, 1, 15, "0000:83:00.0", None, 35, 31877)],
        npu_smi=None,
        driver=None,
        process_table=True,
        processes=[(0, 0, 632268, "python3.1", 197, None)],
        idle=(1, 2),
    ),
    "091": Golden(  # redacted Bus-Id kept as printed; cut after NPU 1
        chips=[
            b910(0, "910B4-1", "0000:xx:00.0", 91.3, 33, (3197, 65536)),
            b910(1, "910B4-1", "0000:xx:00.0", 88.1, 32, (3197, 65536)),
        ],
        npu_smi="25.2.0",
        driver="25.2.0",
        process_table=False,
    ),
    "092": Golden(  # no version rows
        chips=[b910(0, "910B4", "0000:00:00.0", 86.0, 40, (2828, 32768))],
        npu_smi=None,
        driver=None,
        process_table=False,
    ),
    "093": Golden(
        chips=[
            b910(0, "910B3", "0000:C1:00.0", 101.8, 43, (3318, 65536)),
            b910(1, "910B3", "0000:C2:00.0", 92.0, 39, (3314, 65536)),
            b910(2, "910B3", "0000:81:00.0", 102.0, 40, (3314, 65536)),
            b910(3, "910B3", "0000:82:00.0", 99.8, 40, (3314, 65536)),
            b910(4, "910B3", "0000:01:00.0", 98.6, 45, (3314, 65536)),
            b910(5, "910B3", "0000:02:00.0", 99.7, 44, (3314, 65536)),
            b910(6, "910B3", "0000:41:00.0", 103.8, 45, (3314, 65536)),
            b910(7, "910B3", "0000:42:00.0", 98.2, 44, (3315, 65536)),
        ],
        npu_smi="24.1.rc1.b030",
        driver="24.1.rc1.b030",
        process_table=False,
    ),
    "100": Golden(
        chips=[
            a3(0, 0, 0, "0000:9D:00.0", 182.0, 36, 3402),
            a3(0, 1, 1, "0000:9F:00.0", None, 35, 3200),
            a3(1, 0, 2, "0000:99:00.0", 181.0, 35, 3396),
            a3(1, 1, 3, "0000:9B:00.0", None, 36, 3205),
            a3(2, 0, 4, "0000:95:00.0", 176.9, 34, 3395),
            a3(2, 1, 5, "0000:97:00.0", None, 34, 3203),
            a3(3, 0, 6, "0000:91:00.0", 181.2, 36, 3395),
            a3(3, 1, 7, "0000:93:00.0", None, 35, 3203),
            a3(4, 0, 8, "0000:8D:00.0", 179.8, 36, 52553),
            a3(4, 1, 9, "0000:8F:00.0", None, 37, 52358),
            a3(5, 0, 10, "0000:89:00.0", 183.8, 37, 52567),
            a3(5, 1, 11, "0000:8B:00.0", None, 36, 52345),
            a3(6, 0, 12, "0000:85:00.0", 185.9, 37, 52552),
            a3(6, 1, 13, "0000:87:00.0", None, 36, 52358),
            a3(7, 0, 14, "0000:81:00.0", 182.1, 34, 52554),
            a3(7, 1, 15, "0000:83:00.0", None, 36, 52358),
        ],
        npu_smi="24.1.rc3.3",
        driver="24.1.rc3.3",
        process_table=True,
        processes=[
            (4, 0, 957687, "pt_main_thread", 49207, None),
            (4, 1, 957770, "pt_main_thread", 49207, None),
            (5, 0, 957790, "pt_main_thread", 49207, None),
            (5, 1, 957852, "pt_main_thread", 49207, None),
            (6, 0, 957876, "pt_main_thread", 49207, None),
            (6, 1, 957912, "pt_main_thread", 49207, None),
            (7, 0, 957957, "pt_main_thread", 49207, None),
            (7, 1, 958011, "pt_main_thread", 49207, None),
        ],
        idle=(0, 1, 2, 3),
    ),
}

TABLE_CAPTURES = tuple(sorted(GOLDEN))

#: Complete, undamaged captures: nothing to warn about.
CLEAN = (
    "001",
    "003",
    "004",
    "007",
    "008",
    "022",
    "039",
    "041",
    "042",
    "043",
    "044",
    "049",
    "093",
    "100",
)

#: Damaged / fragment captures and the warning each must carry (regex, case-insensitive).
DAMAGED_WARNINGS: Dict[str, Tuple[str, ...]] = {
    "015": (r"elid|\.\.\.|omit",),
    "016": (r".",),
    "027": (r"elid|\.\.\.|omit",),
    "052": (r".",),
    "088": (r"cut|truncat|incomplete|end|closing|border",),  # head fragment, no closing border
    "089": (r"cut|truncat|incomplete|unterminated|closing", r"header"),
    "091": (r"cut|truncat|incomplete|end|closing|border",),
}

NON_TABLE = tuple(
    sorted(p.name.split("_", 1)[0] for p in DATA.glob("*.txt") if p.name.split("_", 1)[0] not in GOLDEN)
)


# --------------------------------------------------------------------------------------
# golden tests
# --------------------------------------------------------------------------------------


def test_every_default_table_capture_has_a_golden() -> None:
    assert TABLE_CAPTURES == (
        "001", "003", "004", "007", "008", "015", "016", "022", "027", "037", "039", "041",
        "042", "043", "044", "049", "051", "052", "082", "088", "089", "091", "092", "093",
        "100",
    )  # fmt: skip


@pytest.mark.parametrize("prefix", TABLE_CAPTURES)
def test_golden_capture(prefix: str) -> None:
    check_golden(parse_info(load(prefix)), GOLDEN[prefix])


@pytest.mark.parametrize("prefix", TABLE_CAPTURES)
def test_golden_none_metrics_have_the_expected_reasons(prefix: str) -> None:
    """The set of None metrics is exactly what the capture lacks, and each has a reason."""
    table = parse_info(load(prefix))
    for sample, want in zip(table.chips, GOLDEN[prefix].chips):
        expected_none = {
            name for name, value in zip(CHIP_FIELDS, want) if value is None and name in CHIP_METRICS
        }
        got_none = {m for m in CHIP_METRICS if getattr(sample, m) is None}
        assert got_none == expected_none, sample.identity.key
        reasons = {m: r for m, r in sample.unavailable().items() if m in CHIP_METRICS}
        assert set(reasons) == expected_none, sample.identity.key
        assert all(isinstance(r, str) and r.strip() for r in reasons.values())


@pytest.mark.parametrize("prefix", CLEAN)
def test_clean_capture_has_no_warnings(prefix: str) -> None:
    assert parse_info(load(prefix)).warnings == ()


@pytest.mark.parametrize("prefix", sorted(DAMAGED_WARNINGS))
def test_damaged_capture_warns(prefix: str) -> None:
    table = parse_info(load(prefix))
    assert table.chips, "a damaged capture still yields what can be read"
    assert table.warnings, f"{prefix}: no warning"
    for pattern in DAMAGED_WARNINGS[prefix]:
        assert any(re.search(pattern, w, re.IGNORECASE) for w in table.warnings), (
            f"{prefix}: no warning matching {pattern!r} in {table.warnings!r}"
        )


def test_placeholders_versus_real_zero() -> None:
    """041 prints a real `0.0` power (kept); A3 chip 1 prints `-` and 310P prints `NA` (None)."""
    alarm = parse_info(load("041")).chips[0]
    assert alarm.power_w == 0.0
    assert "power_w" not in alarm.unavailable()
    a3_chip1 = parse_info(load("043")).chips[1]
    assert a3_chip1.power_w is None
    assert a3_chip1.unavailable()["power_w"]
    duo = parse_info(load("044")).chips[0]
    assert duo.power_w is None
    assert duo.unavailable()["power_w"]


def test_trailing_space_and_leading_indent_do_not_matter() -> None:
    """The same table, indented by a tab and with trailing spaces, parses identically."""
    text = load("001")
    shifted = "\n".join("\t" + line + "   " for line in text.splitlines())
    a, b = parse_info(text), parse_info(shifted)
    assert [actual(c) for c in a.chips] == [actual(c) for c in b.chips]
    assert [proc_tuple(p) for p in a.processes] == [proc_tuple(p) for p in b.processes]


def test_crlf_line_endings() -> None:
    text = load("043").replace("\n", "\r\n")
    check_golden(parse_info(text), GOLDEN["043"])


def _edit(text: str, old: str, new: str) -> str:
    """Replace one unique fragment by another of the same length (the table keeps its width)."""
    assert len(old) == len(new)
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_placeholders_anywhere_and_health_spellings() -> None:
    """NA / - in any metric becomes None with a reason; health words map to their members."""
    text = load("022")
    text = _edit(text, "| OK            | 87.2        33  ", "| OK            | NA          NA  ")
    text = _edit(
        text,
        "| 0000:C2:00.0  | 0           0    / 0          2654 / 32768 ",
        "| 0000:C2:00.0  | -           0    / 0          NA   / NA    ",
    )
    text = _edit(text, "| 2     910B4               | OK      ", "| 2     910B4               | Warning ")
    text = _edit(text, "| 3     910B4               | OK      ", "| 3     910B4               | Critical")
    text = _edit(text, "| 4     910B4               | OK      ", "| 4     910B4               | UNKNOWN ")
    text = _edit(
        text,
        "| 84.8        37                0    / 0    ",
        "| 84.8        37                -    / -    ",
    )
    text = _edit(text, "| 7     910B4               | OK      ", "| 7     910B4               | Alarm   ")
    assert len({len(line) for line in text.splitlines()}) == 1
    table = parse_info(text)
    want = list(GOLDEN["022"].chips)
    want[0] = b910(0, "910B4", "0000:C1:00.0", None, None, (2654, 32768))
    want[1] = chip(1, 0, "910B4", "0000:C2:00.0", "OK", 82.7, 33, None, None, NO, Z, Z)
    want[2] = chip(2, 0, "910B4", "0000:81:00.0", "Warning", 82.7, 33, 0, None, (2654, 32768), Z, Z)
    want[3] = chip(3, 0, "910B4", "0000:82:00.0", "Critical", 89.1, 34, 0, None, (2654, 32768), Z, Z)
    want[4] = chip(4, 0, "910B4", "0000:01:00.0", "Unknown", 84.5, 39, 0, None, (2654, 32768), Z, Z)
    want[5] = chip(5, 0, "910B4", "0000:02:00.0", "OK", 84.8, 37, 0, None, (2654, 32768), Z, NO)
    want[7] = chip(7, 0, "910B4", "0000:42:00.0", "Alarm", 81.6, 37, 0, None, (2653, 32768), Z, Z)
    problems = diff_chips([actual(c) for c in table.chips], want)
    assert not problems, "\n".join(problems)
    assert_metric_contract(table)


@pytest.mark.parametrize("digit", ["\u00b9", "\u00b2", "\u00b3", "\u2075"])
def test_unicode_superscript_digit_does_not_raise(digit: str) -> None:
    """`'¹'.isdigit()` is True but `int('¹')` raises: an ID cell holding one must not crash."""
    text = _edit(load("039"), "| 0       310B4  ", f"| {digit}       310B4  ")
    table = parse_info(text)  # must not raise
    assert_metric_contract(table)
    table = parse_info(f"|{digit}|\n||")
    assert table.chips == ()
    assert table.warnings


# --------------------------------------------------------------------------------------
# non-table captures: no chips, at least one warning, never raises
# --------------------------------------------------------------------------------------


def test_non_table_captures_are_listed() -> None:
    assert len(NON_TABLE) >= 30
    assert "054" in NON_TABLE  # `npu-smi info watch` rows look numeric but are no table


@pytest.mark.parametrize("prefix", NON_TABLE)
def test_non_table_capture_gives_no_chips_and_a_warning(prefix: str) -> None:
    table = parse_info(load(prefix))
    assert table.chips == ()
    assert table.warnings
    assert all(isinstance(w, str) and w for w in table.warnings)


@pytest.mark.parametrize("text", ["", "\n", "   ", "npu-smi: command not found\n", "+---+\n|   |\n+---+\n"])
def test_trivial_inputs(text: str) -> None:
    table = parse_info(text)
    assert table.chips == ()
    assert table.warnings


# --------------------------------------------------------------------------------------
# unseen layouts (MANIFEST "Layout notes"), built by hand with consistent widths
# --------------------------------------------------------------------------------------


def _row(widths: Sequence[int], cells: Sequence[str]) -> str:
    assert len(widths) == len(cells)
    for w, c in zip(widths, cells):
        assert len(c) <= w, (c, w)
    return "|" + "|".join(c.ljust(w) for w, c in zip(widths, cells)) + "|"


def _border(widths: Sequence[int], ch: str = "-") -> str:
    return "+" + "+".join(ch * w for w in widths) + "+"


def _table(lines: Sequence[str], width: int) -> str:
    assert {len(line) for line in lines} == {width}, "hand-built table must have one width"
    return "\n".join(lines) + "\n"


def atlas_300i_310x4_20x() -> str:
    """(a) Atlas 300I: two cards (NPU 2048, 2049) of four 310 chips, 20.x, 80 columns."""
    w = (19, 17, 40)
    full = (78,)
    dash, eq = _border(w), _border(w, "=")

    def pair(
        npu: str,
        health: str,
        power: str,
        temp: str,
        chip_: str,
        dev: str,
        bus: str,
        aic: str,
        mem: str,
    ) -> list:
        return [
            _row(w, [f" {npu:<8}310", f" {health}", f" {power:<18}{temp}"]),
            _row(w, [f" {chip_:<8}{dev}", f" {bus}", f" {aic:<18}{mem}"]),
        ]

    lines = [
        _border(full),
        _row(full, [" npu-smi 1.8.21                   Version: 20.2.0"]),
        dash,
        _row(w, [" NPU     Name", " Health", " Power(W)          Temp(C)"]),
        _row(w, [" Chip    Device", " Bus-Id", " AICore(%)         Memory-Usage(MB)"]),
        eq,
        *pair("2048", "OK", "12.8", "48", "0", "0", "0000:04:00.0", "0", "2703 / 8192"),
        dash,
        *pair("2048", "OK", "12.9", "51", "1", "1", "0000:05:00.0", "3", "2710 / 8192"),
        dash,
        *pair("2048", "Warning", "13.0", "50", "2", "2", "0000:06:00.0", "0", "2690 / 8192"),
        dash,
        *pair("2048", "OK", "NA", "49", "3", "3", "0000:07:00.0", "17", "6001 / 8192"),
        eq,
        *pair("2049", "OK", "12.1", "44", "0", "4", "0000:0A:00.0", "0", "2703 / 8192"),
        dash,
        *pair("2049", "OK", "12.2", "45", "1", "5", "0000:0B:00.0", "0", "2704 / 8192"),
        dash,
        *pair("2049", "OK", "12.3", "46", "2", "6", "0000:0C:00.0", "0", "2705 / 8192"),
        dash,
        *pair("2049", "OK", "12.4", "47", "3", "7", "0000:0D:00.0", "0", "2706 / 8192"),
        eq,
    ]
    return _table(lines, 80)


def test_unseen_atlas_300i_310x4_20x() -> None:
    table = parse_info(atlas_300i_310x4_20x())

    def c310(
        npu: int,
        c: int,
        dev: int,
        bus: str,
        health: str,
        power: Optional[float],
        temp: int,
        aic: int,
        used: int,
    ) -> tuple:
        return chip(npu, c, "310", bus, health, power, temp, aic, None, NO, (used, 8192), NO, dev=dev)

    check_golden(
        table,
        Golden(
            chips=[
                c310(2048, 0, 0, "0000:04:00.0", "OK", 12.8, 48, 0, 2703),
                c310(2048, 1, 1, "0000:05:00.0", "OK", 12.9, 51, 3, 2710),
                c310(2048, 2, 2, "0000:06:00.0", "Warning", 13.0, 50, 0, 2690),
                c310(2048, 3, 3, "0000:07:00.0", "OK", None, 49, 17, 6001),
                c310(2049, 0, 4, "0000:0A:00.0", "OK", 12.1, 44, 0, 2703),
                c310(2049, 1, 5, "0000:0B:00.0", "OK", 12.2, 45, 0, 2704),
                c310(2049, 2, 6, "0000:0C:00.0", "OK", 12.3, 46, 0, 2705),
                c310(2049, 3, 7, "0000:0D:00.0", "OK", 12.4, 47, 0, 2706),
            ],
            npu_smi="1.8.21",
            driver="20.2.0",
            process_table=False,
        ),
    )
    assert table.warnings == ()
    for sample in table.chips:
        assert {"hbm_used_mib", "hbm_total_mib", "hugepages_used", "hugepages_total"} <= set(
            sample.unavailable()
        )


def p310_four_digit_npu_id() -> str:
    """(b) 310P, 22.0.x style, NPU IDs with 4 digits: first cell 23 wide, 98 columns."""
    w = (23, 17, 54)
    full = (96,)
    eq = _border(w, "=")
    lines = [
        _border(full),
        _row(full, [" npu-smi 22.0.0                           Version: 22.0.2"]),
        _border(w),
        _row(w, [" NPU     Name", " Health", " Power(W)     Temp(C)           Hugepages-Usage(page)"]),
        _row(w, [" Chip    Device", " Bus-Id", " AICore(%)    Memory-Usage(MB)"]),
        eq,
        _row(w, [" 1024    310P3", " OK", " NA           45                0    / 0"]),
        _row(w, [" 0       0", " 0000:3B:00.0", " 0            1203 / 21527"]),
        eq,
        _row(w, [" 1025    310P3", " OK", " 18.4         47                12   / 1024"]),
        _row(w, [" 0       1", " 0000:3C:00.0", " 42           20110/ 21527"]),
        eq,
    ]
    return _table(lines, 98)


def test_unseen_310p_four_digit_npu_id() -> None:
    table = parse_info(p310_four_digit_npu_id())
    check_golden(
        table,
        Golden(
            chips=[
                chip(
                    1024,
                    0,
                    "310P3",
                    "0000:3B:00.0",
                    "OK",
                    None,
                    45,
                    0,
                    None,
                    NO,
                    (1203, 21527),
                    Z,
                    dev=0,
                ),
                chip(
                    1025,
                    0,
                    "310P3",
                    "0000:3C:00.0",
                    "OK",
                    18.4,
                    47,
                    42,
                    None,
                    NO,
                    (20110, 21527),
                    (12, 1024),
                    dev=1,
                ),
            ],
            npu_smi="22.0.0",
            driver="22.0.2",
            process_table=False,
        ),
    )
    assert table.warnings == ()


def a5_950_99cols() -> str:
    """(c) 950, 25.7 99-column style: split separator after the header, merged between devices."""
    split = (8, 18, 15, 53)
    merged = (27, 15, 53)
    procs = (27, 15, 26, 26)
    full = (97,)
    lines = [
        _border(full),
        _row(full, [" npu-smi 25.7.rc1.6                               Version: 25.7.rc1.6"]),
        _border(split),
        _row(
            split,
            [" NPU ID", " Name", " Health", " Power(W)    Temp(C)           Hugepages-Usage(page)"],
        ),
        _row(split, ["", "", " Bus-Id", " NPU Util(%) Memory-Usage(MB)  HBM-Usage(MB)"]),
        _border(split, "="),
        _row(split, [" 0", " Ascend950PR", " OK", " 195.6       56                0     / 0"]),
        _row(split, ["", "", " 0000:61:00.0", " 0           0    / 0          5239  / 131072"]),
        _border(merged, "="),
        _row(split, [" 1", " Ascend950PR", " Warning", " 201.3       58                -     / -"]),
        _row(split, ["", "", " NA", " 37          0    / 0          64012 / 131072"]),
        _border(merged, "="),
        _border(merged),
        _row(procs, [" NPU ID", " Process id", " Process name", " Process memory(MB)"]),
        _border(merged, "="),
        _row(full, [" No running processes found in NPU 0"]),
        _border(merged, "="),
        _row(procs, [" 1", " 4242", " python3", " 3120"]),
        _border(merged, "="),
    ]
    return _table(lines, 99)


def test_unseen_950_99cols() -> None:
    table = parse_info(a5_950_99cols())
    check_golden(
        table,
        Golden(
            chips=[
                chip(
                    0,
                    0,
                    "Ascend950PR",
                    "0000:61:00.0",
                    "OK",
                    195.6,
                    56,
                    None,
                    0,
                    (5239, 131072),
                    Z,
                    Z,
                ),
                chip(
                    1,
                    0,
                    "Ascend950PR",
                    None,
                    "Warning",
                    201.3,
                    58,
                    None,
                    37,
                    (64012, 131072),
                    Z,
                    NO,
                ),
            ],
            npu_smi="25.7.rc1.6",
            driver="25.7.rc1.6",
            process_table=True,
            processes=[(1, 0, 4242, "python3", 3120, None)],
            idle=(0,),
        ),
    )
    assert table.warnings == ()
    assert table.chips[1].unavailable().keys() >= {
        "aicore_percent",
        "hugepages_used",
        "hugepages_total",
    }


def a910_21x_93cols() -> str:
    """(d) 910A, 21.x: 93 columns, first cell 22 wide, Hugepages column present."""
    w = (22, 15, 52)
    procs = (22, 15, 26, 25)
    full = (91,)
    eq = _border(w, "=")
    lines = [
        _border(full),
        _row(full, [" npu-smi 21.0.4                   Version: 21.0.4"]),
        _border(w),
        _row(w, [" NPU   Name", " Health", " Power(W)    Temp(C)           Hugepages-Usage(page)"]),
        _row(w, [" Chip", " Bus-Id", " AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)"]),
        eq,
        _row(w, [" 0     910A", " OK", " 69.4        37                970  / 970"]),
        _row(w, [" 0", " 0000:C1:00.0", " 12          2356 / 15039      31012/ 32768"]),
        eq,
        _row(w, [" 1     910A", " Warning", " 72.1        41                0    / 970"]),
        _row(w, [" 0", " 0000:81:00.0", " 0           1500 / 15137      0    / 32768"]),
        eq,
        _border(w),
        _row(procs, [" NPU     Chip", " Process id", " Process name", " Process memory(MB)"]),
        eq,
        _row(procs, [" 0       0", " 23456", " python3.7", " 30000"]),
        eq,
        _row(full, [" No running processes found in NPU 1"]),
        eq,
    ]
    return _table(lines, 93)


def test_unseen_910a_21x_93cols() -> None:
    table = parse_info(a910_21x_93cols())
    check_golden(
        table,
        Golden(
            chips=[
                chip(
                    0,
                    0,
                    "910A",
                    "0000:C1:00.0",
                    "OK",
                    69.4,
                    37,
                    12,
                    None,
                    (31012, 32768),
                    (2356, 15039),
                    (970, 970),
                ),
                chip(
                    1,
                    0,
                    "910A",
                    "0000:81:00.0",
                    "Warning",
                    72.1,
                    41,
                    0,
                    None,
                    (0, 32768),
                    (1500, 15137),
                    (0, 970),
                ),
            ],
            npu_smi="21.0.4",
            driver="21.0.4",
            process_table=True,
            processes=[(0, 0, 23456, "python3.7", 30000, None)],
            idle=(1,),
        ),
    )
    assert table.warnings == ()
