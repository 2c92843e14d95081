"""Provides the ``%npuwatch`` line magic: a thin parser over ``npuwatch.notebook``.

    %load_ext npuwatch
    %npuwatch [--interval S] [--demo [SCENARIO]] [--replay FILE] [--devices 0,1] [--history MINUTES]
              [--layout auto|cards|table] [--root DIR] [--npu-smi PATH] [--timeout S]   live view
    %npuwatch snapshot [options]                                   one sample as a table
    %npuwatch doctor [options] [--only ID,…] [--skip ID,…]         environment diagnosis
    %npuwatch selftest [options] [--device N|all] [--level quick|full] [--backend auto|acl|torch]
    %npuwatch fleet --prometheus URL | --hosts H:P,… [--selector M] [--interval S] …   the fleet's nodes
    %npuwatch stop                                                 stop every live view

A bad option prints one line in the cell: argparse here raises instead of exiting, since a
``SystemExit`` inside a magic would surface as a traceback (or worse, end a plain IPython).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import replace
from typing import Any, List, NoReturn, Optional, Sequence, Tuple

from IPython.core.magic import Magics, line_magic, magics_class

from npuwatch.errors import UsageError
from npuwatch.feeds import FeedOptions, scenario_listing, shared_options
from npuwatch.option_values import minutes
from npuwatch.widgets.notebook.layout import LAYOUTS

COMMANDS = ("snapshot", "doctor", "selftest", "fleet", "stop")
USAGE = (
    "%npuwatch [snapshot|doctor|selftest|fleet|stop] [--demo [SCENARIO]] [--interval S] … (%npuwatch --help)"
)
#: Options that take a value: a command word right after one of them is that value, not a command.
_VALUED = frozenset(
    (
        "--interval",
        "--replay",
        "--root",
        "--npu-smi",
        "--devices",
        "--timeout",
        "--history",
        "--layout",
        "--only",
        "--skip",
        "--device",
        "--level",
        "--backend",
        "--dcmi-lib",
        "--timeout-per-device",
        # fleet's
        "--prometheus",
        "--hosts",
        "--selector",
        "--node-label",
        "--basic-auth",
        "--bearer-token-file",
        "--ca-file",
        "--lookback",
        "--record",
        "--duration",
        "--speed",
        "--stale-after",
    )
)


class MagicUsageError(UsageError):
    """A bad ``%npuwatch`` line: shown as one line, never a traceback."""


class _ExitError(Exception):
    """argparse finished on its own (``--help`` printed): nothing more to do."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise MagicUsageError(message)

    def exit(self, status: int = 0, message: Optional[str] = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise _ExitError(status)


def build_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one form: the CLI's shared options plus the form's own (fleet: ``npuwatch fleet``'s)."""
    if command == "fleet":
        from npuwatch.notebook import fleet_parser

        return fleet_parser(
            _Parser(prog="%npuwatch fleet", description="the fleet's nodes, worst first, as a live table")
        )
    parser = _Parser(
        prog=f"%npuwatch {command}".strip(),
        parents=[shared_options(chip_backend=command != "selftest")],
        description="npuwatch in a notebook: a live view, or one of snapshot, doctor, selftest, stop.",
    )
    if command == "":
        parser.add_argument(
            "--history",
            type=minutes,
            default=None,
            metavar="MINUTES",
            help="how much history the plots show (default 15)",
        )
        parser.add_argument(
            "--layout",
            choices=LAYOUTS,
            default="auto",
            help="a card per chip, a row per chip, or auto: the table above 8 chips (default auto)",
        )
    elif command == "doctor":
        from npuwatch.doctor.command import add_arguments

        add_arguments(parser)
    elif command == "selftest":
        from npuwatch.selftest.command import add_arguments as add_selftest_arguments

        add_selftest_arguments(parser)
    return parser


def split_command(words: Sequence[str]) -> Tuple[str, List[str]]:
    """The form (``""`` for the live view) and the remaining words.

    ``--demo snapshot`` means the default scenario, as on the command line.
    """
    from npuwatch.probes.simulator import DEFAULT_SCENARIO

    rest = list(words)
    for i, word in enumerate(rest):
        if word not in COMMANDS or (i > 0 and rest[i - 1] in _VALUED):
            continue
        del rest[i]
        if i > 0 and rest[i - 1] == "--demo":
            rest.insert(i, DEFAULT_SCENARIO)
        return word, rest
    return "", rest


def run_line(line: str) -> Any:
    """Run one ``%npuwatch`` line; returns what the cell should show (None after an error)."""
    try:
        return _run(line)
    except _ExitError:
        return None
    except MagicUsageError as exc:
        _say(f"%npuwatch: {exc}  usage: {USAGE}")
    except ImportError as exc:
        _say(f"%npuwatch: {exc}")
    except UsageError as exc:  # a bad value or combination, from the options, a command or the API
        _say(f"%npuwatch: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    except Exception as exc:  # a bug: one line naming the traceback's file, never a traceback here
        from npuwatch.crash import crash_line

        _say(crash_line(exc, "%npuwatch"))
    return None


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def _run(line: str) -> Any:
    from npuwatch import notebook

    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise MagicUsageError(str(exc)) from None
    command, words = split_command(words)
    args = build_parser(command).parse_args(words)
    if getattr(args, "demo", None) in ("list", "help"):
        print(scenario_listing(), end="")
        return None
    if command == "stop":
        count = notebook.stop_all()
        print(f"npuwatch: stopped {count} live view{'s' if count != 1 else ''}")
        return None
    if command == "fleet":
        return _fleet(args)
    if command == "doctor":
        return _doctor(args)
    if command == "selftest":
        return _selftest(args)
    options = FeedOptions.from_args(args)
    if command == "snapshot":
        return notebook.snapshot_for(options)
    history = args.history if args.history is not None else notebook.DEFAULT_HISTORY_MIN
    return notebook.show_for(options, history_min=history, layout=args.layout)


def _fleet(args: argparse.Namespace) -> Any:
    from npuwatch import notebook

    if args.json:  # one npuwatch/fleet/v1 document, as `npuwatch fleet --json` prints it
        from npuwatch.fleet.command import open_fleet_feed
        from npuwatch.fleet.fleet_json import dumps

        feed = open_fleet_feed(args)
        try:
            print(dumps(feed.sample()))
        finally:
            feed.close()
        return None
    return notebook.fleet_for(args)


def _doctor(args: argparse.Namespace) -> Any:
    from npuwatch import notebook

    _refuse(args, "doctor", "replay")
    if args.list:
        from npuwatch.doctor.registry import all_checks
        from npuwatch.widgets.doctor_text import render_check_list

        print(render_check_list(all_checks()), end="")
        return None
    verbose = bool(getattr(args, "verbose", False))
    options = FeedOptions.from_args(args)
    result = notebook.doctor_for(options, only=args.only, skip=args.skip, verbose=verbose)
    if args.json:
        from npuwatch.doctor.report_json import to_dict

        print(json.dumps(to_dict(result.report, dict(result.about)), indent=2))
        return None
    return result


def _selftest(args: argparse.Namespace) -> Any:
    from npuwatch import notebook

    _refuse(args, "selftest", "replay", "devices")
    options = FeedOptions.from_args(args)
    per_device = replace(options, timeout_s=args.timeout_per_device or options.timeout_s)
    result = notebook.selftest_for(
        per_device, device=args.selftest_device, level=args.level, backend=args.backend
    )
    if args.json:
        from npuwatch.selftest.report_json import to_dict

        print(json.dumps(to_dict(result.report), indent=2))
        return None
    return result


def _refuse(args: argparse.Namespace, command: str, *names: str) -> None:
    """Options of the shared set that make no sense for ``command``: say so, do not ignore them."""
    for name in names:
        if getattr(args, name, None) is not None:
            if command == "selftest" and name == "devices":
                raise MagicUsageError(
                    "selftest takes --device N|all: logical IDs as the runtime numbers them, "
                    "not npu-smi's NPU IDs (--devices)"
                )
            raise MagicUsageError(f"{command} does not take --{name.replace('_', '-')}")


@magics_class
class NpuwatchMagics(Magics):
    """``%npuwatch``: the live view, ``snapshot``, ``doctor``, ``selftest``, ``stop``."""

    @line_magic
    def npuwatch(self, line: str) -> Any:
        """Watch, diagnose and self-test Ascend NPUs; ``%npuwatch --help`` lists the options."""
        return run_line(line)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext npuwatch``: register the ``%npuwatch`` magic."""
    ipython.register_magics(NpuwatchMagics)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext npuwatch``: stop every live view (the magic stays until the kernel restarts)."""
    from npuwatch.notebook import stop_all

    stop_all()
