"""The Grafana dashboard queries only metrics that `npuwatch serve` exposes (scraped from the demos)."""

from __future__ import annotations

import http.client
import json
import re
import time
from typing import Any, Dict, Iterator, List, Set

import pytest
from prometheus_client.parser import text_string_to_metric_families

from npuwatch.exporter.server import Exporter
from npuwatch.feeds import FeedOptions, open_feed
from tests.conftest import REPO

DASHBOARD = REPO / "dashboards" / "npuwatch-grafana.json"
#: Layouts the default demo (910B) does not print: the 950's NPU Util, the 310 family's DDR.
# The overall utilisation, which npu-smi prints only on the 950, comes through DCMI (the demos'
# default backend) on the 910B too (selector 13, driver-interfaces.md §6.6).
OTHER_LAYOUTS = {
    "310p-duo": {"npu_chip_info_used_memory", "npu_chip_info_total_memory"},
}
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}
_KEYWORDS |= {"offset", "inf", "nan"}


def dashboard() -> Dict[str, Any]:
    loaded: Dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def walk(node: Any) -> Iterator[Dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def queries(doc: Dict[str, Any]) -> List[str]:
    """Every PromQL the dashboard runs: panel targets and the template variables' queries."""
    found = [node["expr"] for node in walk(doc.get("panels", [])) if isinstance(node.get("expr"), str)]
    for variable in doc["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            found.append(query)
    return found


def metric_names(expr: str) -> Set[str]:
    """The metric names a PromQL expression selects (functions, keywords and label names skipped)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals (label values)
    text = re.sub(r"label_values\(\s*([^,()]+?)\s*,\s*\w+\s*\)", r"\1", text)  # Grafana: metric, label
    text = re.sub(r"\$\{?\w+\}?", "", text)  # Grafana variables
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function call
        if match.group(0).lower() not in _KEYWORDS:
            names.add(match.group(0))
    return names


def scrape(scenario: str) -> Set[str]:
    """The sample names `/metrics` exposes for a demo, over HTTP once the first sample is in."""
    options = FeedOptions(demo=scenario, interval_s=3600)
    with open_feed(options) as feed, Exporter(feed, "127.0.0.1", 0) as exporter:
        deadline = time.monotonic() + 60
        while exporter.view.snapshot is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        conn = http.client.HTTPConnection(*exporter.address, timeout=30)
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode("utf-8")
        conn.close()
    return {s.name for family in text_string_to_metric_families(body) for s in family.samples}


def test_metric_name_extraction():
    assert metric_names(
        'sum by (npu_id) (rate(npuwatch_probe_errors_total{probe="x"}[$__rate_interval]))'
    ) == {"npuwatch_probe_errors_total"}
    assert metric_names('100 * a_used{instance=~"$instance"} / on(id) group_left(x) a_total') == {
        "a_used",
        "a_total",
    }
    assert metric_names("label_values(machine_npu_nums, instance)") == {"machine_npu_nums"}
    assert metric_names("up or bool down") == {"up", "down"}


def test_every_metric_the_dashboard_queries_is_exposed_by_the_demo():
    doc = dashboard()
    asked = set().union(*(metric_names(q) for q in queries(doc)))
    default = scrape("910b-training")
    missing_by_default = asked - default
    assert missing_by_default == set().union(*OTHER_LAYOUTS.values())
    for scenario, names in OTHER_LAYOUTS.items():
        assert names <= scrape(scenario), scenario


def test_the_dashboard_covers_health_ai_core_hbm_power_temperature_processes_and_up():
    asked = set().union(*(metric_names(q) for q in queries(dashboard())))
    for name in (
        "npu_chip_info_health_status",
        "npu_chip_info_utilization",
        "npu_chip_info_hbm_used_memory",
        "npu_chip_info_hbm_total_memory",
        "npu_chip_info_power",
        "npu_chip_info_temperature",
        "npu_chip_info_process_info",
        "npuwatch_up",
    ):
        assert name in asked, name


def test_panels_use_the_prometheus_datasource_variable():
    doc = dashboard()
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = doc["panels"]
    assert panels
    ids = [panel["id"] for panel in panels]
    assert len(set(ids)) == len(ids)
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert target["expr"].strip()


@pytest.mark.parametrize("expr", queries(dashboard()))
def test_every_query_has_balanced_brackets(expr):
    for opening, closing in ("()", "{}", "[]"):
        assert expr.count(opening) == expr.count(closing), expr
