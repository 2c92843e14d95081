"""Provides ``npuwatch fleet``: many nodes' NPUs through Prometheus, their ``npuwatch serve``, or a recording.

One-shot (``--json``): one ``npuwatch/fleet/v1`` document on stdout; exit 0 when every node is
current, 1 with one line per problem on stderr (the source failed — unreachable, not a Prometheus
API, 401/403, a timeout, no NPU series —, a node is stale, a node's clock is off, series were
skipped).  ``--record FILE`` writes one document per refresh.  Without either: the live view.
Nothing is written to Prometheus or to the nodes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, List

from npuwatch.errors import UsageError
from npuwatch.option_values import duration, seconds, speed_factor

if TYPE_CHECKING:
    from npuwatch.fleet.feed import FleetFeed, FleetSource, PrometheusSource, ReplaySource
    from npuwatch.fleet.hosts import HostsSource
    from npuwatch.fleet.model import FleetSnapshot

EXIT_PROBLEM = 1
EXIT_NO_VIEW = 2
DEFAULT_INTERVAL_S = 5.0
DEFAULT_TIMEOUT_S = 10.0
#: The basic-auth password when ``--basic-auth`` names only the user (kept out of ``ps``).
PASSWORD_VARIABLE = "NPUWATCH_PROMETHEUS_PASSWORD"


class FleetUsageError(UsageError):
    """A bad ``fleet`` option: the CLI's exit 64."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``fleet`` options."""
    source = parser.add_argument_group("where the fleet is read (one of)")
    source.add_argument("--prometheus", metavar="URL", help="the Prometheus that scrapes the nodes")
    source.add_argument(
        "--hosts",
        metavar="LIST",
        help="host:port,… of each node's `npuwatch serve` (port 9492 by default), or @FILE of them",
    )
    source.add_argument("--replay", metavar="FILE", help="play a fleet recording (`npuwatch fleet --record`)")
    prom = parser.add_argument_group("Prometheus")
    prom.add_argument(
        "--selector",
        metavar="MATCHERS",
        help='label matchers of the NPU series, e.g. {job="npu"} (then a target with no NPU series is a '
        "node too: shown stale)",
    )
    prom.add_argument(
        "--node-label",
        metavar="LABEL",
        help="the label naming a node (default: node, node_name, nodename, kubernetes_node, hostname, "
        "else instance)",
    )
    auth = prom.add_mutually_exclusive_group()
    auth.add_argument(
        "--basic-auth",
        metavar="USER:PASSWORD",
        help="HTTP basic authentication (or USER alone, the password in NPUWATCH_PROMETHEUS_PASSWORD)",
    )
    auth.add_argument("--bearer-token-file", metavar="FILE", help="send the token in FILE as a bearer token")
    tls = prom.add_mutually_exclusive_group()
    tls.add_argument("--ca-file", metavar="FILE", help="trust this CA bundle for https")
    tls.add_argument("--insecure", action="store_true", help="do not verify the TLS certificate")
    prom.add_argument(
        "--lookback",
        type=seconds,
        metavar="S",
        default=300.0,
        help="how far back a node that stopped reporting is still shown (default 300)",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one npuwatch/fleet/v1 JSON document and exit")
    out.add_argument("--record", metavar="FILE", help="record fleet snapshots to FILE (gzip when .gz)")
    out.add_argument("--duration", type=duration, metavar="S", help="with --record: stop after S seconds")
    out.add_argument("--force", action="store_true", help="with --record: replace FILE when it exists")
    out.add_argument("--speed", type=speed_factor, metavar="X", help="with --replay: X times faster")
    timing = parser.add_argument_group("timing")
    timing.add_argument(
        "--interval",
        type=seconds,
        metavar="S",
        help=f"seconds between refreshes (default {DEFAULT_INTERVAL_S:g})",
    )
    timing.add_argument(
        "--timeout",
        type=seconds,
        metavar="S",
        help=f"limit for one refresh, all its queries or nodes' answers (default {DEFAULT_TIMEOUT_S:g}; "
        "--hosts: 5)",
    )
    timing.add_argument(
        "--stale-after",
        dest="stale_after",
        type=seconds,
        metavar="S",
        default=60.0,
        help="a node whose newest sample is older is stale (default 60)",
    )
    parser.add_argument("--verbose", action="store_true", help="show tracebacks of internal errors")


def open_fleet_feed(args: argparse.Namespace) -> FleetFeed:
    """The FleetFeed the options name (``FleetUsageError`` for a bad combination or value)."""
    from npuwatch.fleet.feed import FleetFeed

    chosen = [name for name in ("prometheus", "hosts", "replay") if getattr(args, name, None)]
    if len(chosen) != 1:
        raise FleetUsageError(
            "fleet: give one of --prometheus URL, --hosts host:port,… or --replay FILE"
            + (f" (got {', '.join('--' + c for c in chosen)})" if chosen else "")
        )
    interval = getattr(args, "interval", None) or DEFAULT_INTERVAL_S
    source: FleetSource
    if chosen[0] == "replay":
        source = _replay_source(args)
    elif chosen[0] == "hosts":
        source = _hosts_source(args)
    else:
        source = _prometheus_source(args)
    return FleetFeed(source, interval)


def _replay_source(args: argparse.Namespace) -> ReplaySource:
    from npuwatch.fleet.feed import ReplaySource
    from npuwatch.recording import RecordingError

    try:
        return ReplaySource(args.replay, getattr(args, "speed", None) or 1.0)
    except RecordingError as exc:
        raise FleetUsageError(f"fleet --replay: {exc}") from None


def _hosts_source(args: argparse.Namespace) -> HostsSource:
    from npuwatch.fleet.hosts import HostsSource, parse_hosts

    try:
        hosts = parse_hosts(args.hosts)
    except ValueError as exc:
        raise FleetUsageError(f"fleet --hosts: {exc}") from None
    timeout = getattr(args, "timeout", None) or 5.0
    return HostsSource(hosts, timeout_s=timeout, stale_after_s=args.stale_after)


def _prometheus_source(args: argparse.Namespace) -> PrometheusSource:
    from npuwatch.fleet.feed import PrometheusSource
    from npuwatch.fleet.prometheus import Auth, Prometheus
    from npuwatch.fleet.series import selector_matchers

    try:
        matchers = selector_matchers(getattr(args, "selector", None))
    except ValueError as exc:
        raise FleetUsageError(f"fleet --selector: {exc}") from None
    auth = Auth()
    if getattr(args, "basic_auth", None):
        user, colon, password = args.basic_auth.partition(":")
        if not colon and os.environ.get(PASSWORD_VARIABLE) is not None:
            colon, password = ":", os.environ[PASSWORD_VARIABLE]
        if not colon or not user:
            raise FleetUsageError(
                f"fleet --basic-auth: expected USER:PASSWORD, or USER with {PASSWORD_VARIABLE} set"
            )
        auth = Auth(basic=(user, password))
    elif getattr(args, "bearer_token_file", None):
        auth = Auth(bearer_token=_token(args.bearer_token_file))
    ca_file = getattr(args, "ca_file", None)
    if ca_file and not os.path.isfile(ca_file):
        raise FleetUsageError(f"fleet --ca-file: no such file: {ca_file}")
    try:
        client = Prometheus(
            args.prometheus,
            timeout_s=getattr(args, "timeout", None) or DEFAULT_TIMEOUT_S,
            auth=auth,
            ca_file=ca_file,
            insecure=bool(getattr(args, "insecure", False)),
        )
    except (ValueError, OSError) as exc:
        raise FleetUsageError(f"fleet --prometheus: {exc}") from None
    return PrometheusSource(
        client,
        matchers=matchers,
        lookback_s=args.lookback,
        stale_after_s=args.stale_after,
        node_label=getattr(args, "node_label", None),
    )


def _token(path: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise FleetUsageError(
            f"fleet --bearer-token-file: cannot read {path}: {exc.strerror or exc}"
        ) from None
    if not token or any(c.isspace() for c in token):
        raise FleetUsageError(f"fleet --bearer-token-file: {path} holds no single token")
    return token


def run(args: argparse.Namespace) -> int:
    """Run ``npuwatch fleet``."""
    if getattr(args, "record", None) and getattr(args, "json", False):
        raise FleetUsageError("fleet: --json and --record do not go together")
    if getattr(args, "record", None):
        return _record(args)
    if getattr(args, "json", False):
        return _one_shot(args)
    return _live(args)


def problems(fleet: FleetSnapshot) -> List[str]:
    """One line per thing wrong with a fleet snapshot: the source's failure, stale nodes, clocks off,
    skipped series (what makes a one-shot exit 1)."""
    lines: List[str] = []
    if fleet.error:
        lines.append(fleet.error)
    lines.extend(fleet.warnings)
    for node in fleet.nodes:
        if node.stale and not fleet.error:
            lines.append(f"{node.node} is stale: {node.stale_reason}")
        lines.extend(f"{node.node}: {warning}" for warning in node.warnings)
    return lines


def _one_shot(args: argparse.Namespace) -> int:
    from npuwatch.fleet import fleet_json
    from npuwatch.text_safety import can_encode, inert

    with open_fleet_feed(args) as feed:
        fleet = feed.sample()
    if fleet.nodes:
        print(fleet_json.dumps(fleet, ensure_ascii=not can_encode(sys.stdout)))
    found = problems(fleet)
    for line in found:
        print(f"npuwatch fleet: {inert(line)}", file=sys.stderr)
    return EXIT_PROBLEM if found else 0


def _record(args: argparse.Namespace) -> int:
    from npuwatch.fleet.feed import FleetRecordingWriter
    from npuwatch.recording import RecordingError, RecordingExistsError
    from npuwatch.text_safety import inert

    path = args.record
    if not args.force and os.path.isfile(path):
        raise FleetUsageError(f"fleet --record {path}: the file already exists (pass --force to replace it)")
    with open_fleet_feed(args) as feed:
        try:
            writer = FleetRecordingWriter(path, overwrite=bool(args.force))
        except RecordingExistsError as exc:
            raise FleetUsageError(f"fleet --record: {exc}") from None
        except RecordingError as exc:
            print(f"npuwatch fleet: {inert(str(exc))}", file=sys.stderr)
            return EXIT_PROBLEM
        stop_at = None if args.duration is None else time.monotonic() + args.duration
        written = 0
        why = "Ctrl-C"
        try:
            with writer:
                while stop_at is None or time.monotonic() < stop_at:
                    started = time.monotonic()
                    fleet = feed.sample()
                    writer.write_fleet(fleet)
                    written += 1
                    if getattr(feed.source, "ended", False):
                        why = "end of the recording"
                        break
                    pause = feed.interval_s - (time.monotonic() - started)
                    if stop_at is not None:
                        pause = min(pause, stop_at - time.monotonic())
                    if pause > 0:
                        time.sleep(pause)
                else:
                    why = "duration reached"
        except KeyboardInterrupt:
            pass
        except RecordingError as exc:
            print(f"npuwatch fleet: {inert(str(exc))}", file=sys.stderr)
            return EXIT_PROBLEM
    print(f"npuwatch fleet: recorded {written} fleet snapshots to {inert(path)} ({why})", file=sys.stderr)
    return 0


def _live(args: argparse.Namespace) -> int:
    feed = open_fleet_feed(args)
    try:
        try:
            from npuwatch.widgets.fleet.app import run_fleet_app
        except ImportError as exc:
            missing = getattr(exc, "name", None) or str(exc)
            print(
                f"npuwatch fleet: the live fleet view is not available ({missing}); "
                "use --json for one snapshot",
                file=sys.stderr,
            )
            return EXIT_NO_VIEW
        return int(run_fleet_app(feed, args))
    finally:
        feed.close()
