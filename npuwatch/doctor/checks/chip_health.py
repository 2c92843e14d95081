"""Check chip-health: every chip npu-smi lists is OK; otherwise which one, in what state, and why."""

from __future__ import annotations

import time
from typing import List, Optional, Sequence

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned
from npuwatch.model import ChipSample, Health
from npuwatch.probes.npu_smi import NpuSmi, NpuSmiError
from npuwatch.probes.npu_smi.reports import parse_health

#: A query needs at least this much of the check's time left to be worth starting.
_MIN_QUERY_S = 0.5

#: At most this many ``-t health`` queries: each costs an npu-smi call.
_MAX_QUERIES = 4


def _where(chip: ChipSample) -> str:
    identity = chip.identity
    bus = f", {identity.bus_id}" if identity.bus_id else ""
    return f"NPU {identity.npu_id} (chip {identity.chip_id}{bus})"


def _error_text(machine: Machine, chip: ChipSample, deadline: float) -> Optional[str]:
    """``npu-smi info -t health -i N -c M``'s error code and information, when there is time."""
    left_s = min(machine.timeout_s, deadline - time.monotonic())
    if left_s < _MIN_QUERY_S:
        return None
    identity = chip.identity
    try:
        output = NpuSmi(machine.npu_smi_path, timeout_s=left_s).query(
            "health", identity.npu_id, identity.chip_id
        )
    except NpuSmiError as exc:
        return f"(`npu-smi info -t health` failed: {exc.failure.message})"
    report = parse_health(output.text)
    found = next((c for c in report.chips if c.chip_id in (identity.chip_id, None)), None)
    if found is None or not (found.error_codes or found.error_information):
        return None
    codes = " ".join(found.error_codes)
    info = "; ".join(found.error_information)
    return " ".join(part for part in (codes, info) if part and part != "NA") or None


def run(machine: Machine) -> Finding:
    """Judge every chip's health; look up error codes of the chips that are not OK."""
    deadline = time.monotonic() + machine.timeout_s  # the check itself is stopped at timeout + 1 s
    table = machine.info_table()
    if table is None:
        return skipped("npu-smi gave no table to read health from (see npu-smi)")
    if not table.chips:
        return skipped("npu-smi listed no chip (see npu-smi)")
    sick = [chip for chip in table.chips if chip.health is not Health.OK]
    unlisted = machine.unreported_chips()
    if unlisted is not None and not sick:
        # A chip npu-smi does not list has no health to show: it is not OK.
        return failed(f"{unlisted.message}; the chips it lists are OK", unlisted.hint)
    if not sick:
        return passed(f"all {len(table.chips)} chips are OK")
    states: List[str] = []
    lines: List[str] = []
    for index, chip in enumerate(sick):
        error = _error_text(machine, chip, deadline) if index < _MAX_QUERIES else None
        state = f"{_where(chip)} is in {chip.health.value} state" + (f": error {error}" if error else "")
        busy = [p for p in table.processes if (p.npu_id, p.chip_id) == chip.identity.key]
        if busy:
            state_processes = ", ".join(f"{p.pid} {p.name or ''}".strip() for p in busy)
            lines.append(f"{state}; processes on it: {state_processes}")
        else:
            lines.append(state)
        states.append(state)
    worst = _worst(sick)
    first = sick[0].identity
    summary = _summary(sick, states)
    hint = (
        f"see `npu-smi info -t health -i {first.npu_id} -c {first.chip_id}`; stop the processes on the chip, "
        f"then reset it as root: `npu-smi set -t reset -i {first.npu_id} -c {first.chip_id}` "
        "(this kills every process on the card; newer drivers: `npu-smi set -t reset -i N`); "
        "if the reset fails or the state returns, reboot, then check `dmesg` and the driver/firmware versions"
    )
    make = failed if worst in (Health.ALARM, Health.CRITICAL) or unlisted is not None else warned
    if unlisted is not None:
        lines.append(unlisted.message)
    return make(summary, hint, lines)


def _worst(chips: Sequence[ChipSample]) -> Health:
    rank = {Health.CRITICAL: 0, Health.ALARM: 1, Health.WARNING: 2, Health.UNKNOWN: 3, Health.OK: 4}
    return min((chip.health for chip in chips), key=lambda health: rank[health])


def _summary(sick: Sequence[ChipSample], states: Sequence[str]) -> str:
    if len(sick) == 1:
        return states[0]
    short = [f"{c.identity.label} {c.health.value}" for c in sick[:6]]
    more = " …" if len(sick) > 6 else ""
    return f"{len(sick)} chips are not OK: {', '.join(short)}{more}"


CHECK = Check(
    id="chip-health",
    group=Group.HARDWARE,
    title="every chip reports OK health",
    run=run,
    requires=("npu-smi",),
    runs_npu_smi=True,
)
