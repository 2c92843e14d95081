"""Provides the notebook API behind ``%npuwatch``: show() a live view, snapshot(), doctor(), selftest().

Every function takes the shared data-source options of the command line (DESIGN §2.1) as
keywords — ``demo`` (a scenario name, or True for the default one), ``replay``, ``root``,
``npu_smi``, ``devices``, ``interval_s``, ``timeout_s`` — and raises ``NotebookUsageError`` (a
``ValueError``) for a bad combination.  ipywidgets is needed only by ``show()``.
"""

from __future__ import annotations

import argparse
import os
import sys
import weakref
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Union

from npuwatch.option_values import MAX_SECONDS

if TYPE_CHECKING:
    from npuwatch.widgets.notebook.hub import SamplerHub
    from npuwatch.widgets.notebook.live_view import LiveView
    from npuwatch.widgets.notebook.reports import DoctorResult, SelftestResult, SnapshotResult

__all__ = ["NotebookUsageError", "doctor", "selftest", "show", "snapshot", "stop_all"]

#: How long show() waits for the first snapshot before returning (a hung npu-smi costs no more):
#: long enough that a healthy machine's view carries numbers in its text/html fallback too.
FIRST_SAMPLE_WAIT_S = 1.0
DEFAULT_HISTORY_MIN = 15.0

Devices = Union[str, Iterable[int], None]
_VIEWS: weakref.WeakSet[LiveView] = weakref.WeakSet()


class NotebookUsageError(ValueError):
    """Options that contradict each other or name nothing (the magic prints it as one line)."""


def _devices(devices: Devices) -> Optional[List[int]]:
    if devices is None:
        return None
    if isinstance(devices, str):
        try:
            ids = [int(part) for part in devices.split(",") if part.strip()]
        except ValueError:
            raise NotebookUsageError(f"devices: expected NPU IDs like 0,1,3, got {devices!r}") from None
    else:
        ids = [int(device) for device in devices]
    if not ids or any(i < 0 for i in ids):
        raise NotebookUsageError(f"devices: expected NPU IDs like 0,1,3, got {devices!r}")
    return ids


def _demo(demo: Union[str, bool, None]) -> Optional[str]:
    if demo is None or demo is False:
        return None
    if demo is True:
        from npuwatch.probes.simulator import DEFAULT_SCENARIO

        return DEFAULT_SCENARIO
    return str(demo)


def _positive(name: str, value: Optional[float], maximum: float = MAX_SECONDS) -> Optional[float]:
    """The same bounds as the command line's options: above 0, finite, at most ``maximum``."""
    if value is not None and not 0 < value <= maximum:
        raise NotebookUsageError(f"{name} must be more than 0 and at most {maximum:g}, got {value!r}")
    return value


def feed_options(
    *,
    demo: Union[str, bool, None] = None,
    replay: Optional[str] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    devices: Devices = None,
    interval_s: Optional[float] = None,
    timeout_s: Optional[float] = None,
    speed: Optional[float] = None,
) -> Dict[str, Any]:
    """``build_sampler`` keywords from the shared options, checked as the CLI checks them.

    ``interval_s`` is resolved (``NPUWATCH_INTERVAL``, else 1 s) so equal views share a sampler.
    """
    from npuwatch.option_values import env_seconds
    from npuwatch.probes.simulator import list_scenarios
    from npuwatch.sampler_options import SamplerUsageError, sampler_options

    scenario = _demo(demo)
    if scenario is not None and scenario not in {name for name, _ in list_scenarios()}:
        names = ", ".join(name for name, _ in list_scenarios())
        raise NotebookUsageError(f"unknown demo scenario {scenario!r}; choose one of: {names}")
    namespace = argparse.Namespace(
        demo=scenario,
        replay=None if replay is None else str(replay),
        root=None if root is None else str(root),
        npu_smi=npu_smi,
        devices=_devices(devices),
        interval=_positive("interval_s", interval_s),
        timeout=_positive("timeout_s", timeout_s),
        speed=_positive("speed", speed, maximum=sys.float_info.max),
    )
    try:
        options = sampler_options(namespace)
        if options["interval_s"] is None:
            options["interval_s"] = env_seconds(os.environ, "NPUWATCH_INTERVAL", 1.0)
    except (SamplerUsageError, ValueError) as exc:
        raise NotebookUsageError(str(exc).splitlines()[0]) from None
    return options


def show(
    *,
    demo: Union[str, bool, None] = None,
    replay: Optional[str] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    devices: Devices = None,
    interval_s: Optional[float] = None,
    timeout_s: Optional[float] = None,
    speed: Optional[float] = None,
    history_min: float = DEFAULT_HISTORY_MIN,
    layout: str = "auto",
    wait_s: float = FIRST_SAMPLE_WAIT_S,
    hub: Optional[SamplerHub] = None,
) -> LiveView:
    """A live view (display it, or let the cell show it); ``.stop()`` ends it.

    Sampling runs on a background thread shared by views with the same options; this returns
    after the first snapshot or ``wait_s`` seconds, whichever is first, and the view shows
    "sampling…" until the first snapshot.  Without an NPU and with no source named, the view
    shows the demo machine, as the terminal dashboard does.  ``layout``: ``cards`` (a card per
    chip), ``table`` (a row per chip) or ``auto`` (the table above 8 chips); a toggle in the
    view switches between them.
    """
    from npuwatch.live_text import demo_fallback
    from npuwatch.probes.torch_memory import own_memory
    from npuwatch.widgets.notebook.live_view import LiveView, import_ipywidgets
    from npuwatch.widgets.notebook.layout import resolve_layout

    import_ipywidgets()  # the clear "pip install 'npuwatch[jupyter]'" error before any work
    if not history_min > 0:
        raise NotebookUsageError(f"history must be more than 0 minutes, got {history_min!r}")
    try:
        resolve_layout(layout, 0)
    except ValueError as exc:
        raise NotebookUsageError(str(exc)) from None
    options = feed_options(
        demo=demo,
        replay=replay,
        root=root,
        npu_smi=npu_smi,
        devices=devices,
        interval_s=interval_s,
        timeout_s=timeout_s,
        speed=speed,
    )
    options, banner = demo_fallback(options)
    view = LiveView(
        options,
        interval_s=options["interval_s"],
        history_min=history_min,
        banner=banner,
        hub=hub,
        layout=layout,
        read_own_memory=own_memory,
    )
    _VIEWS.add(view)
    if wait_s > 0:
        view.wait_first(wait_s)
    return view


def stop_all() -> int:
    """Stop every live view of this kernel; returns how many were running."""
    running = [view for view in list(_VIEWS) if view.running]
    for view in running:
        view.stop()
    return len(running)


def snapshot(
    *,
    demo: Union[str, bool, None] = None,
    replay: Optional[str] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    devices: Devices = None,
    timeout_s: Optional[float] = None,
) -> SnapshotResult:
    """One sample, shown as an HTML table (``.snapshot`` is the Snapshot).

    It waits for npu-smi as ``npuwatch snapshot`` does, at most ``timeout_s`` (default 5 s).
    """
    from npuwatch.availability import no_data_reason
    from npuwatch.widgets.notebook.reports import SnapshotResult
    from npuwatch.wiring import build_sampler

    options = feed_options(
        demo=demo, replay=replay, root=root, npu_smi=npu_smi, devices=devices, timeout_s=timeout_s
    )
    with build_sampler(**options) as sampler:
        taken = sampler.sample()
    return SnapshotResult(taken, no_data_reason(taken))


def doctor(
    *,
    demo: Union[str, bool, None] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    timeout_s: Optional[float] = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    verbose: bool = False,
) -> DoctorResult:
    """The environment diagnosis as an HTML report with statuses and fixes (``.report``)."""
    from npuwatch.doctor.command import DoctorUsageError, doctor_title, open_machine
    from npuwatch.doctor.engine import run_doctor
    from npuwatch.doctor.registry import all_checks, select
    from npuwatch.widgets.notebook.reports import DoctorResult

    feed_options(demo=demo, root=root, npu_smi=npu_smi, timeout_s=timeout_s)  # same checks as the CLI
    if root is not None and not os.path.isdir(root):
        raise NotebookUsageError(f"root {root}: no such directory")
    try:
        chosen = select(all_checks(), tuple(only), tuple(skip))
    except ValueError as exc:
        raise NotebookUsageError(str(exc)) from None
    args = argparse.Namespace(demo=_demo(demo), root=root, npu_smi=npu_smi, timeout=timeout_s)
    with ExitStack() as stack:
        try:
            # The CLI's own wiring: a demo's tree, --root, or this machine (DESIGN §3).
            machine, about = open_machine(args, stack, verbose)
        except DoctorUsageError as exc:
            raise NotebookUsageError(str(exc)) from None
        report = run_doctor(machine, chosen)
    return DoctorResult(report, doctor_title(about), about)


def selftest(
    *,
    device: Union[str, int, Sequence[int]] = "all",
    level: str = "quick",
    backend: str = "auto",
    timeout_s: Optional[float] = None,
    demo: Union[str, bool, None] = None,
    root: Optional[str] = None,
    progress: bool = True,
) -> SelftestResult:
    """The runtime self-test (child processes with hard timeouts), progress shown while it runs."""
    from npuwatch.selftest.orchestrate import SelftestUsageError, run_selftest
    from npuwatch.widgets.notebook.reports import SelftestResult

    scenario = _demo(demo)
    feed_options(demo=scenario, root=root, timeout_s=timeout_s)
    if scenario is not None:
        from npuwatch.selftest.command import demo_report

        args = argparse.Namespace(demo=scenario, level=level, backend=backend, timeout_per_device=timeout_s)
        return SelftestResult(demo_report(args))
    from npuwatch.probes.sysroot import Sysroot

    where = root or os.environ.get("NPUWATCH_ROOT") or "/"
    if not os.path.isdir(where):
        raise NotebookUsageError(f"root {where}: no such directory")
    shown = _Progress() if progress else None
    try:
        report = run_selftest(
            devices=device,
            level=level,
            backend=backend,
            timeout_s=timeout_s,
            sysroot=Sysroot(where),
            on_progress=shown.event if shown else None,
        )
    except SelftestUsageError as exc:
        raise NotebookUsageError(str(exc)) from None
    finally:
        if shown is not None:
            shown.close()
    return SelftestResult(report)


class _Progress:
    """The step each device is at, in an output that updates while the self-test runs.

    An ipywidgets HTML widget when available (its updates are comm messages, safe from the
    watcher thread); otherwise nothing live, as a plain IPython display cannot be updated
    reliably from another thread.
    """

    def __init__(self) -> None:
        self.steps: Dict[int, str] = {}
        self.widget: Any = None
        try:
            import ipywidgets  # type: ignore[import-untyped]
            from IPython.display import display

            from npuwatch.widgets.notebook.reports import progress_html
        except ImportError:
            return
        self.widget = ipywidgets.HTML(progress_html({}))
        self.widget.add_class("npuwatch-selftest-progress")
        display(self.widget)

    def event(self, device: int, event: Dict[str, Any]) -> None:
        from npuwatch.probes.runtime.protocol import Step
        from npuwatch.widgets.notebook.reports import progress_html

        kind = event.get("event")
        if kind == "start":
            try:
                self.steps[device] = Step(event.get("step")).title
            except ValueError:
                return
        elif kind == "call" and device in self.steps:
            self.steps[device] = self.steps[device].split(" (", 1)[0] + f" ({event.get('name')})"
        else:
            return
        if self.widget is not None:
            self.widget.value = progress_html(self.steps)

    def close(self) -> None:
        if self.widget is not None:
            self.widget.close()  # the results replace the progress
