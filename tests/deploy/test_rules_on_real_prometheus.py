"""The alerting rules evaluated by a real Prometheus (Debian's `prometheus`) that scrapes
`npuwatch serve` over demos on loopback: the alerts the demos' faults call for fire, named by
node and chip, and nothing alerts twice.  The rules' `for:` durations are set to 0 here (they are
unit-tested with promtool); everything else is the shipped file."""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Dict, FrozenSet, List, Set, Tuple

from npuwatch.exporter.server import Exporter
from npuwatch.feeds import FeedOptions, open_feed
from tests.conftest import REPO
from tests.fleet.cluster import PrometheusServer, free_port, need_prometheus

RULES = REPO / "deploy" / "prometheus" / "npuwatch-rules.yml"
#: Each demo and the alerts it must raise: (alertname, NPU ID, the reason/class/level label).
EXPECTED: Dict[str, Set[Tuple[str, str, str]]] = {
    "throttling": {("NpuChipThrottling", "2", "thermal"), ("NpuChipThrottling", "5", "power")},
    "hbm-leak": {("NpuHbmLeaked", "0", "idle-holding-hbm"), ("NpuHbmLeaked", "1", "idle-holding-hbm")},
    "chip-alarm": {("NpuChipUnhealthy", "3", "critical")},
}
Alert = Dict[str, Dict[str, str]]


def alerts(prometheus: PrometheusServer) -> List[Alert]:
    data = prometheus.api("alerts")
    return [] if data is None else list(data["alerts"])  # None: not listening yet


def key(alert: Alert) -> Tuple[str, str, str]:
    labels = alert["labels"]
    detail = labels.get("reason") or labels.get("class") or labels.get("level") or ""
    return labels["alertname"], labels.get("npu_id", ""), detail


def start_prometheus(tmp_path: Path, targets: List[str], down: str) -> PrometheusServer:
    rules = re.sub(r"for: \d+m", "for: 0s", RULES.read_text(encoding="utf-8"))
    quoted = ", ".join(f"'{target}'" for target in [*targets, down])
    config = (
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [rules.yml]\n"
        "scrape_configs:\n"
        "  - job_name: npuwatch\n"
        f"    static_configs: [{{targets: [{quoted}]}}]\n"
    )
    return PrometheusServer(tmp_path, config=config, files={"rules.yml": rules})


def test_a_real_prometheus_raises_the_alerts_the_demos_call_for(tmp_path: Path):
    need_prometheus()
    with ExitStack() as stack:
        instances: Dict[str, str] = {}
        for scenario in EXPECTED:
            feed = stack.enter_context(open_feed(FeedOptions(demo=scenario, interval_s=1.0)))
            exporter = stack.enter_context(Exporter(feed, "127.0.0.1", 0))
            host, port = exporter.address
            instances[f"{host}:{port}"] = scenario
        down = f"127.0.0.1:{free_port()}"  # nothing listens there
        prometheus = stack.enter_context(start_prometheus(tmp_path, list(instances), down))
        wanted: FrozenSet[Tuple[str, str, Tuple[str, str, str]]] = frozenset(
            (instance, scenario, each)
            for instance, scenario in instances.items()
            for each in EXPECTED[scenario]
        )
        deadline = time.monotonic() + 150
        while True:
            firing = [a for a in alerts(prometheus) if a["state"] == "firing"]
            got = {
                (
                    a["labels"].get("instance", ""),
                    instances.get(a["labels"].get("instance", ""), ""),
                    key(a),
                )
                for a in firing
            }
            if wanted <= got and any(a["labels"]["alertname"] == "NpuExporterDown" for a in firing):
                break
            prometheus.assert_running()
            assert time.monotonic() < deadline, f"missing after 150 s: {sorted(wanted - got)}"
            time.sleep(1.0)
    # The chip in Alarm alerts once: npuwatch's level speaks for it, not also its health gauge.
    alarm = [a for a in firing if a["labels"]["alertname"] == "NpuChipUnhealthy"]
    assert [(a["labels"]["npu_id"], a["labels"]["source"]) for a in alarm] == [("3", "npuwatch")]
    (down_alert,) = [a for a in firing if a["labels"]["alertname"] == "NpuExporterDown"]
    assert down_alert["labels"]["instance"] == down
    for alert in firing:
        instance = alert["labels"].get("instance", "")
        assert instance in alert["annotations"]["summary"], alert
        if "npu_id" in alert["labels"]:
            assert (
                f"NPU {alert['labels']['npu_id']} chip {alert['labels']['chip_id']}"
                in alert["annotations"]["summary"]
            )
    assert prometheus.process.returncode is not None
