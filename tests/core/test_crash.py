"""An internal error is never a success: exit 70, one line naming the file that keeps the traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npuwatch import cli
from npuwatch.crash import EXIT_INTERNAL, crash_line, report_folder
from npuwatch.feeds import FeedOptions


@pytest.fixture(autouse=True)
def state_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def _kept_file(line: str) -> Path:
    found = re.search(r"traceback in (\S+);", line)
    assert found, line
    return Path(found.group(1))


def test_crash_line_names_what_and_where_and_keeps_the_traceback(state_home):
    try:
        raise KeyError("chip")
    except KeyError as exc:
        line = crash_line(exc, "the dashboard")
    assert line.startswith("npuwatch: internal error in the dashboard: KeyError: 'chip' (traceback in ")
    kept = _kept_file(line)
    assert kept.parent == report_folder() == state_home / "npuwatch"
    text = kept.read_text()
    assert "Traceback (most recent call last)" in text and "KeyError: 'chip'" in text


def test_crash_report_falls_back_to_the_temp_folder_when_the_state_folder_fails(tmp_path, monkeypatch):
    blocker = tmp_path / "file-not-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    line = crash_line(RuntimeError("boom"), "sampling")
    assert _kept_file(line).parent == tmp_path


def test_a_command_that_crashes_exits_70_with_one_line(monkeypatch, capsys):
    def broken(_args):
        raise RuntimeError("boom")

    monkeypatch.setitem(cli._COMMANDS, "snapshot", broken)
    assert cli.main(["snapshot", "--demo", "idle"]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("npuwatch: internal error in `npuwatch snapshot`: RuntimeError: boom (traceback in")
    assert "RuntimeError: boom" in _kept_file(err).read_text()


def test_verbose_still_shows_the_traceback(monkeypatch):
    def broken(_args):
        raise RuntimeError("boom")

    monkeypatch.setitem(cli._COMMANDS, "snapshot", broken)
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["snapshot", "--demo", "idle", "--verbose"])


def test_a_dashboard_crash_exits_70_not_0(monkeypatch, capsys):
    from textual.app import App

    from npuwatch.widgets.tui import app as dashboard

    def broken(self, snapshot):
        raise ZeroDivisionError("in a card")

    real_run = App.run
    monkeypatch.setattr(dashboard.NpuwatchApp, "show", broken)
    monkeypatch.setattr(dashboard.NpuwatchApp, "run", lambda self: real_run(self, headless=True))
    assert dashboard.run_dashboard(FeedOptions(demo="idle")) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "npuwatch: internal error in the dashboard: ZeroDivisionError: in a card (traceback in " in err
    assert "Traceback" not in err  # Textual's screenful of locals is not printed
    assert "ZeroDivisionError: in a card" in _kept_file(err).read_text()
