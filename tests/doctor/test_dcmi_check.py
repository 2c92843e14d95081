"""The doctor's dcmi check: the library found and loaded, dcmi_init explained, DCMI against npu-smi."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Sequence

import psutil
import pytest

from npuwatch.chip_source import ChipReading, SourceFailure, SourceReading
from npuwatch.cli import main
from npuwatch.doctor import dcmi_agreement, facts, registry
from npuwatch.doctor.checks import dcmi
from npuwatch.doctor.engine import run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import Finding, Group, Status
from npuwatch.model import ChipIdentity, ChipSample, Health
from npuwatch.probes.dcmi import abi
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder
from tests.doctor.machines import TestMachine, simulated

WORKER = "npuwatch.probes.dcmi.worker"


def as_user(monkeypatch, name: str = "alice", uid: int = 1000) -> None:
    identity = facts.UserIdentity(uid, name, frozenset({uid}), process=False)
    monkeypatch.setattr(facts, "current_user", lambda: identity)


def workers() -> List[psutil.Process]:
    """DCMI worker processes this test process started (and did not end)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(WORKER in part for part in child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def _no_worker_left():
    yield
    assert workers() == [], "a DCMI worker outlived the check"


def demo_machine(tm: TestMachine, *, timeout_s: float = 5.0, backend: str = "auto") -> Machine:
    """The demo's machine as ``npuwatch doctor --demo`` builds it: its fake library named."""
    return Machine(
        Sysroot(tm.root, environ=dict(tm.environ)),
        tm.npu_smi,
        timeout_s,
        dcmi_library=tm.sim.dcmi_library,
        dcmi_kind=tm.sim.dcmi_kind,
        chip_backend=backend,
    )


def run(tm: TestMachine, **options) -> Finding:
    return dcmi.run(demo_machine(tm, **options))


# ---------------------------------------------------------------- the demos


def test_the_check_runs_after_npu_smi_in_the_driver_group():
    ids = [name.replace("_", "-") for name in registry.CHECK_MODULES]
    assert ids.index("dcmi") == ids.index("npu-smi") + 1
    assert dcmi.CHECK.id == "dcmi"
    assert dcmi.CHECK.group is Group.DRIVER
    assert dcmi.CHECK.needs_hardware and dcmi.CHECK.runs_npu_smi


def test_910b_training_both_backends_read_the_same_chips_and_values(tmp_path):
    finding = run(simulated(tmp_path))
    assert finding.status is Status.PASS, finding
    assert finding.summary == (
        "DCMI reads 8 chips and agrees with npu-smi "
        "(temperature ±2 °C, power ±5 W or 5 %, AI Core ±10 points)"
    )
    assert any(line.startswith("library: /usr/local/dcmi/libdcmi.so") for line in finding.details)
    assert "DCMI read 8 chips" in finding.details


@pytest.mark.parametrize(("scenario", "chips"), [("a3", 16), ("310p-duo", 4), ("950", 8), ("chip-alarm", 8)])
def test_every_healthy_dcmi_demo_agrees_with_npu_smi(tmp_path, scenario, chips):
    finding = run(simulated(tmp_path, scenario))
    assert finding.status is Status.PASS, finding
    assert finding.summary.startswith(f"DCMI reads {chips} chips and agrees with npu-smi")


def test_doctor_command_runs_the_check_on_the_demo(capsys):
    code = main(
        ["doctor", "--demo", "910b-training", "--only", "npu-smi,dcmi", "--json", "--backend", "auto"]
    )
    document = json.loads(capsys.readouterr().out)
    results = {result["id"]: result for result in document["results"]}
    assert code == 0
    assert results["dcmi"]["status"] == "pass"
    assert results["dcmi"]["summary"].startswith("DCMI reads 8 chips and agrees with npu-smi")


def test_dcmi_permission_names_the_group_fix(tmp_path, monkeypatch):
    as_user(monkeypatch)
    tm = simulated(tmp_path, "dcmi-permission")
    tm.builder.write_file("/etc/passwd", "alice:x:1000:1000::/home/alice:/bin/bash\n")  # the tree's uid 1000
    finding = run(tm)
    assert finding.status is Status.WARN
    assert finding.summary == (
        "dcmi_init refused with -8002 (OPER_NOT_PERMITTED): alice is not root and not in HwHiAiUser; "
        "npuwatch reads the chips through npu-smi instead"
    )
    assert finding.hint is not None
    assert "`sudo usermod -aG HwHiAiUser alice`, then log out and in again" in finding.hint


def test_dcmi_permission_as_root_does_not_ask_root_to_become_root(tmp_path, monkeypatch):
    as_user(monkeypatch, "root", 0)
    finding = run(simulated(tmp_path, "dcmi-permission"))
    assert finding.status is Status.WARN
    assert finding.summary.startswith("dcmi_init refused with -8002 (OPER_NOT_PERMITTED) even for root")
    assert "usermod" not in (finding.hint or "")


def test_dcmi_permission_fails_when_dcmi_is_the_backend_chosen(tmp_path, monkeypatch):
    as_user(monkeypatch)
    finding = run(simulated(tmp_path, "dcmi-permission"), backend="dcmi")
    assert finding.status is Status.FAIL
    assert "--backend dcmi never falls back to npu-smi" in finding.details


def test_dcmi_missing_says_npuwatch_falls_back_to_npu_smi(tmp_path):
    tm = simulated(tmp_path, "dcmi-missing")
    assert tm.sim.dcmi_library is None
    finding = run(tm)
    assert finding.status is Status.SKIP
    assert finding.summary == (
        "libdcmi.so not found (looked in /usr/local/Ascend/driver/lib64/driver/libdcmi.so, "
        "/usr/local/dcmi/libdcmi.so); npuwatch reads the chips through npu-smi instead"
    )
    assert any(line.startswith("search order: --dcmi-lib / NPUWATCH_DCMI_LIB") for line in finding.details)
    assert any("-v /usr/local/dcmi:/usr/local/dcmi" in line for line in finding.details)


def test_dcmi_missing_fails_with_backend_dcmi(tmp_path):
    finding = run(simulated(tmp_path, "dcmi-missing"), backend="dcmi")
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("libdcmi.so not found")
    assert "-v /usr/local/dcmi:/usr/local/dcmi" in (finding.hint or "")


def test_a_named_library_that_is_not_there_is_a_warning(tmp_path):
    tm = simulated(tmp_path)
    machine = demo_machine(tm)
    machine.dcmi_library = str(tmp_path / "nowhere" / "libdcmi.so")
    finding = dcmi.run(machine)
    assert finding.status is Status.WARN
    assert finding.summary.startswith(f"libdcmi.so not found (looked in {tmp_path}/nowhere/libdcmi.so)")


def test_container_without_manager_nodes_names_the_devices_and_mounts(tmp_path):
    finding = run(simulated(tmp_path, "container-missing-nodes"))
    assert finding.status is Status.FAIL  # npu-smi fails alike: nothing reads the chips
    assert finding.summary == (
        "dcmi_init failed with -8005 (INNER_ERR): this container lacks /dev/davinci_manager, "
        "/dev/devmm_svm, /dev/hisi_hdc"
    )
    assert finding.hint is not None
    assert "--device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc" in finding.hint
    assert "-v /usr/local/dcmi:/usr/local/dcmi" in finding.hint


def test_a_host_without_manager_nodes_points_at_the_driver(tmp_path):
    finding = run(simulated(tmp_path, "no-driver"))
    assert finding.status is Status.FAIL
    assert finding.summary.startswith("dcmi_init failed with -8005 (INNER_ERR): /dev/davinci_manager")
    assert "lsmod | grep drv_" in (finding.hint or "")


def test_a_hanging_library_is_a_warning_within_the_check_s_limit_and_leaves_no_worker(tmp_path):
    finding = run(simulated(tmp_path, "dcmi-hang"), timeout_s=1.0)
    assert finding.status is Status.WARN
    assert finding.summary.startswith("DCMI hangs: a DCMI call did not return within 1 s")
    assert workers() == []


def test_the_engine_gets_the_hang_s_finding_not_its_own_timeout(tmp_path):
    report = run_doctor(demo_machine(simulated(tmp_path, "dcmi-hang"), timeout_s=1.0), [dcmi.CHECK])
    assert report.results[0].status is Status.WARN, report.results[0]


def test_a_crashing_library_is_a_warning(tmp_path):
    finding = run(simulated(tmp_path, "dcmi-crash"))
    assert finding.status is Status.WARN
    assert finding.summary.startswith("DCMI crashes: the DCMI library crashed (SIGSEGV) in the worker")


def test_a_damaged_library_is_named_with_the_loader_s_words(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_library("/usr/local/dcmi/libdcmi.so", broken=True)
    machine = demo_machine(tm)
    machine.dcmi_library = None  # searched: found in the tree, does not load
    finding = dcmi.run(machine)
    assert finding.status is Status.WARN
    assert finding.summary.startswith("/usr/local/dcmi/libdcmi.so does not load: ")
    assert "npuwatch reads the chips through npu-smi instead" in finding.summary
    assert "damaged or built for another architecture" in (finding.hint or "")


def test_a_libdcmi_without_dcmi_init_is_no_dcmi_library(tmp_path):
    tm = simulated(tmp_path)
    tm.builder.install_library("/usr/local/dcmi/libdcmi.so")  # a real library, but libm
    machine = demo_machine(tm)
    machine.dcmi_library = None
    finding = dcmi.run(machine)
    assert finding.status is Status.SKIP
    assert finding.summary == (
        "/usr/local/dcmi/libdcmi.so has no dcmi_init: it is not the driver's libdcmi.so; "
        "npuwatch reads the chips through npu-smi instead"
    )


# ---------------------------------------------------------------- scripted sources


def chip(npu_id: int, temperature_c: int = 50, power_w: float = 200.0, aicore: int = 40) -> ChipSample:
    return ChipSample(
        identity=ChipIdentity(npu_id, 0, "910B3"),
        health=Health.OK,
        temperature_c=temperature_c,
        power_w=power_w,
        aicore_percent=aicore,
    )


def reading(*chips: ChipSample) -> SourceReading:
    return SourceReading(ChipReading(chips=chips), None, 0.01)


class Scripted:
    """A source that answers its readings in turn (the last one for ever)."""

    def __init__(self, readings: Sequence[SourceReading]) -> None:
        self.readings = list(readings)
        self.closed = False

    def read(self) -> SourceReading:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]

    def close(self) -> None:
        self.closed = True


class ScriptedMachine(Machine):
    """A tree with a loadable libdcmi.so whose DCMI and npu-smi readings are scripted."""

    def __init__(
        self, root: Path, dcmi_readings: Sequence[SourceReading], npu_smi_readings: Sequence[SourceReading]
    ) -> None:
        builder = SysrootBuilder(root)
        builder.install_library("/usr/local/dcmi/libdcmi.so")
        self.dcmi_side = Scripted(dcmi_readings)
        self.npu_smi_side = Scripted(npu_smi_readings)
        trusted = {"NPUWATCH_TRUST_ROOT": "1"}  # the tree's library is this test's: it may load
        opener = lambda machine, t, g: self.dcmi_side  # noqa: E731
        super().__init__(Sysroot(root, environ=trusted), None, dcmi_opener=opener)
        self._first = self.npu_smi_side.read()

    def chip_reading(self) -> SourceReading:
        return self._first

    def fresh_chip_reading(self, timeout_s: float) -> SourceReading:
        return self.npu_smi_side.read()


def test_a_lasting_disagreement_names_the_chip_and_the_metric(tmp_path):
    npu_smi = reading(chip(0), chip(3, temperature_c=75))
    machine = ScriptedMachine(tmp_path, [reading(chip(0), chip(3, temperature_c=61))], [npu_smi])
    finding = dcmi.run(machine)
    assert finding.status is Status.WARN
    assert finding.summary == (
        "DCMI and npu-smi disagree: NPU 3 chip 0 temperature: DCMI 61 °C, npu-smi 75 °C (tolerance ±2 °C)"
    )
    assert "compare `npu-smi info` with `npuwatch snapshot --json --backend dcmi`" in (finding.hint or "")
    assert machine.dcmi_side.closed


def test_a_disagreement_seen_once_is_values_moving_between_reads(tmp_path):
    dcmi_side = [reading(chip(0, power_w=250.0)), reading(chip(0, power_w=200.0))]
    machine = ScriptedMachine(tmp_path, dcmi_side, [reading(chip(0, power_w=200.0))])
    finding = dcmi.run(machine)
    assert finding.status is Status.PASS, finding


def test_every_disagreement_is_listed_with_the_first_in_the_summary(tmp_path):
    ours = reading(chip(0, power_w=300.0, aicore=90), chip(1))
    theirs = reading(chip(0, power_w=200.0, aicore=40), chip(2))
    finding = dcmi.run(ScriptedMachine(tmp_path, [ours], [theirs]))
    assert finding.status is Status.WARN
    assert (
        finding.summary
        == "DCMI and npu-smi disagree: NPU 1 chip 0 listed by DCMI, not by npu-smi (and 3 more)"
    )
    assert finding.details[-4:] == (
        "NPU 1 chip 0 listed by DCMI, not by npu-smi",
        "NPU 2 chip 0 listed by npu-smi, not by DCMI",
        "NPU 0 chip 0 power: DCMI 300.0 W, npu-smi 200.0 W (tolerance ±5 W or 5 %)",
        "NPU 0 chip 0 AI Core: DCMI 90 %, npu-smi 40 % (tolerance ±10 points)",
    )


def test_dcmi_working_while_npu_smi_fails_passes_and_says_so(tmp_path):
    failure = SourceReading(None, SourceFailure("timeout", "npu-smi did not answer within 5 s", "h"), 5.0)
    finding = dcmi.run(ScriptedMachine(tmp_path, [reading(chip(0))], [failure]))
    assert finding.status is Status.PASS
    assert finding.summary == "DCMI reads 1 chip (npu-smi gives nothing to compare with: see npu-smi)"


def test_dcmi_listing_no_chip_is_a_problem(tmp_path):
    finding = dcmi.run(ScriptedMachine(tmp_path, [reading()], [reading(chip(0))]))
    assert finding.status is Status.WARN
    assert finding.summary.startswith("dcmi_init succeeds but DCMI lists no chip")


def test_init_8005_in_a_container_with_its_nodes_points_at_the_host_s_libraries(tmp_path):
    failure = SourceFailure("init", "dcmi_init failed with -8005: DCMI internal error", "h", error_code=-8005)
    machine = ScriptedMachine(tmp_path, [SourceReading(None, failure, 0.1)], [reading(chip(0))])
    builder = SysrootBuilder(tmp_path)
    builder.mark_container("docker")
    builder.add_dev_nodes(range(1))
    finding = dcmi.run(machine)
    assert finding.status is Status.WARN
    assert finding.summary.startswith(
        "dcmi_init failed with -8005 (INNER_ERR) in a container whose device nodes are present"
    )
    assert "-v /usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64" in (finding.hint or "")


def test_another_init_code_is_explained_from_the_code_table(tmp_path):
    failure = SourceFailure("init", "dcmi_init failed with -8020", "h", error_code=-8020)
    finding = dcmi.run(ScriptedMachine(tmp_path, [SourceReading(None, failure, 0.1)], [reading(chip(0))]))
    assert finding.status is Status.WARN
    assert finding.summary.startswith(
        "dcmi_init failed with -8020 (RESOURCE_OCCUPIED): the device is in use by another process"
    )


# ---------------------------------------------------------------- the comparison alone


@pytest.mark.parametrize(
    ("ours", "theirs", "agree"),
    [
        (chip(0, temperature_c=50), chip(0, temperature_c=52), True),
        (chip(0, temperature_c=50), chip(0, temperature_c=53), False),
        (chip(0, power_w=100.0), chip(0, power_w=105.0), True),  # 5 W
        (chip(0, power_w=100.0), chip(0, power_w=105.5), False),
        (chip(0, power_w=400.0), chip(0, power_w=420.0), True),  # 5 % of 420 W
        (chip(0, power_w=400.0), chip(0, power_w=425.0), False),
        (chip(0, aicore=40), chip(0, aicore=50), True),
        (chip(0, aicore=40), chip(0, aicore=51), False),
    ],
)
def test_tolerances(ours, theirs, agree):
    found = dcmi_agreement.disagreements(ChipReading(chips=(ours,)), ChipReading(chips=(theirs,)))
    assert (found == []) is agree


def test_a_metric_only_one_backend_has_is_no_disagreement():
    a3_chip_1 = ChipSample(identity=ChipIdentity(0, 1), health=Health.OK, temperature_c=40)
    with_power = ChipSample(identity=ChipIdentity(0, 1), health=Health.OK, temperature_c=40, power_w=90.0)
    assert (
        dcmi_agreement.disagreements(ChipReading(chips=(a3_chip_1,)), ChipReading(chips=(with_power,))) == []
    )


def test_the_check_never_calls_a_setter():
    # The worker calls only the declared prototypes: none of them changes the device.
    assert not [name for name in abi.PROTOTYPES if any(word in name for word in ("set", "reset", "upgrade"))]


def test_where_it_looks_follows_the_loader_s_search_order(tmp_path):
    from npuwatch.probes.dcmi import library

    trusted = {"NPUWATCH_TRUST_ROOT": "1"}
    machine = Machine(Sysroot(tmp_path, environ=trusted), None)
    assert dcmi.candidates(machine) == library.candidates(None, str(tmp_path), trusted)
    assert dcmi.candidates(machine) == tuple(str(tmp_path / p) for p in library.INSTALLED_PATHS)
    assert dcmi.candidates(Machine(Sysroot(tmp_path, environ={}), None)) == ()  # an untrusted tree's: none
    live = Machine(Sysroot("/", environ={}), None)
    assert dcmi.candidates(live) == library.candidates(None, "/")
    named = Machine(Sysroot("/", environ={"NPUWATCH_DCMI_LIB": "/opt/libdcmi.so"}), None)
    assert dcmi.candidates(named) == ("/opt/libdcmi.so",)


def test_no_worker_is_left_when_the_read_raises(tmp_path):
    class Exploding(Scripted):
        def read(self) -> SourceReading:
            raise RuntimeError("boom")

    machine = ScriptedMachine(tmp_path, [reading(chip(0))], [reading(chip(0))])
    side = Exploding([reading(chip(0))])
    machine._dcmi_opener = lambda m, t, g: side
    with pytest.raises(RuntimeError):
        dcmi.run(machine)
    assert side.closed
