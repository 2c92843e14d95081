"""The doctor engine and registry, with checks of its own: order, crashes, hangs, skips, exit codes."""

from __future__ import annotations

import importlib
import threading
from typing import Iterator, List

import pytest

from npuwatch.doctor import registry
from npuwatch.doctor.engine import DEFAULT_CHECK_TIMEOUT_S, DoctorReport, check_timeout_s, run_doctor
from npuwatch.doctor.machine import Machine
from npuwatch.doctor.result import (
    Check,
    CheckResult,
    Finding,
    Group,
    Status,
    failed,
    passed,
    skipped,
    warned,
)
from npuwatch.probes.sysroot import Sysroot
from npuwatch.probes.sysroot_builder import SysrootBuilder

#: The 19 check IDs of the issue, hardware up (docs/design.md §6).
ISSUE_IDS = (
    "pci-devices",
    "driver-bound",
    "device-nodes",
    "device-permissions",
    "driver-install",
    "firmware-compat",
    "npu-smi",
    "dcmi",  # issue 16
    "chip-health",
    "cann-install",
    "cann-env",
    "cann-libraries",
    "driver-cann-compat",
    "torch-npu-compat",
    "visible-devices",
    "container-mounts",
    "op-kernels",
    "hbm-held",
    "pcie-link",
    "cann-python-deps",
)


def make(check_id: str, finding: Finding, **options: object) -> Check:
    """A check that always finds ``finding``."""
    return Check(check_id, Group.DRIVER, f"test check {check_id}", lambda machine: finding, **options)  # type: ignore[arg-type]


def crashing(machine: Machine) -> Finding:
    raise RuntimeError("boom")


@pytest.fixture
def npu_machine(tmp_path) -> Machine:
    """A tree with one /dev/davinci0: has_hardware() is True."""
    builder = SysrootBuilder(tmp_path / "npu")
    builder.add_dev_nodes([0])
    return Machine(builder.sysroot(), None)


@pytest.fixture
def bare_machine(tmp_path) -> Machine:
    """A tree with no PCI function and no /dev node: no NPU."""
    builder = SysrootBuilder(tmp_path / "bare")
    builder.write_file("/etc/hostname", "cpu-only\n")
    return Machine(builder.sysroot(), None)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """An event a hanging check waits on; set at teardown so no thread outlives the test for long."""
    event = threading.Event()
    yield event
    event.set()


def statuses(report: DoctorReport) -> List[Status]:
    return [result.status for result in report.results]


# ---------------------------------------------------------------- running


def test_checks_run_in_the_given_order_and_are_reported_live(npu_machine):
    seen: List[str] = []
    checks = [make(name, passed(f"{name} ok")) for name in ("c", "a", "b")]
    report = run_doctor(npu_machine, checks, on_result=lambda result: seen.append(result.id))
    assert [result.id for result in report.results] == ["c", "a", "b"]
    assert seen == ["c", "a", "b"]
    assert report.results[0].summary == "c ok"
    assert report.results[0].title == "test check c"
    assert report.results[0].group is Group.DRIVER
    assert report.has_hardware


def test_a_crashing_check_is_an_error_and_the_report_goes_on(npu_machine):
    checks = [Check("crash", Group.DRIVER, "crashes", crashing), make("after", passed("still here"))]
    report = run_doctor(npu_machine, checks)
    crash, after = report.results
    assert crash.status is Status.ERROR
    assert crash.summary == "the check crashed: RuntimeError('boom')"
    assert crash.hint == "this is a bug in npuwatch: please report it with the output of --verbose"
    assert crash.details == ()  # the traceback only with --verbose
    assert after.status is Status.PASS
    assert report.exit_code == 1


def test_verbose_puts_the_traceback_in_the_details(tmp_path):
    machine = Machine(Sysroot(tmp_path, environ={}), None, verbose=True)
    (result,) = run_doctor(machine, [Check("crash", Group.DRIVER, "crashes", crashing)]).results
    assert any("RuntimeError: boom" in line for line in result.details)


def test_a_hanging_check_is_an_error_at_its_timeout(npu_machine, gate):
    def hang(machine: Machine) -> Finding:
        gate.wait(30)
        return passed("too late")

    checks = [Check("hang", Group.DRIVER, "hangs", hang), make("after", passed("ran"))]
    report = run_doctor(npu_machine, checks, timeout_for=lambda check, machine: 0.05)
    hung, after = report.results
    assert hung.status is Status.ERROR
    assert hung.summary == "the check did not finish within 0.05 s"
    assert "`npuwatch doctor --only hang --verbose`" in (hung.hint or "")
    assert after.status is Status.PASS


def test_a_check_returning_something_else_is_an_error(npu_machine):
    check = Check("odd", Group.DRIVER, "returns text", lambda machine: "fine")  # type: ignore[arg-type,return-value]
    (result,) = run_doctor(npu_machine, [check]).results
    assert result.status is Status.ERROR
    assert result.summary == "the check returned str, not a Finding"


def test_the_hint_is_kept_only_for_warn_fail_and_error(npu_machine):
    with_hint = Finding(Status.PASS, "ok", (), "a stray hint")
    report = run_doctor(npu_machine, [make("p", with_hint), make("w", warned("meh", "do this"))])
    assert [result.hint for result in report.results] == [None, "do this"]


def test_duration_is_measured(npu_machine):
    (result,) = run_doctor(npu_machine, [make("p", passed("ok"))]).results
    assert result.duration_s >= 0.0


# ---------------------------------------------------------------- requires and needs_hardware


@pytest.mark.parametrize(
    "blocking", [failed("broken", "fix it"), skipped("not here"), Finding(Status.ERROR, "crashed")]
)
def test_a_check_whose_requirement_did_not_pass_is_skipped(npu_machine, blocking):
    called: List[bool] = []

    def dependent(machine: Machine) -> Finding:
        called.append(True)
        return passed("ran")

    checks = [make("base", blocking), Check("dep", Group.DRIVER, "needs base", dependent, requires=("base",))]
    base, dep = run_doctor(npu_machine, checks).results
    assert dep.status is Status.SKIP
    assert dep.summary == f"needs base: {base.summary}"
    assert dep.skipped_because == ("base",)
    assert called == []


def test_a_warning_requirement_does_not_block(npu_machine):
    checks = [make("base", warned("meh", "hint")), make("dep", passed("ran"), requires=("base",))]
    assert statuses(run_doctor(npu_machine, checks)) == [Status.WARN, Status.PASS]


def test_a_requirement_that_did_not_run_does_not_block(npu_machine):
    (result,) = run_doctor(npu_machine, [make("dep", passed("ran"), requires=("not-selected",))]).results
    assert result.status is Status.PASS


def test_every_failed_requirement_is_named(npu_machine):
    checks = [
        make("one", failed("one broken", "x")),
        make("two", failed("two broken", "y")),
        make("dep", passed("ran"), requires=("one", "two")),
    ]
    dep = run_doctor(npu_machine, checks).results[-1]
    assert dep.summary == "needs one: one broken"
    assert dep.skipped_because == ("one", "two")


def test_hardware_checks_skip_on_a_machine_without_npu(bare_machine):
    checks = [make("hw", passed("ran"), needs_hardware=True), make("sw", passed("ran"))]
    report = run_doctor(bare_machine, checks)
    assert not report.has_hardware
    hw, sw = report.results
    assert hw.status is Status.SKIP
    assert hw.summary == "no Ascend NPU on this machine"
    assert sw.status is Status.PASS
    assert report.exit_code == 0


def test_hardware_checks_run_on_a_machine_with_npu(npu_machine):
    (result,) = run_doctor(npu_machine, [make("hw", passed("ran"), needs_hardware=True)]).results
    assert result.status is Status.PASS


def test_when_hardware_cannot_be_told_hardware_checks_run(bare_machine, monkeypatch):
    def broken() -> bool:
        raise OSError("sysfs unreadable")

    monkeypatch.setattr(bare_machine, "has_hardware", broken)
    report = run_doctor(bare_machine, [make("hw", passed("ran"), needs_hardware=True)])
    assert report.has_hardware
    assert statuses(report) == [Status.PASS]


# ---------------------------------------------------------------- timeouts and exit codes


def test_check_timeouts(npu_machine):
    assert check_timeout_s(make("x", passed("ok")), npu_machine) == DEFAULT_CHECK_TIMEOUT_S == 3.0
    slow = Machine(npu_machine.sysroot, None, timeout_s=7.5)
    assert check_timeout_s(make("y", passed("ok"), runs_npu_smi=True), slow) == 9.5  # 7.5 + kill grace + 1


@pytest.mark.parametrize(
    ("findings", "code"),
    [
        ([], 0),
        ([passed("ok")], 0),
        ([passed("ok"), skipped("n/a")], 0),
        ([passed("ok"), warned("meh", "h")], 1),
        ([Finding(Status.ERROR, "crashed")], 1),
        ([warned("meh", "h"), failed("bad", "h")], 2),
        ([Finding(Status.ERROR, "crashed"), failed("bad", "h"), skipped("n/a")], 2),
    ],
)
def test_exit_codes(npu_machine, findings, code):
    checks = [make(f"c{n}", finding) for n, finding in enumerate(findings)]
    assert run_doctor(npu_machine, checks).exit_code == code


def test_counts(npu_machine):
    findings = [passed("a"), passed("b"), warned("c", "h"), failed("d", "h")]
    counts = run_doctor(npu_machine, [make(f"c{n}", f) for n, f in enumerate(findings)]).counts()
    assert counts[Status.PASS] == 2
    assert counts[Status.WARN] == 1
    assert counts[Status.FAIL] == 1
    assert counts[Status.SKIP] == counts[Status.ERROR] == 0


def test_report_from_results_alone():
    result = CheckResult("x", Group.HARDWARE, "t", Status.FAIL, "bad")
    assert DoctorReport((result,), has_hardware=True, duration_s=0.0).exit_code == 2


# ---------------------------------------------------------------- registry


def test_registry_lists_the_issue_checks_in_order():
    assert len(registry.CHECK_MODULES) == 20
    assert tuple(name.replace("_", "-") for name in registry.CHECK_MODULES) == ISSUE_IDS


@pytest.mark.parametrize("module", ["visible_devices", "container_mounts"])
def test_a_check_module_defines_check_with_its_id(module):
    loaded = importlib.import_module(f"npuwatch.doctor.checks.{module}")
    assert loaded.CHECK.id == module.replace("_", "-")
    assert module in registry.CHECK_MODULES


def test_all_checks_imports_each_module_in_order(monkeypatch):
    monkeypatch.setattr(registry, "CHECK_MODULES", ("container_mounts", "visible_devices"))
    assert [check.id for check in registry.all_checks()] == ["container-mounts", "visible-devices"]


CHECKS = tuple(make(name, passed("ok")) for name in ("a", "b", "c"))


def test_select_keeps_everything_by_default():
    assert registry.select(CHECKS) == CHECKS


def test_select_only_keeps_run_order():
    assert [check.id for check in registry.select(CHECKS, only=("c", "a"))] == ["a", "c"]


def test_select_skip():
    assert [check.id for check in registry.select(CHECKS, skip=("b",))] == ["a", "c"]


def test_select_only_and_skip():
    assert [check.id for check in registry.select(CHECKS, only=("a", "b"), skip=("a",))] == ["b"]


@pytest.mark.parametrize(("only", "skip"), [(("nope",), ()), ((), ("nope",)), (("a", "nope"), ())])
def test_select_rejects_unknown_ids(only, skip):
    with pytest.raises(ValueError, match=r"unknown check ID nope; `npuwatch doctor --list` shows them"):
        registry.select(CHECKS, only=only, skip=skip)


def test_select_names_every_unknown_id():
    with pytest.raises(ValueError, match="unknown check ID x, y;"):
        registry.select(CHECKS, only=("x",), skip=("y",))
