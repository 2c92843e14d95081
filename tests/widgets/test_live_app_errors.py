"""What the live apps (dashboard, fleet view) do with a bug a refresh raises: shown while
refreshing goes on, one traceback file per distinct error, and exit 70 with its line at the end
(``widgets/tui/app_base.py``; the real-terminal tests are in test_tui_tmux_signals.py)."""

from __future__ import annotations

from npuwatch.crash import EXIT_INTERNAL
from npuwatch.widgets.tui.app_base import MAX_REFRESH_REPORTS, LiveApp, exit_status


def reports(folder) -> list:
    return sorted((folder / "npuwatch").glob("npuwatch-crash-*.txt"))


def test_a_refresh_bug_repeated_every_tick_writes_one_traceback_and_exits_70(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = LiveApp()
    lines = set()
    for _ in range(50):  # a refresh a second for almost a minute
        try:
            raise ZeroDivisionError("injected")
        except ZeroDivisionError as error:
            lines.add(app.refresh_crash_line(error, "sampling"))
    assert len(lines) == 1 and len(reports(tmp_path)) == 1
    for number in range(3 * MAX_REFRESH_REPORTS):  # distinct errors: bounded too
        app.refresh_crash_line(ValueError(f"bad value {number}"), "sampling")
    assert len(reports(tmp_path)) == MAX_REFRESH_REPORTS
    assert exit_status(app, "the dashboard") == EXIT_INTERNAL
    said = capsys.readouterr().err.splitlines()
    assert said == [app.refresh_error]
    assert said[0].startswith("npuwatch: internal error in sampling: ZeroDivisionError: injected (traceback")


def test_a_clean_run_exits_0_and_a_signal_keeps_its_status(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert exit_status(LiveApp(), "the dashboard") == 0
    app = LiveApp()
    app.refresh_crash_line(ZeroDivisionError("injected"), "sampling")
    app._return_code = 143  # SIGTERM asked the app to exit (run_live_app)
    assert exit_status(app, "the dashboard") == 143
