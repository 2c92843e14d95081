"""Provides main(): the fake ``npu-smi`` a demo machine runs, one short-lived process per call.

It reads the scenario name, start time and seed from ``npu-smi.json`` beside the script and
prints what the real tool would print now.  ``NPUWATCH_SIM_NOW`` (seconds since the start)
freezes time.  Imports stay minimal (no psutil, no textual): this runs on every tick.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, TextIO

from npuwatch.probes.simulator import render_kv
from npuwatch.probes.simulator.catalog import get_scenario
from npuwatch.probes.simulator.dynamics import MachineState, machine_state
from npuwatch.probes.simulator.render import render_info
from npuwatch.probes.simulator.scenarios import Layout, NpuSmiMode, Scenario

STATE_FILE = "npu-smi.json"
NOW_VARIABLE = "NPUWATCH_SIM_NOW"

# `npu-smi info -h` (028), trimmed to the first block.
INFO_USAGE = """Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]

Commands:
       watch          Show all device's status in scrolling format
       proc           Show device's matrix process status in scrolling format
       -h, --help     Show this help text and exit
       -m             Show all device's mapping information
       -l             Show all device's topology information
       -t type        Show information for type
                      type: board, flash, memory, usages, sensors, temp, power, volt, mac-addr,
                            common, health, product, ecc, ip, sys-time, i2c_check, work-mode,
                            ecc-enable, p2p-enable, ssh-enable, license, customized-info,
                            device-share, nve-level, aicpu-config, pcie-err, mcu-monitor,
                            err-count, boot-area, vnpu-mode, info-vnpu, vnpu-svm, cpu-num-cfg,
                            first-power-on-date, proc-mem, phyid-remap, vnpu-cfg-recover, key-manage,
                            template-info, pkcs-enable, p2p-mem-cfg, pwm-mode, pwm-duty-ratio,
                            boot-select, topo.

Options:
       -i %d          Card ID
       -c %d          Chip ID
       -p %d          Chip Physical ID
"""
#: Every type the real 23.x tool lists (028); the fake renders some, the rest are unsupported.
KNOWN_TYPES = frozenset(
    INFO_USAGE.split("type: ", 1)[1].split("Options")[0].replace(".", "").replace(",", " ").split()
)
USAGE = "Usage: npu-smi <info|set|clear|upgrade> [Options...]\n"
#: The captures never show npu-smi's exit status for errors; -1 (255) is assumed.
ERROR_EXIT = 255


def load_state(directory: Path) -> Dict[str, object]:
    """The demo's JSON state: ``scenario``, ``started_at`` (epoch seconds) and ``seed``."""
    with open(directory / STATE_FILE, encoding="utf-8") as handle:
        data: Dict[str, object] = json.load(handle)
    return data


def elapsed_s(started_at: float, environ: Optional[Dict[str, str]] = None) -> float:
    """Seconds since the demo started, or the frozen ``NPUWATCH_SIM_NOW``."""
    frozen = (os.environ if environ is None else environ).get(NOW_VARIABLE)
    if frozen:
        try:
            return max(0.0, float(frozen))
        except ValueError:
            pass
    return max(0.0, time.time() - started_at)


def _error(out: TextIO, text: str) -> int:
    out.write(text)
    return ERROR_EXIT


def _options(args: Sequence[str]) -> Optional[Dict[str, str]]:
    """``-t usages -i 0 -c 1`` → {"-t": "usages", …}; None when an option lacks its value."""
    found: Dict[str, str] = {}
    for index in range(0, len(args), 2):
        if index + 1 >= len(args) or not args[index].startswith("-"):
            return None
        found[args[index]] = args[index + 1]
    return found


def _query(state: MachineState, args: Sequence[str], out: TextIO) -> int:
    options = _options(args)
    if options is None or set(options) - {"-t", "-i", "-c"}:
        return _error(out, "Error parameter of -t\n" + INFO_USAGE)
    kind = options["-t"]
    if kind not in KNOWN_TYPES:
        return _error(out, f"Error parameter of -t\n{INFO_USAGE}")
    npu = options.get("-i", "")
    npu_ids = state.scenario.npu_ids
    if not npu.isdigit() or int(npu) not in npu_ids:
        return _error(out, "Error parameter of -i\n")
    chip_text = options.get("-c")
    chip_ids = [c.chip_id for c in state.scenario.chips if c.npu_id == int(npu)]
    if chip_text is not None and (not chip_text.isdigit() or int(chip_text) not in chip_ids):
        return _error(out, "Error parameter of -c\n")
    if kind not in render_kv.QUERY_TYPES:
        out.write(f"This device does not support querying {kind}.\n")  # 070
        return ERROR_EXIT
    chip = None if chip_text is None else int(chip_text)
    out.write(render_kv.render_query(state, kind, int(npu), chip))
    return 0


def watch_header(scenario: Scenario) -> str:
    """The column line of ``npu-smi info watch`` (054; 950 as 055)."""
    if scenario.layout is Layout.A5:
        names = ["NpuID(Idx)", "Pwr(W)", "Temp(C)", "AI Core(%)", "AI Cpu(%)", "Ctrl Cpu(%)"]
        wide = ["Memory(%)", "Memory BW(%)", "NPU Util(%)", "AI Cube(%)"]
        return "".join(f"{n:<12}" for n in names) + "".join(f"{n:<15}" for n in wide).rstrip()
    names = ["NpuID(Idx)", "ChipId(Idx)", "Pwr(W)", "Temp(C)", "AI Core(%)", "AI Cpu(%)"]
    names += ["Ctrl Cpu(%)", "Memory(%)", "Memory BW(%)"]
    return "".join(f"{n:<12}" for n in names).rstrip()


def watch_rows(state: MachineState, npu_id: Optional[int] = None) -> List[str]:
    """One round of ``npu-smi info watch`` rows: 12-wide fields with trailing spaces (054)."""
    rows = []
    for chip in state.chips:
        spec = chip.spec
        if npu_id is not None and spec.npu_id != npu_id:
            continue
        power = "NA" if chip.power_w is None else f"{chip.power_w:.1f}"
        total = spec.hbm_total_mib or spec.memory_total_mib
        used = chip.hbm_used_mib if spec.hbm_total_mib else chip.memory_used_mib
        memory = 0 if not total else round(100 * used / total)
        ctrl = 3 + chip.aicore_percent // 20
        if state.scenario.layout is Layout.A5:
            fields = [spec.npu_id, power, chip.temperature_c, chip.aicore_percent, chip.aicpu_percent, ctrl]
            tail = [memory, chip.aicore_percent // 2, chip.aicore_percent, chip.aicore_percent]
            rows.append("".join(f"{v!s:<12}" for v in fields) + "".join(f"{v!s:<15}" for v in tail))
            continue
        fields = [spec.npu_id, spec.chip_id, power, chip.temperature_c]
        fields += [chip.aicore_percent, chip.aicpu_percent]
        bandwidth = chip.hbm_bandwidth_percent
        fields += [ctrl, memory, chip.aicore_percent * 2 // 3 if bandwidth is None else bandwidth]
        rows.append("".join(f"{v!s:<12}" for v in fields))
    return rows


def _watch(scenario: Scenario, started_at: float, seed: int, args: Sequence[str], out: TextIO) -> int:
    options = _options(args)
    if options is None or set(options) - {"-i", "-c", "-d"}:
        return _error(out, "Error parameter of watch\n" + INFO_USAGE)
    npu = options.get("-i")
    npu_id = int(npu) if npu is not None and npu.isdigit() else None
    delay_s = float(options.get("-d", "1") or 1)
    out.write(watch_header(scenario) + "\n")
    while True:  # streams until killed, as the real tool does
        state = machine_state(scenario, elapsed_s(started_at), seed)
        out.write("".join(row + "\n" for row in watch_rows(state, npu_id)))
        out.flush()
        time.sleep(max(0.1, delay_s))


def run(scenario: Scenario, started_at: float, seed: int, argv: Sequence[str], out: TextIO) -> int:
    """Answer one npu-smi command line as ``scenario`` would at this instant."""
    if scenario.npu_smi_mode is NpuSmiMode.HANG:
        while True:  # a wedged driver: never answers; the caller must kill us
            time.sleep(3600)
    if scenario.npu_smi_mode is NpuSmiMode.ERROR:
        out.write(scenario.error_text)
        out.flush()
        return scenario.error_exit_code
    if not argv or argv[0] != "info":
        return _error(out, USAGE)
    args = list(argv[1:])
    if args[:1] == ["watch"]:
        return _watch(scenario, started_at, seed, args[1:], out)
    if args[:1] in (["-h"], ["--help"]):
        out.write(INFO_USAGE)
        return 0
    state = machine_state(scenario, elapsed_s(started_at), seed)
    if not args:
        out.write(render_info(state))
        return 0
    if args == ["-l"]:
        out.write(render_kv.render_list(state))
        return 0
    if args == ["-m"]:
        out.write(render_kv.render_mapping(state))
        return 0
    return _query(state, args, out)


def main(argv: Sequence[str], directory: Optional[Path] = None) -> int:
    """Entry point of the installed script: ``directory`` holds ``npu-smi.json``."""
    where = directory if directory is not None else Path(sys.argv[0]).resolve().parent
    data = load_state(where)
    scenario = get_scenario(str(data["scenario"]))
    started_at = float(str(data.get("started_at", time.time())))
    seed = int(str(data.get("seed", 0)))
    try:
        code = run(scenario, started_at, seed, argv, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (| head): exit quietly like a C tool
        return 0
    return code
