"""Provides check_health(): the one-line healthy/unhealthy verdict behind ``npuwatch check``.

The verdict (docs/design.md §6) asks, in order: are the device nodes there, does the chip source
answer within its timeout, is every visible chip ``OK`` and under its temperature limit, and —
when asked — does a quick self-test pass on every chip.  Chips are read through the same chip
source as the sampler's, on the backend chosen (``--backend``): DCMI reads them in its worker
process with their error codes, no npu-smi process; ``check_source`` is npu-smi's for ``check``,
whose healthy path runs ``npu-smi`` once: only a chip that is not ``OK`` costs a ``-t health``
query, for its error code.

This module runs every few seconds in thousands of containers (Docker HEALTHCHECK, Kubernetes
probes): it imports the probes it needs and nothing of the sampler, history or views.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Collection, List, Mapping, Optional, Sequence, Tuple

from npuwatch.chip_families import OTHER, family_of, required_device_nodes
from npuwatch.chip_source import ChipSource, SourceFailure, reading_info, source_title
from npuwatch.judge.fault_codes import worst_handling
from npuwatch.judge.limits import Thresholds
from npuwatch.judge.rules import ReasonKind, judge_chip
from npuwatch.machine_chips import read_machine_chips, unreported_chips
from npuwatch.model import ChipSample, Health, NpuProcess
from npuwatch.probes.devices import UNREADABLE_DEV_HINT, DevNodes, scan_dev
from npuwatch.probes.npu_smi import NpuSmi
from npuwatch.probes.npu_smi.source import NpuSmiSource
from npuwatch.probes.sysroot import Sysroot
from npuwatch.source_info import SourceInfo
from npuwatch.text_safety import shorten
from npuwatch.verdict import ChipCheck, HealthVerdict, Problem, Reason

if TYPE_CHECKING:
    from npuwatch.selftest import SelftestReport

#: The time all ``-t health`` queries (the error codes of chips that are not OK) may take
#: together: the verdict is already "unhealthy", so it must not wait long for the details.
HEALTH_QUERY_BUDGET_S = 2.0

_NODES_HINT = (
    "in a container pass the devices: --device /dev/davinciN (one per chip) --device /dev/davinci_manager "
    "--device /dev/devmm_svm --device /dev/hisi_hdc (or use the Ascend Docker Runtime); on the host "
    "check that the driver is loaded (`lsmod | grep drv`) and run `npuwatch doctor`"
)
_ACCESS_HINT = (
    "run as root or as a member of the HwHiAiUser group (`sudo usermod -aG HwHiAiUser $USER`; "
    "in a container: --group-add with the group's GID)"
)


def check_source(npu_smi: Optional[NpuSmi], label: str = "npu-smi") -> NpuSmiSource:
    """The chip source ``npuwatch check`` reads live: one ``npu-smi info``, no logic-ID mapping,
    and the error codes of chips not OK within ``HEALTH_QUERY_BUDGET_S`` (at most the npu-smi
    timeout) together: the verdict is already "unhealthy" then, so it must not wait long for the
    details, and a check lasts at most the timeout plus that budget."""
    npu_smi = npu_smi or NpuSmi(None)
    budget_s = min(npu_smi.timeout_s, HEALTH_QUERY_BUDGET_S)
    return NpuSmiSource(npu_smi, label, logic_ids=False, errors_budget_s=budget_s)


def check_health(
    sysroot: Optional[Sysroot],
    source: ChipSource,
    *,
    devices: Optional[Collection[int]] = None,
    max_temp_c: Optional[float] = None,
    selftest: bool = False,
    selftest_skip: Optional[str] = None,
    backend_note: Optional[str] = None,
) -> HealthVerdict:
    """Judge the machine seen through ``sysroot`` and the chip ``source``; never raises for its problems.

    ``source`` is read once, as the sampler reads it: ``check_source`` live, a ``CaptureSource``
    for a saved ``npu-smi info`` text; its ``label`` names the verdict's source.  ``sysroot`` None
    skips the device nodes (a replayed capture has none).  ``devices`` limits the chips to these
    NPU IDs; ``max_temp_c`` replaces every model's critical limit (the judge's table).
    ``selftest`` runs a quick self-test once everything else is healthy (``selftest_skip``: why it
    cannot run here, e.g. on a simulated machine).  ``backend_note``: why ``source`` is not the
    backend chosen, when the caller decided it (the reading's own note wins).
    """
    started = time.monotonic()
    problems: List[Problem] = []
    notes: List[str] = []
    nodes = scan_dev(sysroot) if sysroot is not None else None
    outcome = source.read()
    backend = source.probe_name  # after the read: the backend that read it (``auto`` may fall back)
    if outcome.failure is not None:
        problems.append(_source_problem(outcome.failure, reading_info(source, outcome)))
    reading = outcome.reading
    chips: Tuple[ChipCheck, ...] = ()
    if reading is not None:
        notes.extend(reading.warnings)
        chosen = [c for c in reading.chips if devices is None or c.identity.npu_id in devices]
        chips = judge_chips(chosen, max_temp_c, reading.processes, reading.process_table)
        problems.extend(chip_problems(reading.chips, chips, devices, reading.warnings, backend))
        if sysroot is not None and nodes is not None and devices is None:
            unlisted = unreported_chips(read_machine_chips(sysroot, nodes), reading.chips, backend)
            problems[:0] = [unlisted] if unlisted is not None else []
    if nodes is not None:
        families = [family_of(c.name) for c in chips] or [OTHER]  # no chip read: every node counts
        problems[:0] = _node_problems(nodes, required_device_nodes(families))
    summary: Optional[Mapping[str, Any]] = None
    if selftest and not problems:
        summary, failed = _run_selftest(sysroot, selftest_skip)
        problems.extend(failed)
    return HealthVerdict(
        problems=tuple(problems),
        chips=chips,
        source=source.label,
        selftest=summary,
        duration_s=time.monotonic() - started,
        notes=tuple(notes),
        backend=backend,
        backend_note=outcome.note or backend_note,
    )


def _source_problem(failure: SourceFailure, source: SourceInfo) -> Problem:
    # The message names the source that failed as it declares itself (``DCMI failed: dcmi_init
    # failed with -8002``), never another's.  DCMI messages read "npu-smi failed with DCMI error
    # -8005 (INNER_ERR): <a long meaning>": the line keeps the clause before the colon, --json
    # keeps all of it in the hint.
    head, _, rest = failure.message.partition(": ")
    short = head if len(failure.message) > 80 and len(head) >= 20 else failure.message
    hint = failure.hint if short == failure.message else f"{rest}; {failure.hint}"
    named = short if source.names_itself(failure.message) else source.failure_text(short)
    return Problem(Reason.of_source(source.name), named, hint)


def _node_problems(nodes: DevNodes, required: Collection[str]) -> List[Problem]:
    if nodes.reason is not None:
        return [
            Problem(
                Reason.DEVICE_NODES, nodes.reason, UNREADABLE_DEV_HINT if nodes.unreadable else _NODES_HINT
            )
        ]
    found: List[Problem] = []
    if not nodes.davinci_ids:
        found.append(Problem(Reason.DEVICE_NODES, "no /dev/davinciN node", _NODES_HINT))
    # The chips' families say which nodes they need: a 310B SoC board has no devmm_svm.
    missing = [n for n in nodes.missing_managers if n in required]
    absent = [n for n in missing if nodes.node(n) is None]
    if absent:
        names = ", ".join(f"/dev/{n}" for n in absent)
        found.append(Problem(Reason.DEVICE_NODES, f"{names} missing", _NODES_HINT))
    for name in missing:
        node = nodes.node(name)
        if node is not None:
            found.append(Problem(Reason.DEVICE_NODES, f"{node.path} {node.problem}", _NODES_HINT))
    locked = nodes.inaccessible
    if locked:
        first = locked[0]
        owner = f"{first.owner or first.uid}:{first.group or first.gid} mode {first.mode_text}"
        names = ", ".join(n.path for n in locked[:3]) + (" …" if len(locked) > 3 else "")
        found.append(Problem(Reason.DEVICE_NODES, f"no read/write access to {names} ({owner})", _ACCESS_HINT))
    return found


def judge_chips(
    chips: Sequence[ChipSample],
    max_temp_c: Optional[float] = None,
    processes: Sequence[NpuProcess] = (),
    process_table: bool = True,
) -> Tuple[ChipCheck, ...]:
    """Each chip as the judge rules it (``max_temp_c`` replaces every model's critical limit), with
    the error codes its source attached (``ChipSample.errors``).  Also judges ``/healthz``."""
    thresholds = Thresholds(temperature_critical_c=max_temp_c)
    judged = [
        _chip_check(
            c, thresholds, [p for p in processes if (p.npu_id, p.chip_id) == c.identity.key], process_table
        )
        for c in chips
    ]
    return tuple(judged)


def _chip_check(
    chip: ChipSample, thresholds: Thresholds, processes: Sequence[NpuProcess], process_table: bool
) -> ChipCheck:
    identity = chip.identity
    return ChipCheck(
        npu_id=identity.npu_id,
        chip_id=identity.chip_id,
        name=identity.name,
        health=chip.health,
        temperature_c=chip.temperature_c,
        max_temp_c=thresholds.temperature_limits_c(identity.name)[1],
        error_codes=tuple(error.code for error in chip.errors),
        judgement=judge_chip(chip, processes, thresholds=thresholds, process_table=process_table),
    )


def chip_problems(
    listed_chips: Sequence[ChipSample],
    chips: Tuple[ChipCheck, ...],
    devices: Optional[Collection[int]],
    warnings: Sequence[str] = (),
    backend: str = "npu-smi",
) -> List[Problem]:
    """What is wrong with the chips the chip source (``backend``) listed: none listed, a wanted NPU
    missing, health, heat."""
    found: List[Problem] = []
    if not listed_chips:
        detail = f": {warnings[0]}" if warnings else ""
        found.append(
            Problem(
                Reason.NO_CHIPS,
                f"{source_title(backend)} lists no chip{detail}",
                "run `npu-smi info` by hand; then `npuwatch doctor`",
            )
        )
    listed = {c.identity.npu_id for c in listed_chips}
    for npu_id in sorted(set(devices or ()) - listed):
        shown = ",".join(str(n) for n in sorted(listed)) or "none"
        found.append(
            Problem(
                Reason.CHIP_MISSING,
                f"NPU {npu_id} not listed by {source_title(backend)} (it lists {shown})",
                "check --devices against `npu-smi info -l`; in a container, pass that NPU's /dev/davinciN",
                npu_id=npu_id,
            )
        )
    for chip in chips:
        found.extend(_unhealthy(chip))
    return found


def _unhealthy(chip: ChipCheck) -> List[Problem]:
    """The problems behind a chip the judge calls ``critical`` or ``unknown`` (its warnings are not)."""
    found: List[Problem] = []
    for reason in chip.judgement.reasons:
        if not reason.level.unhealthy:
            continue
        if reason.kind is ReasonKind.HEALTH:
            state = "health unknown" if chip.health is Health.UNKNOWN else chip.health.value
            codes = f" ({' '.join(chip.error_codes)})" if chip.error_codes else ""
            query = f"`npu-smi info -t health -i {chip.npu_id} -c {chip.chip_id}`"
            handling = worst_handling(chip.error_codes)
            if handling is None:
                hint = f"{query} explains the error code; check `dmesg` and move jobs off this chip"
            else:  # Huawei's handling class of the code says what to do
                action = f"{handling.value}: {handling.action}"
                hint = f"Huawei's handling of the code is {action}; {query} explains it"
                codes = codes[:-1] + f" → {handling.value})"
            found.append(
                Problem(Reason.CHIP_HEALTH, f"{chip.label} {state}{codes}", hint, chip.npu_id, chip.chip_id)
            )
        elif reason.kind is ReasonKind.TEMPERATURE:
            hint = "check this slot's fans and airflow and the server's inlet temperature"
            message = f"{chip.label} {reason.text}"
            found.append(Problem(Reason.TEMPERATURE, message, hint, chip.npu_id, chip.chip_id))
        else:  # lost, stale: the chip cannot be read
            message = f"{chip.label} {reason.text}"
            found.append(Problem(Reason.CHIP_MISSING, message, reason.detail, chip.npu_id, chip.chip_id))
    return found


def _run_selftest(
    sysroot: Optional[Sysroot], skip_reason: Optional[str]
) -> Tuple[Mapping[str, Any], List[Problem]]:
    """The quick self-test on every device the runtime sees, imported only here (it is the slow part).

    Its devices are the runtime's logical IDs, not npu-smi's NPU IDs, so ``--devices`` does not
    narrow it: ``ASCEND_RT_VISIBLE_DEVICES``, which the self-test's child inherits, does.  Only a
    pass (or a pass with warnings) is healthy: a skipped self-test proved nothing that was asked.
    """
    if skip_reason is not None:
        summary = {"status": "skip", "exit_code": 1, "summary": skip_reason}
        return summary, [
            Problem(Reason.SELFTEST, f"self-test skipped: {shorten(skip_reason, 100)}", skip_reason)
        ]
    from npuwatch.selftest import run_selftest
    from npuwatch.selftest.report_json import to_dict

    report = run_selftest(
        devices="all",
        level="quick",
        environ=None if sysroot is None else sysroot.environ,
        sysroot=sysroot,
    )
    summary = to_dict(report)
    status = report.status.value
    if status in ("pass", "warn"):
        return summary, []
    verb = {"fail": "failed", "skip": "skipped", "error": "could not run"}.get(status, status)
    finding = _first_finding(report, status)
    hint = f"{finding}; `npuwatch selftest` shows every step and its fix"
    return summary, [Problem(Reason.SELFTEST, f"self-test {verb}: {shorten(finding, 100)}", hint)]


def _first_finding(report: SelftestReport, status: str) -> str:
    """``device 0 copy H2D: acl.rt.memcpy_async(kind=1) returned 507033``: the first step with ``status``."""
    for run in report.runs:
        where = "" if run.device is None else f"device {run.device} "
        for step in run.steps:
            if step.status.value == status:
                return f"{where}{step.step.title}: {step.detail}"
        if run.problem and run.status.value == status:
            return f"{where}{run.problem}"
    return str(report.summary)
