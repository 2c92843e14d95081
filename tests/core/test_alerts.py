"""Tests for the alerts: every condition, hysteresis, ordering, summary line, and the demo scenarios."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Iterable, List, Optional, Sequence, Tuple

import pytest

from npuwatch import alerts as alerts_module
from npuwatch.alerts import (
    Alert,
    AlertKind,
    Hysteresis,
    Severity,
    summary_line,
)
from npuwatch.chip_state import FELL_OFF_BUS, VANISHED
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.judge import Thresholds
from npuwatch.judge.workload import WorkloadJudge
from npuwatch.model import (
    CHIP_METRICS,
    ChipError,
    ChipIdentity,
    ChipSample,
    Health,
    HostInfo,
    MetricNote,
    MetricStatus,
    NpuProcess,
    PcieLink,
    ProbeReport,
    ProcessHostInfo,
    Snapshot,
)
from npuwatch.probes.npu_smi.table import parse_info
from tests.conftest import capture_text

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class AlertTracker(alerts_module.AlertTracker):
    """The dashboard's tracker, given each update as a new sample one second after the last.

    The tracker counts samples (distinct snapshot times), not calls: these tests reuse one
    snapshot for several samples, so each call is stamped anew (the counting itself is pinned
    by the tests of ``alerts_module.AlertTracker`` under "samples, not calls" below).
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.samples = 0

    def update(self, snapshot: Snapshot) -> Tuple[Alert, ...]:
        self.samples += 1
        return super().update(replace(snapshot, taken_at=T0 + timedelta(seconds=self.samples)))


OK = ProbeReport("npu-smi", MetricStatus.OK, 0.3)
HUNG = ProbeReport("npu-smi", MetricStatus.TIMEOUT, 5.0, "npu-smi did not answer within 5.0 s and was killed")


def chip(npu: int = 0, chip_id: int = 0, name: str = "910B3", **values: object) -> ChipSample:
    fields: dict = {
        "health": Health.OK,
        "power_w": 180.0,
        "temperature_c": 45,
        "aicore_percent": 60,
        "hbm_used_mib": 30000,
        "hbm_total_mib": 65536,
        "memory_used_mib": 0,
        "memory_total_mib": 0,
    }
    fields.update(values)
    identity = ChipIdentity(npu, chip_id, name=name, bus_id=f"0000:{npu + 1:02X}:00.0")
    return ChipSample(identity=identity, **fields)


def proc(npu: int = 0, chip_id: int = 0, pid: int = 4242, cpu: Optional[float] = 20.0) -> NpuProcess:
    host = None if cpu is None else ProcessHostInfo(user="ai", command="python train.py", cpu_percent=cpu)
    return NpuProcess(npu, chip_id, pid, "python3", 20000, host=host)


def busy_on(chips: Iterable[ChipSample]) -> Tuple[NpuProcess, ...]:
    """One ordinary process per chip, so no chip looks like it holds memory for nobody."""
    return tuple(proc(c.identity.npu_id, c.identity.chip_id, 1000 + i) for i, c in enumerate(chips))


def snap(
    chips: Sequence[ChipSample],
    processes: Optional[Sequence[NpuProcess]] = None,
    probe: ProbeReport = OK,
    host: Optional[HostInfo] = None,
) -> Snapshot:
    procs = busy_on(chips) if processes is None else tuple(processes)
    return Snapshot(T0, "test", chips=tuple(chips), processes=procs, host=host, probes=(probe,))


def from_capture(number: str, probe: ProbeReport = OK) -> Snapshot:
    table = parse_info(capture_text(number))
    return Snapshot(T0, f"replay:{number}", chips=table.chips, processes=table.processes, probes=(probe,))


def feed(tracker: AlertTracker, snapshot: Snapshot, times: int) -> Tuple[Alert, ...]:
    result: Tuple[Alert, ...] = ()
    for _ in range(times):
        result = tracker.update(snapshot)
    return result


def kinds(alerts: Iterable[Alert]) -> List[Tuple[AlertKind, Severity, Optional[Tuple[int, int]]]]:
    return [(a.kind, a.severity, a.chip) for a in alerts]


def failed(c: ChipSample, status: MetricStatus, reason: str) -> ChipSample:
    """A chip as chip_state makes it when npu-smi gave nothing for it: every metric null."""
    note = MetricNote(status, reason)
    return ChipSample(identity=c.identity, health=Health.UNKNOWN, notes={m: note for m in CHIP_METRICS})


def stale(c: ChipSample) -> ChipSample:
    note = MetricNote(MetricStatus.STALE, "npu-smi timed out; showing the value from 3 s ago")
    return replace(c, notes={m: note for m in CHIP_METRICS if getattr(c, m) is not None})


# --- records ---------------------------------------------------------------------------------


def test_severity_orders_info_warning_critical():
    assert Severity.INFO < Severity.WARNING < Severity.CRITICAL
    assert max(Severity) is Severity.CRITICAL
    assert sorted([Severity.CRITICAL, Severity.INFO, Severity.WARNING]) == list(Severity)


def test_alert_is_frozen():
    alert = Alert(("npu-smi",), Severity.WARNING, AlertKind.NPU_SMI, "npu-smi slow: 3.1 s", "why")
    with pytest.raises(dataclasses.FrozenInstanceError):
        alert.message = "x"  # type: ignore[misc]


def test_counts_below_one_are_refused():
    with pytest.raises(ValueError, match="at least 1"):
        Hysteresis(raise_after=0)


def test_a_healthy_busy_node_has_no_alerts():
    chips = [chip(n) for n in range(8)]
    assert feed(AlertTracker(), snap(chips), 5) == ()


# --- 1. health -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("health", "severity", "message"),
    [
        (Health.WARNING, Severity.WARNING, "NPU 3 Warning"),
        (Health.ALARM, Severity.CRITICAL, "NPU 3 Alarm"),
        (Health.CRITICAL, Severity.CRITICAL, "NPU 3 Critical"),
        (Health.UNKNOWN, Severity.WARNING, "NPU 3 health unknown"),
    ],
)
def test_health_not_ok_shows_at_once(health, severity, message):
    alerts = AlertTracker().update(snap([chip(2), chip(3, health=health)]))
    assert len(alerts) == 1
    alert = alerts[0]
    assert (alert.kind, alert.severity, alert.message) == (AlertKind.HEALTH, severity, message)
    assert alert.key == ("health", 3, 0)
    assert alert.chip == (3, 0)
    assert "npu-smi info -t health -i 3 -c 0" in alert.detail


def test_health_alert_names_the_error_code_and_its_meaning():
    errors = (ChipError("80E01801", "HBM multi-bit ECC error"), ChipError("80CB8002"))
    alerts = AlertTracker().update(snap([chip(3, health=Health.ALARM, errors=errors)]))
    assert alerts[0].message == "NPU 3 Alarm 80E01801 HBM multi-bit ECC error (+1 code) → restart-business"
    assert "Huawei's handling of it is restart-business: restart the job" in alerts[0].detail
    assert "80E01801 (HBM multi-bit ECC error), 80CB8002" in alerts[0].detail


def test_health_from_a_real_capture_in_alarm():
    alerts = AlertTracker().update(from_capture("041"))  # 310B4 in Alarm, no process table
    assert kinds(alerts) == [(AlertKind.HEALTH, Severity.CRITICAL, (0, 0))]
    assert alerts[0].message == "NPU 0 Alarm"


def test_health_stays_through_good_updates_and_clears_after_three():
    tracker = AlertTracker()
    bad, good = snap([chip(3, health=Health.ALARM)]), snap([chip(3)])
    assert tracker.update(bad)
    assert tracker.update(good), "a single good update must not clear it"
    assert tracker.update(good)
    assert tracker.update(good) == ()


def test_a_good_update_between_bad_ones_restarts_the_clear_count():
    tracker = AlertTracker()
    bad, good = snap([chip(3, health=Health.ALARM)]), snap([chip(3)])
    for update in (bad, good, good, bad, good, good):
        assert tracker.update(update), "never three good updates in a row yet"
    assert tracker.update(good) == ()
    assert tracker.alerts == ()


# --- 6. npu-smi slow, failing, hung ----------------------------------------------------------


def test_npu_smi_hang_is_one_alert_not_one_per_chip():
    # As chip_state lists chips from PCI sysfs when npu-smi never answered: health Unknown.
    chips = [
        failed(chip(n, c, "Ascend910"), MetricStatus.TIMEOUT, HUNG.message or "")
        for n in range(8)
        for c in (0, 1)
    ]
    tracker = AlertTracker()
    hung = snap(chips, processes=(), probe=HUNG)
    alerts = tracker.update(hung)
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]
    assert alerts[0].message == "npu-smi hung: killed after 5.0 s — run `npuwatch doctor`"
    assert alerts[0].key == ("npu-smi",)
    assert "dmesg" in alerts[0].detail


@pytest.mark.parametrize("status", [MetricStatus.ERROR, MetricStatus.PERMISSION])
def test_npu_smi_failure_is_critical_with_its_message(status):
    message = "npu-smi failed with DCMI error -8005 (not in this container): the device nodes are missing"
    report = ProbeReport("npu-smi", status, 0.1, message)
    chips = [failed(chip(n), status, message) for n in range(8)]
    alerts = feed(AlertTracker(), snap(chips, processes=(), probe=report), 2)
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]
    assert alerts[0].message == (
        "npu-smi failed with DCMI error -8005 (not in this container) — run `npuwatch doctor`"
    )
    assert message in alerts[0].detail
    other = ProbeReport("npu-smi", status, 0.1, "no such device")
    shown = feed(AlertTracker(), snap([], (), probe=other), 2)[0].message
    assert shown == "npu-smi failed: no such device — run `npuwatch doctor`"


@pytest.mark.parametrize("report", [HUNG, ProbeReport("npu-smi", MetricStatus.ERROR, 0.1, "no such device")])
def test_a_failing_npu_smi_alerts_from_its_first_failed_sample(report):
    # Nothing can be read while npu-smi fails: waiting a second sample would only show
    # "no alerts" over a screen of n/a.
    chips = [failed(chip(n), report.status, report.message or "") for n in range(8)]
    alerts = AlertTracker().update(snap(chips, processes=(), probe=report))
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]
    assert alerts[0].message.endswith("— run `npuwatch doctor`")
    assert "npuwatch doctor" in summary_line(alerts, 78)


def test_a_failure_after_good_samples_alerts_at_once_and_clears_with_hysteresis():
    tracker = AlertTracker()
    feed(tracker, snap([chip(0)]), 3)
    assert kinds(tracker.update(snap([stale(chip(0))], probe=HUNG))) == [
        (AlertKind.NPU_SMI, Severity.CRITICAL, None)
    ]
    good = snap([chip(0)])
    assert len(feed(tracker, good, 2)) == 1  # a flapping npu-smi does not flicker the line
    assert tracker.update(good) == ()


def test_npu_smi_slow_is_a_warning():
    tracker = AlertTracker()
    slow = snap([chip(0)], probe=ProbeReport("npu-smi", MetricStatus.OK, 3.14))
    assert tracker.update(slow) == ()
    alerts = tracker.update(slow)
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.WARNING, None)]
    assert alerts[0].message == "npu-smi slow: 3.1 s"
    assert feed(AlertTracker(), snap([chip(0)], probe=ProbeReport("npu-smi", MetricStatus.OK, 1.9)), 3) == ()
    assert feed(AlertTracker(Thresholds(source_slow_s=1.0)), snap([chip(0)], probe=slow.probes[0]), 2)


@pytest.mark.parametrize(
    ("report", "message"),
    [
        (ProbeReport("dcmi", MetricStatus.OK, 3.14), "DCMI slow: 3.1 s"),
        (
            ProbeReport("dcmi", MetricStatus.TIMEOUT, 5.0, "a DCMI call did not return within 5 s"),
            "DCMI hung: killed after 5.0 s — run `npuwatch doctor`",
        ),
        (
            ProbeReport("dcmi", MetricStatus.ERROR, 0.1, "no such device"),
            "DCMI failed: no such device — run `npuwatch doctor`",
        ),
        (
            ProbeReport("dcmi", MetricStatus.ERROR, 0.1, "DCMI error -8005 (INNER_ERR): a long meaning"),
            "DCMI error -8005 (INNER_ERR): a long meaning — run `npuwatch doctor`",
        ),
    ],
)
def test_the_source_alert_names_dcmi_when_dcmi_read_the_chips(report, message):
    snapshot = replace(snap([chip(0)], probe=report), chip_source="dcmi")
    alerts = feed(AlertTracker(), snapshot, 2)
    assert [a.message for a in alerts] == [message]
    assert "npu-smi" not in alerts[0].message + alerts[0].detail


def test_a_fallback_from_the_chosen_backend_is_a_calm_note_once_it_lasts_and_clears():
    note = "dcmi has not answered for 1.0 s: reading through npu-smi; dcmi is tried again in the background"
    fell_back = replace(snap([chip(0)]), backend_note=note)
    tracker = AlertTracker()
    assert tracker.update(fell_back) == ()  # one tick read through npu-smi is no news
    alerts = tracker.update(fell_back)
    assert kinds(alerts) == [(AlertKind.BACKEND, Severity.INFO, None)]
    assert alerts[0].message.startswith("dcmi has not answered for 1.0 s")
    assert note in alerts[0].detail
    assert feed(tracker, snap([chip(0)]), 3) == ()  # DCMI reads again: the note goes


def test_chip_alerts_hold_while_npu_smi_fails_and_clear_after_it_answers():
    tracker = AlertTracker()
    alarm = chip(3, health=Health.ALARM, temperature_c=91)
    feed(tracker, snap([chip(2), alarm]), 2)
    shown = kinds(tracker.alerts)
    assert (AlertKind.HEALTH, Severity.CRITICAL, (3, 0)) in shown
    assert (AlertKind.TEMPERATURE, Severity.WARNING, (3, 0)) in shown
    # npu-smi times out: chips go stale (then failed); nothing about them can be judged.
    alerts = feed(tracker, snap([stale(chip(2)), stale(alarm)], probe=HUNG), 3)
    alerts = feed(tracker, snap([failed(alarm, MetricStatus.TIMEOUT, "hung")], (), probe=HUNG), 5)
    assert set(shown) | {(AlertKind.NPU_SMI, Severity.CRITICAL, None)} == set(kinds(alerts))
    # npu-smi answers again and the chip is fine: everything clears after three good updates.
    healthy = snap([chip(2), chip(3)])
    assert len(feed(tracker, healthy, 2)) == 3
    assert tracker.update(healthy) == ()


# --- 2. temperature --------------------------------------------------------------------------


def test_default_temperature_limits_by_family():
    limits = Thresholds().temperature_limits_c
    assert [limits(name)[0] for name in ("910B3", "Ascend910", "Ascend950DT", "910A", None)] == [85] * 5
    assert [limits(name)[0] for name in ("310P3", "310B4")] == [80, 80]


def test_temperature_raises_at_the_limit_after_two_updates():
    tracker = AlertTracker()
    hot = snap([chip(0, temperature_c=86)])
    assert tracker.update(hot) == ()
    alerts = tracker.update(hot)
    assert kinds(alerts) == [(AlertKind.TEMPERATURE, Severity.WARNING, (0, 0))]
    assert alerts[0].message == "NPU 0 86 °C (limit 85 °C)"
    assert "throttling" in alerts[0].detail
    assert feed(AlertTracker(), snap([chip(0, temperature_c=84)]), 5) == ()


def test_temperature_ten_over_the_limit_is_critical():
    alerts = feed(AlertTracker(), snap([chip(0, temperature_c=95)]), 2)
    assert kinds(alerts) == [(AlertKind.TEMPERATURE, Severity.CRITICAL, (0, 0))]


def test_temperature_of_a_310p_chip_uses_its_lower_limit():
    chips = [chip(2, 0, "310P3", temperature_c=70), chip(2, 1, "310P3", temperature_c=82)]
    alerts = feed(AlertTracker(), snap(chips), 2)
    assert [a.message for a in alerts] == ["NPU 2 chip 1 82 °C (limit 80 °C)"]


def test_temperature_limit_can_be_set():
    assert feed(AlertTracker(Thresholds(temperature_warning_c=70.0)), snap([chip(0, temperature_c=72)]), 2)


def test_a_temperature_alert_clears_three_updates_below_the_limit_as_the_chip_turns_ok():
    # No band beside the judge's limit: the alert line says warning exactly while the judge does,
    # and clear_after (three updates) keeps it from flickering.
    tracker = AlertTracker()
    feed(tracker, snap([chip(0, temperature_c=88)]), 2)
    assert tracker.alerts[0].message == "NPU 0 88 °C (limit 85 °C)"
    cool = snap([chip(0, temperature_c=81)])
    assert feed(tracker, cool, 2), "needs three updates below the limit"
    assert tracker.update(cool) == ()


def test_idle_captures_hold_only_the_driver_baseline():
    for number in ("022", "003", "093", "007", "100", "037", "044", "049", "039", "004"):
        assert feed(AlertTracker(), from_capture(number), 3) == (), number


def test_hbm_held_on_a_chip_without_process():
    idle = from_capture("022")  # 8 × 910B4, 2654 / 32768 MiB, "no process" table
    leaked = replace(idle.chips[4], hbm_used_mib=20000)
    snapshot = replace(idle, chips=(*idle.chips[:4], leaked, *idle.chips[5:]))
    tracker = AlertTracker()
    assert tracker.update(snapshot) == ()
    alerts = tracker.update(snapshot)
    assert kinds(alerts) == [(AlertKind.HBM_HELD, Severity.WARNING, (4, 0))]
    assert alerts[0].message == "NPU 4 19.5 GiB HBM held, no process"
    assert "leaked or zombie" in alerts[0].detail
    assert "another container" not in alerts[0].detail
    # With a process listed on that chip the memory is accounted for.
    owned = replace(snapshot, processes=(proc(4, 0),))
    assert feed(AlertTracker(), owned, 3) == ()
    # In a container, npu-smi hides other containers' processes: the detail says so.
    boxed = replace(snapshot, host=HostInfo(hostname="pod", in_container=True))
    assert "another container" in feed(AlertTracker(), boxed, 2)[0].detail


def test_hbm_held_is_not_judged_from_stale_values():
    leaked = chip(1, hbm_used_mib=40000)
    alerts = feed(AlertTracker(), snap([stale(leaked)], (), probe=HUNG), 4)
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]


def test_memory_held_on_a_310p_uses_ddr():
    duo = from_capture("044")  # 310P3 Duo: Memory-Usage only, a process on every chip
    alerts = feed(AlertTracker(), replace(duo, processes=()), 2)
    assert [(a.kind, a.chip) for a in alerts] == [(AlertKind.HBM_HELD, c.identity.key) for c in duo.chips]
    assert alerts[0].message == "NPU 1 15.9 GiB memory held, no process"


# --- 4. input-bound --------------------------------------------------------------------------


def test_input_bound_shows_when_the_workload_judge_says_so_and_names_the_busy_process():
    tracker, judge = AlertTracker(), WorkloadJudge()
    stalled = judge.judge(snap([chip(0, aicore_percent=2)], [proc(0, 0, cpu=380.0)]))
    assert stalled.chips[0].workload is not None
    alerts = tracker.update(stalled)
    assert kinds(alerts) == [(AlertKind.INPUT_BOUND, Severity.WARNING, (0, 0))]
    assert alerts[0].message == "NPU 0 input-bound"
    assert "data-loader workers" in alerts[0].detail
    assert "PID 4242 at 380 % host CPU" in alerts[0].detail


def test_a_snapshot_no_feed_judged_gives_no_workload_alert():
    assert feed(AlertTracker(), snap([chip(0, aicore_percent=2)], [proc(0, 0, cpu=380.0)]), 5) == ()


@pytest.mark.parametrize(
    ("aicore", "cpu"),
    [(40, 380.0), (2, 30.0), (2, None)],  # NPU busy; host idle; host details not visible
)
def test_no_input_bound_otherwise(aicore, cpu):
    judged = WorkloadJudge().judge(snap([chip(0, aicore_percent=aicore)], [proc(0, 0, cpu=cpu)]))
    assert feed(AlertTracker(), judged, 5) == ()


# --- 5. PCIe and lost devices ----------------------------------------------------------------


def test_pcie_width_below_max_is_a_warning():
    link = PcieLink(16.0, 32.0, 8, 16)
    tracker = AlertTracker()
    degraded = snap([chip(4), chip(5, pcie=link)])
    assert tracker.update(degraded) == ()
    alerts = tracker.update(degraded)
    assert kinds(alerts) == [(AlertKind.PCIE_DEGRADED, Severity.WARNING, (5, 0))]
    assert alerts[0].message == "NPU 5 PCIe x8 of x16, Gen4 of Gen5"
    assert "lspci -vv -s 0000:06:00.0" in alerts[0].detail


def test_pcie_speed_alone_counts_only_under_load():
    slow = PcieLink(2.5, 32.0, 16, 16)
    alerts = feed(AlertTracker(), snap([chip(5, pcie=slow)]), 2)  # AI Core 60 %: busy
    assert kinds(alerts) == [(AlertKind.PCIE_DEGRADED, Severity.WARNING, (5, 0))]
    assert alerts[0].message == "NPU 5 PCIe Gen1 of Gen5 under load"
    # Idle, a slower link is link power saving: no alert, not even a note (the judge says ok).
    assert feed(AlertTracker(), snap([chip(5, pcie=slow, aicore_percent=0)]), 3) == ()
    assert feed(AlertTracker(), snap([chip(5, pcie=PcieLink(32.0, 32.0, 16, 16))]), 3) == ()


def test_chips_sharing_a_pci_function_give_one_link_alert():
    link = PcieLink(16.0, 16.0, 8, 16)
    duo = [chip(2, 0, "310P3", pcie=link), replace(chip(2, 1, "310P3", pcie=link))]
    duo[1] = replace(duo[1], identity=replace(duo[1].identity, bus_id=duo[0].identity.bus_id))
    alerts = feed(AlertTracker(), snap(duo), 2)
    assert kinds(alerts) == [(AlertKind.PCIE_DEGRADED, Severity.WARNING, (2, 0))]


def test_a_chip_off_the_bus_is_lost_at_once():
    alerts = AlertTracker().update(snap([chip(5, pcie=PcieLink(None, None, None, None, present=False))]))
    assert kinds(alerts) == [(AlertKind.DEVICE_LOST, Severity.CRITICAL, (5, 0))]
    assert alerts[0].message == "NPU 5 off the PCIe bus"


def test_a_chip_npu_smi_no_longer_lists_is_lost_and_nothing_else():
    tracker = AlertTracker()
    feed(tracker, snap([chip(0), chip(1, temperature_c=90)]), 2)
    assert kinds(tracker.alerts) == [(AlertKind.TEMPERATURE, Severity.WARNING, (1, 0))]
    gone = replace(failed(chip(1), MetricStatus.ERROR, VANISHED), lost_reason=VANISHED)
    alerts = tracker.update(snap([chip(0), gone], busy_on([chip(0)])))
    assert kinds(alerts)[0] == (AlertKind.DEVICE_LOST, Severity.CRITICAL, (1, 0))
    assert alerts[0].message == "NPU 1 lost"
    assert AlertKind.HEALTH not in {a.kind for a in alerts}, "health Unknown of a lost chip is not news"
    alerts = feed(tracker, snap([chip(0), gone], busy_on([chip(0)])), 3)
    assert kinds(alerts) == [(AlertKind.DEVICE_LOST, Severity.CRITICAL, (1, 0))], "old alerts clear"
    reason = f"{VANISHED}; {FELL_OFF_BUS}"
    off_bus = replace(failed(chip(1), MetricStatus.ERROR, reason), lost_reason=reason)
    assert AlertTracker().update(snap([off_bus], ()))[0].message == "NPU 1 off the PCIe bus"


# --- ordering and the summary line -----------------------------------------------------------


def test_alerts_sort_most_severe_first_then_by_npu_and_chip():
    chips = [
        chip(0, health=Health.WARNING),
        chip(1, temperature_c=99),
        chip(3, health=Health.ALARM),
        chip(5, pcie=PcieLink(32.0, 32.0, 8, 16)),
        chip(6, pcie=PcieLink(16.0, 32.0, 16, 16)),
    ]
    alerts = feed(AlertTracker(), snap(chips, probe=ProbeReport("npu-smi", MetricStatus.OK, 2.5)), 2)
    assert [(a.severity, a.chip, a.kind) for a in alerts] == [
        (Severity.CRITICAL, (1, 0), AlertKind.TEMPERATURE),
        (Severity.CRITICAL, (3, 0), AlertKind.HEALTH),
        (Severity.WARNING, None, AlertKind.NPU_SMI),
        (Severity.WARNING, (0, 0), AlertKind.HEALTH),
        (Severity.WARNING, (5, 0), AlertKind.PCIE_DEGRADED),
        (Severity.WARNING, (6, 0), AlertKind.PCIE_DEGRADED),  # slow under load
    ]


def _alert(message: str, severity: Severity = Severity.WARNING, npu: int = 0) -> Alert:
    return Alert(("health", npu, 0), severity, AlertKind.HEALTH, message, "", (npu, 0))


ALERTS = (
    _alert("NPU 3 Alarm", Severity.CRITICAL, 3),
    _alert("NPU 5 PCIe x8 of x16", Severity.WARNING, 5),
    _alert("NPU 6 86 °C (limit 85 °C)", Severity.WARNING, 6),
    _alert("NPU 7 input-bound", Severity.WARNING, 7),
)


def test_summary_line_when_empty():
    assert summary_line((), 80) == "no alerts"


def test_summary_line_fits_everything_when_wide():
    line = summary_line(ALERTS, 200)
    assert line == "⚠ NPU 3 Alarm · NPU 5 PCIe x8 of x16 · NPU 6 86 °C (limit 85 °C) · NPU 7 input-bound"


def test_summary_line_counts_what_does_not_fit():
    assert summary_line(ALERTS, 50) == "⚠ NPU 3 Alarm · NPU 5 PCIe x8 of x16 · +2 more"
    assert summary_line(ALERTS, 30) == "⚠ NPU 3 Alarm · +3 more"


def test_summary_line_puts_the_most_severe_first_whatever_the_input_order():
    assert summary_line(tuple(reversed(ALERTS)), 30) == "⚠ NPU 3 Alarm · +3 more"


@pytest.mark.parametrize("width", range(0, 40))
def test_summary_line_never_exceeds_its_width(width):
    assert len(summary_line(ALERTS, width)) <= width
    assert len(summary_line((), width)) <= width
    assert len(summary_line(ALERTS[:1], width)) <= width


def test_summary_line_cuts_a_message_too_long_for_the_width():
    assert summary_line(ALERTS, 20) == "⚠ NPU 3 A… · +3 more"
    assert summary_line(ALERTS[:1], 8) == "⚠ NPU 3…"


# --- the demo scenarios through the real sampler ---------------------------------------------


def demo_alerts(scenario: str, samples: int) -> Tuple[Alert, ...]:
    tracker = AlertTracker()
    sampler = open_feed(FeedOptions(demo=scenario, timeout_s=1))
    try:
        alerts: Tuple[Alert, ...] = ()
        for _ in range(samples):
            alerts = tracker.update(sampler.sample())
        return alerts
    finally:
        sampler.close()


def test_demo_chip_alarm_gives_a_critical_health_alert_on_npu_3():
    alerts = demo_alerts("chip-alarm", 1)
    assert (AlertKind.HEALTH, Severity.CRITICAL, (3, 0)) in kinds(alerts)
    assert alerts[0].message == "NPU 3 Alarm 80E01801 HBM multi-bit ECC error → restart-business"


def test_demo_pcie_degraded_gives_a_link_alert_on_npu_5():
    alerts = demo_alerts("pcie-degraded", 3)
    assert (AlertKind.PCIE_DEGRADED, Severity.WARNING, (5, 0)) in kinds(alerts)
    assert not [a for a in alerts if a.severity is Severity.CRITICAL]


def test_demo_npu_smi_hang_gives_one_critical_npu_smi_alert():
    alerts = demo_alerts("npu-smi-hang", 1)  # the sample waits for the 1 s timeout
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]
    assert alerts[0].message.startswith("npu-smi hung: killed after 1.")
    assert alerts[0].message.endswith("— run `npuwatch doctor`")


def test_demo_dcmi_hang_read_through_dcmi_alerts_dcmi_hung_not_npu_smi():
    tracker = AlertTracker()
    sampler = open_feed(FeedOptions(demo="dcmi-hang", timeout_s=1, backend="dcmi"))
    try:
        snapshot = sampler.sample()
    finally:
        sampler.close()
    assert snapshot.chip_source == "dcmi"
    alerts = tracker.update(snapshot)
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]
    assert alerts[0].message.startswith("DCMI hung: killed after ")
    assert "npu-smi" not in alerts[0].message


@pytest.mark.parametrize("scenario", ["no-driver", "container-missing-nodes"])
def test_demo_failing_npu_smi_alerts_from_the_first_sample_and_points_at_doctor(scenario):
    alerts = demo_alerts(scenario, 1)
    assert kinds(alerts) == [(AlertKind.NPU_SMI, Severity.CRITICAL, None)]
    assert alerts[0].message == "npu-smi failed with DCMI error -8005 (INNER_ERR) — run `npuwatch doctor`"
    assert summary_line(alerts, 78) == "⚠ " + alerts[0].message  # whole on an 80-column dashboard


def test_demo_training_node_has_no_critical_alert():
    alerts = demo_alerts("910b-training", 3)
    assert not [a for a in alerts if a.severity is Severity.CRITICAL], alerts
