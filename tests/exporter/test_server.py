"""The exporter over real HTTP on a free loopback port: /metrics, /healthz, /snapshot, 404, 405, threads."""

from __future__ import annotations

import errno
import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from importlib import resources
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from npuwatch import snapshot_json
from npuwatch.exporter.metrics import HEALTH_CODES
from npuwatch.exporter.server import Exporter
from npuwatch.feeds import FeedOptions, open_feed
from npuwatch.model import ChipIdentity, ChipSample, Health, MetricStatus, ProbeReport, Snapshot
from npuwatch.text_safety import inert
from tests.exporter.test_metrics import labels_of as chip_labels

SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())
Series = Dict[Tuple[str, FrozenSet[Tuple[str, str]]], float]


class CountingFeed:
    """A SnapshotFeed wrapper that counts ``sample()`` calls (and can hold the first one back)."""

    def __init__(self, inner, gate: Optional[threading.Event] = None) -> None:
        self.inner = inner
        self.interval_s = inner.interval_s
        self.history = inner.history
        self.gate = gate
        self.calls = 0

    @property
    def label(self) -> str:
        return self.inner.label

    def sample(self) -> Snapshot:
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(60)
        return self.inner.sample()

    def chip_details(self, npu_id, chip_id):
        return None

    def close(self) -> None:
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ScriptedFeed(CountingFeed):
    """A feed whose ``sample()`` returns or raises what the test says."""

    def __init__(self, result: Callable[[], Snapshot], interval_s: float = 3600.0) -> None:
        self.result = result
        self.interval_s = interval_s
        self.history = None
        self.gate = None
        self.calls = 0

    @property
    def label(self) -> str:
        return "scripted"

    def sample(self) -> Snapshot:
        self.calls += 1
        return self.result()

    def close(self) -> None:
        pass


@pytest.fixture
def serve(monkeypatch):
    """Start an Exporter on 127.0.0.1:0 over a demo (values frozen); stopped and closed after."""
    running: List[Tuple[Exporter, CountingFeed]] = []
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "120")

    def start(
        scenario: str = "910b-training",
        *,
        interval_s: float = 3600.0,
        timeout_s: Optional[float] = None,
        feed: Optional[CountingFeed] = None,
        gate: Optional[threading.Event] = None,
        **options,
    ) -> Tuple[Exporter, CountingFeed]:
        if feed is None:
            feed = CountingFeed(
                open_feed(FeedOptions(demo=scenario, interval_s=interval_s, timeout_s=timeout_s)), gate
            )
        exporter = Exporter(feed, "127.0.0.1", 0, **options)
        running.append((exporter, feed))
        exporter.start()
        return exporter, feed

    yield start
    for exporter, feed in running:
        exporter.stop()
        feed.close()


def request(exporter: Exporter, path: str, method: str = "GET") -> Tuple[int, Dict[str, str], bytes]:
    host, port = exporter.address
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def series(body: bytes) -> Series:
    out: Series = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def wait_until(predicate: Callable[[], bool], deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < end, "condition not reached before the deadline"
        time.sleep(0.05)


def up(exporter: Exporter) -> float:
    return series(request(exporter, "/metrics")[2]).get(("npuwatch_up", frozenset()), -1.0)


def sampled(exporter: Exporter) -> bool:
    return exporter.view.snapshot is not None


def labels_of(sample: ChipSample) -> FrozenSet[Tuple[str, str]]:
    return frozenset(chip_labels(sample).items())


# --- /metrics ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["910b-training", "a3"])
def test_metrics_over_http_match_the_snapshot_the_server_holds(serve, scenario):
    exporter, _ = serve(scenario)
    wait_until(lambda: up(exporter) == 1.0)
    snapshot = exporter.view.snapshot
    assert snapshot is not None
    status, headers, body = request(exporter, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    got = series(body)
    assert got[("machine_npu_nums", frozenset())] == len(snapshot.chips)
    for c in snapshot.chips:
        labels = labels_of(c)
        assert got[("npu_chip_info_health_status", labels)] == HEALTH_CODES[c.health]
        assert got[("npu_chip_info_temperature", labels)] == c.temperature_c
        assert got[("npu_chip_info_utilization", labels)] == c.aicore_percent
        assert got[("npu_chip_info_hbm_used_memory", labels)] == c.hbm_used_mib
        assert got[("npu_chip_info_hbm_total_memory", labels)] == c.hbm_total_mib
        if c.power_w is None:  # A3's second chip prints '-'
            assert ("npu_chip_info_power", labels) not in got
        else:
            assert got[("npu_chip_info_power", labels)] == c.power_w
    for p in snapshot.processes:
        owner = snapshot.chip(p.npu_id, p.chip_id)
        assert owner is not None
        key = labels_of(owner) | {("process_id", str(p.pid)), ("process_name", p.name or "")}
        assert got[("npu_chip_info_process_info", key)] == p.npu_memory_mib
    assert snapshot.chip_source == "dcmi"  # the demo reads through its fake libdcmi.so by default
    for probe in ("dcmi", "sysfs", "host"):
        assert got[("npuwatch_probe_errors_total", frozenset({("probe", probe)}))] == 0
    assert got[("npuwatch_scrape_duration_seconds", frozenset())] > 0
    assert got[("npuwatch_sample_age_seconds", frozenset())] >= 0


def test_scrapes_never_sample_a_hundred_concurrent_scrapers_cost_one_sample(serve):
    exporter, feed = serve()
    wait_until(lambda: sampled(exporter))
    before = feed.calls
    paths = ["/metrics"] * 80 + ["/healthz"] * 10 + ["/snapshot"] * 10
    with ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(pool.map(lambda path: request(exporter, path)[0], paths))
    assert statuses == [200] * 100
    assert feed.calls == before == 1  # the interval is an hour: only the first sample ran


def test_before_the_first_sample_metrics_say_down_and_healthz_no_sample_yet(serve):
    gate = threading.Event()
    exporter, feed = serve(gate=gate)
    wait_until(lambda: feed.calls == 1)  # the sampler is inside its first sample()
    status, _, body = request(exporter, "/metrics")
    assert status == 200
    assert series(body) == {("npuwatch_up", frozenset()): 0.0}
    assert request(exporter, "/healthz")[:1] == (503,)
    assert request(exporter, "/healthz")[2] == b"unhealthy: no sample yet\n"
    assert request(exporter, "/snapshot")[0] == 503
    gate.set()
    wait_until(lambda: up(exporter) == 1.0)


def test_the_sampling_thread_keeps_sampling_on_its_interval(serve):
    exporter, feed = serve(interval_s=0.1)
    wait_until(lambda: feed.calls >= 3)
    first = exporter.view.snapshot
    wait_until(lambda: exporter.view.snapshot is not first)


# --- /healthz ------------------------------------------------------------------------------------


def test_healthz_is_200_with_the_check_line_for_the_default_demo(serve):
    exporter, _ = serve()
    wait_until(lambda: sampled(exporter))
    status, headers, body = request(exporter, "/healthz")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body.decode().startswith("healthy: 8/8 chips OK")
    assert body.count(b"\n") == 1


def test_healthz_is_503_naming_the_chip_in_alarm(serve):
    exporter, _ = serve("chip-alarm")
    wait_until(lambda: sampled(exporter))
    status, _, body = request(exporter, "/healthz")
    line = body.decode()
    assert status == 503
    assert line.startswith("unhealthy: NPU 3 chip 0 Alarm")
    assert line.count("\n") == 1 and line.endswith("\n")
    got = series(request(exporter, "/metrics")[2])
    alarm = next(c for c in exporter.view.snapshot.chips if c.health is Health.ALARM)
    assert got[("npu_chip_info_health_status", labels_of(alarm))] == 0
    assert got[("machine_unhealthy_npu_nums", frozenset())] == 1


def test_healthz_is_503_when_npu_smi_hangs_and_up_is_0(serve):
    exporter, _ = serve("npu-smi-hang", timeout_s=0.5, interval_s=0.2)
    wait_until(lambda: sampled(exporter))
    status, _, body = request(exporter, "/healthz")
    assert status == 503
    assert body.decode().startswith("unhealthy: npu-smi timeout: ")
    got = series(request(exporter, "/metrics")[2])
    assert got[("npuwatch_up", frozenset())] == 0
    assert got[("npuwatch_probe_errors_total", frozenset({("probe", "npu-smi")}))] >= 1
    # Chips still come from PCI sysfs, with health unknown (-1) and no fake 0 values.
    assert got[("machine_unknown_npu_nums", frozenset())] == 8
    assert not [name for name, _ in got if name == "npu_chip_info_temperature"]


def test_healthz_is_503_when_the_sample_is_stale_and_the_age_gauge_says_how_old(serve):
    now = [1000.0]
    exporter, _ = serve(clock=lambda: now[0], max_age_s=10.0)
    wait_until(lambda: sampled(exporter))
    assert request(exporter, "/healthz")[0] == 200
    now[0] += 42.0
    status, _, body = request(exporter, "/healthz")
    assert status == 503
    assert body == b"unhealthy: stale: the latest sample is 42.0 s old (limit 10 s)\n"
    assert series(request(exporter, "/metrics")[2])[("npuwatch_sample_age_seconds", frozenset())] == 42.0


def test_healthz_names_an_npu_asked_for_that_the_chip_source_does_not_list(serve):
    exporter, _ = serve(devices=[0, 9])
    wait_until(lambda: sampled(exporter))
    status, _, body = request(exporter, "/healthz")
    assert status == 503
    # The demo's chips are read through its fake DCMI: the line names the source that read them.
    assert b"NPU 9 not listed by DCMI" in body


def test_a_feed_that_raises_is_reported_and_sampling_goes_on(serve):
    def boom() -> Snapshot:
        raise RuntimeError("driver went away")

    feed = ScriptedFeed(boom, interval_s=0.05)
    exporter, _ = serve(feed=feed)
    wait_until(lambda: feed.calls >= 3)
    status, _, body = request(exporter, "/healthz")
    assert status == 503
    assert body == b"unhealthy: sampling failed: RuntimeError: driver went away\n"
    got = series(request(exporter, "/metrics")[2])
    assert got[("npuwatch_up", frozenset())] == 0
    assert got[("npuwatch_probe_errors_total", frozenset({("probe", "sampler")}))] >= 3


def test_unknown_health_and_a_hot_chip_are_unhealthy(serve):
    identity = ChipIdentity(0, 0, name="910B3")
    chips = (
        ChipSample(identity, Health.UNKNOWN, temperature_c=50),
        ChipSample(ChipIdentity(1, 0, name="910B3"), Health.OK, temperature_c=99),
    )
    snapshot = Snapshot(
        datetime.now(timezone.utc),
        "scripted",
        chips=chips,
        probes=(ProbeReport("npu-smi", MetricStatus.OK, 0.01),),
    )
    exporter, _ = serve(feed=ScriptedFeed(lambda: snapshot))
    wait_until(lambda: sampled(exporter))
    status, _, body = request(exporter, "/healthz")
    assert status == 503
    assert body.decode() == (
        "unhealthy: NPU 0 chip 0 health unknown; NPU 1 chip 0 99 °C (critical limit 95 °C) "
        "— 0/2 chips OK, max 99 °C\n"
    )


# --- /snapshot, other paths and methods ----------------------------------------------------------


def test_snapshot_is_schema_v1_json_of_the_held_snapshot(serve):
    exporter, _ = serve("a3")
    wait_until(lambda: sampled(exporter))
    status, headers, body = request(exporter, "/snapshot")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    doc = json.loads(body)
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)
    assert doc == json.loads(snapshot_json.dumps(exporter.view.snapshot))
    assert doc["source"] == "demo:a3" and len(doc["chips"]) == 16


@pytest.mark.parametrize("path", ["/", "/metric", "/index.html", "/metrics/extra"])
def test_other_paths_are_404_with_a_short_index(serve, path):
    exporter, _ = serve()
    status, _, body = request(exporter, path)
    assert status == 404
    assert b"/metrics" in body and b"/healthz" in body and b"/snapshot" in body
    assert len(body.splitlines()) < 10


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_methods_other_than_get_and_head_are_405(serve, method):
    exporter, _ = serve()
    status, headers, body = request(exporter, "/metrics", method)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert b"read-only" in body


def test_head_answers_the_headers_without_a_body_and_queries_are_ignored(serve):
    exporter, _ = serve()
    wait_until(lambda: sampled(exporter))
    status, headers, body = request(exporter, "/healthz", "HEAD")
    assert (status, body) == (200, b"")
    assert int(headers["Content-Length"]) > 0
    assert request(exporter, "/metrics?format=text")[0] == 200


def test_one_keep_alive_connection_serves_many_requests(serve):
    exporter, _ = serve()
    wait_until(lambda: sampled(exporter))
    conn = http.client.HTTPConnection(*exporter.address, timeout=30)
    try:
        for path in ["/metrics", "/healthz", "/snapshot", "/nope"] * 5:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            assert response.status in (200, 404)
            assert not response.will_close
    finally:
        conn.close()


def test_stop_closes_the_port_and_ends_the_threads(monkeypatch):
    monkeypatch.setenv("NPUWATCH_SIM_NOW", "120")
    with open_feed(FeedOptions(demo="910b-training", interval_s=0.1)) as feed:
        exporter = Exporter(feed, "127.0.0.1", 0)
        before = set(threading.enumerate())
        exporter.start()
        wait_until(lambda: sampled(exporter))
        address = exporter.address
        exporter.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5).close()
    assert set(threading.enumerate()) <= before


def test_a_port_in_use_raises_oserror_at_construction(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        demo = FeedOptions(demo="910b-training")
        with open_feed(demo) as feed, pytest.raises(OSError, match="in use") as info:
            Exporter(feed, "127.0.0.1", port)
    assert info.value.errno == errno.EADDRINUSE


def test_an_empty_host_listens_on_every_interface(monkeypatch):
    options = FeedOptions(demo="910b-training", interval_s=3600)
    with open_feed(options) as feed, Exporter(feed, "", 0) as exporter:
        _, port = exporter.address
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/nope")
        assert conn.getresponse().status == 404
        conn.close()


def test_an_ipv6_loopback_listens_in_brackets():
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    with open_feed(FeedOptions(demo="910b-training", interval_s=3600)) as feed:
        try:
            exporter = Exporter(feed, "::1", 0)
        except OSError as exc:
            pytest.skip(f"no IPv6 loopback here: {exc}")
        with exporter:
            assert exporter.url.startswith("http://[::1]:")
            assert request(exporter, "/nope")[0] == 404


def test_hostile_names_and_messages_reach_no_scraper_or_probe_as_control_bytes(serve):
    """A chip name and a source message with ESC, CR, C1 and bidi controls and a byte that is not
    UTF-8: /metrics parses and /healthz answers, both with those escaped (``\\x1b``), none raw."""
    from tests.exporter.test_metrics import HOSTILE

    failed = ProbeReport("npu-smi", MetricStatus.ERROR, 0.01, HOSTILE)
    snapshot = Snapshot(
        datetime.now(timezone.utc),
        "scripted",
        chips=(ChipSample(ChipIdentity(0, 0, name=HOSTILE), Health.ALARM),),
        probes=(failed,),
    )
    exporter, _ = serve(feed=ScriptedFeed(lambda: snapshot))
    wait_until(lambda: sampled(exporter))
    for path in ("/metrics", "/healthz"):
        _, _, body = request(exporter, path)
        assert all(byte >= 0x20 or byte == 0x0A for byte in body), (path, body)
        text = body.decode("utf-8")
        assert "\x9b" not in text and "\u202e" not in text, (path, text)
    status, _, body = request(exporter, "/healthz")
    assert status == 503
    assert body.decode().startswith("unhealthy: npu-smi error: x\\x1b[2J\\x1b]0;pwn\\x07")
    got = series(request(exporter, "/metrics")[2])
    assert [labels for name, labels in got if name == "npu_chip_info_health_status"] == [
        frozenset({**chip_labels(snapshot.chips[0]), "model_name": inert(HOSTILE)}.items())
    ]


def test_worker_restarts_are_a_counter_that_holds_while_another_backend_reads():
    def snapshot(*probes: ProbeReport) -> Snapshot:
        return Snapshot(taken_at=datetime.now(timezone.utc), source="scripted", probes=probes)

    script = iter(
        [
            snapshot(ProbeReport("dcmi", MetricStatus.OK, 0.01, restarts=0)),
            snapshot(ProbeReport("dcmi", MetricStatus.ERROR, 0.01, "the DCMI worker used …", restarts=2)),
            snapshot(ProbeReport("npu-smi", MetricStatus.OK, 0.2)),  # ``auto`` fell back: no DCMI report
        ]
    )
    exporter = Exporter(ScriptedFeed(lambda: next(script)))
    try:
        key = ("npuwatch_worker_restarts_total", frozenset({("probe", "dcmi")}))
        seen = []
        for _ in range(3):
            exporter.sample_now()
            seen.append(series(exporter.metrics_body()).get(key))
        assert seen == [0, 2, 2]
        assert (
            b"# HELP npuwatch_worker_restarts_total Times a probe's reader process" in exporter.metrics_body()
        )
    finally:
        exporter.stop()
