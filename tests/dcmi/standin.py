"""A stand-in reader for the DCMI worker's tests: the worker's opener, with faults by environment.

``STANDIN_MODE`` picks the behaviour (``ok``, ``init:<code>``, ``hang-open``, ``hang-tick``,
``hang-tick-once``, ``segv-tick-once``, ``raise-tick``, ``print``, ``spawn-hang-tick``, ``gone``);
``STANDIN_MARK`` names a file a "once" fault creates (so the next worker behaves), and where
``spawn-hang-tick`` writes its grandchild's PID.  ``STANDIN_REFRESHES`` names a file ``refresh``
appends a line to.  Runs in the worker process: standard library and the records only.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from typing import Optional, Sequence, Tuple

from npuwatch.probes.dcmi import records
from npuwatch.probes.dcmi.worker import InitOutcome

CHIPS = (
    records.ChipFacts(
        records.ChipRef(0, 0, logic_id=0, phy_id=0),
        chip_name="910B3",
        bus_id="0000:c1:00.0",
        aicore_rated_freq_mhz=1800,
    ),
    records.ChipFacts(
        records.ChipRef(3, 0, logic_id=1, phy_id=1),
        chip_name="910B3",
        bus_id="0000:01:00.0",
        codes={"aicore_rated_freq_mhz": -8255},
    ),
)


def _mode() -> str:
    return os.environ.get("STANDIN_MODE", "ok")


def _once() -> bool:
    """True the first time (the mark file did not exist; now it does)."""
    mark = os.environ["STANDIN_MARK"]
    try:
        fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class StandinReader:
    def __init__(self) -> None:
        self.ticks = 0

    def init(self) -> int:
        return 0

    def inventory(self) -> records.Inventory:
        return records.Inventory(dcmi_version="24.1.rc1", driver_version="24.1.rc1.b030", chips=CHIPS)

    def tick(self, chips: Sequence[records.ChipFacts]) -> Tuple[records.ChipTick, ...]:
        self.ticks += 1
        mode = _mode()
        if mode == "hang-tick" or (mode == "hang-tick-once" and _once()):
            time.sleep(3600)
        if mode == "segv-tick-once" and _once():
            ctypes.string_at(0)  # a real SIGSEGV
        if mode == "raise-tick":
            raise ValueError("the stand-in's bug")
        if mode == "spawn-hang-tick":
            child = subprocess.Popen(["sleep", "600"])
            with open(os.environ["STANDIN_MARK"], "w") as handle:
                handle.write(str(child.pid))
            time.sleep(3600)
        if mode == "print":
            print("chatty library line")
            sys.stdout.flush()
            os.write(1, b"raw bytes on fd 1\n")
        return tuple(_tick(facts.ref, self.ticks) for facts in chips)


def _tick(ref: records.ChipRef, number: int) -> records.ChipTick:
    if _mode() == "gone" and ref.card_id == 3:
        return records.ChipTick(ref, health=0xFFFFFFFF)
    return records.ChipTick(
        ref,
        health=1 if ref.card_id == 3 else 0,
        values={
            "power_w": 93.5,
            "temperature_c": 41.4,
            "aicore_percent": float(number),
            "hbm_used_mib": 3000.0,
            "hbm_total_mib": 65536.0,
            "aicore_freq_mhz": 1800.0,
            "voltage_v": 0.82,
        },
        codes={"npu_util_percent": -8255, "vector_percent": -8002, "hbm_bandwidth_percent": -8006},
        processes=(records.ProcessRecord(4242, 3 * 2**20 + 5),) if ref.card_id == 0 else (),
        error_codes=(records.ErrorCodeRecord(0x80E01801, "HBM multi-bit ECC error"),)
        if ref.card_id == 3
        else (),
    )


def open_reader(spec: Optional[str], root: str) -> Tuple[InitOutcome, Optional[StandinReader]]:
    mode = _mode()
    if mode == "hang-open":
        time.sleep(3600)
    if mode.startswith("init:"):
        return InitOutcome("init", code=int(mode.split(":", 1)[1])), None
    if mode == "not-found":
        return InitOutcome("not-found", message="libdcmi.so not found", hint="install the driver"), None
    return InitOutcome("ok", code=0), StandinReader()


def refresh() -> None:
    with open(os.environ["STANDIN_REFRESHES"], "a") as handle:
        handle.write("refreshed\n")
