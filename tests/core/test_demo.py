"""Every demo scenario runs the product's real path (runner → parser → sampler) and validates."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import psutil
import pytest

from npuwatch.cli import main
from npuwatch.probes.simulator import list_scenarios

SCHEMA = json.loads(resources.files("npuwatch").joinpath("snapshot-v1.schema.json").read_text())
SCENARIOS = [name for name, _ in list_scenarios()]
FAILING = {"no-driver", "container-missing-nodes", "npu-smi-hang"}


def test_required_scenarios_exist():
    required = {"910b-training", "a3", "310p-duo", "no-driver", "container-missing-nodes", "npu-smi-hang"}
    assert required | {"chip-alarm", "pcie-degraded"} <= set(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_snapshot_json_validates_for_every_scenario(scenario, capsys):
    code = main(["snapshot", "--json", "--demo", scenario, "--timeout", "2"])
    doc = json.loads(capsys.readouterr().out)
    jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(doc)
    assert doc["source"] == f"demo:{scenario}"
    if scenario in FAILING:
        assert code == 1
        # Chips come from PCI sysfs, every metric null with the failure's status.
        assert len(doc["chips"]) == 8
        statuses = {s for chip in doc["chips"] for s in chip["metric_status"].values()}
        assert statuses == ({"timeout"} if scenario == "npu-smi-hang" else {"error"})
    else:
        assert code == 0
        assert doc["chips"]
        assert doc["host"] is not None


def test_hang_scenario_returns_within_the_timeout_with_a_timeout_status(capsys):
    before = set(psutil.Process().children(recursive=True))
    code = main(["snapshot", "--json", "--demo", "npu-smi-hang", "--timeout", "1"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    npu_smi = next(p for p in doc["probes"] if p["name"] == "npu-smi")
    assert npu_smi["status"] == "timeout"
    assert "within 1.0 s" in npu_smi["message"]
    assert all(set(chip["metric_status"].values()) == {"timeout"} for chip in doc["chips"])
    left = set(psutil.Process().children(recursive=True)) - before
    assert not [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_a3_scenario_groups_two_chips_per_npu(capsys):
    assert main(["snapshot", "--json", "--demo", "a3"]) == 0
    chips = json.loads(capsys.readouterr().out)["chips"]
    assert len(chips) == 16
    assert [(c["npu_id"], c["chip_id"], c["phy_id"]) for c in chips[:3]] == [(0, 0, 0), (0, 1, 1), (1, 0, 2)]
    assert chips[1]["power_w"] is None and "power_w" in chips[1]["unavailable"]


def test_310p_duo_has_sparse_ids_ddr_and_no_hbm(capsys):
    assert main(["snapshot", "--json", "--demo", "310p-duo"]) == 0
    chips = json.loads(capsys.readouterr().out)["chips"]
    ids = sorted({c["npu_id"] for c in chips})
    assert ids != list(range(len(ids)))  # sparse
    assert all(c["hbm_total_mib"] is None and c["memory_total_mib"] for c in chips)
    assert chips[0]["bus_id"] == chips[1]["bus_id"]  # a Duo card: two chips, one Bus-Id


def test_chip_alarm_and_pcie_degraded_show_up(capsys):
    main(["snapshot", "--json", "--demo", "chip-alarm"])
    healths = [c["health"] for c in json.loads(capsys.readouterr().out)["chips"]]
    assert "Alarm" in healths
    main(["snapshot", "--json", "--demo", "pcie-degraded"])
    chips = json.loads(capsys.readouterr().out)["chips"]
    degraded = [
        c for c in chips if c["pcie"] and (c["pcie"]["current_width"] or 0) < (c["pcie"]["max_width"] or 0)
    ]
    assert degraded


def test_training_demo_enriches_processes_with_host_details(capsys):
    assert main(["snapshot", "--json", "--demo"]) == 0
    processes = json.loads(capsys.readouterr().out)["processes"]
    assert processes
    assert all(p["user"] and p["command"] and p["rss_bytes"] for p in processes)


def test_unknown_scenario_is_a_usage_error_listing_the_names(capsys):
    assert main(["snapshot", "--demo", "nope"]) == 64
    err = capsys.readouterr().err
    assert "910b-training" in err and "a3" in err


def test_demo_list_prints_the_scenarios(capsys):
    assert main(["--demo", "list"]) == 0
    assert "310p-duo" in capsys.readouterr().out
