"""`npuwatch serve` as users run it: start-up line, scrape, SIGTERM/SIGINT exit 0, bind and usage errors."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Tuple

import pytest

from npuwatch.cli import EXIT_USAGE, main
from npuwatch.errors import UsageError
from npuwatch.exporter.command import DEFAULT_LISTEN, ListenAddress, ServeUsageError, parse_listen
from tests.conftest import REPO

STARTED = re.compile(r"^npuwatch serve: listening on http://127\.0\.0\.1:(\d+) .*source demo:(\S+),")


def wait_until(predicate: Callable[[], bool], deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, "condition not reached before the deadline"
        time.sleep(0.05)


def get(port: int, path: str) -> Tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def start_serve(tmp_path: Path, *argv: str) -> Tuple[subprocess.Popen, Path, Path]:
    """``python -m npuwatch serve ARGV`` with its temp files (the demo's tree) under tmp_path/tmp."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    env = {**os.environ, "TMPDIR": str(temp), "NPUWATCH_SIM_NOW": "120"}
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "npuwatch", "serve", *argv],
            stdout=stdout,
            stderr=stderr,
            env=env,
            cwd=REPO,
        )
    return process, out, temp


def started_port(process: subprocess.Popen, out: Path) -> Tuple[int, str]:
    def line() -> str:
        assert process.poll() is None, f"serve exited early with {process.returncode}"
        return out.read_text()

    wait_until(lambda: "\n" in line())
    first = out.read_text().splitlines()[0]
    found = STARTED.match(first)
    assert found, first
    return int(found.group(1)), found.group(2)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_scrapes_then_stops_cleanly_on_a_signal_and_removes_the_demo_tree(tmp_path, stop):
    process, out, temp = start_serve(tmp_path, "--demo", "--listen", "127.0.0.1:0", "--interval", "0.2")
    try:
        port, scenario = started_port(process, out)
        assert scenario == "910b-training"
        assert list(temp.iterdir())  # the simulated machine lives while serving
        wait_until(lambda: b"npuwatch_up 1.0" in get(port, "/metrics")[1])
        status, body = get(port, "/healthz")
        assert (status, body.startswith(b"healthy: 8/8 chips OK")) == (200, True)
        process.send_signal(stop)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert list(temp.iterdir()) == []  # the demo's tree is gone
    assert len(out.read_text().splitlines()) == 1  # one line at start, nothing per request
    assert (tmp_path / "err.txt").read_text() == ""
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_serve_on_an_explicit_port(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process, out, _ = start_serve(tmp_path, "--demo", "a3", "--listen", f"127.0.0.1:{port}")
    try:
        assert started_port(process, out) == (port, "a3")
        wait_until(lambda: b"machine_npu_nums 16.0" in get(port, "/metrics")[1])
        process.terminate()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_port_in_use_is_one_clear_line_and_exit_1(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--demo", "--listen", f"127.0.0.1:{port}"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"npuwatch: cannot listen on 127.0.0.1:{port}: ")
    assert "in use" in lines[0] and "--listen" in lines[0]
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []  # the demo started for it was removed


def test_an_address_that_is_not_this_machines_is_exit_1(capsys):
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never assigned to a local interface.
    assert main(["serve", "--demo", "--listen", "192.0.2.1:9492"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("npuwatch: cannot listen on 192.0.2.1:9492: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    "value",
    ["9492", "localhost", "127.0.0.1:http", "127.0.0.1:65536", "[::1:9492", "::1:9492", "[nope]:1", ""],
)
def test_a_malformed_listen_is_a_usage_error(capsys, value):
    assert main(["serve", "--demo", "--listen", value]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("npuwatch: --listen") and "Traceback" not in err


def test_a_malformed_listen_as_a_subprocess_exits_64_in_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "npuwatch", "serve", "--demo", "--listen", "nonsense"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == EXIT_USAGE
    assert out.stderr.count("\n") == 1 and "HOST:PORT" in out.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DEFAULT_LISTEN, ListenAddress("127.0.0.1", 9492)),
        ("0.0.0.0:9492", ListenAddress("0.0.0.0", 9492)),
        (":9492", ListenAddress("", 9492)),
        ("[::1]:9492", ListenAddress("::1", 9492)),
        ("[::]:0", ListenAddress("::", 0)),
        ("localhost:8080", ListenAddress("localhost", 8080)),
    ],
)
def test_listen_forms(text, expected):
    assert parse_listen(text) == expected
    assert parse_listen(expected.display) == expected


def test_a_malformed_listen_is_a_usage_error_the_cli_exits_64_for(capsys):
    assert issubclass(ServeUsageError, UsageError)  # the CLI catches the type (npuwatch.errors)
    assert main(["serve", "--listen", "no-port"]) == EXIT_USAGE
    assert "--listen 'no-port': no port" in capsys.readouterr().err


def test_demo_and_root_together_are_a_usage_error(capsys, tmp_path):
    assert main(["serve", "--demo", "--root", str(tmp_path)]) == EXIT_USAGE
    assert "--demo" in capsys.readouterr().err


def test_serve_help_names_listen_and_the_default(capsys):
    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    help_text: List[str] = capsys.readouterr().out.split()
    assert "--listen" in help_text and any("127.0.0.1:9492" in word for word in help_text)


def test_the_exporter_loads_no_ui_library():
    # docs/design.md §1: the exporter is core; it must not pull textual, rich, ipywidgets or IPython.
    code = (
        "import sys, npuwatch.exporter.command, npuwatch.exporter.server;"
        "print([m for m in ('textual', 'rich', 'ipywidgets', 'IPython') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout.strip() == "[]"
