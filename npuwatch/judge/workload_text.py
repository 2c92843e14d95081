"""Provides what the workload judge says: each class's next step, what decides it (the README's
table), the throttle causes' advice and a workload's one-line summary."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from npuwatch.model import EvidenceValue, LastOwner, Throttling, WorkloadClass

#: How sentences name a signal a class needed ("needs a source that reads AI CPU").
READING_TITLES = {
    "hbm_bandwidth_percent": "HBM bandwidth",
    "aicpu_percent": "AI CPU",
    "aicore_freq_mhz": "the AI Core clock",
    "host_cpu_percent": "the host side's CPU",
}
#: The metric each class that ``needs_dcmi`` names is decided from.
_DECIDED_FROM = {"memory-bound": "HBM bandwidth", "aicpu-bound": "AI CPU", "throttling": "the AI Core clock"}


def needs_sentence(classes: Sequence[str]) -> str:
    """``needs a source that reads HBM bandwidth, AI CPU to tell memory-bound, aicpu-bound``: what
    a workload's ``needs_dcmi`` means; "" when it names none."""
    if not classes:
        return ""
    metrics = ", ".join(dict.fromkeys(_DECIDED_FROM.get(name, name) for name in classes))
    return f"needs a source that reads {metrics} to tell {', '.join(classes)}"


HOST_HIDDEN = "host CPU not visible here: run with --pid=host"
AICPU_UNREAD = "needs a source that reads AI CPU"

NEXT_STEPS = {
    WorkloadClass.COMPUTE_BOUND: (
        "AI Core is the limit, as it should be: to go faster, profile the operators "
        "(`msprof --aic-metrics=PipeUtilization`) and look at mixed precision or fused operators."
    ),
    WorkloadClass.MEMORY_BOUND: (
        "HBM bandwidth is the limit: profile memory traffic (`msprof --aic-metrics=Memory`), fuse "
        "element-wise operators, avoid format conversions (TransData) and recomputation that re-read HBM."
    ),
    WorkloadClass.AICPU_BOUND: (
        "operators are falling back to the AI CPU: profile with `msprof --aicpu=on` and check these "
        "operators' support (and dtypes) on this SoC; replace or cast the ones that run on the AI CPU."
    ),
    WorkloadClass.INPUT_BOUND: (
        "the host does not feed the chip fast enough: add data-loader workers, pin memory and "
        "prefetch, or move preprocessing onto the NPU."
    ),
    WorkloadClass.WAITING: (
        "AI Core waits between launches: take a timeline profile (`msprof --task-time=on`) to find "
        "launch or synchronisation gaps (many small operators, host syncs such as .item(), stream "
        "waits, a slow collective)."
    ),
    WorkloadClass.IDLE: "nothing to do: no process uses the chip.",
    WorkloadClass.IDLE_HOLDING_HBM: (
        "memory is held with no process: find the holder with `fuser -v /dev/davinci*` and end it "
        "(a zombie or a process in another container); the memory is freed when it exits."
    ),
    WorkloadClass.UNKNOWN: "see the chip's health and the chip source: no current AI Core reading.",
    WorkloadClass.ALLOCATED_IDLE: (
        "nothing to do here: a process holds the chip but sends it no work (an idle server, a "
        "parked notebook); end it if its memory is needed elsewhere."
    ),
    WorkloadClass.IN_USE_ELSEWHERE: (
        "a process not listed here uses the chip (another container, or a driver that lists no "
        "processes): nothing to free; `npu-smi info` on the host shows it."
    ),
    WorkloadClass.UNDETERMINED: (
        "the signal that would say why AI Core is low is not read here: read the chips with a "
        "source that reads it, or run npuwatch where it sees the job's processes (--pid=host)."
    ),
}
#: What decides each class, as the README says it (the rules are ``observe``'s).
DECIDED_BY = {
    WorkloadClass.COMPUTE_BOUND: "AI Core at or above `aicore_low_percent` (and not memory-bound)",
    WorkloadClass.MEMORY_BOUND: (
        "HBM bandwidth at or above `hbm_bandwidth_high_percent` while AI Core is below "
        "`aicore_busy_percent` (needs a source that reads HBM bandwidth)"
    ),
    WorkloadClass.AICPU_BOUND: (
        "AI Core low, AI CPU at or above `aicpu_busy_percent` (needs a source that reads AI CPU)"
    ),
    WorkloadClass.INPUT_BOUND: (
        "AI Core low while the job's host side loads: its process and children at or above "
        "`host_loader_percent` or its children at `host_busy_percent`; or the host at "
        "`host_saturated_percent` after a drop (AI Core busy within `active_window_s`) where children "
        "were not read; or a drop with the process at `host_busy_percent`, AI Core still working and "
        "AI CPU read and not busy"
    ),
    WorkloadClass.WAITING: (
        "AI Core low in a job, the host side not loading (a process spinning one core while AI Core "
        "stopped is a sync or a collective) and AI CPU not busy (or not read: said)"
    ),
    WorkloadClass.IDLE: "no process on the chip, AI Core not busy",
    WorkloadClass.IDLE_HOLDING_HBM: (
        "no process in the source's process table, AI Core not busy, memory more than "
        "`hbm_held_min_mib` above the family's idle memory, for `held_settle_s` "
        "(the `hbm-held` rule of the judge table)"
    ),
    WorkloadClass.UNKNOWN: (
        "no current AI Core reading (the chip is lost, its values are stale, or not reported)"
    ),
    WorkloadClass.ALLOCATED_IDLE: (
        "a process on the chip, AI Core below `aicore_idle_percent` for `active_window_s` (from the "
        "first sample when the process is idle too), the host side not loading"
    ),
    WorkloadClass.IN_USE_ELSEWHERE: "AI Core busy with no process listed on the chip",
    WorkloadClass.UNDETERMINED: (
        "AI Core low in a job and the deciding signal not read: the job's host CPU (another PID "
        "namespace), or AI CPU while the process is at `host_busy_percent` (input- or AI CPU-bound)"
    ),
}


def class_table() -> str:
    """The README's table of the classes: what decides each and the next step (Markdown)."""
    lines = ["| class | card tag | decided by | next step |", "|---|---|---|---|"]
    for kind in WorkloadClass:
        step = NEXT_STEPS[kind]
        lines.append(f"| `{kind.value}` | {kind.tag} | {DECIDED_BY[kind]} | {step[:1].upper()}{step[1:]} |")
    return "\n".join(lines)


THROTTLE_STEPS = {
    Throttling.THERMAL: (
        "AI Core is throttled because the chip is hot: check this slot's fans and airflow and the "
        "server's inlet temperature. "
    ),
    Throttling.POWER: (
        "AI Core is throttled at its power cap: check the card's power limit and the server's power "
        "budget and supplies. "
    ),
    Throttling.UNREPORTED: (
        "AI Core runs below its rated clock while busy and the readings show neither heat nor a power "
        "cap: check the power limit set on the card or the rack (`npu-smi info -t power -i N`) and "
        "the BMC's throttle events. "
    ),
}


def _pct(value: EvidenceValue) -> str:
    return f"{value:.0f} %" if isinstance(value, (int, float)) else "n/a"


def summary(
    kind: WorkloadClass,
    evidence: Mapping[str, EvidenceValue],
    throttling: Optional[Throttling],
    owner: Optional[LastOwner],
    hedge: str,
) -> str:
    aicore = f"AI Core {_pct(evidence.get('aicore_percent'))}"
    host = evidence.get("host_cpu_percent")
    children = evidence.get("children")
    workers = f" with {children} child processes" if isinstance(children, int) and children else ""
    if kind is WorkloadClass.COMPUTE_BOUND:
        text = aicore
    elif kind is WorkloadClass.MEMORY_BOUND:
        text = f"HBM bandwidth {_pct(evidence.get('hbm_bandwidth_percent'))}, {aicore}"
    elif kind is WorkloadClass.AICPU_BOUND:
        text = f"AI CPU {_pct(evidence.get('aicpu_percent'))}, {aicore}"
    elif kind is WorkloadClass.INPUT_BOUND:
        pid = evidence.get("pid")
        text = f"{aicore}, " + (
            f"PID {pid}{workers} at {_pct(host)} host CPU" if pid is not None else "the host's CPU saturated"
        )
    elif kind is WorkloadClass.WAITING:
        aicpu = evidence.get("aicpu_percent")
        text = f"{aicore}, host {_pct(host)}" + (f", AI CPU {_pct(aicpu)}" if aicpu is not None else "")
    elif kind is WorkloadClass.UNDETERMINED:
        pid = evidence.get("pid")
        shown = f", PID {pid}{workers} at {_pct(host)} host CPU" if pid is not None else ""
        text = f"{aicore}{shown}"
    elif kind is WorkloadClass.ALLOCATED_IDLE:
        text = f"allocated, no work: {aicore}"
    elif kind is WorkloadClass.IN_USE_ELSEWHERE:
        text = f"{aicore}, in use by a process not visible here (another container, an older driver)"
    elif kind is WorkloadClass.IDLE_HOLDING_HBM:
        used = evidence.get("hbm_used_mib")
        used_text = f"{used / 1024:.1f} GiB" if isinstance(used, (int, float)) else "memory"
        text = f"{used_text} held, no process" + (f"; last held by PID {owner.pid}" if owner else "")
    elif kind is WorkloadClass.IDLE:
        text, hedge = (f"{aicore}; {hedge}", "") if hedge else ("no process", "")
    else:
        text = "no current AI Core reading"
    if hedge:
        text += f": {hedge}" if kind is WorkloadClass.UNDETERMINED else f" ({hedge})"
    if throttling is not None:
        freq, rated = evidence.get("aicore_freq_mhz"), evidence.get("aicore_rated_freq_mhz")
        if throttling is Throttling.THERMAL:
            cause = f"at {_num(evidence.get('temperature_c'))} °C"
        elif throttling is Throttling.POWER:
            cause = f"at {_num(evidence.get('power_w'))} W of {_num(evidence.get('rated_power_w'))} W"
        else:
            heat, power = _num(evidence.get("temperature_c")), _num(evidence.get("power_w"))
            cause = f"at {heat} °C, {power} W: cause not reported"
        text += f"; throttled ({throttling.value}): {_num(freq)} of {_num(rated)} MHz {cause}"
    return text


def _num(value: EvidenceValue) -> str:
    return f"{value:.0f}" if isinstance(value, (int, float)) else "n/a"
