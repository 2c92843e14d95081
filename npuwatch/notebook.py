"""Provides the notebook API behind ``%npuwatch``: show() a live view, snapshot(), doctor(), selftest().

Every function takes the shared data-source options of the command line (docs/design.md §2.1) as
keywords — ``demo`` (a scenario name, or True for the default one), ``replay``, ``root``,
``npu_smi``, ``devices``, ``interval_s``, ``timeout_s`` — and raises ``NotebookUsageError`` (a
``ValueError``: ``npuwatch.errors.UsageError``) for a bad value or combination.  The keywords
become one ``npuwatch.feeds.FeedOptions``, checked by the same rules as the command line; the
``%npuwatch`` magic builds that record from its parsed line and calls the ``*_for`` functions.
ipywidgets is needed only by ``show()``.
"""

from __future__ import annotations

import argparse
import sys
import weakref
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, NoReturn, Optional, Sequence, Union

from npuwatch.errors import UsageError
from npuwatch.feeds import FeedOptions, open_machine, parse_devices

if TYPE_CHECKING:
    from npuwatch.widgets.notebook.fleet_view import FleetView
    from npuwatch.widgets.notebook.hub import SamplerHub
    from npuwatch.widgets.notebook.live_view import LiveView
    from npuwatch.widgets.notebook.reports import DoctorResult, SelftestResult, SnapshotResult

__all__ = ["NotebookUsageError", "doctor", "fleet", "selftest", "show", "snapshot", "stop_all"]

#: How long show() waits for the first snapshot before returning (a hung npu-smi costs no more):
#: long enough that a healthy machine's view carries numbers in its text/html fallback too.
FIRST_SAMPLE_WAIT_S = 1.0
DEFAULT_HISTORY_MIN = 15.0

#: The notebook API's name for the one usage error: what a bad keyword or combination raises.
NotebookUsageError = UsageError

Devices = Union[str, Iterable[int], None]
_VIEWS: weakref.WeakSet[LiveView] = weakref.WeakSet()


def source_options(
    *,
    demo: Union[str, bool, None] = None,
    replay: Optional[str] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    devices: Devices = None,
    interval_s: Optional[float] = None,
    timeout_s: Optional[float] = None,
    speed: Optional[float] = None,
    backend: Optional[str] = None,
    dcmi_lib: Optional[str] = None,
) -> FeedOptions:
    """The API's keywords as validated FeedOptions (``demo=True`` is the default scenario)."""
    if demo is True:
        from npuwatch.probes.simulator import DEFAULT_SCENARIO

        demo = DEFAULT_SCENARIO
    return FeedOptions(
        demo=None if demo is None or demo is False else str(demo),
        replay=None if replay is None else str(replay),
        root=None if root is None else str(root),
        npu_smi=None if npu_smi is None else str(npu_smi),
        devices=parse_devices(devices),
        interval_s=interval_s,
        timeout_s=timeout_s,
        speed=speed,
        backend=backend,
        dcmi_lib=None if dcmi_lib is None else str(dcmi_lib),
    ).validate()


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
    backend: Optional[str] = None,
    dcmi_lib: Optional[str] = None,
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
    options = source_options(
        demo=demo,
        replay=replay,
        root=root,
        npu_smi=npu_smi,
        devices=devices,
        interval_s=interval_s,
        timeout_s=timeout_s,
        speed=speed,
        backend=backend,
        dcmi_lib=dcmi_lib,
    )
    return show_for(options, history_min=history_min, layout=layout, wait_s=wait_s, hub=hub)


def show_for(
    options: FeedOptions,
    *,
    history_min: float = DEFAULT_HISTORY_MIN,
    layout: str = "auto",
    wait_s: float = FIRST_SAMPLE_WAIT_S,
    hub: Optional[SamplerHub] = None,
) -> LiveView:
    """``show()`` for options already gathered (the magic's)."""
    from dataclasses import replace

    from npuwatch.feeds import demo_fallback
    from npuwatch.probes.torch_memory import own_memory
    from npuwatch.widgets.notebook.layout import resolve_layout
    from npuwatch.widgets.notebook.live_view import LiveView, import_ipywidgets

    import_ipywidgets()  # the clear "pip install 'npuwatch[jupyter]'" error before any work
    if not history_min > 0:
        raise NotebookUsageError(f"history must be more than 0 minutes, got {history_min!r}")
    try:
        resolve_layout(layout, 0)
    except ValueError as exc:
        raise NotebookUsageError(str(exc)) from None
    # The interval resolved now (NPUWATCH_INTERVAL, else 1 s), so equal views share a sampler.
    options, banner = demo_fallback(replace(options, interval_s=options.interval()))
    interval_s = options.interval()
    view = LiveView(
        options,
        interval_s=interval_s,
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
    """Stop every live view (fleet views too) of this kernel; returns how many were running."""
    running = [view for view in list(_VIEWS) if view.running]
    for view in running:
        view.stop()
    fleets = 0
    if "npuwatch.widgets.notebook.fleet_view" in sys.modules:  # none ran unless it was imported
        from npuwatch.widgets.notebook.fleet_view import stop_all as stop_fleets

        fleets = stop_fleets()
    return len(running) + fleets


def fleet(
    *,
    prometheus: Optional[str] = None,
    hosts: Union[str, Sequence[str], None] = None,
    replay: Optional[str] = None,
    selector: Optional[str] = None,
    node_label: Optional[str] = None,
    basic_auth: Optional[str] = None,
    bearer_token_file: Optional[str] = None,
    ca_file: Optional[str] = None,
    insecure: bool = False,
    interval: Optional[float] = None,
    timeout: Optional[float] = None,
    lookback: Optional[float] = None,
    stale_after: Optional[float] = None,
    speed: Optional[float] = None,
    sort: str = "worst",
    wait_s: float = FIRST_SAMPLE_WAIT_S,
) -> FleetView:
    """A live table of the fleet's nodes, worst first (display it, or let the cell show it);
    ``.stop()`` ends it.  The options are ``npuwatch fleet``'s (``prometheus=URL``, ``hosts=`` a
    ``host:port,…`` string or a list, ``replay=FILE``, ``selector='{job="npu"}'``, ``interval=`` s …),
    checked by the same parser.  Returns after the first refresh or ``wait_s`` seconds."""
    words: List[str] = []
    given = {
        "prometheus": prometheus,
        "hosts": hosts if hosts is None or isinstance(hosts, str) else ",".join(hosts),
        "replay": replay,
        "selector": selector,
        "node-label": node_label,
        "basic-auth": basic_auth,
        "bearer-token-file": bearer_token_file,
        "ca-file": ca_file,
        "insecure": insecure,
        "interval": interval,
        "timeout": timeout,
        "lookback": lookback,
        "stale-after": stale_after,
        "speed": speed,
    }
    for name, value in given.items():
        if value is True:
            words.append(f"--{name}")
        elif value is not None and value is not False:
            words += [f"--{name}", str(value)]
    return fleet_for(fleet_parser().parse_args(words), sort=sort, wait_s=wait_s)


class _FleetParser(argparse.ArgumentParser):
    """``npuwatch fleet``'s options; a bad one raises NotebookUsageError instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise NotebookUsageError(f"fleet: {message}")


def fleet_parser(parser: Optional[argparse.ArgumentParser] = None) -> argparse.ArgumentParser:
    """``npuwatch fleet``'s options on ``parser`` (a new one that raises NotebookUsageError)."""
    from npuwatch.fleet.command import add_arguments

    parser = parser or _FleetParser(prog="npuwatch.notebook.fleet", add_help=False)
    add_arguments(parser)
    return parser


def fleet_for(
    args: argparse.Namespace, *, sort: str = "worst", wait_s: float = FIRST_SAMPLE_WAIT_S
) -> FleetView:
    """``fleet()`` for options already parsed (the magic's)."""
    from npuwatch.fleet.command import open_fleet_feed
    from npuwatch.widgets.notebook.fleet_view import FleetView
    from npuwatch.widgets.notebook.live_view import import_ipywidgets

    import_ipywidgets()  # the clear "pip install 'npuwatch[jupyter]'" error before any work
    for name in ("json", "record"):
        if getattr(args, name, None):
            raise NotebookUsageError(
                f"fleet --{name} is the command line's (npuwatch fleet --{name}); in a notebook fleet is the "
                "live table (its .fleet is the latest FleetSnapshot)"
            )
    feed = open_fleet_feed(args)  # a bad combination raises its usage error (a NotebookUsageError)
    try:
        view = FleetView(feed, sort=sort)
    except ValueError as exc:
        feed.close()
        raise NotebookUsageError(str(exc)) from None
    if wait_s > 0:
        view.wait_first(wait_s)
    return view


def snapshot(
    *,
    demo: Union[str, bool, None] = None,
    replay: Optional[str] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    devices: Devices = None,
    timeout_s: Optional[float] = None,
    backend: Optional[str] = None,
    dcmi_lib: Optional[str] = None,
) -> SnapshotResult:
    """One sample, shown as an HTML table (``.snapshot`` is the Snapshot).

    It waits for the chips as ``npuwatch snapshot`` does, at most ``timeout_s`` (default 5 s);
    ``backend`` is ``auto`` (DCMI, else npu-smi), ``dcmi`` or ``npu-smi`` (``NPUWATCH_BACKEND``).
    """
    options = source_options(
        demo=demo,
        replay=replay,
        root=root,
        npu_smi=npu_smi,
        devices=devices,
        timeout_s=timeout_s,
        backend=backend,
        dcmi_lib=dcmi_lib,
    )
    return snapshot_for(options)


def snapshot_for(options: FeedOptions) -> SnapshotResult:
    """``snapshot()`` for options already gathered (the magic's)."""
    from npuwatch.availability import no_data_reason
    from npuwatch.feeds import open_feed
    from npuwatch.widgets.notebook.reports import SnapshotResult

    with open_feed(options) as sampler:
        taken = sampler.sample()
    return SnapshotResult(taken, no_data_reason(taken))


def doctor(
    *,
    demo: Union[str, bool, None] = None,
    root: Optional[str] = None,
    npu_smi: Optional[str] = None,
    timeout_s: Optional[float] = None,
    dcmi_lib: Optional[str] = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    verbose: bool = False,
) -> DoctorResult:
    """The environment diagnosis as an HTML report with statuses and fixes (``.report``)."""
    options = source_options(demo=demo, root=root, npu_smi=npu_smi, timeout_s=timeout_s, dcmi_lib=dcmi_lib)
    return doctor_for(options, only=only, skip=skip, verbose=verbose)


def doctor_for(
    options: FeedOptions, *, only: Sequence[str] = (), skip: Sequence[str] = (), verbose: bool = False
) -> DoctorResult:
    """``doctor()`` for options already gathered (the magic's)."""
    from npuwatch.doctor.command import choose_checks, diagnose, doctor_title
    from npuwatch.widgets.notebook.reports import DoctorResult

    chosen = choose_checks(only, skip)
    with open_machine(options) as handle:  # the CLI's wiring: a demo's tree, --root or this machine
        report, about = diagnose(handle, options, chosen, verbose=verbose)
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
    options = source_options(demo=demo, root=root, timeout_s=timeout_s)
    return selftest_for(options, device=device, level=level, backend=backend, progress=progress)


def selftest_for(
    options: FeedOptions,
    *,
    device: Union[str, int, Sequence[int]] = "all",
    level: str = "quick",
    backend: str = "auto",
    progress: bool = True,
) -> SelftestResult:
    """``selftest()`` for options already gathered (the magic's); ``options.timeout_s`` is per device."""
    from npuwatch.selftest.command import demo_report
    from npuwatch.selftest.orchestrate import run_selftest
    from npuwatch.widgets.notebook.reports import SelftestResult

    if options.demo is not None:
        return SelftestResult(demo_report(options.demo, level, backend, options.timeout_s))
    with open_machine(options) as machine:
        shown = _Progress() if progress else None
        try:
            report = run_selftest(
                devices=device,
                level=level,
                backend=backend,
                timeout_s=options.timeout_s,
                sysroot=machine.sysroot,
                on_progress=shown.event if shown else None,
            )
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
