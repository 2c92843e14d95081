"""The composition root: FeedOptions, its one set of rules, open_machine() and open_feed(), UsageError."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from pathlib import Path
from typing import List

import pytest

from npuwatch.cli import EXIT_USAGE, main
from npuwatch.errors import UsageError, VariableError
from npuwatch.feeds import DEFAULT_BACKEND, FeedOptions, demo_fallback, open_feed, open_machine, parse_devices
from npuwatch.history import History

DATA = Path(__file__).resolve().parent.parent / "data" / "npu_smi"
CAPTURE = str(next(DATA.glob("001_*.txt")))

#: Every command that reads a machine, with the arguments it needs besides the shared options.
COMMANDS = {
    "snapshot": ["snapshot"],
    "check": ["check"],
    "doctor": ["doctor"],
    "selftest": ["selftest"],
    "serve": ["serve", "--listen", "127.0.0.1:0"],
}


def _run(capsys, words: List[str]):
    code = main(words)
    return code, capsys.readouterr().err


# --- one set of rules, the same answer from every command -------------------------------------------


@pytest.mark.parametrize("command", [*COMMANDS, "record"])
@pytest.mark.parametrize("other", ["--root", "--npu-smi"])
def test_every_command_refuses_a_demo_with_a_machine_of_its_own(command, other, capsys, tmp_path):
    words = COMMANDS.get(command, ["record", str(tmp_path / "out.ndjson")])
    code, err = _run(capsys, [*words, "--demo", other, str(tmp_path)])
    assert code == EXIT_USAGE, err
    assert f"--demo brings its own machine: it cannot be combined with {other}" in err


@pytest.mark.parametrize("command", [*COMMANDS, "record"])
def test_every_command_refuses_speed_without_a_recording(command, capsys, tmp_path):
    words = COMMANDS.get(command, ["record", str(tmp_path / "out.ndjson")])
    code, err = _run(capsys, [*words, "--demo", "--speed", "2"])
    assert code == EXIT_USAGE, err
    assert "--speed applies only to --replay of a recording" in err


@pytest.mark.parametrize("command", ["snapshot", "check", "serve", "record"])
def test_a_replay_that_names_no_file_is_a_usage_error_everywhere(command, capsys, tmp_path):
    words = COMMANDS.get(command, ["record", str(tmp_path / "out.ndjson")])
    code, err = _run(capsys, [*words, "--replay", str(tmp_path / "missing.txt")])
    assert code == EXIT_USAGE, err
    assert "missing.txt: no such file" in err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unknown_scenario_is_a_usage_error_everywhere(command, capsys):
    code, err = _run(capsys, [*COMMANDS[command], "--demo", "no-such-machine"])
    assert code == EXIT_USAGE
    assert "unknown demo scenario 'no-such-machine'" in err and "910b-training" in err


@pytest.mark.parametrize("command", ["", "snapshot", "check", "doctor"])
def test_demo_list_prints_the_scenarios_for_every_command(command, capsys):
    code = main([*([command] if command else []), "--demo", "list"])
    assert code == 0
    assert "Scenarios for --demo:" in capsys.readouterr().out


# --- UsageError: one type, caught as a type ---------------------------------------------------------


def test_every_usage_error_class_is_the_one_type():
    from npuwatch.check_command import CheckUsageError
    from npuwatch.doctor.command import DoctorUsageError
    from npuwatch.exporter.command import ServeUsageError
    from npuwatch.jupyter import MagicUsageError
    from npuwatch.notebook import NotebookUsageError
    from npuwatch.record_command import RecordUsageError
    from npuwatch.selftest.orchestrate import SelftestUsageError

    for kind in (CheckUsageError, DoctorUsageError, ServeUsageError, MagicUsageError, RecordUsageError):
        assert issubclass(kind, UsageError)
    assert issubclass(SelftestUsageError, UsageError) and NotebookUsageError is UsageError
    assert issubclass(UsageError, ValueError)  # callers that caught ValueError still do


def test_the_cli_exits_64_for_the_type_whatever_its_name(monkeypatch, capsys):
    class Contradiction(UsageError):  # noqa: N818 (the CLI goes by the type, not the name)
        pass

    def refuse(args: argparse.Namespace) -> int:
        raise Contradiction("these options contradict each other")

    monkeypatch.setitem(__import__("npuwatch.cli").cli._COMMANDS, "snapshot", refuse)
    assert main(["snapshot"]) == EXIT_USAGE
    assert "npuwatch: these options contradict each other" in capsys.readouterr().err


def test_a_value_error_named_like_a_usage_error_is_still_a_bug(monkeypatch, capsys):
    class LooksLikeAUsageError(ValueError):
        pass

    def broken(args: argparse.Namespace) -> int:
        raise LooksLikeAUsageError("a bug")

    monkeypatch.setitem(__import__("npuwatch.cli").cli._COMMANDS, "snapshot", broken)
    assert main(["snapshot"]) == 70
    assert "internal error" in capsys.readouterr().err


# --- FeedOptions ------------------------------------------------------------------------------------


def test_options_from_a_command_line_are_typed_and_hashable():
    args = argparse.Namespace(demo=None, replay=CAPTURE, devices=[3, 1], interval=2.0, timeout=4.0)
    options = FeedOptions.from_args(args)
    assert options == FeedOptions(replay=CAPTURE, devices=frozenset({1, 3}), interval_s=2.0, timeout_s=4.0)
    assert options.devices == frozenset({1, 3})
    assert {options: 1}[FeedOptions(replay=CAPTURE, devices=[1, 3], interval_s=2.0, timeout_s=4.0)] == 1


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (FeedOptions(interval_s=0), "interval_s must be more than 0 and at most 86400"),
        (FeedOptions(timeout_s=float("nan")), "timeout_s must be more than 0"),
        (FeedOptions(speed=float("inf"), replay=CAPTURE), "speed must be more than 0"),
        (FeedOptions(devices=[-1]), "expected NPU IDs"),
        (FeedOptions(backend="nvml"), "unknown chip-data backend 'nvml': choose one of auto, dcmi, npu-smi"),
        (FeedOptions(backend="dcmi", replay=CAPTURE), "--backend reads a live machine"),
        (FeedOptions(demo="a3", dcmi_lib="/x/libdcmi.so"), "cannot be combined with --dcmi-lib"),
        (FeedOptions(demo="910b-training", replay=CAPTURE), "--demo and --replay cannot be combined"),
        (FeedOptions(replay=str(DATA)), "a directory, not a file"),
        (FeedOptions(replay=CAPTURE, speed=2.0), "--speed applies only to --replay of a recording"),
    ],
)
def test_validate_names_what_is_wrong(options, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")):
        options.validate()


def test_every_backend_is_accepted_by_name():
    for name in ("auto", "dcmi", "npu-smi"):
        assert FeedOptions(backend=name).validate().backend == name


def test_the_backend_falls_back_to_the_variable_then_auto():
    assert FeedOptions().chip_backend({}) == DEFAULT_BACKEND
    assert FeedOptions().chip_backend({"NPUWATCH_BACKEND": "NPU-SMI"}) == "npu-smi"
    assert FeedOptions(backend="dcmi").chip_backend({"NPUWATCH_BACKEND": "npu-smi"}) == "dcmi"
    with pytest.raises(VariableError, match="NPUWATCH_BACKEND='nvml' is not a chip-data backend") as info:
        FeedOptions().chip_backend({"NPUWATCH_BACKEND": "nvml"})
    assert info.value.hint == "unset it or give one of auto, dcmi, npu-smi"


def test_the_command_line_names_the_backend_and_the_library_and_selftest_keeps_its_own_backend():
    from npuwatch.cli import build_parser

    args = build_parser(["snapshot"]).parse_args(
        ["snapshot", "--backend", "dcmi", "--dcmi-lib", "/l/libdcmi.so"]
    )
    assert (FeedOptions.from_args(args).backend, FeedOptions.from_args(args).dcmi_lib) == (
        "dcmi",
        "/l/libdcmi.so",
    )
    args = build_parser(["selftest"]).parse_args(["selftest", "--backend", "torch"])
    assert args.backend == "torch" and not hasattr(args, "chip_backend")


def test_interval_and_timeout_fall_back_to_the_variables_then_the_defaults():
    assert FeedOptions().interval({}) == 1.0 and FeedOptions().timeout({}) == 5.0
    env = {"NPUWATCH_INTERVAL": "2.5", "NPUWATCH_TIMEOUT": "9"}
    assert FeedOptions().interval(env) == 2.5 and FeedOptions().timeout(env) == 9.0
    assert FeedOptions(interval_s=0.5, timeout_s=1.0).interval(env) == 0.5
    with pytest.raises(VariableError, match="NPUWATCH_TIMEOUT='soon' is not a number") as info:
        FeedOptions().timeout({"NPUWATCH_TIMEOUT": "soon"})
    assert info.value.variable == "NPUWATCH_TIMEOUT" and "NPUWATCH_TIMEOUT=5" in info.value.hint


def test_a_demo_ignores_the_root_and_npu_smi_variables():
    env = {"NPUWATCH_ROOT": "/nowhere", "NPUWATCH_NPU_SMI": "/nowhere/npu-smi"}
    with open_machine(FeedOptions(demo="310p-duo"), env) as machine:
        assert machine.scenario == "310p-duo" and machine.label == "demo:310p-duo"
        assert machine.npu_smi_path is not None and machine.npu_smi_path.exists()
        tree = machine.sysroot.root
        assert tree.is_dir()
    assert not tree.exists()  # closing the handle removed the simulated machine


def test_the_root_variable_names_itself_when_it_is_not_a_folder(tmp_path):
    with pytest.raises(VariableError, match="NPUWATCH_ROOT=") as info:
        open_machine(FeedOptions(), {"NPUWATCH_ROOT": str(tmp_path / "gone")})
    assert "unset NPUWATCH_ROOT" in info.value.hint
    with pytest.raises(UsageError, match="--root") as given:
        open_machine(FeedOptions(root=str(tmp_path / "gone")), {})
    assert not isinstance(given.value, VariableError)


def test_a_machine_under_a_root_finds_its_npu_smi(tmp_path):
    binary = tmp_path / "usr" / "local" / "bin" / "npu-smi"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    with open_machine(FeedOptions(root=str(tmp_path), trust_root=True), {}) as machine:
        assert machine.label == "npu-smi" and machine.scenario is None
        assert machine.npu_smi_path == binary
        assert machine.npu_smi(3.0).timeout_s == 3.0
        assert machine.trusted and machine.npu_smi_withheld is None
    with open_machine(FeedOptions(root=str(tmp_path)), {"NPUWATCH_TRUST_ROOT": "1"}) as machine:
        assert machine.npu_smi_path == binary  # the variable trusts it too
    with open_machine(FeedOptions(root=str(tmp_path)), {}) as machine:  # untrusted: found, never run
        assert machine.npu_smi_path is None and not machine.trusted
        assert machine.npu_smi_withheld is not None
        assert machine.npu_smi_withheld.program == "/usr/local/bin/npu-smi"


def test_open_feed_reads_a_saved_capture_and_a_demo():
    with open_feed(FeedOptions(replay=CAPTURE, devices={0, 1}), {}) as feed:
        snapshot = feed.sample()
    assert feed.label.startswith("replay:001_") and {c.identity.npu_id for c in snapshot.chips} == {0, 1}
    with open_feed(FeedOptions(demo="310p-duo", interval_s=0.5, host=False), {}) as feed:
        assert feed.label == "demo:310p-duo" and feed.interval_s == 0.5
        assert feed.sample().chips


def test_demo_fallback_only_when_nothing_was_chosen():
    chosen = FeedOptions(replay=CAPTURE)
    assert demo_fallback(chosen, {}) == (chosen, "")
    named = FeedOptions()
    assert demo_fallback(named, {"NPUWATCH_ROOT": "/"}) == (named, "")


def test_npu_ids_parse_one_way_everywhere():
    assert parse_devices("0, 1,3") == frozenset({0, 1, 3})
    assert parse_devices([2, 1]) == frozenset({1, 2})
    assert parse_devices(None) is None
    for bad in ("a,b", "", "-1", [], [-2]):
        with pytest.raises(UsageError, match="expected NPU IDs like 0,1,3"):
            parse_devices(bad)


def test_history_for_a_span_holds_it_at_any_interval():
    assert History.for_span(1.0).capacity == 900
    assert History.for_span(0.1).capacity == 9000
    assert History.for_span(60.0).capacity == 900  # never fewer points than the default
    assert History.for_span(0.0).capacity >= 900  # a recording's zero gaps do not divide by zero


def test_the_magic_parses_its_line_without_loading_the_command_line():
    code = (
        "import sys; from npuwatch.jupyter import build_parser; build_parser(''); build_parser('doctor'); "
        "print('npuwatch.cli' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "False"


def test_an_opening_feed_hands_over_the_feed_and_the_demo_says_which_fake_it_runs():
    from npuwatch.feeds import OpeningFeed

    opening = OpeningFeed(FeedOptions(demo="a3"))
    feed, banner = opening.result()
    with feed:
        assert banner.startswith("demo a3: chips through fake ")  # "fake libdcmi.so (C, …)" or the stand-in
        assert banner.endswith("; a simulated npu-smi as the fallback")
        assert len(feed.sample().chips) == 16
    opening.close()  # taken: closing the opening leaves the feed to its owner


def test_an_opening_feed_raises_what_opening_raised_and_closes_a_feed_nobody_took(tmp_path):
    from npuwatch.feeds import OpeningFeed

    with pytest.raises(UsageError, match=r"--replay .*no such file"):
        OpeningFeed(FeedOptions(replay=str(tmp_path / "missing.txt"))).result()
    opening = OpeningFeed(FeedOptions(demo="910b-training", backend="npu-smi"))
    opening.close()  # never taken: the demo's tree goes with it
    assert opening.result()[0] is not None
    root = opening.result()[0].sysroot.root  # type: ignore[attr-defined]
    assert not root.exists()


def test_an_opening_feed_takes_the_first_sample_on_its_thread_and_hands_it_over_once():
    from npuwatch.feeds import OpeningFeed

    opening = OpeningFeed(FeedOptions(demo="a3", backend="npu-smi"))
    feed, _ = opening.result()
    with feed:
        first = opening.first_sample()
        assert first is not None
        snapshot, took_s = first
        assert len(snapshot.chips) == 16 and took_s >= 0
        assert feed.history.values((0, 0), "temperature_c") == [snapshot.chips[0].temperature_c]
        assert opening.first_sample() is None  # once
    opening.close()


class _HangingFeed:
    """A feed whose first sample blocks until released (a hung npu-smi), as open_feed returns it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.closed = False
        self.sampled = False

    def sample(self) -> str:
        self.release.wait(30)
        self.sampled = True
        return "the first snapshot"

    def close(self) -> None:
        self.closed = True


def test_the_dashboard_gets_its_feed_while_the_first_sample_still_hangs(monkeypatch):
    import npuwatch.feeds as feeds
    import npuwatch.feeds.opening as opening_module

    hanging = _HangingFeed()
    monkeypatch.setattr(opening_module, "open_feed", lambda *args, **kwargs: hanging)
    opening = feeds.OpeningFeed(FeedOptions(demo="a3", backend="npu-smi"))
    feed, _ = opening.result()  # does not wait for the sample
    assert feed is hanging and not hanging.release.is_set()
    hanging.release.set()
    snapshot, took_s = opening.first_sample()
    assert snapshot == "the first snapshot" and took_s >= 0


def test_closing_an_opening_feed_nobody_took_never_waits_for_a_hung_first_sample(monkeypatch):
    import npuwatch.feeds as feeds
    import npuwatch.feeds.opening as opening_module

    hanging = _HangingFeed()
    monkeypatch.setattr(opening_module, "open_feed", lambda *args, **kwargs: hanging)
    opening = feeds.OpeningFeed(FeedOptions(demo="a3", backend="npu-smi"))
    opening.close()
    assert hanging.closed and not hanging.sampled  # closed while its first sample still hangs
    hanging.release.set()
