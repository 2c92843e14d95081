"""Issue 28, group 7 ("one fact, several verdicts"), the DCMI-failure half: a failed DCMI is named
DCMI on every surface — the alert line, `check`, `/healthz` — never npu-smi.

``--backend dcmi`` on the ``dcmi-permission`` demo: the fake ``libdcmi.so`` (C, built with
``cc``) answers ``dcmi_init`` with -8002.  Each surface asks the snapshot's ``SourceInfo`` which
source failed; none guesses it from the failure's words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Tuple

from npuwatch.alerts import AlertKind, AlertTracker, summary_line
from npuwatch.cli import main
from npuwatch.feeds import FeedOptions, open_feed
from tests.exporter.test_serve_cli import get, start_serve, started_port, wait_until

#: DCMI named as a word, as sentences name it (``dcmi_init`` is a function, not the source's name).
NAMES_DCMI = re.compile(r"(?<![\w-])DCMI(?![\w-])")
SCENARIO = ("--demo", "dcmi-permission", "--backend", "dcmi")


def alert_line(options: FeedOptions, samples: int = 3) -> Tuple[str, str]:
    """The dashboard's alert line after ``samples`` samples, and the source alert's detail."""
    tracker = AlertTracker()
    with open_feed(options) as feed:
        for _ in range(samples):
            alerts = tracker.update(feed.sample())
    source = [a for a in alerts if a.kind is AlertKind.NPU_SMI]
    assert len(source) == 1, alerts
    return summary_line(alerts, 200), source[0].detail


def test_the_alert_line_names_dcmi_when_dcmi_fails_to_initialise():
    line, detail = alert_line(FeedOptions(demo="dcmi-permission", backend="dcmi", interval_s=0.2))
    assert NAMES_DCMI.search(line), line
    assert "dcmi_init failed with -8002" in line
    assert "npu-smi" not in line + detail


def test_a_replay_of_the_recording_names_dcmi_too(tmp_path: Path):
    path = tmp_path / "dcmi-failing.ndjson"
    argv = ["record", *SCENARIO, "--duration", "1", "--interval", "0.3", "--quiet", str(path)]
    assert main(argv) == 0
    line, detail = alert_line(FeedOptions(replay=str(path), speed=100.0))
    assert NAMES_DCMI.search(line), line
    assert "npu-smi" not in line + detail


def test_check_names_dcmi(capsys):
    assert main(["check", *SCENARIO]) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith("unhealthy: DCMI failed: dcmi_init failed with -8002"), line
    assert "npu-smi" not in line
    assert main(["check", "--json", *SCENARIO]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert [p["reason"] for p in problems] == ["dcmi"]
    assert NAMES_DCMI.search(problems[0]["message"])


def test_healthz_names_dcmi(tmp_path: Path):
    process, out, _ = start_serve(tmp_path, *SCENARIO, "--listen", "127.0.0.1:0", "--interval", "0.2")
    try:
        port, _ = started_port(process, out)
        wait_until(lambda: b"no sample yet" not in get(port, "/healthz")[1])
        status, body = get(port, "/healthz")
        line = body.decode()
        assert status == 503
        assert line.startswith("unhealthy: DCMI permission: dcmi_init failed with -8002"), line
        assert "npu-smi" not in line
        process.terminate()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
