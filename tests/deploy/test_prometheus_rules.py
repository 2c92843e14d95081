"""The alerting rules in deploy/prometheus: valid (`promtool check rules`), unit-tested (`promtool
test rules`: every alert both fires and stays quiet, on npuwatch's and npu-exporter's series), and
written against the names and label values `npuwatch serve` really exposes."""

from __future__ import annotations

import http.client
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, List, Set, Tuple

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from npuwatch.exporter.server import Exporter
from npuwatch.feeds import FeedOptions, open_feed
from tests.conftest import REPO, need
from tests.exporter.test_grafana import metric_names  # one PromQL reader for rules and dashboard

RULES_DIR = REPO / "deploy" / "prometheus"
RULES = RULES_DIR / "npuwatch-rules.yml"
RULE_TESTS = RULES_DIR / "npuwatch-rules.test.yml"
#: The severities the rules use, most urgent first.
SEVERITIES = ("critical", "warning", "info")
#: Names the rules select that are not an exporter's (Prometheus's own target health).
PROMETHEUS_OWN = {"up"}

Exposition = Dict[str, List[Dict[str, str]]]


def promtool() -> str:
    path = shutil.which("promtool")
    need(path is not None, "promtool is not installed (Debian: apt-get install prometheus)")
    assert path is not None
    return path


def run_promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [promtool(), *args], cwd=RULES_DIR, capture_output=True, text=True, timeout=120, check=False
    )


def rules() -> List[Dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def rule_tests() -> List[Dict[str, Any]]:
    doc = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    return [case for test in doc["tests"] for case in test.get("alert_rule_test", [])]


def selectors(expr: str) -> Iterator[Tuple[str, str, str, str]]:
    """(metric, label, operator, value) of each label matcher a selector names."""
    for selector in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}", expr):
        for matcher in re.finditer(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"', selector.group(2)):
            yield selector.group(1), matcher.group(1), matcher.group(2), matcher.group(3)


def scrape_text(scenario: str) -> str:
    """`/metrics` of `npuwatch serve --demo SCENARIO` over HTTP, once the first sample is in."""
    with (
        open_feed(FeedOptions(demo=scenario, interval_s=3600)) as feed,
        Exporter(feed, "127.0.0.1", 0) as exporter,
    ):
        deadline = time.monotonic() + 60
        while exporter.view.snapshot is None:
            assert time.monotonic() < deadline, "no sample within 60 s"
            time.sleep(0.05)
        conn = http.client.HTTPConnection(*exporter.address, timeout=30)
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode("utf-8")
        conn.close()
    return body


def scrape(scenario: str) -> Exposition:
    """Every sample's labels by sample name, from `/metrics` of `npuwatch serve --demo`."""
    out: Exposition = {}
    for family in text_string_to_metric_families(scrape_text(scenario)):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(dict(sample.labels))
    return out


@pytest.fixture(scope="module")
def exposed() -> Exposition:
    return scrape("910b-training")


def test_promtool_check_rules_passes():
    out = run_promtool("check", "rules", RULES.name)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules())} rules found" in out.stdout


def test_promtool_test_rules_passes():
    out = run_promtool("test", "rules", RULE_TESTS.name)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_test_rules_fails_on_a_rule_that_no_longer_alerts(tmp_path: Path):
    """The unit tests bite: the same tests against rules whose throttling never fires fail."""
    broken = RULES.read_text(encoding="utf-8").replace(
        "npuwatch_chip_throttling == 1", "npuwatch_chip_throttling == 2"
    )
    assert broken != RULES.read_text(encoding="utf-8")
    (tmp_path / RULES.name).write_text(broken, encoding="utf-8")
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    out = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0
    assert "NpuChipThrottling" in out.stdout + out.stderr


def test_every_alert_has_a_severity_a_summary_and_a_description_naming_the_node():
    for rule in rules():
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        annotations = rule["annotations"]
        for key in ("summary", "description"):
            assert "$labels.node $labels.instance" in annotations[key], (rule["alert"], key)


def test_every_alert_is_tested_firing_and_not_firing():
    cases = rule_tests()
    for name in {rule["alert"] for rule in rules()}:
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case.get("exp_alerts") for case in mine), f"{name} is never tested firing"
        assert any(not case.get("exp_alerts") for case in mine), f"{name} is never tested quiet"


def test_alerts_over_npu_exporter_names_are_tested_on_npu_exporter_series():
    """An alert whose expression needs no npuwatch_ series fires in the tests on a series with
    npu-exporter's labels (no npu_id: npu-exporter has none)."""
    shared = {
        rule["alert"]
        for rule in rules()
        if not any(name.startswith("npuwatch_") for name in metric_names(rule["expr"].split(" unless ")[0]))
    }
    assert shared == {"NpuChipUnhealthy", "NpuHbmEccDoubleBitErrors", "NpuExporterDown"}
    for name in shared:
        fired = [
            alert["exp_labels"]
            for case in rule_tests()
            if case["alertname"] == name
            for alert in case.get("exp_alerts") or []
        ]
        assert any(labels.get("job") == "npu-exporter" and "npu_id" not in labels for labels in fired), name


def test_every_metric_the_rules_use_is_exposed_by_npuwatch_serve(exposed: Exposition):
    used = set().union(*(metric_names(rule["expr"]) for rule in rules()))
    ours = used - PROMETHEUS_OWN
    assert ours, "the rules select no exporter metric"
    missing = sorted(name for name in ours if name not in exposed)
    assert not missing, f"the rules use metrics /metrics does not expose: {missing}"
    assert {"npuwatch_chip_workload", "npuwatch_chip_throttling", "npuwatch_chip_level"} <= ours


def test_every_label_value_the_rules_match_is_one_npuwatch_serve_exposes(exposed: Exposition):
    checked: Set[FrozenSet[str]] = set()
    for rule in rules():
        for metric, label, operator, value in selectors(rule["expr"]):
            if metric in PROMETHEUS_OWN:
                continue
            assert operator in ("=", "=~"), (rule["alert"], metric, label, operator)
            values = {labels.get(label) for labels in exposed[metric]}
            wanted = value.split("|") if operator == "=~" else [value]
            for each in wanted:
                assert re.fullmatch(r"[\w-]+", each), f"{rule['alert']}: {each!r} is not a plain alternative"
                assert each in values, f"{rule['alert']}: no {metric}{{{label}={each!r}}} on /metrics"
            checked.add(frozenset({metric, label}))
    assert len(checked) >= 2  # level and class at least


def test_the_metric_name_reader_skips_functions_keywords_labels_and_ranges():
    expr = 'increase(a_total{x="y"}[10m]) > 0 unless on(job, instance, id) b_level{level=~"c|d"}'
    assert metric_names(expr) == {"a_total", "b_level"}
    assert list(selectors(expr)) == [("a_total", "x", "=", "y"), ("b_level", "level", "=~", "c|d")]


@pytest.mark.parametrize("scenario", ["910b-training", "chip-alarm"])
def test_promtool_check_metrics_finds_nothing_to_lint_in_the_exposition(scenario: str):
    """Prometheus's own parser and linter read `/metrics` (workload and throttling included) clean."""
    body = scrape_text(scenario)
    assert "npuwatch_chip_workload{" in body
    out = subprocess.run(
        [promtool(), "check", "metrics"], input=body, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout + out.stderr == ""
