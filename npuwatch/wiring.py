"""Provides build_sampler(): wires a Sampler for this machine, a demo scenario or a replayed capture."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Optional, Union

from npuwatch.chip_details import fetch_chip_details
from npuwatch.feed import SnapshotFeed
from npuwatch.option_values import env_seconds, machine_root
from npuwatch.probes.container import detect_container
from npuwatch.probes.host import HostProbe, ProcessLookup
from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S, NpuSmi, find_npu_smi
from npuwatch.probes.sysroot import Sysroot
from npuwatch.recording import RecordingError, is_recording
from npuwatch.replay import ReplaySampler
from npuwatch.sampler import Sampler
from npuwatch.sampler_options import SamplerUsageError
from npuwatch.sources import CaptureSource, NpuSmiSource


def build_sampler(
    *,
    demo: Optional[str] = None,
    replay: Union[str, Path, None] = None,
    root: Union[str, Path, None] = None,
    npu_smi: Optional[str] = None,
    timeout_s: Optional[float] = None,
    interval_s: Optional[float] = None,
    devices: Optional[Iterable[int]] = None,
    environ: Optional[Mapping[str, str]] = None,
    host: bool = True,
    speed: Optional[float] = None,
) -> SnapshotFeed:
    """A Sampler wired from the DESIGN §2.1 options; unset ones fall back to ``NPUWATCH_*``.

    ``demo`` starts a simulated machine (a sysroot with a fake npu-smi) that lives until the
    sampler is closed.  ``replay`` plays a recording (NDJSON from ``npuwatch record``) at
    ``speed`` × its pace, or parses a saved ``npu-smi info`` text as the live path would.
    """
    env = os.environ if environ is None else environ
    timeout = timeout_s if timeout_s is not None else env_seconds(env, "NPUWATCH_TIMEOUT", DEFAULT_TIMEOUT_S)
    interval = interval_s if interval_s is not None else env_seconds(env, "NPUWATCH_INTERVAL", 1.0)
    wanted = None if devices is None else frozenset(devices)
    if speed is not None and (replay is None or not is_recording(replay)):
        raise SamplerUsageError("--speed applies only to --replay of a recording made by `npuwatch record`")
    if replay is not None and is_recording(replay):
        try:
            return ReplaySampler.open(replay, speed=1.0 if speed is None else speed, devices=wanted)
        except RecordingError as exc:
            raise SamplerUsageError(str(exc)) from None
    if demo is not None:
        return _demo_sampler(demo, timeout, interval, wanted, host)
    sysroot = Sysroot(machine_root(None if root is None else str(root), env), environ=env)
    if replay is not None:
        source = CaptureSource.open(Path(replay))
        return Sampler(source, sysroot, None, interval_s=interval, devices=wanted)
    path = find_npu_smi(sysroot, npu_smi or env.get("NPUWATCH_NPU_SMI"))
    npu_smi_obj = NpuSmi(path, timeout_s=timeout)
    live = NpuSmiSource(npu_smi_obj)
    probe = _host_probe(sysroot) if host else None
    return Sampler(
        live,
        sysroot,
        probe,
        interval_s=interval,
        devices=wanted,
        details=lambda npu, chip: fetch_chip_details(npu_smi_obj, npu, chip),
    )


def _demo_sampler(
    scenario: str,
    timeout_s: float,
    interval_s: float,
    devices: Optional[frozenset[int]],
    host: bool,
) -> Sampler:
    from npuwatch.probes.simulator import Simulation

    sim = Simulation.start(scenario)
    try:
        sysroot = Sysroot(sim.root, environ=sim.environ)
        npu_smi_obj = NpuSmi(sim.npu_smi, timeout_s=timeout_s)
        source = NpuSmiSource(npu_smi_obj, label=f"demo:{sim.scenario.name}")
        probe = _host_probe(sysroot, sim.process_lookup) if host else None
    except BaseException:
        sim.close()
        raise
    return Sampler(
        source,
        sysroot,
        probe,
        interval_s=interval_s,
        devices=devices,
        on_close=sim.close,
        details=lambda npu, chip: fetch_chip_details(npu_smi_obj, npu, chip),
    )


def _host_probe(sysroot: Sysroot, lookup: Optional[ProcessLookup] = None) -> HostProbe:
    container = detect_container(sysroot)
    return HostProbe(
        lookup=lookup,
        in_container=container.in_container,
        host_pid_namespace=container.host_pid_namespace,
    )
