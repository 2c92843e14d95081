"""Hostile input against npuwatch's verdicts (issue 14, defects 5, 8, 10 and 11).

A verdict is wrong when it says healthy while the machine has chips npu-smi does not report
(5), when one bad process row blanks every other one (8), when "permission denied" reads as
"not installed" (10), or when junk from npu-smi hides the chips sysfs knows (11).  Each case
runs ``npuwatch`` as a child over a sysroot tree with a fake npu-smi script, bounded in time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from npuwatch.exporter.healthz import judge_healthz
from npuwatch.exporter.metrics import ExporterView, render
from npuwatch.health import check_health, check_source
from npuwatch.probes.devices import scan_dev
from npuwatch.probes.npu_smi import NpuSmi
from npuwatch.probes.npu_smi.source import NpuSmiSource
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.pci import scan_pci
from npuwatch.probes.sysroot_builder import SysrootBuilder
from npuwatch.sampler import Sampler
from tests.conftest import capture_text, need

#: Generous: a run over a small tree takes a second or two.
DEADLINE_S = 30.0

#: The eight 910B2 chips of capture 001, in NPU-ID order, with their Bus-Ids.
BUS_IDS = (
    "0000:c1:00.0",
    "0000:c2:00.0",
    "0000:81:00.0",
    "0000:82:00.0",
    "0000:01:00.0",
    "0000:02:00.0",
    "0000:41:00.0",
    "0000:42:00.0",
)
FULL_TABLE = capture_text("001")
_LINES = FULL_TABLE.splitlines()
#: npu-smi's table cut after the first chip: no closing line, no process section.
CUT_TABLE = "\n".join(_LINES[:8]) + "\n"
#: A clean table of 4 of the 8 chips, with its closing line.
FOUR_OF_EIGHT = "\n".join(_LINES[:18] + _LINES[30:31]) + "\n"
JUNK = "Segmentation fault? no: just\x01garbage ~~~ 12 34 56\nmore junk\n"


def build_machine(
    root: Path,
    *,
    nodes: Sequence[int] = range(8),
    container: bool = False,
    pci: bool = True,
) -> SysrootBuilder:
    """Eight 910B2 chips (PCI functions and /dev/davinciN), the driver installed, no npu-smi."""
    builder = SysrootBuilder(root)
    if pci:
        for bdf in BUS_IDS:
            builder.add_pci_function(bdf, device_id=0xD802)
    builder.add_dev_nodes(nodes)
    builder.install_driver("24.1.rc2", firmware="7.5.0.1.129", userland=False)
    if container:
        builder.mark_container("docker")
    else:
        builder.set_host_pid_namespace(True)
    return builder


def fake_npu_smi(directory: Path, text: str, exit_code: int = 0) -> Path:
    """A script that prints ``text`` for ``npu-smi info`` (and nothing for other queries)."""
    directory.mkdir(parents=True, exist_ok=True)
    payload = directory / "info.txt"
    payload.write_text(text, encoding="utf-8")
    script = directory / "npu-smi"
    script.write_text(
        f'#!/bin/sh\nif [ "$#" = 1 ] && [ "$1" = info ]; then cat {payload}; exit {exit_code}; fi\nexit 0\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def run_npuwatch(*args: str, env: Optional[Dict[str, str]] = None) -> Tuple[int, str, str]:
    """``python -m npuwatch ARGS`` with a deadline; (exit code, stdout, stderr)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NPUWATCH_", "ASCEND_"))}
    environ.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "npuwatch", *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        env=environ,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def doctor_results(root: Path, npu_smi: Path, *checks: str) -> Dict[str, Dict[str, Any]]:
    _, out, err = run_npuwatch(
        "doctor", "--root", str(root), "--npu-smi", str(npu_smi), "--json", "--only", ",".join(checks)
    )
    assert "Traceback" not in err, err
    return {r["id"]: r for r in json.loads(out)["results"]}


# ---------------------------------------------------------- defect 5: fewer chips than the machine has


@pytest.mark.parametrize("text", [CUT_TABLE, FOUR_OF_EIGHT], ids=["cut-table", "four-of-eight"])
def test_check_is_unhealthy_when_npu_smi_lists_fewer_chips_than_the_machine_has(
    tmp_path: Path, text: str
) -> None:
    build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", text)
    code, out, err = run_npuwatch("check", "--root", str(tmp_path / "root"), "--npu-smi", str(npu_smi))
    assert code == 1, out
    listed = 1 if text is CUT_TABLE else 4
    assert out.startswith(f"unhealthy: npu-smi lists {listed} of 8 chips"), out
    assert "8 Ascend PCI functions" in out and "8 /dev/davinciN" in out, out
    assert "Traceback" not in err


@pytest.mark.parametrize("text", [CUT_TABLE, FOUR_OF_EIGHT], ids=["cut-table", "four-of-eight"])
def test_doctor_fails_when_npu_smi_lists_fewer_chips_than_the_machine_has(tmp_path: Path, text: str) -> None:
    build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", text)
    results = doctor_results(tmp_path / "root", npu_smi, "npu-smi", "chip-health")
    # npu-smi answered (a warning), and chip-health fails for the chips it does not list.
    expected = {"npu-smi": "warn", "chip-health": "fail"}
    for check, status in expected.items():
        assert results[check]["status"] == status, results[check]
        assert "of 8 chips" in results[check]["summary"], results[check]


def test_check_and_doctor_pass_a_full_table(tmp_path: Path) -> None:
    build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", FULL_TABLE)
    code, out, _ = run_npuwatch("check", "--root", str(tmp_path / "root"), "--npu-smi", str(npu_smi))
    assert (code, out.split(",")[0]) == (0, "healthy: 8/8 chips OK"), out
    results = doctor_results(tmp_path / "root", npu_smi, "npu-smi", "chip-health")
    assert [r["status"] for r in results.values()] == ["pass", "pass"], results


def test_a_container_given_one_of_eight_chips_is_healthy_with_that_chip(tmp_path: Path) -> None:
    # PCI sysfs shows all eight functions in a container: its own nodes say what it was given.
    build_machine(tmp_path / "root", nodes=[2], container=True)
    one = "\n".join(_LINES[:6] + _LINES[12:15]) + "\n"  # NPU 2 only, as npu-smi prints it there
    npu_smi = fake_npu_smi(tmp_path / "bin", one)
    code, out, _ = run_npuwatch("check", "--root", str(tmp_path / "root"), "--npu-smi", str(npu_smi))
    assert (code, out.split(",")[0]) == (0, "healthy: 1/1 chips OK"), out


def test_a_container_with_two_nodes_and_one_chip_listed_is_unhealthy(tmp_path: Path) -> None:
    build_machine(tmp_path / "root", nodes=[2, 3], container=True)
    npu_smi = fake_npu_smi(tmp_path / "bin", "\n".join(_LINES[:6] + _LINES[12:15]) + "\n")
    code, out, _ = run_npuwatch("check", "--root", str(tmp_path / "root"), "--npu-smi", str(npu_smi))
    assert code == 1 and "npu-smi lists 1 of 2 chips" in out and "2 /dev/davinciN" in out, out
    assert "PCI" not in out, out  # a container's PCI view is the host's, not what it was given


def test_serve_healthz_agrees_on_a_table_cut_short_from_the_first_sample(tmp_path: Path) -> None:
    builder = build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", CUT_TABLE)
    with Sampler(NpuSmiSource(NpuSmi(npu_smi, timeout_s=10)), builder.sysroot()) as sampler:
        snapshot = sampler.sample()
    answer = judge_healthz(ExporterView(snapshot=snapshot), 0.0, 60.0)
    assert answer.status == 503, answer
    assert "npu-smi lists 1 of 8 chips" in answer.line, answer
    assert any("npu-smi lists 1 of 8 chips" in w for w in snapshot.warnings), snapshot.warnings


def machine_of(root: Path) -> Any:
    from npuwatch.machine_chips import machine_chips
    from npuwatch.probes.container import detect_container

    sysroot = SysrootBuilder(root).sysroot()
    return machine_chips(scan_pci(sysroot), scan_dev(sysroot), detect_container(sysroot).in_container)


def test_a3_counts_one_pci_function_and_one_node_per_chip(tmp_path: Path) -> None:
    from npuwatch.machine_chips import unreported_chips

    # Atlas A3: 8 NPUs × 2 chips, one PCI function (d803) and one /dev/davinciN per chip.
    builder = SysrootBuilder(tmp_path)
    for n in range(16):
        builder.add_pci_function(f"0000:{0x10 + n:02x}:00.0", device_id=0xD803)
    builder.add_dev_nodes(range(16))
    table = parse_info(capture_text("043"))  # 2 cards × 2 chips
    has = machine_of(tmp_path)
    assert has.count == 16
    problem = unreported_chips(has, table.chips)
    assert problem is not None and "lists 4 of 16 chips" in problem.message


def test_310p_duo_counts_two_chips_per_function(tmp_path: Path) -> None:
    from npuwatch.machine_chips import unreported_chips

    builder = SysrootBuilder(tmp_path)
    for bdf in ("0000:01:00.0", "0000:81:00.0"):
        builder.add_pci_function(bdf, device_id=0xD500, subsystem_device_id=0x0110)
    builder.add_dev_nodes(range(4))
    table = parse_info(capture_text("044"))  # 2 cards × 2 chips
    has = machine_of(tmp_path)
    assert has.count == 4
    assert unreported_chips(has, table.chips) is None


def test_310b_soc_board_without_pci_counts_its_device_nodes(tmp_path: Path) -> None:
    from npuwatch.machine_chips import unreported_chips

    SysrootBuilder(tmp_path).add_dev_nodes([0], extra=())
    table = parse_info(capture_text("039"))
    has = machine_of(tmp_path)
    assert has.count == 1 and unreported_chips(has, table.chips) is None
    SysrootBuilder(tmp_path).add_dev_nodes([1])
    problem = unreported_chips(machine_of(tmp_path), table.chips)
    assert problem is not None and "lists 1 of 2 chips" in problem.message


def test_functions_given_to_another_driver_are_not_counted(tmp_path: Path) -> None:
    from npuwatch.machine_chips import unreported_chips

    # Passed through to a VM (vfio-pci): the host's npu-smi rightly does not list them.
    builder = build_machine(tmp_path, nodes=range(4))
    for bdf in BUS_IDS[4:]:
        builder.bind_driver(bdf, "vfio-pci")
    table = parse_info(FOUR_OF_EIGHT)
    assert unreported_chips(machine_of(tmp_path), table.chips) is None


def test_check_health_with_devices_judges_only_those(tmp_path: Path) -> None:
    builder = build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", FOUR_OF_EIGHT)
    verdict = check_health(builder.sysroot(), check_source(NpuSmi(npu_smi, timeout_s=10)), devices={0, 1})
    assert verdict.healthy, verdict.line


# ------------------------------------------------------------------ defect 11: junk from npu-smi


def test_junk_from_npu_smi_is_a_failed_read_and_the_pci_chips_stay(tmp_path: Path) -> None:
    root = tmp_path / "root"
    build_machine(root)
    npu_smi = fake_npu_smi(tmp_path / "bin", JUNK)
    _, out, err = run_npuwatch("snapshot", "--root", str(root), "--npu-smi", str(npu_smi), "--json")
    assert "Traceback" not in err, err
    document = json.loads(out)
    assert len(document["chips"]) == 8, document["chips"]
    probe = next(p for p in document["probes"] if p["name"] == "npu-smi")
    assert probe["status"] != "ok", probe
    assert "no chip table" in (probe["message"] or ""), probe
    assert any("no chip table" in w for w in document["warnings"]), document["warnings"]


def test_junk_from_npu_smi_sets_npuwatch_up_to_0_and_healthz_to_503(tmp_path: Path) -> None:
    builder = build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", JUNK)
    with Sampler(NpuSmiSource(NpuSmi(npu_smi, timeout_s=10)), builder.sysroot()) as sampler:
        snapshot = sampler.sample()
    view = ExporterView(snapshot=snapshot)
    assert view.up is False
    assert b"npuwatch_up 0.0" in render(view)
    answer = judge_healthz(view, 0.0, 60.0)
    assert answer.status == 503 and "no chip table" in answer.line, answer


def test_an_empty_answer_is_a_failed_read_too(tmp_path: Path) -> None:
    builder = build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", "\n")
    reading = NpuSmiSource(NpuSmi(npu_smi, timeout_s=10)).read()
    assert reading.reading is None and reading.failure is not None, reading
    del builder


def test_a_table_with_a_header_and_no_chip_is_still_a_table(tmp_path: Path) -> None:
    # npu-smi's header with an empty chip section is npu-smi's own answer, not junk.
    npu_smi = fake_npu_smi(tmp_path / "bin", "\n".join(_LINES[:6]) + "\n")
    reading = NpuSmiSource(NpuSmi(npu_smi, timeout_s=10)).read()
    assert reading.failure is None and reading.reading is not None and not reading.reading.chips


# ------------------------------------------------------------------ defect 8: one bad PID


def _with_process_rows(rows: List[str]) -> str:
    head = _LINES[:33]  # the chip table and the process header
    return "\n".join(head + rows) + "\n"


def test_a_bad_pid_is_skipped_and_the_other_rows_keep_their_details(tmp_path: Path) -> None:
    me = os.getpid()
    name = Path(sys.executable).name[:15]
    sep = "+===========================+===============+====================================================+"
    rows = [
        f"| 0       0                 | -1            | {'evil':<24} | 129                     |",
        f"| 1       0                 | {me:<13} | {name:<24} | 129                     |",
        sep,
    ]
    builder = build_machine(tmp_path / "root")
    npu_smi = fake_npu_smi(tmp_path / "bin", _with_process_rows(rows))
    from npuwatch.probes.host import HostProbe

    host = HostProbe(in_container=False, host_pid_namespace=True)
    with Sampler(NpuSmiSource(NpuSmi(npu_smi, timeout_s=10)), builder.sysroot(), host) as sampler:
        snapshot = sampler.sample()
    pids = [p.pid for p in snapshot.processes]
    assert pids == [me], snapshot.processes
    assert snapshot.processes[0].host is not None, snapshot.processes[0]
    assert any("PID -1" in w for w in snapshot.warnings), snapshot.warnings
    assert all(p.status.value == "ok" for p in snapshot.probes if p.name == "host"), snapshot.probes


def test_host_probe_never_fails_all_rows_for_one_pid() -> None:
    from npuwatch.model import NpuProcess
    from npuwatch.probes.host import HostProbe, PsutilLookup

    me = os.getpid()
    name = Path(sys.executable).name[:15]
    host = HostProbe(PsutilLookup(), host_pid_namespace=True)
    rows = [NpuProcess(npu_id=0, chip_id=0, pid=pid, name=name) for pid in (-1, 0, 2**40, me)]
    out = host.enrich(rows)
    assert [p.host is not None for p in out] == [False, False, False, True], out
    assert all(p.host_unavailable for p in out[:3]), out


# ---------------------------------------------------------- defect 10: permission denied is not "absent"

NOBODY = 65534


@pytest.fixture
def shared_tree() -> Iterator[Path]:
    """A folder other users can read (pytest's tmp_path is root's alone); removed afterwards."""
    need(os.geteuid() == 0, "switching to another user needs root (CI runs as root)")
    top = Path(tempfile.mkdtemp(prefix="verdicts-"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert not top.exists()


def as_nobody(root: Path, npu_smi: Path, *checks: str) -> Dict[str, Any]:
    """Run doctor checks over ``root`` as uid 65534 in a forked child: {id: finding, has_hardware}.

    A forked child, not a new interpreter: the interpreter may live where nobody can reach it
    (/root/.pyenv).  Everything the checks need is imported here first, as root.
    """
    from npuwatch.doctor.machine import Machine
    from npuwatch.doctor.registry import all_checks
    from npuwatch.probes.sysroot import Sysroot

    wanted = [c for c in all_checks() if c.id in checks]
    warm = Machine(Sysroot(root, environ={}), npu_smi, timeout_s=10)
    for check in wanted:
        check.run(warm)  # imports what the checks import, while root can still read it
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become nobody, judge, report, and leave without cleanup handlers
        code = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            machine = Machine(Sysroot(root, environ={}), npu_smi, timeout_s=10)
            out: Dict[str, Any] = {"has_hardware": machine.has_hardware(), "uid": os.getuid()}
            for check in wanted:
                finding = check.run(machine)
                out[check.id] = {
                    "status": finding.status.value,
                    "summary": finding.summary,
                    "hint": finding.hint,
                }
            os.write(write_end, json.dumps(out).encode())
        except BaseException as exc:  # reported to the parent, never raised in the child
            os.write(write_end, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    document: Dict[str, Any] = json.loads(data)
    assert "error" not in document and document["uid"] == NOBODY, document
    return document


def _shared_machine(top: Path) -> Tuple[SysrootBuilder, Path]:
    builder = build_machine(top / "root")
    builder.add_dev_nodes(range(8), mode=0o666)
    for folder in (top / "root").rglob("*"):
        if folder.is_dir() and not folder.is_symlink():
            folder.chmod(0o755)
    return builder, fake_npu_smi(top / "bin", FULL_TABLE)


def test_an_unreadable_driver_folder_is_not_called_not_installed(shared_tree: Path) -> None:
    builder, npu_smi = _shared_machine(shared_tree)
    builder.path("/usr/local/Ascend/driver").chmod(0o750)  # root:root, as without --install-for-all
    finding = as_nobody(builder.root, npu_smi, "driver-install")["driver-install"]
    assert "not installed" not in finding["summary"], finding
    assert "cannot read /usr/local/Ascend/driver as this user" in finding["summary"], finding
    assert "HwHiAiUser" in finding["hint"] and "--install-for-all" in finding["hint"], finding


def test_an_unreadable_pci_folder_is_not_called_no_npu(shared_tree: Path) -> None:
    builder, npu_smi = _shared_machine(shared_tree)
    for n in range(8):
        builder.path(f"/dev/davinci{n}").unlink()  # and no device node this user can see
    builder.path("/sys/bus/pci/devices").chmod(0o700)
    result = as_nobody(builder.root, npu_smi, "pci-devices", "npu-smi")
    assert result["has_hardware"] is True, result
    finding = result["pci-devices"]
    assert "no Ascend NPU" not in finding["summary"], finding
    assert "cannot read /sys/bus/pci/devices as this user" in finding["summary"], finding
    assert result["npu-smi"]["status"] == "pass", result["npu-smi"]
