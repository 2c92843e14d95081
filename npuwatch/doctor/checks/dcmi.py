"""Check dcmi: libdcmi.so is found, loads (in a child), ``dcmi_init`` succeeds, and DCMI agrees with npu-smi.

Severities (a DCMI problem matters as much as what npuwatch can still read):

- no library (none found, or a file named ``libdcmi.so`` without ``dcmi_init``) while npu-smi
  answers: skip, saying npuwatch reads the chips through npu-smi (it falls back; nothing breaks,
  only DCMI's metrics stay empty);
- a library that does not load, hangs or crashes, a failed ``dcmi_init``, or a read that fails:
  warn while npu-smi answers (npuwatch falls back to it), fail when nothing else reads the chips —
  npu-smi fails too, or ``--backend dcmi`` / ``NPUWATCH_BACKEND=dcmi`` forbids the fallback;
- both backends read: pass when they list the same chips and every value both have is within
  the tolerances of ``dcmi_agreement``, warn naming each chip and metric that disagrees twice in a row (values
  move between two reads, so a first disagreement is read again before it is reported).

The library is loaded first in a throw-away child (``probes.library_load``), then read in the
DCMI source's own worker process: a library that hangs or crashes costs a child, never the doctor.
No DCMI setter is ever called.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, List, Optional, Sequence, Tuple

from npuwatch.chip_source import ChipReading, SourceFailure, SourceReading
from npuwatch.doctor import facts
from npuwatch.doctor.dcmi_agreement import TOLERANCES_TEXT, Disagreement, disagreements
from npuwatch.doctor.engine import check_timeout_s
from npuwatch.doctor.facts import device_flags, reboot_first
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Check, Finding, Group, failed, passed, skipped, warned
from npuwatch.probes.dcmi import search
from npuwatch.probes.dcmi.records import SYMBOL_MISSING
from npuwatch.probes.dcmi_codes import describe
from npuwatch.probes.devices import MANAGER_NODES
from npuwatch.probes.library_load import load_libraries
from npuwatch.probes.runner import KILL_GRACE_S

#: Loading the library in its child may take this long (it is milliseconds when it works).
LOAD_TIMEOUT_S = 2.0
#: Left of the check's own limit for ending the worker and writing the result.
CLOSE_MARGIN_S = 0.7
#: The least a fresh worker process is given to start (an interpreter and its imports).
MIN_START_GRACE_S = 0.5
MAX_START_GRACE_S = 5.0

_MOUNT_HINT = (
    "mount the host's DCMI and driver libraries: -v /usr/local/dcmi:/usr/local/dcmi "
    "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64"
)
_NOT_FOUND_HINT = (
    "libdcmi.so comes with the driver package (/usr/local/Ascend/driver/lib64/driver and "
    "/usr/local/dcmi); in a container " + _MOUNT_HINT + "; or name a copy with --dcmi-lib PATH"
)
_FALLS_BACK = "npuwatch reads the chips through npu-smi instead"
_DCMI_ONLY = "AI Core frequency, Vector, HBM bandwidth, ECC and error codes stay empty"
_DISAGREE_HINT = (
    "both backends read the same driver, so a lasting difference is a bug in one of them: compare "
    "`npu-smi info` with `npuwatch snapshot --json --backend dcmi` and report both outputs; "
    "`--backend npu-smi` reads as npu-smi does meanwhile"
)


# ---------------------------------------------------------------- finding the library


@dataclass(frozen=True)
class Library:
    """Where the library was looked for, and what loading each candidate said."""

    tried: Tuple[str, ...]  # the search, as the machine names the paths
    loaded: Optional[str] = None  # the first candidate that loads (machine name)
    errors: Tuple[Tuple[str, str], ...] = ()  # (candidate, loader's words) for those that did not
    stand_in: bool = False  # ``python:<module>``: the demos' pure-Python stand-in, nothing to dlopen

    @property
    def found(self) -> bool:
        """Whether any candidate exists (loaded or not)."""
        return self.loaded is not None or bool(self.errors)


def candidates(machine: Machine) -> Tuple[str, ...]:
    """Where the DCMI worker looks for the library on ``machine`` (real paths), in its order."""
    return search.candidates(machine.dcmi_library, str(machine.sysroot.root), machine.environ)


def search_order() -> str:
    """The search, in words (shown when nothing loads)."""
    installed = ", ".join(f"/{path}" for path in search.INSTALLED_PATHS)
    return (
        f"--dcmi-lib / {search.ENV_VAR}, else {search.LOADER_NAME} on the loader path "
        f"(live machine only), {installed}"
    )


def shown(machine: Machine, where: str) -> str:
    """A candidate as the machine names it: ``/usr/local/dcmi/libdcmi.so``, not the tree's real path."""
    root = str(machine.sysroot.root).rstrip("/")
    if root and where.startswith(root + "/"):
        return where[len(root) :]
    return where


def in_machine_words(machine: Machine, text: str) -> str:
    """``text`` (a loader's or the worker's words) with the tree's real paths as the machine names
    them: ``/usr/local/dcmi/libdcmi.so: file too short``, not ``/tmp/tree/usr/…`` (issue 29)."""
    if machine.sysroot.is_live:
        return text
    root = str(machine.sysroot.root).rstrip("/")
    return text.replace(root + "/", "/") if root else text


def locate(machine: Machine) -> Library:
    """Every candidate that exists, loaded in a child in search order: the first that loads wins."""
    tried = candidates(machine)
    names = tuple(shown(machine, where) for where in tried)
    if tried and tried[0].startswith(search.PYTHON_PREFIX):  # a module, imported by the worker
        return Library(names, loaded=tried[0], stand_in=True)
    present = [where for where in tried if "/" not in where or os.path.exists(where)]
    if not present:
        return Library(names)
    ld_path = machine.environ.get("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH", ""))
    results = load_libraries(present, ld_path, LOAD_TIMEOUT_S)
    errors: List[Tuple[str, str]] = []
    for where in present:
        error = results.get(where)
        if error is None:
            return Library(names, shown(machine, where), tuple(errors))
        if "/" not in where and "cannot open shared object file" in error:
            continue  # not on the loader path: that is "not found", not a load error
        errors.append((shown(machine, where), in_machine_words(machine, error)))
    return Library(names, errors=tuple(errors))


# ---------------------------------------------------------------- the check


@dataclass(frozen=True)
class _Budget:
    """The check's own limit, shared by its steps (the engine abandons it past the limit)."""

    deadline: float

    def left_s(self) -> float:
        return self.deadline - time.monotonic()


def run(machine: Machine) -> Finding:
    """Find and load the library, initialise it in the DCMI worker, read once, compare with npu-smi."""
    budget = _Budget(time.monotonic() + check_timeout_s(CHECK, machine) - CLOSE_MARGIN_S)
    held = search.withheld(machine.dcmi_library, str(machine.sysroot.root), machine.environ)
    if held is not None:
        untrusted = facts.not_trusted(machine, "loading libdcmi.so", [held])
        if untrusted is not None:
            return untrusted
    library = locate(machine)
    details = _library_details(machine, library)
    if library.loaded is None:
        if library.found:
            where, error = library.errors[0]
            return _problem(machine, f"{where} does not load: {error}", _load_hint(error), details)
        looked = ", ".join(library.tried) or "nowhere: the tree is not trusted"
        return _no_library(machine, f"libdcmi.so not found (looked in {looked})", details)
    source, first = machine.dcmi_first_read(*_limits(machine, budget))  # begun as the doctor began, maybe
    try:
        if first.failure is not None or first.reading is None:
            return _explain(machine, library, _failure(machine, first), details)
        return _compare(machine, source.read, first.reading, budget, details)
    finally:
        source.close()


def prefetch(machine: Machine) -> None:
    """Begin DCMI's first read now, on a daemon thread, with this check's whole budget (the
    doctor calls it as it begins: a hung library then waits beside npu-smi's checks, not after
    them); nothing when the library cannot load here (the check says why itself)."""
    root = str(machine.sysroot.root)
    if search.absent(machine.dcmi_library, root, machine.environ) is not None:
        return
    limits = _limits(machine, _Budget(time.monotonic() + check_timeout_s(CHECK, machine) - CLOSE_MARGIN_S))
    threading.Thread(
        target=machine.dcmi_first_read, args=limits, name="npuwatch-doctor-dcmi", daemon=True
    ).start()


def _limits(machine: Machine, budget: _Budget) -> Tuple[float, float]:
    """One DCMI read's limit (``--timeout``) and its worker's start grace, within what is left."""
    left_s = max(budget.left_s(), MIN_START_GRACE_S * 2)
    timeout_s = max(MIN_START_GRACE_S, min(machine.timeout_s, left_s - MIN_START_GRACE_S))
    grace_s = min(MAX_START_GRACE_S, max(MIN_START_GRACE_S, left_s - timeout_s))
    return timeout_s, grace_s


def _failure(machine: Machine, outcome: SourceReading) -> SourceFailure:
    if outcome.failure is not None:
        failure = outcome.failure
        return replace(failure, message=in_machine_words(machine, failure.message))
    return SourceFailure("crash", "the DCMI source gave neither a reading nor a failure", "")


def _library_details(machine: Machine, library: Library) -> List[str]:
    details: List[str] = []
    kind = f" — {machine.dcmi_kind}" if machine.dcmi_kind else ""
    if library.stand_in:
        details.append(f"library: {library.loaded}{kind} (a pure-Python stand-in: nothing to dlopen)")
    elif library.loaded is not None:
        details.append(f"library: {library.loaded}{kind}: loads (dlopen in a child process)")
    details += [f"{where}: does not load: {error}" for where, error in library.errors]
    if library.loaded is None:
        details.append(f"search order: {search_order()}")
    if machine.chip_backend != "auto":
        details.append(f"backend chosen: {machine.chip_backend} (--backend / NPUWATCH_BACKEND)")
    return details


def _fallback_works(machine: Machine) -> bool:
    """Whether npuwatch still reads the chips when DCMI fails: npu-smi answers, and may be used."""
    if machine.chip_backend == "dcmi":
        return False
    outcome = machine.chip_reading()
    return outcome.failure is None and outcome.reading is not None and bool(outcome.reading.chips)


def _problem(machine: Machine, summary: str, hint: str, details: Sequence[str]) -> Finding:
    """A DCMI problem: a warning while npu-smi reads the chips, a failure when nothing does."""
    if _fallback_works(machine):
        if machine.chip_backend == "npu-smi":
            return warned(summary, hint, [*details, "npuwatch is set to read through npu-smi"])
        return warned(f"{summary}; {_FALLS_BACK}", hint, [*details, f"without DCMI: {_DCMI_ONLY}"])
    why = (
        "--backend dcmi never falls back to npu-smi"
        if machine.chip_backend == "dcmi"
        else "npu-smi does not read the chips either (see npu-smi): nothing does"
    )
    return failed(summary, hint, [*details, why])


def _no_library(machine: Machine, summary: str, details: Sequence[str]) -> Finding:
    """No DCMI library here: nothing to check (npuwatch reads through npu-smi, whose own check
    judges it), unless DCMI was asked for by name (``--dcmi-lib``, ``--backend dcmi``)."""
    if machine.chip_backend == "dcmi" or machine.dcmi_library:
        return _problem(machine, summary, _NOT_FOUND_HINT, details)
    lines = [*details, f"without DCMI: {_DCMI_ONLY}", f"to read through DCMI: {_NOT_FOUND_HINT}"]
    if _fallback_works(machine):
        return skipped(f"{summary}; {_FALLS_BACK}", lines)
    return skipped(
        f"{summary}; npuwatch reads the chips through npu-smi, which fails too (see npu-smi)", lines
    )


def _load_hint(error: str) -> str:
    if "undefined symbol" in error:
        return (
            "libdcmi.so does not match the driver libraries it loads: the driver's userland is mixed "
            "from two versions; reinstall the driver package"
        )
    if any(word in error for word in ("wrong ELF class", "invalid ELF header", "file too short")):
        return "this libdcmi.so is damaged or built for another architecture: reinstall the driver package"
    if "hung" in error or "killed by" in error:
        return "the library hangs or crashes while loading: check `dmesg`; reinstall the driver package"
    return (
        "libdcmi.so needs the driver's own libraries: add /usr/local/Ascend/driver/lib64/driver and "
        "/usr/local/Ascend/driver/lib64/common to LD_LIBRARY_PATH; in a container " + _MOUNT_HINT
    )


def _explain(machine: Machine, library: Library, failure: SourceFailure, details: List[str]) -> Finding:
    """Why DCMI gave no reading: the loader, ``dcmi_init``'s code, a hang or a crash."""
    code = failure.error_code
    if code != SYMBOL_MISSING:
        details = [*details, f"DCMI said: {failure.message}"]
    if failure.kind == "not-found":
        looked = ", ".join(library.tried) or "nowhere: the tree is not trusted"
        return _no_library(machine, f"libdcmi.so not found (looked in {looked})", details)
    if failure.kind == "permission" or code == -8002:
        return _permission(machine, details)
    if failure.kind in ("init", "load") and code == SYMBOL_MISSING:
        summary = f"{library.loaded} has no dcmi_init: it is not the driver's libdcmi.so"
        return _no_library(machine, summary, details)
    if failure.kind == "init" and code == -8005:
        return _inner_error(machine, details)
    if failure.kind == "init" and code is not None:
        known = describe(code)
        name = f" ({known.name})" if known is not None else ""
        meaning = known.meaning if known is not None else "an unknown DCMI error"
        hint = known.hint if known is not None else failure.hint or "check `dmesg` and `npu-smi info`"
        return _problem(machine, f"dcmi_init failed with {code}{name}: {meaning}", hint, details)
    if failure.kind == "timeout":
        return _problem(machine, f"DCMI hangs: {_head(failure.message)}", failure.hint, details)
    if failure.kind == "crash":
        return _problem(machine, f"DCMI crashes: {_head(failure.message)}", failure.hint, details)
    return _problem(machine, f"DCMI failed: {failure.message}", failure.hint or _NOT_FOUND_HINT, details)


def _head(message: str) -> str:
    """The clause before the first ``;`` (the rest, how npuwatch copes, is in the details)."""
    return message.split("; ", 1)[0]


def _permission(machine: Machine, details: List[str]) -> Finding:
    user = facts.machine_user(machine)
    name = user.name or f"uid {user.uid}"
    info = machine.install_info()
    group = (info.user_group if info is not None else None) or facts.DRIVER_GROUP
    who = name if user.name else "$USER"
    if user.is_root:
        return _problem(
            machine,
            "dcmi_init refused with -8002 (OPER_NOT_PERMITTED) even for root",
            "DCMI refuses this process although it runs as root: in a container pass the device nodes "
            f"and the host's {group} group (`--group-add $(getent group {group} | cut -d: -f3)`) or run it "
            "--privileged; on a host check that /dev/davinci* belong to the driver's group "
            "(device-permissions)",
            details,
        )
    hint = (
        f"add the user to the driver's group: `sudo usermod -aG {group} {who}`, then log out and in again "
        f"(groups are read at login; `newgrp {group}` for this shell only), or run as root"
    )
    if machine.container().in_container:
        hint += f"; in a container: `--group-add $(getent group {group} | cut -d: -f3)` (the host's GID)"
    summary = f"dcmi_init refused with -8002 (OPER_NOT_PERMITTED): {name} is not root and not in {group}"
    return _problem(machine, summary, hint, details)


def _inner_error(machine: Machine, details: List[str]) -> Finding:
    dev = machine.dev()
    missing = [name for name in MANAGER_NODES if not dev.has(name)]
    in_container = machine.container().in_container
    summary = "dcmi_init failed with -8005 (INNER_ERR)"
    if in_container and (missing or not dev.davinci_ids):
        absent = [*missing, *([] if dev.davinci_ids else ["davinciN"])]
        flags = device_flags(missing) + (
            " --device /dev/davinciN (one per chip)" if not dev.davinci_ids else ""
        )
        return _problem(
            machine,
            f"{summary}: this container lacks {', '.join('/dev/' + n for n in absent)}",
            f"start the container with {flags.strip()} (or the Ascend Docker Runtime), and {_MOUNT_HINT}",
            details,
        )
    if in_container:
        return _problem(
            machine,
            f"{summary} in a container whose device nodes are present",
            f"the driver libraries in the container must be the host's own: {_MOUNT_HINT}; and the NPU must "
            "not be held by another container (`npu-smi info` on the host)",
            details,
        )
    if missing:
        nodes = ", ".join(f"/dev/{name}" for name in missing)
        hint = (
            f"the driver did not create {nodes}: check `lsmod | grep drv_` and `dmesg | grep -i devdrv`; "
            "reinstall the driver and reboot"
        )
        return _problem(machine, f"{summary}: {nodes} missing", reboot_first(machine, hint, details), details)
    hint = (
        "the driver's userland does not match its kernel module, or the device is held: check "
        "`cat /usr/local/Ascend/driver/version.info` and `dmesg | grep -i devdrv`; reinstall the driver "
        "and reboot"
    )
    hint = reboot_first(machine, hint, details)
    return _problem(machine, f"{summary}: DCMI internal error", hint, details)


# ---------------------------------------------------------------- both backends read


def _compare(
    machine: Machine,
    read_dcmi: Callable[[], SourceReading],
    dcmi: ChipReading,
    budget: _Budget,
    details: List[str],
) -> Finding:
    chips = len(dcmi.chips)
    details = [*details, f"DCMI read {chips} chip{'s' if chips != 1 else ''}", *dcmi.warnings[:4]]
    if not chips:
        hint = (
            "check `npu-smi info -l` and `dmesg | grep -i devdrv`; in a container pass the chips' "
            "/dev/davinciN nodes"
        )
        return _problem(machine, "dcmi_init succeeds but DCMI lists no chip", hint, details)
    if machine.chip_reading().failure is not None:
        return _dcmi_only(machine, chips, details)
    npu_smi = _npu_smi_now(machine, budget)
    if npu_smi is None:
        return _dcmi_only(machine, chips, details)
    details.append(f"compared with npu-smi within {TOLERANCES_TEXT}")
    found = disagreements(dcmi, npu_smi)
    if found:
        found = _again(machine, read_dcmi, found, budget)
    if not found:
        return passed(
            f"DCMI reads {chips} chip{'s' if chips != 1 else ''} and agrees with npu-smi ({TOLERANCES_TEXT})",
            details,
        )
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return warned(
        f"DCMI and npu-smi disagree: {found[0].text}{more}",
        _DISAGREE_HINT,
        [*details, *(item.text for item in found)],
    )


def _npu_smi_now(machine: Machine, budget: _Budget) -> Optional[ChipReading]:
    """npu-smi read right after DCMI (the values move): again when time allows, else the doctor's read."""
    limit_s = min(machine.timeout_s, budget.left_s() - KILL_GRACE_S)  # a hung npu-smi takes that more
    if limit_s >= MIN_START_GRACE_S:
        outcome = machine.fresh_chip_reading(limit_s)
        if outcome.reading is not None:
            return outcome.reading
    return machine.chip_reading().reading


def _again(
    machine: Machine,
    read_dcmi: Callable[[], SourceReading],
    first: List[Disagreement],
    budget: _Budget,
) -> List[Disagreement]:
    """Read both once more: only what disagrees both times is reported (values move between reads)."""
    if budget.left_s() < machine.timeout_s + MIN_START_GRACE_S:
        return first  # a second DCMI read could outlast the check's limit
    outcome = read_dcmi()
    if outcome.reading is None:
        return first
    npu_smi = _npu_smi_now(machine, budget)
    if npu_smi is None:
        return first
    again = {item.key for item in disagreements(outcome.reading, npu_smi)}
    return [item for item in first if item.key in again]


def _dcmi_only(machine: Machine, chips: int, details: List[str]) -> Finding:
    plural = "s" if chips != 1 else ""
    if machine.chip_backend == "npu-smi":
        return warned(
            f"DCMI reads {chips} chip{plural} but npu-smi, the backend chosen, does not (see npu-smi)",
            "use DCMI: `--backend auto` (or unset NPUWATCH_BACKEND)",
            details,
        )
    return passed(
        f"DCMI reads {chips} chip{plural} (npu-smi gives nothing to compare with: see npu-smi)", details
    )


CHECK = Check(
    id="dcmi",
    group=Group.DRIVER,
    title="libdcmi.so is found and loads, dcmi_init succeeds, and DCMI agrees with npu-smi",
    run=run,
    needs_hardware=True,
    runs_npu_smi=True,
)
