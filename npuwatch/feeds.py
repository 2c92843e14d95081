"""Provides the one composition root: FeedOptions, open_machine() and open_feed().

Every command, the notebook and the dashboard name their data source the same way (docs/design.md §2.1):
``shared_options()`` declares the flags, ``FeedOptions.from_args`` reads them (the notebook builds
one from keywords), ``FeedOptions.validate`` holds every rule about their combinations, and

- ``open_machine(options)`` wires the machine to read: a demo's simulated tree, ``--root`` or
  this machine, and the npu-smi that belongs to it (``check``, ``doctor``, ``selftest``);
- ``open_feed(options)`` wires a SnapshotFeed on top of it, or over a recording or a saved
  ``npu-smi info`` text (the dashboard, the plain view, ``snapshot``, ``serve``, ``record``, the
  notebook).

This module imports only light things at the top: ``npuwatch check`` loads it, and its import
graph is pinned (tests/core/test_check.py); the sampler, the simulator and the recording modules
load inside the functions that need them.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, Mapping, Optional, Tuple

from npuwatch.errors import UsageError, VariableError
from npuwatch.option_values import (
    MAX_SECONDS,
    env_seconds,
    machine_root,
    npu_ids,
    parse_npu_ids,
    seconds,
    speed_factor,
)
from npuwatch.probes.runner import held_signals, release_signals
from npuwatch.probes.simulator import DEFAULT_SCENARIO

if TYPE_CHECKING:
    from npuwatch.chip_source import ChipSource
    from npuwatch.feed import SnapshotFeed
    from npuwatch.model import Snapshot
    from npuwatch.probes.host import HostProbe, ProcessLookup
    from npuwatch.probes.npu_smi import NpuSmi, Withheld
    from npuwatch.probes.simulator.machine import PendingSimulation
    from npuwatch.probes.sysroot import Sysroot

#: The chip-data backends a feed can read (``--backend`` / ``NPUWATCH_BACKEND``): ``auto`` reads
#: through DCMI (in-process, ``libdcmi.so``) and falls back to npu-smi (``npuwatch.fallback_source``);
#: ``dcmi`` and ``npu-smi`` are explicit and never switch.
BACKENDS: Tuple[str, ...] = ("auto", "dcmi", "npu-smi")
DEFAULT_BACKEND = "auto"

#: How much longer than one read (``--timeout``) DCMI's worker may take to give its first answer
#: (a fresh interpreter, the library's load, ``dcmi_init``): inside the one budget of a command.
WORKER_START_GRACE_S = 1.0
#: On top of ``--timeout``, what a one-shot command (``check``, ``snapshot``) may take in all
#: (README: "within --timeout + 2 s"): npu-smi's start beside a hung DCMI read
#: (``fallback_source.hedge_for``) and the error codes of chips not OK, all inside it; the
#: interpreter's start is the rest of the 2 s.
ONE_SHOT_GRACE_S = 1.5


def one_shot_deadline(timeout_s: float, started: Optional[float] = None) -> float:
    """A one-shot command's end (``time.monotonic()``): ``started`` (now) plus its ``--timeout``
    and ``ONE_SHOT_GRACE_S``; no npu-smi call runs past it, no DCMI worker is started again."""
    return (time.monotonic() if started is None else started) + timeout_s + ONE_SHOT_GRACE_S


#: The time a tick's ``npu-smi info -t health`` queries (the error codes of chips not OK) share:
#: a driver that hangs on a broken chip's query must not hold a tick for a timeout per chip.
ERROR_QUERIES_BUDGET_S = 2.0
#: When neither the option nor ``NPUWATCH_INTERVAL`` says otherwise.
DEFAULT_INTERVAL_S = 1.0


def shared_options(chip_backend: bool = True) -> argparse.ArgumentParser:
    """Every reading command's options (docs/design.md §2.1): a parent parser for the CLI and the magic.

    ``chip_backend=False`` leaves out ``--backend`` for ``selftest``, whose own ``--backend``
    (acl|torch) names the runtime; its chip reading follows ``NPUWATCH_BACKEND``.
    """
    shared = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    group = shared.add_argument_group("data source")
    group.add_argument("--interval", type=seconds, metavar="S", help="seconds between samples (default 1.0)")
    group.add_argument(
        "--demo",
        nargs="?",
        const=DEFAULT_SCENARIO,
        metavar="SCENARIO",
        help=f"run on a simulated machine (default scenario {DEFAULT_SCENARIO}; `--demo list` lists them)",
    )
    group.add_argument(
        "--replay",
        metavar="FILE",
        help="play a recording (`npuwatch record`, NDJSON or .gz) or read a saved `npu-smi info` output",
    )
    group.add_argument(
        "--speed", type=speed_factor, metavar="X", help="replay a recording X times faster (default 1)"
    )
    group.add_argument("--root", metavar="DIR", help="read the machine from this sysroot tree (default /)")
    group.add_argument(
        "--trust-root",
        dest="trust_root",
        action="store_true",
        help="run the --root tree's npu-smi and load its libraries (default: read only its files; "
        "NPUWATCH_TRUST_ROOT=1)",
    )
    group.add_argument("--npu-smi", dest="npu_smi", metavar="PATH", help="the npu-smi to run")
    group.add_argument("--devices", type=npu_ids, metavar="IDS", help="only these NPU IDs, e.g. 0,1")
    group.add_argument(
        "--timeout", type=seconds, metavar="S", help="limit for one npu-smi call or one DCMI read (default 5)"
    )
    if chip_backend:
        group.add_argument(
            "--backend",
            dest="chip_backend",
            choices=BACKENDS,
            help="read the chips through DCMI (libdcmi.so, in-process), npu-smi, or auto: DCMI, "
            "falling back to npu-smi when it fails (default auto; NPUWATCH_BACKEND)",
        )
    group.add_argument(
        "--dcmi-lib",
        dest="dcmi_lib",
        metavar="PATH",
        help="the libdcmi.so to load (default: NPUWATCH_DCMI_LIB, the loader path, the driver's folders)",
    )
    group.add_argument("--verbose", action="store_true", help="show tracebacks of internal errors")
    return shared


def scenario_listing() -> str:
    """The ``--demo list`` text: every scenario with what it shows."""
    from npuwatch.probes.simulator import list_scenarios

    lines = (f"  {name:<24} {about}" for name, about in list_scenarios())
    return "Scenarios for --demo:\n" + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class FeedOptions:
    """Where chip data comes from and how it is sampled: the docs/design.md §2.1 options, typed.

    Hashable, so equal options can share one feed (the notebook's views do).  ``None`` means
    "not given": ``interval_s`` and ``timeout_s`` then come from ``NPUWATCH_INTERVAL`` and
    ``NPUWATCH_TIMEOUT`` (else 1 s and npu-smi's 5 s), ``root`` and ``npu_smi`` from
    ``NPUWATCH_ROOT`` and ``NPUWATCH_NPU_SMI`` when the machine is opened.  A demo brings its own
    machine, so those two variables never clash with ``demo``; the options do.
    """

    demo: Optional[str] = None
    """A simulator scenario name (``--demo``): a simulated machine that lives as long as the feed."""
    replay: Optional[str] = None
    """A recording from ``npuwatch record`` or a saved ``npu-smi info`` text (``--replay``)."""
    root: Optional[str] = None
    """The folder a machine's files are read from (``--root``, a sysroot tree)."""
    npu_smi: Optional[str] = None
    """The npu-smi to run (``--npu-smi``)."""
    devices: Optional[FrozenSet[int]] = None
    """Only these NPU IDs (``--devices 0,1``); ``None`` for every chip."""
    interval_s: Optional[float] = None
    """Seconds between samples (``--interval``)."""
    timeout_s: Optional[float] = None
    """The limit for one npu-smi call (``--timeout``)."""
    speed: Optional[float] = None
    """How many times faster a recording replays (``--speed``); only with a recording."""
    host: bool = True
    """Whether to read the host's processes and CPU (psutil) beside the chips."""
    backend: Optional[str] = None
    """The chip-data backend (``--backend``): ``auto``, ``dcmi`` or ``npu-smi``; ``None``:
    ``NPUWATCH_BACKEND``, else ``auto``.  Its flag's namespace name is ``chip_backend``:
    ``selftest --backend`` (acl|torch) names the runtime, so a self-test's chip reading follows
    ``NPUWATCH_BACKEND`` only."""
    dcmi_lib: Optional[str] = None
    """The DCMI library to load (``--dcmi-lib``); ``None``: ``NPUWATCH_DCMI_LIB``, else the search path."""
    trust_root: Optional[bool] = None
    """Run the ``--root`` tree's npu-smi and load its libraries (``--trust-root``); ``None``:
    ``NPUWATCH_TRUST_ROOT``, else only the tree's files are read (``probes.tree_trust``)."""

    def __post_init__(self) -> None:
        if self.devices is not None and not isinstance(self.devices, frozenset):
            object.__setattr__(self, "devices", frozenset(self.devices))  # a list stays hashable

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FeedOptions:
        """The options a command line (or the ``%npuwatch`` magic) gave, validated."""
        devices = getattr(args, "devices", None)
        replay = getattr(args, "replay", None)
        root = getattr(args, "root", None)
        options = cls(
            demo=getattr(args, "demo", None),
            replay=None if replay is None else str(replay),
            root=None if root is None else str(root),
            npu_smi=getattr(args, "npu_smi", None),
            devices=None if devices is None else frozenset(devices),
            interval_s=getattr(args, "interval", None),
            timeout_s=getattr(args, "timeout", None),
            speed=getattr(args, "speed", None),
            backend=getattr(args, "chip_backend", None),
            dcmi_lib=getattr(args, "dcmi_lib", None),
            trust_root=getattr(args, "trust_root", None) or None,
        )
        return options.validate()

    def validate(self) -> FeedOptions:
        """``self`` when the options make sense together; ``UsageError`` saying why not.

        The one home of these rules: every command, the notebook and the magic ask here.
        """
        self._check_values()
        if self.backend is not None and self.backend not in BACKENDS:
            raise UsageError(
                f"unknown chip-data backend {self.backend!r}: choose one of {', '.join(BACKENDS)}"
            )
        if self.replay is not None:
            for name, value in (
                ("--backend", self.backend),
                ("--dcmi-lib", self.dcmi_lib),
                ("--trust-root", self.trust_root or None),
            ):
                if value is not None:
                    raise UsageError(f"{name} reads a live machine: it cannot be combined with --replay")
        if self.demo is not None:
            _check_scenario(self.demo)
            if self.replay is not None:
                raise UsageError("--demo and --replay cannot be combined")
            for name, value in (
                ("--root", self.root),
                ("--npu-smi", self.npu_smi),
                ("--dcmi-lib", self.dcmi_lib),
                ("--trust-root", self.trust_root or None),
            ):
                if value is not None:
                    raise UsageError(f"--demo brings its own machine: it cannot be combined with {name}")
        if self.replay is not None and not os.path.isfile(self.replay):
            why = "a directory, not a file" if os.path.isdir(self.replay) else "no such file"
            raise UsageError(f"--replay {self.replay}: {why}")
        if self.speed is not None and not self.replays_recording:
            raise UsageError("--speed applies only to --replay of a recording made by `npuwatch record`")
        return self

    def _check_values(self) -> None:
        """The bounds the command line's option types enforce, for options built in code."""
        for name, value, maximum in (
            ("interval_s", self.interval_s, MAX_SECONDS),
            ("timeout_s", self.timeout_s, MAX_SECONDS),
            ("speed", self.speed, sys.float_info.max),
        ):
            if value is not None and not 0 < value <= maximum:
                raise UsageError(f"{name} must be more than 0 and at most {maximum:g}, got {value!r}")
        if self.devices is not None and (not self.devices or min(self.devices) < 0):
            raise UsageError(f"devices: expected NPU IDs like 0,1,3, got {sorted(self.devices)!r}")

    @property
    def replays_recording(self) -> bool:
        """Whether ``replay`` names a recording (NDJSON from ``npuwatch record``), not npu-smi text."""
        if self.replay is None:
            return False
        from npuwatch.recording import is_recording

        return is_recording(self.replay)

    def interval(self, environ: Optional[Mapping[str, str]] = None) -> float:
        """``interval_s``, else ``NPUWATCH_INTERVAL``, else 1 s (``VariableError`` for a bad variable)."""
        if self.interval_s is not None:
            return self.interval_s
        return env_seconds(_env(environ), "NPUWATCH_INTERVAL", DEFAULT_INTERVAL_S)

    def timeout(self, environ: Optional[Mapping[str, str]] = None) -> float:
        """``timeout_s``, else ``NPUWATCH_TIMEOUT``, else npu-smi's 5 s (``VariableError`` for a bad one)."""
        if self.timeout_s is not None:
            return self.timeout_s
        from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S

        return env_seconds(_env(environ), "NPUWATCH_TIMEOUT", DEFAULT_TIMEOUT_S)

    def chip_backend(self, environ: Optional[Mapping[str, str]] = None) -> str:
        """``backend``, else ``NPUWATCH_BACKEND``, else ``auto`` (``VariableError`` for a bad variable)."""
        if self.backend is not None:
            return self.backend
        text = _env(environ).get("NPUWATCH_BACKEND", "").strip().lower()
        if not text:
            return DEFAULT_BACKEND
        if text not in BACKENDS:
            raise VariableError(
                f"NPUWATCH_BACKEND={text!r} is not a chip-data backend",
                "NPUWATCH_BACKEND",
                f"unset it or give one of {', '.join(BACKENDS)}",
            )
        return text

    def trusts_root(self, environ: Optional[Mapping[str, str]] = None) -> bool:
        """``trust_root``, else ``NPUWATCH_TRUST_ROOT=1`` (``VariableError`` for another value)."""
        if self.trust_root is not None:
            return self.trust_root
        from npuwatch.probes.tree_trust import TRUST_VARIABLE, trust_value

        text = _env(environ).get(TRUST_VARIABLE, "")
        try:
            return trust_value(text)
        except ValueError as exc:
            raise VariableError(
                str(exc), TRUST_VARIABLE, "unset it, or set it to 1 to trust the tree"
            ) from None

    def names_a_source(self, environ: Optional[Mapping[str, str]] = None) -> bool:
        """Whether a source was chosen: an option, or ``NPUWATCH_ROOT`` / ``NPUWATCH_NPU_SMI`` /
        ``NPUWATCH_DCMI_LIB``."""
        env = _env(environ)
        chosen = (self.demo, self.replay, self.root, self.npu_smi, self.dcmi_lib)
        return any(value is not None for value in chosen) or bool(
            env.get("NPUWATCH_ROOT") or env.get("NPUWATCH_NPU_SMI") or env.get("NPUWATCH_DCMI_LIB")
        )


def _env(environ: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def _check_scenario(name: str) -> None:
    from npuwatch.probes.simulator import list_scenarios

    names = [scenario for scenario, _ in list_scenarios()]
    if name not in names:
        listed = ", ".join(names)
        raise UsageError(f"unknown demo scenario {name!r}; choose one of: {listed} (`--demo list` says more)")


def demo_fallback(
    options: FeedOptions, environ: Optional[Mapping[str, str]] = None
) -> Tuple[FeedOptions, str]:
    """The options to watch, and a banner: the demo when no source was chosen and there is no NPU."""
    if options.names_a_source(environ):
        return options, ""
    from npuwatch.availability import machine_has_npu
    from npuwatch.probes.sysroot import Sysroot

    if machine_has_npu(Sysroot("/")):
        return options, ""
    banner = (
        "No Ascend NPU here (no npu-smi, no Ascend PCI device): showing the simulated "
        f"'{DEFAULT_SCENARIO}' machine. `npuwatch --demo list` shows other scenarios."
    )
    return replace(options, demo=DEFAULT_SCENARIO), banner


@dataclass(frozen=True)
class MachineHandle:
    """The machine to read: its sysroot, its npu-smi and environment; ``close()`` ends a demo.

    Use it as a context manager.  ``scenario`` is the demo's name (``None`` for a real machine or
    a ``--root`` tree); ``process_lookup`` answers for a demo's simulated processes.
    """

    sysroot: Sysroot
    npu_smi_path: Optional[Path]
    environ: Mapping[str, str]
    scenario: Optional[str] = None
    process_lookup: Optional[ProcessLookup] = None
    #: The DCMI library to load: a path, ``python:<module>`` (the demo's stand-in), or ``None`` to
    #: search (the loader path, then the driver's folders under the sysroot).
    dcmi_library: Optional[str] = None
    #: What that library is when it is not the driver's own (``fake libdcmi.so (C, built with cc)``).
    dcmi_kind: Optional[str] = None
    #: The tree's npu-smi npuwatch does not run (an untrusted ``--root`` tree: ``probes.tree_trust``),
    #: and its saved ``npu-smi info`` output read instead; ``None`` when npu-smi runs as found.
    npu_smi_withheld: Optional[Withheld] = None
    _close: Callable[[], None] = field(default=lambda: None, repr=False, compare=False)

    @property
    def label(self) -> str:
        """Where chip data comes from: ``npu-smi`` or ``demo:<scenario>``."""
        return "npu-smi" if self.scenario is None else f"demo:{self.scenario}"

    def npu_smi(self, timeout_s: float, deadline: Optional[float] = None) -> NpuSmi:
        """The machine's npu-smi runner (one that explains "not found" when there is none);
        ``deadline`` (``time.monotonic()``): a one-shot's end, no call runs past it."""
        from npuwatch.probes.npu_smi import NpuSmi

        return NpuSmi(
            self.npu_smi_path, timeout_s=timeout_s, deadline=deadline, withheld=self.npu_smi_withheld
        )

    @property
    def trusted(self) -> bool:
        """Whether the machine's own programs and libraries may run (``probes.tree_trust``)."""
        from npuwatch.probes.tree_trust import runs_tree_code

        return runs_tree_code(self.sysroot.root, self.environ)

    def close(self) -> None:
        """Remove a demo's simulated machine; nothing for a real one."""
        self._close()

    def __enter__(self) -> MachineHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_machine(
    options: FeedOptions,
    environ: Optional[Mapping[str, str]] = None,
    pending: Optional[PendingSimulation] = None,
) -> MachineHandle:
    """The machine ``options`` name: a demo's simulated tree, ``--root`` or this machine.

    ``--root`` falls back to ``NPUWATCH_ROOT``, ``--npu-smi`` to ``NPUWATCH_NPU_SMI``; a root that
    is not a folder is a ``UsageError`` (a ``VariableError`` when the variable named it).  A tree's
    own npu-smi and libraries run only when it is trusted (``--trust-root``, written into the
    machine's environment as ``NPUWATCH_TRUST_ROOT=1``: ``probes.tree_trust``).
    ``pending``: the demo's machine already being built (``Simulation.begin``), taken over here.
    """
    options.validate()
    env = _env(environ)
    from npuwatch.probes.npu_smi import find_npu_smi, withheld_npu_smi
    from npuwatch.probes.sysroot import Sysroot

    if options.demo is not None:
        from npuwatch.probes.simulator import Simulation

        sim = pending.wait() if pending is not None else Simulation.start(options.demo)
        return MachineHandle(
            sim.sysroot(),
            sim.npu_smi,
            dict(sim.environ),
            scenario=sim.scenario.name,
            process_lookup=sim.process_lookup,
            dcmi_library=sim.dcmi_library,
            dcmi_kind=sim.dcmi_kind,
            _close=sim.close,
        )
    root = machine_root(options.root, env)
    if options.trust_root:
        from npuwatch.probes.tree_trust import TRUST_VARIABLE

        env = {**env, TRUST_VARIABLE: "1"}
    else:
        options.trusts_root(env)  # a bad NPUWATCH_TRUST_ROOT is a VariableError, never read as trust
    sysroot = Sysroot(root, environ=env)
    explicit = options.npu_smi or env.get("NPUWATCH_NPU_SMI")
    npu_smi = find_npu_smi(sysroot, explicit)
    withheld = None if explicit else withheld_npu_smi(sysroot)
    library = options.dcmi_lib or env.get("NPUWATCH_DCMI_LIB") or None
    return MachineHandle(sysroot, npu_smi, env, dcmi_library=library, npu_smi_withheld=withheld)


def open_feed(
    options: FeedOptions,
    environ: Optional[Mapping[str, str]] = None,
    pending: Optional[PendingSimulation] = None,
    *,
    deadline: Optional[float] = None,
) -> SnapshotFeed:
    """The SnapshotFeed ``options`` name: live, a demo, a replayed recording or a saved npu-smi text.

    Close it (or use it as a context manager): a demo's simulated machine lives until then.
    ``UsageError`` when the options contradict each other or name nothing usable.  ``pending``:
    the demo's machine already being built; the caller still closes it (a no-op once taken).
    ``deadline`` (``time.monotonic()``): a one-shot's end (``snapshot``): no npu-smi call runs past it.
    """
    options.validate()
    interval_s = options.interval(environ)
    if options.replays_recording:
        return _replay_recording(options)
    timeout_s = options.timeout(environ)
    backend = options.chip_backend(environ)
    machine = open_machine(options, environ, pending)
    try:
        return _sampler(options, machine, interval_s, timeout_s, backend, deadline)
    except BaseException:
        machine.close()
        raise


def _replay_recording(options: FeedOptions) -> SnapshotFeed:
    from npuwatch.recording import RecordingError
    from npuwatch.replay import ReplaySampler

    assert options.replay is not None
    try:
        return ReplaySampler.open(options.replay, speed=options.speed or 1.0, devices=options.devices)
    except RecordingError as exc:
        raise UsageError(str(exc)) from None


def _sampler(
    options: FeedOptions,
    machine: MachineHandle,
    interval_s: float,
    timeout_s: float,
    backend: str,
    deadline: Optional[float] = None,
) -> SnapshotFeed:
    if options.replay is not None:
        from npuwatch.probes.npu_smi.source import CaptureSource
        from npuwatch.sampler import Sampler

        try:
            capture = CaptureSource.open(Path(options.replay))
        except ValueError as exc:  # neither npu-smi text nor a recording
            raise UsageError(str(exc)) from None
        return Sampler(capture, machine.sysroot, None, interval_s=interval_s, devices=options.devices)
    source = chip_source(machine, backend, timeout_s, deadline=deadline)  # first: DCMI's worker starts
    try:
        from npuwatch.sampler import Sampler

        return Sampler(
            source,
            machine.sysroot,
            _host_probe(machine) if options.host else None,
            interval_s=interval_s,
            devices=options.devices,
            on_close=_closing(source, machine),
            about=_about(machine, backend),
        )
    except BaseException:
        from npuwatch.chip_source import close_source

        close_source(source)
        raise


def _about(machine: MachineHandle, backend: str) -> str:
    """A demo's own words on what it runs: which fake DCMI library, and npu-smi's script."""
    if machine.scenario is None:
        return ""
    if backend == "npu-smi":
        return f"demo {machine.scenario}: chips through a simulated npu-smi (--backend npu-smi)"
    library = machine.dcmi_kind or "no DCMI library"
    return f"demo {machine.scenario}: chips through {library}; a simulated npu-smi as the fallback"


def chip_source(
    machine: MachineHandle,
    backend: str,
    timeout_s: float,
    npu_smi: Optional[ChipSource] = None,
    *,
    deadline: Optional[float] = None,
) -> ChipSource:
    """The machine's chip source for ``backend``: npu-smi, DCMI, or DCMI falling back to npu-smi.

    ``timeout_s`` is one read's budget (docs/design.md §2.1 ``--timeout``): one npu-smi call, one DCMI
    read (its worker's start gets ``WORKER_START_GRACE_S`` more), and under ``auto`` both together
    (``FallbackSource`` reads npu-smi beside a DCMI read that has not answered within
    ``hedge_for(timeout_s)``), so a read ends within the timeout plus about a second whichever
    source hangs.  DCMI's worker process starts first, before anything else is imported, so it
    loads, initialises and enumerates while the rest is wired and its first reading is ready by
    the first tick.  ``npu_smi``: the npu-smi side to use (``npuwatch check`` reads it its own
    way); default, the sampler's, whose error-code queries (chips not OK) share
    ``ERROR_QUERIES_BUDGET_S`` a tick.  ``deadline``: a one-shot's end, no npu-smi call runs past it.
    """
    worker = None
    note = None
    if backend == "auto":
        backend, note = auto_backend(machine)
    if backend != "npu-smi":
        from npuwatch.probes.dcmi.worker import start_worker

        root = str(machine.sysroot.root)
        worker = start_worker(
            machine.dcmi_library,
            root,
            timeout_s,
            machine.environ,
            start_grace_s=WORKER_START_GRACE_S,
            restart_at_once=deadline is None,  # a one-shot reads once: no worker for a next read
        )
    try:
        if npu_smi is None:
            from npuwatch.probes.npu_smi.source import NpuSmiSource

            npu_smi = NpuSmiSource(
                machine.npu_smi(timeout_s, deadline),
                label=machine.label,
                errors_budget_s=min(timeout_s, ERROR_QUERIES_BUDGET_S),
            )
        if worker is None:
            if note is None:
                return npu_smi
            from npuwatch.chip_source import NotedSource

            return NotedSource(npu_smi, note)
        from npuwatch.fallback_source import FallbackSource, hedge_for
        from npuwatch.machine_chips import MachineChipsWatch
        from npuwatch.probes.dcmi.source import DcmiSource

        dcmi = DcmiSource(worker, label="dcmi" if machine.scenario is None else machine.label)
        return FallbackSource(
            dcmi,
            npu_smi,
            switching=backend == "auto",
            details=npu_smi,
            hedge_s=hedge_for(timeout_s),
            expected_chips=MachineChipsWatch(machine.sysroot),
        )
    except BaseException:
        if worker is not None:
            worker.close()
        raise


def auto_backend(machine: MachineHandle) -> Tuple[str, Optional[str]]:
    """``auto``'s backend on ``machine`` and the note that explains it: ``("auto", None)`` where a
    libdcmi.so may load; ``("npu-smi", None)`` on a machine without any (a few ``stat`` calls,
    where a worker that finds nothing costs a Python start and a failed tick a minute: such a
    machine simply reads npu-smi); ``("npu-smi", note)`` when an untrusted tree's library was held
    back (``--trust-root``)."""
    from npuwatch.probes.dcmi.search import absent, withheld

    root = str(machine.sysroot.root)
    held = withheld(machine.dcmi_library, root, machine.environ)
    if held is not None:
        return "npu-smi", f"dcmi: {held}: read through npu-smi"
    if absent(machine.dcmi_library, root, machine.environ) is not None:
        return "npu-smi", None
    return "auto", None


def _closing(source: ChipSource, machine: MachineHandle) -> Callable[[], None]:
    """Close the source (DCMI's worker) first, then the machine (a demo's tree)."""
    from npuwatch.chip_source import close_source

    def close() -> None:
        try:
            close_source(source)
        finally:
            machine.close()

    return close


def _host_probe(machine: MachineHandle) -> HostProbe:
    from npuwatch.probes.container import detect_container
    from npuwatch.probes.host import HostProbe

    container = detect_container(machine.sysroot)
    return HostProbe(
        lookup=machine.process_lookup,
        in_container=container.in_container,
        host_pid_namespace=container.host_pid_namespace,
    )


def parse_devices(devices: Any) -> Optional[FrozenSet[int]]:
    """NPU IDs given as ``"0,1,3"`` or an iterable of ints (the notebook's ``devices=``), or ``None``."""
    if devices is None:
        return None
    if isinstance(devices, str):
        try:
            return frozenset(parse_npu_ids(devices))
        except ValueError as exc:
            raise UsageError(f"devices: {exc}") from None
    try:
        ids = frozenset(int(device) for device in devices)
    except (TypeError, ValueError):
        raise UsageError(f"devices: expected NPU IDs like 0,1,3, got {devices!r}") from None
    if not ids or min(ids) < 0:
        raise UsageError(f"devices: expected NPU IDs like 0,1,3, got {devices!r}")
    return ids


class OpeningFeed:
    """``demo_fallback`` and ``open_feed`` on a thread, started at once, then the feed's first
    sample on the same thread.

    The dashboard opens its feed this way before it imports its toolkit: starting DCMI's worker
    process and taking the first sample overlap the import, so the first sample is ready by the
    first paint.  A demo named by the options has its tree built by a forked child
    (``Simulation.begin``), started here before the thread: its file writes then run beside the
    import instead of competing with it for the interpreter.  ``result()`` hands over the feed
    and the banner once the feed is open (raising what opening raised), never waiting for the
    first sample; ``first_sample()`` waits for that one (call it off the UI thread: a hung
    npu-smi holds it until its timeout); ``close()`` ends a feed nobody took.
    """

    def __init__(self, options: FeedOptions, environ: Optional[Mapping[str, str]] = None) -> None:
        self._outcome: Optional[Tuple[SnapshotFeed, str]] = None
        self._error: Optional[BaseException] = None
        self._taken = False
        self._thread: Optional[threading.Thread] = None
        self._opened = threading.Event()
        self._first: Optional[Tuple[Snapshot, float]] = None
        try:
            # A signal (npuwatch's raise SystemExit) waits until the thread owns what was started,
            # and is raised here, where close() can end it: never between a fork and the thread.
            with held_signals():
                decided = _fallback_now(options, environ)
                pending = _begin_demo(options if decided is None else decided[0])
                self._thread = threading.Thread(
                    target=self._open,
                    args=(options, environ, decided, pending),
                    name="npuwatch-open-feed",
                    daemon=True,
                )
                self._thread.start()
        except BaseException:
            self.close()
            raise

    def _open(
        self,
        options: FeedOptions,
        environ: Optional[Mapping[str, str]],
        decided: Optional[Tuple[FeedOptions, str]],
        pending: Optional[PendingSimulation],
    ) -> None:
        release_signals()  # what this thread starts (DCMI's worker) gets the usual signal mask
        try:
            chosen, banner = demo_fallback(options, environ) if decided is None else decided
            feed = open_feed(chosen, environ, pending if chosen.demo is not None else None)
            about = str(getattr(feed, "about", ""))
            self._outcome = (feed, " · ".join(part for part in (banner, about) if part))
        except BaseException as exc:  # handed to result()'s caller
            self._error = exc
            return
        finally:
            if pending is not None:
                pending.close()  # nothing once the feed took the tree
            self._opened.set()
        started = time.monotonic()
        try:
            self._first = (feed.sample(), time.monotonic() - started)
        except Exception:  # a bug in sampling: the dashboard samples again and says what it is
            self._first = None

    def result(self) -> Tuple[SnapshotFeed, str]:
        """The open feed and the banner; what opening raised (a ``UsageError``) is raised here."""
        assert self._thread is not None
        self._opened.wait()
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        self._taken = True
        return self._outcome

    def first_sample(self) -> Optional[Tuple[Snapshot, float]]:
        """The first snapshot the thread took once the feed opened, and the seconds it took: once
        (``None`` after that, when opening failed or sampling raised).  Waits for it."""
        if self._thread is not None:
            self._thread.join()
        first, self._first = self._first, None
        return first

    def close(self) -> None:
        """Close the feed if it opened and ``result()`` never handed it over (a taken feed is its
        owner's to close).  Never waits for the first sample: one still running ends with the
        closed feed, on its daemon thread."""
        if self._taken or self._thread is None:
            return
        self._opened.wait()
        self._taken = True
        if self._outcome is not None:
            self._outcome[0].close()


def _fallback_now(
    options: FeedOptions, environ: Optional[Mapping[str, str]]
) -> Optional[Tuple[FeedOptions, str]]:
    """``demo_fallback`` decided before the thread starts, so a demo standing in for a machine
    without an NPU is built in a child too; ``None`` when the options name a demo or a recording
    already, or when deciding failed (the thread asks again and hands the error to ``result()``)."""
    if options.demo is not None or options.replay is not None:
        return None
    try:
        return demo_fallback(options, environ)
    except Exception:
        return None


def _begin_demo(options: FeedOptions) -> Optional[PendingSimulation]:
    """The demo's machine, its build started in a child, when the options name a valid demo;
    ``None`` otherwise (opening then builds it, or says what is wrong, as ``open_feed`` does)."""
    if options.demo is None:
        return None
    try:
        options.validate()
        from npuwatch.probes.simulator.machine import Simulation

        return Simulation.begin(options.demo)
    except Exception:  # the same error comes again, with its usual words, from open_feed
        return None
