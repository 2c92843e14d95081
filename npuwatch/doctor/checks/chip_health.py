"""Check chip-health: every chip npu-smi lists is OK; otherwise which one, in what state, and why."""

from __future__ import annotations

from typing import List, Optional, Sequence

from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned
from npuwatch.judge.fault_codes import FaultHandling, worst_handling
from npuwatch.model import ChipSample, Health, worst


def _where(chip: ChipSample) -> str:
    identity = chip.identity
    bus = f", {identity.bus_id}" if identity.bus_id else ""
    return f"NPU {identity.npu_id} (chip {identity.chip_id}{bus})"


def _error_text(chip: ChipSample) -> Optional[str]:
    """The chip's error codes and their information, as the chip source found them."""
    codes = " ".join(error.code for error in chip.errors)
    info = "; ".join(error.meaning for error in chip.errors if error.meaning)
    return " ".join(part for part in (codes, info) if part) or None


def run(machine: Machine) -> Finding:
    """Judge every chip's health; look up error codes of the chips that are not OK."""
    table = machine.info_table()
    if table is None:
        return skipped("npu-smi gave no table to read health from (see npu-smi)")
    if not table.chips:
        return skipped("npu-smi listed no chip (see npu-smi)")
    if any(chip.health is not Health.OK for chip in table.chips):
        # The check itself is stopped at its timeout + 1 s: the queries get the timeout together.
        table = machine.with_error_codes(table, machine.timeout_s)
    sick = [chip for chip in table.chips if chip.health is not Health.OK]
    unlisted = machine.unreported_chips()
    if unlisted is not None and not sick:
        # A chip npu-smi does not list has no health to show: it is not OK.
        return failed(f"{unlisted.message}; the chips it lists are OK", unlisted.hint)
    if not sick:
        return passed(f"all {len(table.chips)} chips are OK")
    states: List[str] = []
    lines: List[str] = []
    for chip in sick:
        error = _error_text(chip)
        handling = worst_handling(e.code for e in chip.errors)
        state = f"{_where(chip)} is in {chip.health.value} state" + (f": error {error}" if error else "")
        if handling is not None:
            state += f" (Huawei's handling: {handling.value})"
        busy = [p for p in table.processes if (p.npu_id, p.chip_id) == chip.identity.key]
        if busy:
            state_processes = ", ".join(f"{p.pid} {p.name or ''}".strip() for p in busy)
            lines.append(f"{state}; processes on it: {state_processes}")
        else:
            lines.append(state)
        states.append(state)
    # The judge's scale: Alarm, Critical and no health fail (as `npuwatch check` fails), Warning warns.
    handlings = {chip.identity.key: worst_handling(e.code for e in chip.errors) for chip in sick}
    level = worst(
        worst((chip.health.level, handling.level if handling is not None else chip.health.level))
        for chip, handling in zip(sick, handlings.values())
    )
    first = sick[0].identity
    summary = _summary(sick, states)
    handling = handlings[first.key]
    query = f"`npu-smi info -t health -i {first.npu_id} -c {first.chip_id}`"
    hint = (
        f"see `npu-smi info -t health -i {first.npu_id} -c {first.chip_id}`; stop the processes on the chip, "
        f"then reset it as root: `npu-smi set -t reset -i {first.npu_id} -c {first.chip_id}` "
        "(this kills every process on the card; newer drivers: `npu-smi set -t reset -i N`); "
        "if the reset fails or the state returns, reboot, then check `dmesg` and the driver/firmware versions"
    )
    if handling is not None and handling.rank < FaultHandling.FREE_RESTART_NPU.rank:
        # Huawei keeps the chip in service for this code: no reset, only what its class says.
        hint = f"Huawei's handling of the code is {handling.value}: {handling.action}; {query} explains it"
    elif handling is not None:
        hint = f"Huawei's handling of the code is {handling.value}: {handling.action}. " + hint
    make = failed if level.unhealthy or unlisted is not None else warned
    if unlisted is not None:
        lines.append(unlisted.message)
    return make(summary, hint, lines)


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
