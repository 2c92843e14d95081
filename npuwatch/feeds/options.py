"""Provides the data-source options: ``shared_options()`` declares the flags, ``FeedOptions`` holds
them (from the command line, the environment or the notebook's keywords) and validates their
combinations once (docs/design.md §2.1); ``parse_devices`` reads the notebook's ``devices=``.

Imports only light things at the top: ``npuwatch check`` loads it (tests/core/test_check.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any, FrozenSet, Mapping, Optional, Tuple

from npuwatch.errors import UsageError, VariableError
from npuwatch.option_values import (
    MAX_SECONDS,
    env_seconds,
    npu_ids,
    parse_npu_ids,
    seconds,
    speed_factor,
)
from npuwatch.probes.simulator import DEFAULT_SCENARIO

#: The chip-data backends a feed can read (``--backend`` / ``NPUWATCH_BACKEND``): ``auto`` reads
#: through DCMI (in-process, ``libdcmi.so``) and falls back to npu-smi (``npuwatch.fallback_source``);
#: ``dcmi`` and ``npu-smi`` are explicit and never switch.
BACKENDS: Tuple[str, ...] = ("auto", "dcmi", "npu-smi")
DEFAULT_BACKEND = "auto"
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
        return env_seconds(environ_of(environ), "NPUWATCH_INTERVAL", DEFAULT_INTERVAL_S)

    def timeout(self, environ: Optional[Mapping[str, str]] = None) -> float:
        """``timeout_s``, else ``NPUWATCH_TIMEOUT``, else npu-smi's 5 s (``VariableError`` for a bad one)."""
        if self.timeout_s is not None:
            return self.timeout_s
        from npuwatch.probes.npu_smi import DEFAULT_TIMEOUT_S

        return env_seconds(environ_of(environ), "NPUWATCH_TIMEOUT", DEFAULT_TIMEOUT_S)

    def chip_backend(self, environ: Optional[Mapping[str, str]] = None) -> str:
        """``backend``, else ``NPUWATCH_BACKEND``, else ``auto`` (``VariableError`` for a bad variable)."""
        if self.backend is not None:
            return self.backend
        text = environ_of(environ).get("NPUWATCH_BACKEND", "").strip().lower()
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

        text = environ_of(environ).get(TRUST_VARIABLE, "")
        try:
            return trust_value(text)
        except ValueError as exc:
            raise VariableError(
                str(exc), TRUST_VARIABLE, "unset it, or set it to 1 to trust the tree"
            ) from None

    def names_a_source(self, environ: Optional[Mapping[str, str]] = None) -> bool:
        """Whether a source was chosen: an option, or ``NPUWATCH_ROOT`` / ``NPUWATCH_NPU_SMI`` /
        ``NPUWATCH_DCMI_LIB``."""
        env = environ_of(environ)
        chosen = (self.demo, self.replay, self.root, self.npu_smi, self.dcmi_lib)
        return any(value is not None for value in chosen) or bool(
            env.get("NPUWATCH_ROOT") or env.get("NPUWATCH_NPU_SMI") or env.get("NPUWATCH_DCMI_LIB")
        )


def environ_of(environ: Optional[Mapping[str, str]]) -> Mapping[str, str]:
    """``environ``, else the process's environment."""
    return os.environ if environ is None else environ


def _check_scenario(name: str) -> None:
    from npuwatch.probes.simulator import list_scenarios

    names = [scenario for scenario, _ in list_scenarios()]
    if name not in names:
        listed = ", ".join(names)
        raise UsageError(f"unknown demo scenario {name!r}; choose one of: {listed} (`--demo list` says more)")


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
