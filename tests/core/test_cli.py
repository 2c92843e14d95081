"""Tests for the command line: exit codes, JSON output, errors explained without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from npuwatch.cli import EXIT_USAGE, main

DATA = Path(__file__).resolve().parent.parent / "data" / "npu_smi"
SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())
TABLE_CAPTURES = sorted(
    p for p in DATA.glob("*.txt") if "| Health" in p.read_text(errors="replace") or p.name.startswith("089_")
)


def test_there_are_table_captures():
    assert len(TABLE_CAPTURES) >= 25


@pytest.mark.parametrize("capture", TABLE_CAPTURES, ids=lambda p: p.name[:3])
def test_snapshot_json_replay_validates_for_every_table_capture(capture, capsys):
    code = main(["snapshot", "--json", "--replay", str(capture)])
    out = capsys.readouterr().out
    doc = json.loads(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    assert code == 0
    assert doc["source"] == f"replay:{capture.name}"
    assert doc["host"] is None
    assert doc["chips"]


def test_snapshot_table_replay_shows_each_chip(capsys):
    code = main(["snapshot", "--replay", str(next(DATA.glob("044_*.txt")))])
    out = capsys.readouterr().out
    assert code == 0
    assert "310P3" in out
    assert "15.9/43.2 GiB DDR" in out  # 16302/44280 MiB of DDR on a 310P (no HBM)
    assert "mindie_llm_back" in out


def test_error_capture_exits_1_with_the_explanation(capsys):
    code = main(["snapshot", "--replay", str(next(DATA.glob("035_*.txt")))])
    err = capsys.readouterr().err
    assert code == 1
    assert "-8005" in err and "npuwatch doctor" in err


def test_machine_without_npu_exits_1_with_reason_and_next_step(tmp_path, capsys):
    code = main(["snapshot", "--root", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 1
    assert "no Ascend PCI device, and npu-smi was not found" in captured.err
    assert "npuwatch --demo" in captured.err
    assert "Traceback" not in captured.err + captured.out


def test_missing_replay_file_is_a_usage_error(tmp_path, capsys):
    code = main(["snapshot", "--replay", str(tmp_path / "nope.txt")])
    assert code == 64
    assert "no such file" in capsys.readouterr().err


def test_demo_before_the_subcommand_takes_the_default_scenario(capsys):
    assert main(["--demo", "snapshot", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "demo:910b-training"


def test_live_view_piped_into_a_closed_reader_exits_quietly():
    script = Path(sys.executable).parent / "npuwatch"
    proc = subprocess.run(
        f"{script} --demo --interval 0.2 | head -c 100 >/dev/null",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "internal error" not in proc.stderr
    assert "Traceback" not in proc.stderr


def test_sigterm_removes_the_demo_tree(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "--demo", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the first frame is out: the demo tree exists
    assert list(tmp_path.glob("npuwatch-demo-*"))
    proc.terminate()
    proc.wait(timeout=30)
    assert not list(tmp_path.glob("npuwatch-demo-*"))


def test_garbage_replay_is_a_usage_error_not_an_empty_snapshot(tmp_path, capsys):
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"\x00\xff garbage |||\n+--+\n")
    assert main(["snapshot", "--json", "--replay", str(junk)]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no chip table in it" in captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["snapshot", "--interval", "-1"],
        ["snapshot", "--timeout", "abc"],
        ["snapshot", "--devices", "a,b"],
        ["frobnicate"],
        ["snapshot", "--no-such-option"],
    ],
)
def test_usage_errors_exit_64(argv, capsys):
    assert main(argv) == EXIT_USAGE
    assert "npuwatch:" in capsys.readouterr().err


def test_bad_environment_value_is_a_usage_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("NPUWATCH_INTERVAL", "soon")
    assert main(["snapshot", "--root", str(tmp_path)]) == EXIT_USAGE
    assert "NPUWATCH_INTERVAL" in capsys.readouterr().err


def test_environment_root_is_used(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("NPUWATCH_ROOT", str(tmp_path))
    assert main(["snapshot", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["source"] == "npu-smi"


def test_devices_option_filters(capsys):
    capture = next(DATA.glob("001_*.txt"))
    assert main(["snapshot", "--json", "--devices", "2,5", "--replay", str(capture)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["npu_id"] for c in doc["chips"]] == [2, 5]


def test_python_dash_m_and_version():
    out = subprocess.run(
        [sys.executable, "-m", "npuwatch", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("npuwatch ")


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "npuwatch"
    out = subprocess.run([str(script), "snapshot", "--help"], capture_output=True, text=True, check=True)
    assert "--json" in out.stdout and "--replay" in out.stdout


def test_devices_matching_no_chip_says_so(capsys):
    capture = next(DATA.glob("001_*.txt"))
    assert main(["snapshot", "--devices", "99", "--replay", str(capture)]) == 1
    assert "none of the 8 chip(s) npu-smi lists matches --devices" in capsys.readouterr().err


def test_demo_cannot_be_combined_with_a_root(tmp_path, capsys):
    assert main(["snapshot", "--demo", "a3", "--root", str(tmp_path)]) == 64
    assert "--demo brings its own machine" in capsys.readouterr().err


def test_the_dashboard_opens_its_feed_and_imports_with_the_collector_paused_then_runs_with_it(monkeypatch):
    import gc

    import npuwatch.feeds
    import npuwatch.widgets.tui.app

    seen = {}

    class Opening:
        def __init__(self, options) -> None:
            seen["opening"] = gc.isenabled()
            self.closed = False

        def close(self) -> None:
            seen["closed"] = True

    def run_dashboard(options, opening) -> int:
        seen["running"] = gc.isenabled()
        return 0

    monkeypatch.setattr(npuwatch.feeds, "OpeningFeed", Opening)
    monkeypatch.setattr(npuwatch.widgets.tui.app, "run_dashboard", run_dashboard)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert gc.isenabled()
    assert main(["--demo", "a3"]) == 0
    assert seen == {"opening": False, "running": True, "closed": True}
    assert gc.isenabled()
