"""Provides ``open_feed()``: the SnapshotFeed the options name, wired on the machine they open (a
``Sampler`` over its chip source and host), or over a recording or a saved npu-smi text.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from npuwatch.errors import UsageError
from npuwatch.feeds.chips import chip_source
from npuwatch.feeds.machine import open_machine
from npuwatch.feeds.machine_handle import MachineHandle
from npuwatch.feeds.options import FeedOptions

if TYPE_CHECKING:
    from npuwatch.chip_source import ChipSource
    from npuwatch.feed import SnapshotFeed
    from npuwatch.probes.host import HostProbe
    from npuwatch.probes.simulator.machine import PendingSimulation


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
