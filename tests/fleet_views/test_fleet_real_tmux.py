"""`npuwatch fleet`'s live view as a user runs it, in tmux, against a real Prometheus scraping three
`npuwatch serve` demos every second (chip-alarm, a3, 910b-training; clocks frozen), and with
--hosts against the same servers plus an address nobody answers: the nodes worst first, a node's
chip cards and back, a node that stops turning stale.  The cluster is fleet18's (tests/fleet/cluster.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.fleet.cluster import Cluster, free_port, running_cluster
from tests.widgets.test_tui_tmux import NPUWATCH, Terminal, tmux_terminal

SCENARIOS = ("chip-alarm", "a3", "910b-training")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("fleet-view-cluster"), SCENARIOS) as made:
        yield made


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    with tmux_terminal(tmp_path) as shown:
        yield shown


def in_order(screen: str, *names: str) -> bool:
    return all(name in screen for name in names) and sorted(names, key=screen.index) == list(names)


@pytest.mark.slow
def test_prometheus_fleet_worst_first_drill_in_and_a_stopped_node_turns_stale(
    cluster: Cluster, term: Terminal
):
    alarm, a3, training = (cluster.serves[s].address for s in SCENARIOS)
    term.start([str(NPUWATCH), "fleet", "--prometheus", cluster.prometheus.url, "--interval", "1"], 200, 50)
    screen = term.wait(lambda s: all(a in s for a in (alarm, a3, training)), "the three nodes")
    assert f"prometheus:{cluster.prometheus.url}" in screen
    assert "3 nodes · 31/32 chips OK" in screen
    assert screen.index(alarm) < min(screen.index(a3), screen.index(training))  # worst first
    assert "NPU 3: Alarm 80E01801" in screen
    assert "Traceback" not in screen
    term.keys("Enter")  # the cursor starts on the worst node
    screen = term.wait_text("╭─ NPU 3 · 910B3")
    assert f"› {alarm} ✖ critical · 7/8 chips OK" in screen
    assert "✖ Alarm" in screen
    term.keys("Escape")
    term.wait_text("AI Core avg/min")
    cluster.serves["a3"].stop()  # a node stops reporting: shown stale, never dropped
    screen = term.wait(lambda s: "◌ stale" in s and a3 in s, "the a3 node stale")
    assert "3 nodes · 1 stale" in screen
    term.keys("q")
    assert term.wait_exit() == "EXIT=0"


@pytest.mark.slow
def test_hosts_fleet_with_an_address_nobody_answers(cluster: Cluster, term: Terminal):
    alarm, training = cluster.serves["chip-alarm"].address, cluster.serves["910b-training"].address
    nobody = f"127.0.0.1:{free_port()}"
    hosts = ",".join((alarm, training, nobody))
    term.start([str(NPUWATCH), "fleet", "--hosts", hosts, "--interval", "1"], 200, 50)
    screen = term.wait(lambda s: all(a in s for a in (alarm, training, nobody)), "the three hosts")
    assert in_order(screen, alarm, nobody, training)  # critical, then the stale one, then ok
    assert "hosts:3" in screen and "◌ stale" in screen
    term.keys("Down", "Down", "Enter")
    screen = term.wait_text("╭─ NPU 0 · 910B")
    assert f"› {training} ✔ ok · 8/8 chips OK" in screen
    assert "Processes (" in screen  # --hosts reads each node's processes too
    term.keys("q")
    assert term.wait_exit() == "EXIT=0"
