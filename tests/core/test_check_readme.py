"""The README's health-check commands, run exactly as written against simulated machines."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple, Union

import pytest

from npuwatch.probes.simulator import Simulation
from tests.conftest import REPO, need

HEADING = "## Health checks for containers and Kubernetes"
FAKE_RUNTIME = REPO / "tests" / "fakes" / "runtime"
Command = Union[List[str], str]  # an exec argv, or a line for /bin/sh


def section() -> str:
    """The section's text, up to the next ``## `` heading of README.md."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.find(HEADING + "\n")
    assert start >= 0, f"no section {HEADING!r} in README.md"
    rest = text[start + len(HEADING) :]
    end = re.search(r"^## ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def fenced_blocks(text: str) -> List[Tuple[str, str]]:
    """Every fenced block as (language, body)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def commands() -> List[Tuple[str, Command]]:
    """(where, command) for every `npuwatch check` the section tells users to run."""
    found: List[Tuple[str, Command]] = []
    for language, body in fenced_blocks(section()):
        joined = body.replace("\\\n", " ")
        if language == "dockerfile":
            for m in re.finditer(r"^HEALTHCHECK\b.*?\bCMD\s+(.+)$", joined, re.M):
                cmd = m.group(1).strip()
                found.append(("HEALTHCHECK", json.loads(cmd) if cmd.startswith("[") else cmd))
        elif language == "yaml":
            probe = "exec"
            for line in joined.splitlines():
                named = re.match(r"\s*(\w+Probe):", line)
                probe = named.group(1) if named else probe
                exec_form = re.match(r"\s*command:\s*(\[.*\])\s*$", line)
                if exec_form:
                    found.append((probe, json.loads(exec_form.group(1))))
        elif language in ("sh", "bash", "shell"):
            lines = joined.splitlines()
            found += [("sh", line.strip()) for line in lines if line.startswith("npuwatch check")]
    return found


def test_the_section_shows_every_kind_of_health_check():
    where = [w for w, _ in commands()]
    assert {"HEALTHCHECK", "startupProbe", "readinessProbe", "livenessProbe", "sh"} <= set(where)
    for _, command in commands():
        words = command if isinstance(command, list) else shlex.split(command)
        assert words[:2] == ["npuwatch", "check"], command


def _check_timeout_s(words: List[str]) -> float:
    return float(words[words.index("--timeout") + 1]) if "--timeout" in words else 5.0


def test_every_probe_waits_longer_than_the_check_can_take():
    # A check without --selftest ends within its --timeout + 2 s (health.HEALTH_QUERY_BUDGET_S).
    checked = 0
    for language, body in fenced_blocks(section()):
        joined = body.replace("\\\n", " ")
        if language == "dockerfile":
            for m in re.finditer(r"^HEALTHCHECK\b.*?--timeout=(\d+)s.*?\bCMD\s+(\[.*\])$", joined, re.M):
                assert float(m.group(1)) >= _check_timeout_s(json.loads(m.group(2))) + 3, m.group(0)
                checked += 1
        if language == "yaml":
            for probe in re.split(r"^\s*\w+Probe:", joined, flags=re.M)[1:]:
                words = json.loads(re.search(r"command:\s*(\[.*\])", probe).group(1))
                waits = re.search(r"timeoutSeconds:\s*(\d+)", probe)
                assert waits is not None, probe
                assert float(waits.group(1)) >= _check_timeout_s(words) + 3, probe
                checked += 1
    assert checked == 4  # the HEALTHCHECK and the three probes


@pytest.fixture(scope="module")
def npuwatch_bin() -> Path:
    """The folder of the installed `npuwatch` console script, which the commands call by name."""
    script = Path(sys.executable).parent / "npuwatch"
    need(script.exists(), f"the npuwatch console script is not installed beside {sys.executable}")
    return script.parent


def run_as_written(command: Command, root: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` as Docker (exec form or ``/bin/sh -c``) or Kubernetes (exec) would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NPUWATCH_", "ASCEND_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    env["NPUWATCH_ROOT"] = str(root)  # the machine: a tree whose /usr/local/bin/npu-smi is simulated
    env["NPUWATCH_TRUST_ROOT"] = "1"  # built by this test: its npu-smi and fake libdcmi.so may run
    env["PYTHONPATH"] = str(FAKE_RUNTIME)  # for --selftest: a fake pyACL with two devices
    argv = command if isinstance(command, list) else ["/bin/sh", "-c", command]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd="/")


def _id(case: Tuple[str, Command]) -> str:
    where, command = case
    words = command if isinstance(command, list) else shlex.split(command)
    return f"{where}:{' '.join(words[2:])}"


CASES = commands()


@pytest.mark.parametrize(
    ("scenario", "exit_code", "line"),
    [
        ("910b-training", 0, r"healthy: 8/8 chips OK, max \d+ °C(, self-test passed( with warnings)?)?"),
        (
            "chip-alarm",
            1,
            r"unhealthy: NPU 3 chip 0 Alarm \(80E01801 → restart-business\) — 7/8 chips OK, max \d+ °C",
        ),
        ("no-driver", 1, r"unhealthy: no /dev/davinciN node; .*DCMI error -8005 \(INNER_ERR\)"),
    ],
)
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_the_command_as_written(case, scenario, exit_code, line, npuwatch_bin, tmp_path):
    _, command = case
    with Simulation.start(scenario, workdir=tmp_path / "root") as sim:
        done = run_as_written(command, sim.root, npuwatch_bin)
    assert done.returncode == exit_code, done.stdout + done.stderr
    assert re.fullmatch(line, done.stdout.strip()), done.stdout
    assert "Traceback" not in done.stderr
