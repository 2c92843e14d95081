"""Check hbm-held: no chip holds memory without a process, and no chip is busy with other users' jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from npuwatch.doctor import facts
from npuwatch.doctor.facts import physical_ids
from npuwatch.doctor.machine import Machine, ProcessPlace
from npuwatch.doctor.result import Check, Finding, Group, passed, skipped, warned
from npuwatch.judge.rules import held_memory
from npuwatch.model import ChipSample, NpuProcess


@dataclass(frozen=True)
class _Held:
    """A chip and the memory it holds with no process (the judge's rule, ``npuwatch.judge``)."""

    chip: ChipSample
    memory: str  # "HBM" or "memory"
    used_mib: int
    total_mib: int
    idle_mib: int


@dataclass(frozen=True)
class _Owner:
    uid: int
    name: Optional[str]


def _held(chip: ChipSample) -> Optional[_Held]:
    """The memory ``chip`` holds with no process, by the same rule as the live view's alert."""
    found = held_memory(chip, ())
    if found is None:
        return None
    return _Held(chip, found.kind, int(found.used_mib), found.total_mib, found.idle_mib)


def _owner(machine: Machine, pid: int) -> Optional[_Owner]:
    """Who runs ``pid``, from ``/proc/<pid>/status`` (``None`` when it is not visible here)."""
    text = machine.sysroot.read_text(f"/proc/{pid}/status", limit=16384)
    for line in (text or "").splitlines():
        if line.startswith("Uid:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                uid = int(fields[1])
                return _Owner(uid, machine.user_name(uid))
    return None


def _others(machine: Machine, processes: Sequence[NpuProcess]) -> List[Tuple[NpuProcess, _Owner]]:
    """The processes of other users; only judged where this process sees the host's PIDs."""
    if machine.container().host_pid_namespace is False:
        return []  # npu-smi prints host PIDs: from inside a container they cannot be looked up
    me = facts.current_user().uid
    found = []
    for process in processes:
        owner = _owner(machine, process.pid)
        if owner is not None and owner.uid != me:
            found.append((process, owner))
    return found


def run(machine: Machine) -> Finding:
    """Compare each chip's memory with its processes, and look up whose processes they are."""
    table = machine.info_table()
    if table is None or not table.chips:
        return skipped("npu-smi gave no chip to read memory from (see npu-smi)")
    if not table.process_table:
        return skipped("this npu-smi output has no process table: held memory cannot be told from used")
    by_chip: Dict[Tuple[int, int], List[NpuProcess]] = {}
    for process in table.processes:
        by_chip.setdefault((process.npu_id, process.chip_id), []).append(process)
    idle_chips = [chip for chip in table.chips if not by_chip.get(chip.identity.key)]
    held = [found for found in map(_held, idle_chips) if found is not None]
    others = _others(machine, table.processes)
    foreign = _other_containers(machine, table.processes)
    details = [_held_line(h) for h in held] + [_other_line(p, o) for p, o in others]
    details += [_foreign_line(p) for p in foreign]
    unplaced = len(table.processes) - len(foreign)
    if machine.container().host_pid_namespace is False and unplaced:
        details.append(
            "whose processes these are cannot be told from inside a container (npu-smi prints host PIDs)"
        )
    if not held and not others and not foreign:
        busy = len(table.chips) - len(idle_chips)
        return passed(
            f"no memory held without a process; processes on {busy} of {len(table.chips)} chips", details
        )
    held_chips = {h.chip.identity.key for h in held}
    free = [chip for chip in idle_chips if chip.identity.key not in held_chips]
    parts: List[str] = []
    hints: List[str] = []
    if foreign:
        parts.append(_foreign_summary(foreign))
        hints.append(_foreign_hint(machine, foreign, free))
    if held:
        parts.append(_held_summary(held))
        hints.append(_held_hint(machine, held))
    if others:
        parts.append(_others_summary(others))
        hints.append(_others_hint(others, [chip.identity.label for chip in free]))
    return warned("; ".join(parts), "; ".join(hints), details)


def _other_containers(machine: Machine, processes: Sequence[NpuProcess]) -> List[NpuProcess]:
    """Processes npu-smi shows that certainly run in another container (not this one's jobs)."""
    if not machine.container().in_container:
        return []
    return [p for p in processes if machine.process_place(p) is ProcessPlace.ELSEWHERE]


def _chip_label(npu_id: int, chip_id: int) -> str:
    return f"NPU {npu_id}" if chip_id == 0 else f"NPU {npu_id} chip {chip_id}"


def _foreign_line(process: NpuProcess) -> str:
    memory = f", {process.npu_memory_mib} MiB" if process.npu_memory_mib is not None else ""
    return (
        f"{_chip_label(process.npu_id, process.chip_id)}: PID {process.pid} {process.name or '?'}{memory}; "
        f"Process id in container: NA and no PID {process.pid} in this container: another container's job"
    )


def _foreign_summary(foreign: Sequence[NpuProcess]) -> str:
    chips = sorted({(p.npu_id, p.chip_id) for p in foreign})
    labels = ", ".join(_chip_label(n, c) for n, c in chips)
    if len(foreign) == 1:
        p = foreign[0]
        memory = f", {p.npu_memory_mib} MiB" if p.npu_memory_mib is not None else ""
        return f"{labels} is busy with another container's job (PID {p.pid} {p.name or '?'}{memory})"
    mib = sum(p.npu_memory_mib or 0 for p in foreign)
    verb = "is" if len(chips) == 1 else "are"
    return f"{labels} {verb} busy with other containers' jobs ({len(foreign)} processes, {mib} MiB)"


def _foreign_hint(machine: Machine, foreign: Sequence[NpuProcess], free: Sequence[ChipSample]) -> str:
    pids = ",".join(str(p.pid) for p in foreign[:8])
    owner = (
        f"or find the owner on the host: `npu-smi info` there lists PID {pids}, and "
        f"`ps -o user,pid,etime,cmd -p {pids}` (on the host) names who runs it"
    )
    logical = _logical_ids(machine, free)
    if free and logical:
        return (
            "a job started here would share those chips with another tenant: ask for another chip, or use "
            f"the free ones here: `export ASCEND_RT_VISIBLE_DEVICES={','.join(map(str, logical))}`; {owner}"
        )
    return (
        "a job started here would share the chip with another tenant: ask for another chip (from the "
        f"scheduler, or recreate the container with another free `--device /dev/davinciN`), {owner}"
    )


def _logical_ids(machine: Machine, chips: Sequence[ChipSample]) -> List[int]:
    """The logical device IDs (ASCEND_RT_VISIBLE_DEVICES) of ``chips`` in this container, or []."""
    dev = machine.dev()
    davinci = list(dev.davinci_ids)
    phys = physical_ids(machine, dev)
    ids: List[int] = []
    for chip in chips:
        phy = phys.get(chip.identity.key)
        if phy is None or phy not in davinci:
            return []
        ids.append(davinci.index(phy))
    return sorted(ids)


def _held_line(held: _Held) -> str:
    return (
        f"{held.chip.identity.label}: {held.used_mib} of {held.total_mib} MiB {held.memory} in use with no "
        f"process (an idle chip holds at most ~{held.idle_mib} MiB)"
    )


def _held_summary(held: Sequence[_Held]) -> str:
    if len(held) == 1:
        h = held[0]
        return f"{h.chip.identity.label} holds {h.used_mib} MiB of {h.memory} with no process"
    chips = ", ".join(f"{h.chip.identity.label} ({h.used_mib} MiB)" for h in held)
    return f"{len(held)} chips hold memory with no process: {chips}"


def _held_hint(machine: Machine, held: Sequence[_Held]) -> str:
    identity = held[0].chip.identity
    elsewhere = (
        " (from inside a container it may also be another container's process: "
        "check `npu-smi info` on the host)"
        if machine.container().in_container
        else ""
    )
    return (
        "leaked or zombie memory from a process that died without freeing it"
        f"{elsewhere}: find the holder as root with `fuser -v /dev/davinci*` and stop it; if nothing "
        "holds it, reset the chip as root: "
        f"`npu-smi set -t reset -i {identity.npu_id} -c {identity.chip_id}` "
        "(kills every process on the card), or reboot"
    )


def _other_line(process: NpuProcess, owner: _Owner) -> str:
    who = owner.name or f"uid {owner.uid}"
    memory = f", {process.npu_memory_mib} MiB" if process.npu_memory_mib is not None else ""
    label = (
        f"NPU {process.npu_id}" if process.chip_id == 0 else f"NPU {process.npu_id} chip {process.chip_id}"
    )
    return f"{label}: PID {process.pid} {process.name or ''} of {who}{memory}".replace("  ", " ")


def _others_summary(others: Sequence[Tuple[NpuProcess, _Owner]]) -> str:
    chips = sorted({(p.npu_id, p.chip_id) for p, _ in others})
    users = sorted({o.name or f"uid {o.uid}" for _, o in others})
    labels = ", ".join(f"NPU {n}" if c == 0 else f"NPU {n} chip {c}" for n, c in chips)
    mib = sum(p.npu_memory_mib or 0 for p, _ in others)
    return f"{labels} in use by other users ({', '.join(users)}; {mib} MiB held)"


def _others_hint(others: Sequence[Tuple[NpuProcess, _Owner]], free: Sequence[str]) -> str:
    pids = ",".join(str(p.pid) for p, _ in others[:8])
    see = f"see them with `ps -o user,pid,etime,cmd -p {pids}`"
    if not free:
        return f"every NPU is in use: wait for those jobs or ask their owners ({see})"
    return (
        f"a job started here would compete with them for memory and cores: use the free NPUs "
        f"({', '.join(free)}) through ASCEND_RT_VISIBLE_DEVICES, or wait for those jobs ({see})"
    )


CHECK = Check(
    id="hbm-held",
    group=Group.HARDWARE,
    title="no chip holds memory without a process or is busy with other users' jobs",
    run=run,
    requires=("npu-smi",),
    runs_npu_smi=True,  # reads the shared `npu-smi info`, which it runs itself under --only
)
