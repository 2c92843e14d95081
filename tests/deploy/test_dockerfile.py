"""deploy/Dockerfile builds `npuwatch serve` as users run it: a normal install of this repository on
a slim Python the project supports, a non-root user in the driver's group, no driver file inside,
an ENTRYPOINT `serve` accepts on the documented port, a HEALTHCHECK that says the node's verdict
(and never a traceback), and a build context (.dockerignore) that holds every file the install
needs.  No Docker daemon is needed: the instructions are read, and their commands run here."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

from npuwatch.cli import build_parser
from npuwatch.exporter.command import DEFAULT_PORT, parse_listen
from tests.conftest import REPO
from tests.deploy.test_manifests import container_port, serve_demo
from tests.installed.product import pip_wheel_argv

DOCKERFILE = REPO / "deploy" / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
#: What the mapped folders ship (pyproject's package-data, plus the modules).
SHIPPED = ("*.py", "py.typed", "*.json", "*.tcss", "*.c")
Instruction = Tuple[str, str]


def instructions() -> List[Instruction]:
    """(KEYWORD, arguments) in order, continuation lines joined and comment lines dropped."""
    found: List[Instruction] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops comment lines, also inside a continued instruction
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        found.append((keyword.upper(), rest.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return found


def arguments(keyword: str) -> List[str]:
    return [rest for word, rest in instructions() if word == keyword]


def exec_form(text: str) -> List[str]:
    """A JSON-array (exec form) instruction's argv; a shell form would start /bin/sh."""
    argv = json.loads(text)
    assert isinstance(argv, list) and all(isinstance(word, str) for word in argv), text
    return argv


def healthcheck() -> Tuple[str, List[str]]:
    (text,) = arguments("HEALTHCHECK")
    options, _, command = text.partition("CMD ")
    return options, exec_form(command)


# ---------------------------------------------------------------- base, install, user


def test_the_image_is_a_slim_python_the_project_supports_and_its_pins_were_resolved_on():
    (arg,) = [a for a in arguments("ARG") if a.startswith("PYTHON_VERSION=")]
    version = arg.split("=", 1)[1]
    bases = [rest.split()[0] for rest in arguments("FROM")]
    assert bases and all(base == "python:${PYTHON_VERSION}-slim-bookworm" for base in bases)
    requires = re.search(r'requires-python = ">=(\d+)\.(\d+)"', (REPO / "pyproject.toml").read_text())
    assert requires and tuple(map(int, version.split("."))) >= tuple(map(int, requires.groups()))
    pinned_on = re.search(r"on Python (\d+\.\d+)\.", (REPO / "constraints.txt").read_text())
    assert pinned_on and pinned_on.group(1) == version  # the pins the image installs were tested there


def test_npuwatch_is_a_normal_install_of_this_repository_with_the_exporter_extra():
    runs = " ".join(arguments("RUN"))
    install = re.search(r"pip install ([^&]*)", runs)
    assert install, runs
    words = install.group(1).split()
    assert '".[exporter]"' in words
    assert not {"-e", "--editable"} & set(words)
    assert "--constraint" in words and words[words.index("--constraint") + 1] == "constraints.txt"


def test_the_image_runs_as_a_non_root_user_in_the_hwhiaiuser_group():
    (user,) = arguments("USER")
    assert user.isdigit() and int(user) != 0  # numeric: Kubernetes' runAsNonRoot can verify it
    runs = " ".join(arguments("RUN"))
    assert re.search(r"groupadd --gid 1000 HwHiAiUser", runs)
    assert re.search(rf"useradd --uid {user} .*--groups HwHiAiUser", runs)
    # No ":gid" after the uid: Docker then adds the groups /etc/group gives the user (HwHiAiUser).
    assert ":" not in user


def test_no_driver_file_is_copied_into_the_image():
    assert not arguments("ADD")
    for rest in arguments("COPY"):
        if rest.startswith("--from="):
            continue  # from the build stage
        for source in rest.split()[:-1]:
            assert (REPO / source).exists(), source  # from this repository, nothing fetched
    body = " ".join(rest for word, rest in instructions() if word in ("RUN", "COPY", "ADD"))
    for driver in ("/usr/local/Ascend", "npu-smi", "libdcmi", "/dev/davinci", "/usr/local/dcmi"):
        assert driver not in body, driver


# ---------------------------------------------------------------- what it runs


def test_the_entrypoint_is_serve_on_every_interface_at_the_documented_port():
    argv = exec_form(arguments("ENTRYPOINT")[0]) + exec_form(arguments("CMD")[0])
    assert argv[:2] == ["npuwatch", "serve"]
    args = build_parser(argv[1:]).parse_args(argv[1:])  # argparse exits (SystemExit) on a bad flag
    listen = parse_listen(args.listen)
    assert (listen.host, listen.port) == ("0.0.0.0", DEFAULT_PORT)
    assert arguments("EXPOSE") == [str(DEFAULT_PORT)]
    assert container_port()["containerPort"] == DEFAULT_PORT  # the DaemonSet's port too


def test_the_healthcheck_leaves_the_check_time_to_answer_before_docker_cuts_it_off():
    options, argv = healthcheck()
    timeout = re.search(r"--timeout=(\d+)s", options)
    inner = re.search(r"timeout=(\d+)\)", argv[-1])
    assert timeout and inner and int(inner.group(1)) < int(timeout.group(1))
    assert f"'127.0.0.1', {DEFAULT_PORT}" in argv[-1]


def _run_healthcheck(port: int) -> Tuple[int, str]:
    _, argv = healthcheck()
    assert argv[0] == "python"  # the image's python (its venv is first on PATH)
    script = argv[-1].replace(f"'127.0.0.1', {DEFAULT_PORT}", f"'127.0.0.1', {port}")
    out = subprocess.run(
        [sys.executable, *argv[1:-1], script], capture_output=True, text=True, timeout=30, check=False
    )
    return out.returncode, out.stdout + out.stderr


def test_the_healthcheck_says_the_nodes_verdict_in_one_line():
    argv = ["serve", "--listen", "0.0.0.0:0"]
    with serve_demo(argv, "a3") as healthy, serve_demo(argv, "chip-alarm") as alarm:
        for base, code, start in ((healthy, 0, "healthy: 16/16 chips OK"), (alarm, 1, "unhealthy: NPU 3")):
            port = int(base.rsplit(":", 1)[1])
            answer = _wait_for_verdict(port, code)
            assert answer[0] == code and answer[1].startswith(start), answer
            assert answer[1].count("\n") == 1, answer


def _wait_for_verdict(port: int, code: int) -> Tuple[int, str]:
    """The first sample can take a moment: ask again (as Docker's --start-period allows)."""
    answer = (-1, "")
    for _ in range(60):
        answer = _run_healthcheck(port)
        if answer[0] == code and "no sample yet" not in answer[1]:
            break
        time.sleep(0.3)
    return answer


def test_the_healthcheck_reports_a_server_that_does_not_answer_without_a_traceback():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        code, text = _run_healthcheck(port)
    assert code == 1
    assert text.startswith(f"unhealthy: npuwatch serve does not answer on 127.0.0.1:{DEFAULT_PORT}:")
    assert "Traceback" not in text and text.count("\n") == 1


# ---------------------------------------------------------------- the build context


def context_files() -> List[str]:
    """The repository files (tracked or not, but not git-ignored) .dockerignore lets into the context."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the repository's files cannot be listed")
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in out.stdout.splitlines() if not ignored(name) and (REPO / name).exists()]


def ignored(name: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides."""
    verdict = False
    for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        if _matches(pattern, name):
            verdict = not negate
    return verdict


def _matches(pattern: str, name: str) -> bool:
    """Go's filepath.Match with ``**`` (``*`` stops at ``/``), on the path or any of its parents."""
    regex = ""
    for token in re.split(r"(\*\*/|\*|\?)", pattern):
        regex += {"**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
    parts = name.split("/")
    return any(re.fullmatch(regex, "/".join(parts[: i + 1])) for i in range(len(parts)))


def test_the_build_context_holds_what_the_dockerfile_copies_and_nothing_else():
    files = context_files()
    copied = [
        word.rstrip("/") for rest in arguments("COPY") if "--from=" not in rest for word in rest.split()[:-1]
    ]
    for source in copied:
        assert any(f == source or f.startswith(source + "/") for f in files), f"{source} is left out"
    for name in files:
        assert any(name == source or name.startswith(source + "/") for source in copied), f"{name} is sent"
    assert not [name for name in files if "__pycache__" in name or name.endswith((".pyc", ".so"))]


def test_the_copied_files_alone_build_a_wheel_with_every_module_and_data_file(tmp_path: Path):
    context = tmp_path / "context"
    for name in context_files():
        target = context / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    out = subprocess.run(
        pip_wheel_argv(Path("."), Path("dist")),
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    (wheel,) = (context / "dist").glob("npuwatch-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in _shipped(context) if name not in names]
    assert not missing, missing


def package_dirs() -> Dict[str, str]:
    """pyproject's package-dir: repository folder -> installed path (``probes`` -> ``npuwatch/probes``)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    line = re.search(r"^package-dir = \{(.*)\}$", text, re.MULTILINE)
    assert line, "pyproject.toml has no one-line package-dir"
    pairs = re.findall(r'"([\w.]+)" = "([\w/]+)"', line.group(1))
    return {folder: package.replace(".", "/") for package, folder in pairs}


def _shipped(context: Path) -> Sequence[str]:
    """Every module and data file of the mapped folders, under its installed name."""
    wanted = []
    for folder, package in package_dirs().items():
        assert (context / folder).is_dir(), (
            f"{folder}/ (pyproject's package-dir) is not in the image's context"
        )
        for path in sorted((context / folder).rglob("*")):
            if path.is_file() and any(fnmatch.fnmatchcase(path.name, p) for p in SHIPPED):
                wanted.append(f"{package}/{path.relative_to(context / folder).as_posix()}")
    assert len(wanted) > 100, wanted
    return wanted
