"""``%load_ext npuwatch`` and ``%npuwatch …`` through a real IPython shell (no kernel)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.notebook.helpers import magic_shell, wait_for
from tests.selftest.helpers import fake_env


@pytest.fixture
def ip(needs_ipywidgets):
    with magic_shell() as shell:
        yield shell


@pytest.fixture
def frozen(monkeypatch):
    """The simulator's clock stopped, so two samples of a demo read the same values."""
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "120")


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("%npuwatch: ")
    return lines[0]


def test_live_demo_view_shows_the_demo_numbers(ip, frozen):
    from npuwatch import notebook

    view = ip.run_line_magic("npuwatch", "--demo --interval 0.2")
    wait_for(lambda: view.updates >= 1, "the first demo snapshot")
    reference = notebook.snapshot(demo=True).snapshot
    state = view.state()
    assert state["source"] == "demo:910b-training"
    assert len(state["chips"]) == len(reference.chips) == 8
    for shown, chip in zip(state["chips"], reference.chips):
        assert shown["metrics"]["temperature"] == f"{chip.temperature_c} °C"
        assert shown["metrics"]["util"] == f"{chip.aicore_percent}%"
    assert "npuwatch-live" in view.widget._dom_classes
    view.stop()
    wait_for(lambda: not view.thread.is_alive(), "the sampler thread to end")


def test_a_recording_replays_in_the_view_with_its_values(ip, tmp_path):
    from npuwatch.recording import read_recording

    path = tmp_path / "a3.ndjson.gz"
    argv = ["record", str(path), "--demo", "a3", "--interval", "0.2", "--duration", "1"]
    done = subprocess.run([sys.executable, "-m", "npuwatch", *argv], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    first = read_recording(path).snapshots[0]
    view = ip.run_line_magic("npuwatch", f"--replay {path} --speed 0.01")
    wait_for(lambda: view.updates >= 1, "the first replayed snapshot")
    state = view.state()
    assert state["source"] == "replay:a3.ndjson.gz"
    assert len(state["chips"]) == 16
    for shown, chip in zip(state["chips"], first.chips):
        assert shown["metrics"]["temperature"] == f"{chip.temperature_c} °C"
    view.stop()


def test_two_magic_views_share_one_sampler_and_stop_ends_both(ip, capsys):
    first = ip.run_line_magic("npuwatch", "--demo a3 --interval 0.2")
    second = ip.run_line_magic("npuwatch", "--interval 0.2 --demo a3")
    assert first.thread is second.thread
    third = ip.run_line_magic("npuwatch", "--demo a3 --interval 0.2 --history 5")
    assert third.thread is first.thread  # the plot window is the view's own: same sampler
    ip.run_line_magic("npuwatch", "stop")
    assert "stopped 3 live views" in capsys.readouterr().out
    assert not (first.running or second.running or third.running)
    wait_for(lambda: not first.thread.is_alive(), "the shared sampler thread to end")


def test_snapshot_form_takes_the_shared_options(ip):
    result = ip.run_line_magic("npuwatch", "snapshot --demo a3")
    assert result.snapshot.source == "demo:a3"
    assert len(result.snapshot.chips) == 16
    html = result._repr_mimebundle_()["text/html"]
    assert html.count('class="npuwatch-chip ') == 16
    assert "npuwatch-updated" in html
    assert "Ascend910" in result._repr_mimebundle_()["text/plain"]
    bare = ip.run_line_magic("npuwatch", "--demo snapshot")  # a bare --demo before the form
    assert bare.snapshot.source == "demo:910b-training"


def test_a3_demo_is_a_compact_table_and_layout_cards_gives_cards(ip):
    table = ip.run_line_magic("npuwatch", "--demo a3 --interval 0.2")
    cards = ip.run_line_magic("npuwatch", "--demo a3 --interval 0.2 --layout cards")
    assert cards.thread is table.thread  # the layout is the view's own: one sampler
    wait_for(lambda: table.updates >= 1 and cards.updates >= 1, "both views to update")
    assert (table.state()["layout"], cards.state()["layout"]) == ("table", "cards")
    assert table.chips.value.count('<tr class="npuwatch-chip ') == 16
    assert cards.chips.value.count('<div class="npuwatch-chip ') == 16


def test_duo_snapshot_lists_every_chip_it_cannot_report(ip):
    result = ip.run_line_magic("npuwatch", "snapshot --demo 310p-duo")
    html = result._repr_mimebundle_()["text/html"]
    listed = html.split("Not reported:", 1)[1]
    for chip in result.snapshot.chips:
        if chip.power_w is None:
            assert f"NPU {chip.identity.npu_id} chip {chip.identity.chip_id}" in listed
    assert {c.identity.chip_id for c in result.snapshot.chips} == {0, 1}


@pytest.mark.parametrize("scenario", ["no-driver", "container-missing-nodes"])
def test_failing_npu_smi_says_its_reason_once_in_the_live_view(ip, scenario):
    from html import unescape

    view = ip.run_line_magic("npuwatch", f"--demo {scenario} --interval 0.2")
    wait_for(lambda: view.updates >= 1, "the first sample")
    state = view.state()
    reason = state["shared_reason"]
    assert reason and reason == state["chips"][0]["reasons"]["power"]
    shown = unescape(re.sub(r"<[^>]+>", " ", re.sub(r'title="[^"]*"', "", view.chips.value)))
    assert shown.count(reason) == 1
    assert all(set(chip["metrics"].values()) == {"n/a"} for chip in state["chips"])


def test_doctor_form_shows_statuses_and_a_verdict(ip):
    result = ip.run_line_magic("npuwatch", "doctor --demo chip-alarm")
    html = result._repr_mimebundle_()["text/html"]
    assert "npuwatch-check-pass" in html
    assert "npuwatch-verdict" in html
    assert result.exit_code == result.report.exit_code
    failing = [r for r in result.report.results if r.hint]
    assert failing, "the chip-alarm machine should give at least one fix"
    assert "→ fix:" in html


def test_selftest_form_on_a_demo_says_there_is_nothing_to_test(ip):
    result = ip.run_line_magic("npuwatch", "selftest --demo")
    assert result.exit_code == 1
    assert "simulates npu-smi and sysfs" in result._repr_mimebundle_()["text/html"]


def test_selftest_form_runs_the_runtime_with_progress(ip, tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith(("NPUWATCH_FAKE_", "ASCEND_")):
            monkeypatch.delenv(name)
    for name, value in fake_env(tmp_path / "ledger").items():
        if name.startswith(("NPUWATCH_", "PYTHONPATH", "XDG_")):
            monkeypatch.setenv(name, value)
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    result = ip.run_line_magic("npuwatch", "selftest --device 0 --timeout-per-device 60")
    assert result.exit_code == 0, result.text()
    assert [run.device for run in result.report.runs] == [0]
    assert len(shown) == 1 and "npuwatch-selftest-progress" in shown[0]._dom_classes
    assert "device 0" in shown[0].value  # it showed a step while running
    assert shown[0].comm is None  # the progress went away when the results came
    assert "npuwatch-status-pass" in result._repr_mimebundle_()["text/html"]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--interval x", "expected seconds"),
        ("--demo nope", "unknown demo scenario 'nope'"),
        ("--bogus", "unrecognized arguments: --bogus"),
        ("snapshot --demo --replay x.txt", "--demo and --replay cannot be combined"),
        ("--replay /no/such/file", "no such file"),
        ("selftest --devices 0", "selftest takes --device"),
        ("doctor --replay x.txt", "doctor does not take --replay"),
        ("--history 0", "more than 0 minutes"),
        ("--layout grid", "argument --layout: invalid choice: 'grid'"),
        ("--devices a,b", "expected NPU IDs"),
        ("doctor --demo --only no-such-check", "no-such-check"),
        ("'unbalanced", "quotation"),
    ],
)
def test_bad_options_print_one_line_never_a_traceback(ip, capsys, line, words):
    assert ip.run_line_magic("npuwatch", line) is None
    assert words in _one_line_error(capsys)


def test_help_and_scenario_list_print_and_return_nothing(ip, capsys):
    assert ip.run_line_magic("npuwatch", "--help") is None
    out = capsys.readouterr().out
    assert "--history MINUTES" in out and "--demo [SCENARIO]" in out
    assert ip.run_line_magic("npuwatch", "--demo list") is None
    out = capsys.readouterr().out
    assert "910b-training" in out and "a3" in out


def test_without_ipywidgets_the_view_names_the_extra(ip, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets → ImportError
    assert ip.run_line_magic("npuwatch", "--demo") is None
    line = _one_line_error(capsys)
    assert "pip install 'npuwatch[jupyter]'" in line
    result = ip.run_line_magic("npuwatch", "snapshot --demo")  # the static forms need no widgets
    assert result.snapshot.chips


def test_import_npuwatch_and_the_api_module_stay_free_of_ipython():
    code = (
        "import npuwatch, npuwatch.notebook, npuwatch.widgets.view_model, "
        "npuwatch.widgets.notebook.reports, npuwatch.widgets.notebook.hub, sys; "
        "assert callable(npuwatch.load_ipython_extension); "
        "print([m for m in ('ipywidgets', 'IPython', 'textual', 'rich') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_the_magic_module_imports_no_textual():
    code = (
        "import npuwatch.jupyter, npuwatch.widgets.notebook.live_view, sys; "
        "print([m for m in ('textual', 'rich') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"


def test_a_bug_in_a_form_is_one_crash_line_not_a_usage_message(ip, capsys, monkeypatch):
    from npuwatch import notebook

    def broken(options):
        raise ValueError("a bug, not a bad option")

    monkeypatch.setattr(notebook, "snapshot_for", broken)
    assert ip.run_line_magic("npuwatch", "snapshot --demo") is None
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "internal error in %npuwatch: ValueError: a bug, not a bad option" in captured.err
    assert "traceback in" in captured.err
