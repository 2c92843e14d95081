"""The chip-family table: every capture's chip and every PCI ID finds its row, and a new family is one row."""

from __future__ import annotations

from typing import Iterator

import pytest

from npuwatch import chip_facts, chip_families
from npuwatch.check_command import max_temp_help
from npuwatch.chip_families import (
    FAMILIES,
    OTHER,
    ChipFamily,
    critical_limits_text,
    family_of,
    limits_table,
    required_device_nodes,
)
from npuwatch.cli import main
from npuwatch.doctor.checks import device_nodes, op_kernels
from npuwatch.doctor.result import Status
from npuwatch.judge import Level, Thresholds, limits_for, temperature_level
from npuwatch.model import ChipIdentity, ChipSample, Health
from npuwatch.probes.npu_smi.table import parse_info
from npuwatch.probes.pci import scan_pci
from npuwatch.probes.soc import soc_from_chip_name, soc_from_device_id
from npuwatch.probes.sysroot_builder import SysrootBuilder
from tests.conftest import CAPTURES, capture_text
from tests.doctor.machines import simulated

#: The family of every chip each npu-smi capture lists (by capture number); ``other`` for the
#: documentation's redacted names (``xxx``).  A new capture with chips must be added here.
CAPTURE_FAMILIES = {
    "001": "910b",
    "003": "910b",
    "004": "910",
    "007": "a3",
    "008": "910b",
    "015": "other",
    "016": "other",
    "022": "910b",
    "027": "910b",
    "037": "950",
    "039": "310b",
    "041": "310b",
    "042": "910b",
    "043": "a3",
    "044": "310p",
    "049": "310p",
    "051": "310p",
    "052": "310p",
    "082": "950",
    "088": "a3",
    "089": "a3",
    "091": "910b",
    "092": "910b",
    "093": "910b",
    "100": "a3",
}


def test_every_chip_of_every_capture_finds_its_family():
    seen = {}
    for path in sorted(CAPTURES.glob("*.txt")):
        chips = parse_info(path.read_text(errors="replace")).chips
        if chips:
            seen[path.name[:3]] = {family_of(chip.identity.name).key for chip in chips}
    assert seen == {number: {key} for number, key in CAPTURE_FAMILIES.items()}


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Ascend 910B4", "910b"),  # npu-smi info -m (capture 023)
        ("Ascend910B3", "910b"),  # acl.get_soc_name()
        ("910B4-1", "910b"),
        ("910B2C", "910b"),
        ("Ascend910", "a3"),  # the A3 die as npu-smi's table and -m print it (007, 043, 045, 100)
        ("Ascend910_9391", "a3"),  # acl.get_soc_name() on an A3
        ("Ascend 910_93 (A3)", "a3"),  # the PCI inventory's name
        ("910C", "a3"),
        ("910A", "910"),
        ("910ProB", "910"),
        ("910PremiumA", "910"),
        ("Ascend 910", "910"),  # the PCI inventory's and board report's 910
        ("950DT", "950"),
        ("Ascend950DT", "950"),
        ("Ascend950PR", "950"),
        ("310P3", "310p"),
        ("Ascend310P3", "310p"),
        ("310B4", "310b"),
        ("Ascend310B4", "310b"),
        ("310", "310"),
        ("Ascend 310", "310"),
        ("mcu", "other"),
        ("xxx", "other"),
        ("", "other"),
        (None, "other"),
    ],
)
def test_every_chip_name_a_source_prints_finds_its_family(name, key):
    assert family_of(name).key == key


#: driver-interfaces.md §5.1: every Ascend PCI device ID, its family and its kernel folder.
PCI_IDS = {
    0xD100: ("310", "ascend310"),
    0xD105: ("310b", "ascend310b"),
    0xD500: ("310p", "ascend310p"),
    0xD501: ("310p", "ascend310p"),
    0xD801: ("910", "ascend910"),
    0xD802: ("910b", "ascend910b"),
    0xD803: ("a3", "ascend910_93"),
    0xD804: ("910b", "ascend910b"),  # CLOUD_V2_2P: a 910B 2P
    0xD805: ("910b", "ascend910b"),  # the 910B's SR-IOV VF
    0xD806: ("950", "ascend950"),
    0xD807: ("950", "ascend950"),
    0xD808: ("950", "ascend950"),
}


@pytest.mark.parametrize("device_id", sorted(PCI_IDS))
def test_every_pci_id_finds_its_family_and_soc(device_id):
    key, soc = PCI_IDS[device_id]
    assert family_of(device_id=device_id).key == key
    assert soc_from_device_id(device_id) == soc
    assert chip_families.pci_model(device_id)
    # The ID wins over a name: a bare "Ascend910" on a 910's function is a 910, not an A3.
    assert family_of("Ascend910", device_id).key == key


def test_the_table_holds_exactly_the_driver_ids_and_no_id_twice():
    ids = [i for row in FAMILIES for i in row.pci_device_ids]
    assert sorted(ids) == sorted(PCI_IDS)
    assert family_of(device_id=0x1234) is OTHER and soc_from_device_id(0x1234) is None
    assert chip_families.pci_model(0x1234) is None


#: The fields whose value must say where it comes from (a ``sources`` entry) when it is set.
SOURCED = (
    "soc",
    "pci_device_ids",
    "memory_kind",
    "typical_memory_mib",
    "temperature_warning_c",
    "temperature_critical_c",
    "rated_power_w",
    "card_power_w",
    "power_scope",
    "device_nodes",
    "idle_memory_mib",
    "rated_aicore_mhz",
)


@pytest.mark.parametrize("row", FAMILIES, ids=lambda row: row.key)
def test_every_number_of_every_row_names_its_source(row):
    missing = [name for name in SOURCED if not row.source_of(name)]
    assert missing == []
    assert row.temperature_critical_c > row.temperature_warning_c
    assert set(row.pci_models) <= row.pci_device_ids
    assert set(row.device_nodes) <= set(chip_families.MANAGER_NODES)


#: SoC versions as builds record them (vllm-ascend's and LMCache-Ascend's ``SOC_VERSION``, in
#: any case) and the family each names: the longest kernel-folder prefix wins.
SOC_VERSIONS = {
    "ascend910b1": "910b",
    "Ascend910B3": "910b",
    "ASCEND910B4": "910b",
    "Ascend910_9391": "a3",
    "ascend910_9382": "a3",
    "Ascend910A": "910",
    "Ascend910ProB": "910",
    "ascend310p3": "310p",
    "Ascend310P1": "310p",
    "Ascend310B4": "310b",
    "Ascend310": "310",
    "Ascend950PR_9599": "950",
    "ascend": "other",
    "": "other",
    "Ascend710": "other",
}


@pytest.mark.parametrize(("version", "key"), sorted(SOC_VERSIONS.items()))
def test_a_soc_version_names_its_family_by_prefix(version, key):
    assert chip_families.family_of_soc_version(version).key == key


def test_build_device_types_and_the_soc_version_of_a_chip_name():
    device_types = {"A2": "910b", "A3": "a3", "_310P": "310p", "A5": "950", "a2": "910b", "B9": "other"}
    assert {t: chip_families.family_of_build_device_type(t).key for t in device_types} == device_types
    assert chip_families.family_of_build_device_type("") is OTHER
    names = {"910B3": "Ascend910B3", "310P3": "Ascend310P3", "Ascend910B1": "Ascend910B1"}
    names["950DT"] = "Ascend950DT"
    assert {n: chip_families.soc_version_of_chip(n) for n in names} == names
    # An A3 die prints "Ascend910" and a folder-only name says no variant: no SoC version.
    for name in ("Ascend910", "310P", "910B", "xxx", "", None):
        assert chip_families.soc_version_of_chip(name) is None, name


@pytest.mark.parametrize("row", FAMILIES, ids=lambda row: row.key)
def test_build_facts_name_their_source_when_set(row):
    for name in ("build_device_type", "vllm_ascend_image_suffix"):
        if getattr(row, name) is not None:
            assert row.source_of(name), name


def test_a_card_reading_is_compared_with_the_card_rating():
    duo = family_of("310P3")
    assert duo.rated_power_for_w("card", chips_on_card=2) == 150.0  # not a chip's 72 W
    assert duo.rated_power_for_w("card", chips_on_card=1) == 72.0
    assert duo.rated_power_for_w("chip") == 72.0
    assert family_of("Ascend910").rated_power_for_w("card", chips_on_card=2) is None
    assert family_of("910B3").rated_power_for_w("card") == 400.0  # one chip per module


def test_the_idle_allowance_comes_from_the_family_and_the_old_rule_stays():
    thresholds = Thresholds()
    assert thresholds.idle_allowance_mib(32768) == 4096  # no family: max(4 GiB, total / 16)
    assert thresholds.idle_allowance_mib(98304) == 6144
    b4 = family_of("910B4")
    assert thresholds.idle_allowance_mib(32768, b4) == 3437  # measured, not 4 GiB
    # 5.5 GiB left on a 32 GiB 910B4 is more than its idle figure plus the held margin.
    assert 5632 - thresholds.idle_allowance_mib(32768, b4) > thresholds.hbm_held_min_mib
    # A larger part than the one measured is allowed proportionally more.
    assert thresholds.idle_allowance_mib(131072, family_of("950PR")) == 4857 * 131072 // 98304
    assert thresholds.idle_allowance_mib(3513, family_of("310B4")) == 4096  # no figure: the old rule
    assert thresholds.idle_allowance_mib(65536, OTHER) == 4096


def test_device_nodes_are_the_union_of_the_families_and_with_none_known_what_every_family_needs():
    b310, b910 = family_of("310B4"), family_of("910B3")
    assert required_device_nodes([b310]) == ("davinci_manager", "hisi_hdc")
    assert required_device_nodes([b310, b910]) == ("davinci_manager", "devmm_svm", "hisi_hdc")
    assert required_device_nodes([]) == ("davinci_manager", "hisi_hdc")


# --- a new family is one row ------------------------------------------------------------------

X9 = ChipFamily(
    key="x9",
    title="Ascend X9 (a test family)",
    soc="ascendx9",
    package_chip="X9",
    pci_device_ids=frozenset({0xD8F0}),
    pci_models={0xD8F0: "Ascend X9"},
    two_chip_subsystem=0x022,
    name_pattern=r"^X9",
    memory_kind="DDR",
    typical_memory_mib=8192,
    temperature_warning_c=30.0,
    temperature_critical_c=32.0,
    rated_power_w=50.0,
    card_power_w={1: 50.0, 2: 90.0},
    device_nodes=("davinci_manager", "hisi_hdc"),
    idle_memory_mib=500,
    sources={"rated_power_w": "a test row"},
)


@pytest.fixture
def x9_row(monkeypatch) -> Iterator[ChipFamily]:
    """The table with one more row, first; lookups forget what they cached before and after."""
    monkeypatch.setattr(chip_families, "FAMILIES", (X9, *FAMILIES))
    family_of.cache_clear()
    yield X9
    family_of.cache_clear()


def test_a_new_family_row_is_followed_by_every_reader(x9_row, tmp_path):
    # Lookup, SoC folder, the views' facts and the judge's limits.
    assert family_of("X9B1") is x9_row and limits_for("X9B1") is x9_row
    assert soc_from_device_id(0xD8F0) == "ascendx9" and soc_from_chip_name("X9B1") == "ascendx9"
    assert op_kernels.package_chip("ascendx9") == "X9"
    assert chip_facts.rated_power_w("X9B1") == 50.0 and chip_facts.memory_kind("X9B1") == "DDR"
    chip = ChipSample(ChipIdentity(0, 0, "X9B1"), health=Health.OK, temperature_c=31)
    assert temperature_level(chip) is Level.WARNING
    assert Thresholds().temperature_limits_c("X9B1") == (30.0, 32.0)
    assert Thresholds().idle_allowance_mib(8192, x9_row) == 500
    # The PCI inventory: the ID is an Ascend one, named by the row, with the row's 1PF2P rule.
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_pci_function("0000:c1:00.0", 0xD8F0, subsystem_device_id=0x0220, bound=False)
    (function,) = scan_pci(builder.sysroot()).functions
    assert (function.model, function.chips) == ("Ascend X9", 2)
    # The texts written from the table.
    assert "32 °C for X9" in critical_limits_text() and "32 °C for X9" in max_temp_help()
    assert (
        "| Ascend X9 (a test family) | `d8f0` | `^X9` | 30 °C | 32 °C | 50 W / 2 chips: 90 W |"
        in limits_table()
    )


def test_a_new_family_s_device_nodes_rule_the_doctor(x9_row, tmp_path):
    tm = simulated(tmp_path)
    tm.remove("/sys/bus/pci")
    tm.builder.add_pci_function("0000:c1:00.0", 0xD8F0)
    tm.remove("/dev/devmm_svm")  # the X9 row needs none
    finding = tm.run(device_nodes.CHECK)
    assert finding.status is Status.PASS, finding.summary


def test_a_new_family_s_limits_rule_check_on_a_root_tree(x9_row, tmp_path, capsys):
    # Capture 022 (eight 910B4 at 33-35 °C, no process) with its chips renamed X9B4.
    builder = SysrootBuilder(tmp_path / "root")
    builder.add_dev_nodes(range(8), managers=False, extra=("davinci_manager", "hisi_hdc"))
    path = builder.write_file("/capture.txt", capture_text("022").replace("910B4", "X9B4"))
    builder.install_executable(
        "/usr/local/bin/npu-smi", f'#!/bin/sh\nif [ "$#" -gt 1 ]; then exit 1; fi\ncat {path}\n'
    )
    code = main(["check", "--root", str(builder.root), "--trust-root"])
    line = capsys.readouterr().out.strip()
    assert code == 1
    assert line.startswith("unhealthy: NPU 0 chip 0 33 °C (critical limit 32 °C)"), line
    assert "devmm_svm" not in line
