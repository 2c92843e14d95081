"""Provides the ``npuwatch serve`` sub-command: ``--listen``, start-up line, signals, clean exit."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
import threading
from dataclasses import dataclass

from npuwatch.errors import UsageError
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.termination import stop_on_termination

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9492
DEFAULT_LISTEN = f"{DEFAULT_HOST}:{DEFAULT_PORT}"
_LISTEN_FORMS = "give HOST:PORT, e.g. 127.0.0.1:9492, 0.0.0.0:9492, [::1]:9492, or :9492 for every interface"


class ServeUsageError(UsageError):
    """A malformed ``--listen`` or contradicting options: the CLI's exit 64."""


@dataclass(frozen=True)
class ListenAddress:
    """Where to listen: ``host`` ``""`` means every interface; port 0 picks a free one."""

    host: str
    port: int

    @property
    def display(self) -> str:
        """The address as ``--listen`` spells it."""
        if ":" in self.host:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``:PORT`` (every interface); ``ServeUsageError`` otherwise."""
    value = text.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise ServeUsageError(f"--listen {text!r}: no port; {_LISTEN_FORMS}")
    if host.startswith("[") or host.endswith("]"):
        if not (host.startswith("[") and host.endswith("]")):
            raise ServeUsageError(f"--listen {text!r}: unbalanced brackets; {_LISTEN_FORMS}")
        host = host[1:-1]
        if not _is_ipv6(host):
            raise ServeUsageError(f"--listen {text!r}: {host!r} is not an IPv6 address; {_LISTEN_FORMS}")
    elif ":" in host:
        raise ServeUsageError(f"--listen {text!r}: put an IPv6 address in brackets, e.g. [::1]:9492")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ServeUsageError(f"--listen {text!r}: the port must be a number from 0 to 65535")
    if any(c.isspace() for c in host):
        raise ServeUsageError(f"--listen {text!r}: the host has a space; {_LISTEN_FORMS}")
    return ListenAddress(host, int(port_text))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``serve``'s own option (the shared data-source options come from the main parser)."""
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to listen (default {DEFAULT_LISTEN}, this machine only; 0.0.0.0:{DEFAULT_PORT} or "
        f":{DEFAULT_PORT} for every interface, [::1]:{DEFAULT_PORT} for IPv6)",
    )


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM, SIGINT or SIGHUP; 0 then, 1 when the address cannot be bound."""
    listen_text = getattr(args, "listen", None)
    listen = parse_listen(DEFAULT_LISTEN if listen_text is None else listen_text)
    options = FeedOptions.from_args(args)
    timeout_s = options.timeout()
    try:
        from npuwatch.exporter.server import Exporter
    except ImportError as exc:
        print(
            f"npuwatch: serve needs the prometheus-client package ({exc}); "
            "install it with: pip install 'npuwatch[exporter]'",
            file=sys.stderr,
        )
        return 1
    feed = open_feed(options)  # UsageError: exit 64 through the CLI
    try:
        try:
            exporter = Exporter(feed, listen.host, listen.port, timeout_s=timeout_s, devices=options.devices)
        except OSError as exc:
            print(f"npuwatch: cannot listen on {listen.display}: {_bind_problem(exc)}", file=sys.stderr)
            return 1
        stop = threading.Event()
        with stop_on_termination(stop), exporter:
            every = " (every interface)" if listen.host == "" else ""
            print(
                f"npuwatch serve: listening on {exporter.url}{every} for /metrics /healthz /snapshot; "
                f"source {feed.label}, sampling every {feed.interval_s:g} s",
                flush=True,
            )
            while not stop.wait(0.5):
                pass
    finally:
        feed.close()
    return 0


def _bind_problem(exc: OSError) -> str:
    """What went wrong with the bind, in words, and what to do."""
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror or exc}); {_LISTEN_FORMS}"
    reason = exc.strerror or str(exc)
    hints = {
        errno.EADDRINUSE: "another program listens there (another npuwatch serve or npu-exporter?); "
        "choose another port with --listen",
        errno.EADDRNOTAVAIL: "no interface of this machine has that address",
        errno.EACCES: "ports below 1024 need root; choose a higher port",
    }
    hint = hints.get(exc.errno or 0)
    return f"{reason} ({hint})" if hint else reason


def _is_ipv6(text: str) -> bool:
    try:
        socket.inet_pton(socket.AF_INET6, text)
    except (OSError, ValueError):
        return False
    return True
