"""Terminal escape injection (issue 14, defect 2): machine text is shown, never obeyed.

Whoever runs a job on an NPU chooses its process name and command line; npu-smi's output,
DCMI's strings and recordings come from outside too.  A string holding ``ESC[2J`` (clear the
screen), ``ESC]0;…BEL`` (set the terminal's title), an 8-bit CSI or a bidi override must reach
no terminal raw: every text surface shows it escaped (``\\x1b[2J``), the JSON keeps it exact.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from npuwatch import snapshot_json
from npuwatch.doctor.engine import DoctorReport
from npuwatch.doctor.result import CheckResult, Group, Status
from npuwatch.model import ChipError, Health, MetricStatus, ProbeReport, Snapshot
from npuwatch.selftest.report import DeviceRun, SelftestReport, StepError, StepResult
from npuwatch.text_safety import inert, inert_lines
from npuwatch.widgets.doctor_text import render_doctor
from npuwatch.widgets.text import render_snapshot
from npuwatch.widgets.tui.app import NpuwatchApp
from npuwatch.widgets.tui.chip_grid import ChipGrid
from npuwatch.widgets.tui.detail_screen import DetailScreen
from npuwatch.widgets.tui.messages import ChipSelected
from tests.conftest import REPO
from tests.widgets.fakes import FakeSampler, capture_snapshot, wait_for

#: Clear the screen, set the title (OSC … BEL), an 8-bit CSI, and a right-to-left override.
EVIL = "\x1b[2J\x1b]0;pwned\x07\x9b31m\u202eevil"
SHOWN = "\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m\\u202eevil"
#: What no rendering of EVIL may contain.  (Colour and cursor moves are ``ESC[`` + digits + a
#: letter other than J; the dashboard's own output has those.)
RAW = re.compile("\x1b\\[2J|\x1b\\]|\x07|[\x80-\x9f]|\u202e")


def hostile(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with EVIL in every string that comes from the machine, npu-smi or a file."""
    chips = tuple(
        replace(
            chip,
            identity=replace(chip.identity, name=f"910B{EVIL}", bus_id=f"0000:C1:00.0{EVIL}"),
            health=Health.ALARM if i == 0 else chip.health,
            errors=(ChipError("80E01801", f"HBM ECC {EVIL}"),) if i == 0 else (),
        )
        for i, chip in enumerate(snapshot.chips)
    )
    processes = tuple(
        replace(
            process,
            name=f"python3{EVIL}",
            host=replace(process.host, user=f"eve{EVIL}", command=f"python3 train.py {EVIL}")
            if process.host is not None
            else None,
        )
        for process in snapshot.processes
    )
    host = replace(snapshot.host, hostname=f"node{EVIL}") if snapshot.host is not None else None
    return replace(
        snapshot,
        source=f"replay:rec{EVIL}.ndjson",
        versions=replace(snapshot.versions, npu_smi=f"24.1{EVIL}", driver=f"24.1{EVIL}"),
        chips=chips,
        processes=processes,
        host=host,
        warnings=(f"npu-smi said {EVIL}",),
        probes=(ProbeReport("npu-smi", MetricStatus.OK, 0.1, found=len(chips)),),
    )


EVIL_910B = hostile(capture_snapshot("001"))


def assert_inert(text: str) -> None:
    found = RAW.findall(text)
    assert found == [], f"raw control sequences reach the terminal: {found[:5]!r}"
    assert SHOWN in text, "the hostile text is not shown escaped"


# --- the one function ---------------------------------------------------------------------


def test_inert_escapes_c0_c1_del_bidi_and_surrogates_and_keeps_printable_text():
    assert inert(EVIL) == SHOWN
    assert inert("a\tb\nc\x7f\x00") == "a\\x09b\\x0ac\\x7f\\x00"
    assert inert("\u2066x\u2069 \u200f \ud8ff") == "\\u2066x\\u2069 \\u200f \\ud8ff"
    printable = "Ascend 910B · 37 °C → 芯片 é ✔ [bold] \\x1b"
    assert inert(printable) == printable
    assert inert(inert(EVIL)) == inert(EVIL)
    assert inert_lines(f"one {EVIL}\ntwo\x07") == f"one {SHOWN}\ntwo\\x07"


# --- text surfaces --------------------------------------------------------------------------


def test_snapshot_text_shows_hostile_strings_escaped():
    text = render_snapshot(EVIL_910B)
    assert_inert(text)
    for part in ("python3 train.py ", "eve", "node", "910B", "HBM ECC ", "npu-smi said ", "rec"):
        assert part + SHOWN in text
    # The chip table stays aligned: every chip line has its Health column at the header's place.
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("NPU  Chip"))
    rows = [line for line in lines if line.startswith("0    0 ")]
    assert rows and rows[0].index("Alarm") == header.index("Health")


def test_doctor_text_shows_hostile_strings_escaped():
    result = CheckResult(
        id="npu-smi",
        group=Group.DRIVER,
        title="npu-smi answers",
        status=Status.FAIL,
        summary=f"npu-smi printed {EVIL}",
        details=(f"first line {EVIL}\nsecond {EVIL}",),
        hint=f"look at {EVIL}",
    )
    report = DoctorReport(results=(result,), has_hardware=True, duration_s=0.1)
    for colour in (False, True):
        text = render_doctor(report, title=f"npuwatch doctor: the machine under /tmp/{EVIL}", colour=colour)
        assert_inert(text)


def test_selftest_text_shows_hostile_strings_escaped():
    from npuwatch.probes.runtime.protocol import Step, StepStatus
    from npuwatch.selftest.render import render_report

    step = Step.SET_DEVICE
    error = StepError(
        code=507033, name=f"ACL{EVIL}", meaning=f"m{EVIL}", fix=f"f{EVIL}", message=f"runtime {EVIL}"
    )
    result = StepResult(step, StepStatus.FAIL, 0.01, f"detail {EVIL}", warnings=(f"w{EVIL}",), error=error)
    run = DeviceRun(
        device=0,
        backend="acl",
        steps=(result,),
        duration_s=0.1,
        facts={"soc_name": f"Ascend910B{EVIL}"},
        problem=f"crashed {EVIL}",
        stderr_tail=f"tail {EVIL}\nmore {EVIL}",
    )
    report = SelftestReport("quick", "auto", "0", (run,), 0.1, 5.0, notes=(f"note {EVIL}",))
    for colour in (False, True):
        assert_inert(render_report(report, verbose=True, colour=colour))


def test_check_line_shows_hostile_strings_escaped(capsys):
    from npuwatch import check_command
    from npuwatch.verdict import HealthVerdict, Problem, Reason

    verdict = HealthVerdict(problems=(Problem(Reason.CONFIG, f"chip {EVIL} is hot", f"hint {EVIL}"),))
    check_command._print(verdict, as_json=False)
    out = capsys.readouterr()
    assert_inert(out.out)
    assert RAW.findall(out.err) == []


def test_json_keeps_the_exact_value_escaped_the_json_way():
    text = snapshot_json.dumps(EVIL_910B)
    assert RAW.findall(text) == []  # json.dumps writes \u001b, never the byte
    assert json.loads(text)["processes"][0]["name"] == f"python3{EVIL}"


# --- the dashboard ----------------------------------------------------------------------------


def terminal_output(app: NpuwatchApp) -> str:
    """What textual writes to the terminal for the whole screen as it is now."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


def test_dashboard_shows_hostile_strings_escaped():
    app = NpuwatchApp(FakeSampler([EVIL_910B]))
    screens = []

    async def main() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            assert await wait_for(pilot, lambda: app.snapshot is not None)
            await pilot.pause()
            screens.append(terminal_output(app))
            app.query_one(ChipGrid).set_layout(compact=False, columns=1)
            app.post_message(ChipSelected(EVIL_910B.chips[0].identity.key))
            assert await wait_for(pilot, lambda: isinstance(app.screen, DetailScreen))
            await pilot.pause()
            screens.append(terminal_output(app))

    asyncio.run(main())
    main_screen, detail = screens
    assert RAW.findall(main_screen) == [], RAW.findall(main_screen)[:5]
    assert "python3 train.py \\x1b[2J" in main_screen  # the process table's command column
    assert "NPU 0 · 910B\\x1b[2J" in main_screen  # an NPU box's title
    assert RAW.findall(detail) == [], RAW.findall(detail)[:5]
    assert "910B\\x1b[2J" in detail


def test_dashboard_cards_and_alerts_show_hostile_strings_escaped():
    from npuwatch.widgets.tui.chips import card_lines, compact_line, problem_lines
    from npuwatch.widgets.tui.host_panel import host_lines
    from npuwatch.widgets.tui.processes import visible_rows

    chip = EVIL_910B.chips[0]
    history = FakeSampler([EVIL_910B]).history
    texts = [line.plain for line in card_lines(chip, history, 80, in_group=False)]
    texts += [compact_line(chip, history, 200, in_group=False).plain]
    texts += [line.plain for line in problem_lines(chip, 200)]
    assert EVIL_910B.host is not None
    texts += [host_lines(EVIL_910B.host, 200).plain]
    texts += [cell.plain for row in visible_rows(EVIL_910B.processes, 0, "", "", 0.0) for cell in row]
    assert RAW.findall("\n".join(texts)) == []


# --- end to end: a recording replayed -------------------------------------------------------


def write_recording(path: Path) -> Path:
    path.write_text(snapshot_json.dumps(EVIL_910B, indent=None) + "\n", encoding="utf-8")
    return path


def run_npuwatch(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "npuwatch", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
        encoding="utf-8",
        errors="surrogateescape",
    )


def test_snapshot_of_a_hostile_recording_prints_it_inert(tmp_path):
    recording = write_recording(tmp_path / f"rec{EVIL}.ndjson".replace("/", ""))
    done = run_npuwatch("snapshot", "--replay", str(recording))
    assert done.returncode == 0, done.stderr
    assert RAW.findall(done.stdout) == [], RAW.findall(done.stdout)[:5]
    assert "python3 train.py \\x1b[2J" in done.stdout
    assert RAW.findall(done.stderr) == []


def test_plain_view_of_a_hostile_recording_prints_it_inert(tmp_path):
    recording = write_recording(tmp_path / "rec.ndjson")
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "NO_COLOR": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "npuwatch", "--plain", "--replay", str(recording), "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    try:
        out, err = child.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        child.terminate()
        out, err = child.communicate(timeout=30)
    text = out.decode("utf-8", "replace")
    assert "python3 train.py \\x1b[2J" in text, err.decode()[-2000:]
    assert RAW.findall(text) == [], RAW.findall(text)[:5]
    assert child.poll() is not None


def test_an_npu_smi_error_quoted_on_stderr_is_inert(tmp_path):
    fake = tmp_path / "npu-smi"
    fake.write_text("#!/bin/sh\nprintf 'broken \\033[2J\\033]0;pwned\\007 here\\n' >&2\nexit 3\n")
    fake.chmod(0o755)
    done = run_npuwatch("snapshot", "--npu-smi", str(fake), "--root", str(tmp_path))
    assert done.returncode == 1
    said = done.stdout + done.stderr
    assert "broken \\x1b[2J\\x1b]0;pwned\\x07 here" in done.stderr, said[-2000:]
    assert RAW.findall(said) == []
