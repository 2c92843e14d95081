"""This kernel's torch_npu allocator figures beside the chip's HBM, with the fake torch_npu."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from npuwatch.history import History
from npuwatch.probes import torch_memory
from npuwatch.widgets.notebook.own_memory import own_memory_text
from npuwatch.widgets.view_model import build_view
from tests.selftest.helpers import FAKES
from tests.widgets.fakes import capture_snapshot

_FAKE_MODULES = ("torch", "torch_npu", "fakeruntime", "acl")


def _drop_fakes() -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in _FAKE_MODULES:
            del sys.modules[name]


@pytest.fixture
def fake_torch_npu(monkeypatch):
    """``import torch, torch_npu`` gives the fakes; removed again (path and modules) after the test."""
    for name in ("NPUWATCH_FAKE_FAULT", "NPUWATCH_FAKE_HIDE", "NPUWATCH_FAKE_LEDGER_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ASCEND_RT_VISIBLE_DEVICES", raising=False)
    assert "torch_npu" not in sys.modules, "a real torch_npu is loaded: this test would measure it"
    sys.path.insert(0, str(FAKES))
    try:
        import torch
        import torch_npu  # noqa: F401

        yield torch
    finally:
        sys.path.remove(str(FAKES))
        _drop_fakes()


def test_nothing_without_torch_npu_and_it_is_never_imported():
    if "torch_npu" in sys.modules:
        pytest.skip("torch_npu is loaded in this process")
    assert torch_memory.own_memory(capture_snapshot("001").chips) == {}
    assert "torch_npu" not in sys.modules


def test_own_allocator_figures_land_on_the_chip_of_torch_device_0(fake_torch_npu):
    torch = fake_torch_npu
    torch.npu.init()
    torch.npu.set_device(0)
    tensor = torch.empty(3 * 2**20, dtype=torch.uint8, device="npu:0")  # 3 MiB held
    snapshot = capture_snapshot("001")
    figures = torch_memory.own_memory(snapshot.chips)
    assert set(figures) == {(0, 0), (1, 0)}  # the fake runtime has two devices
    assert (figures[(0, 0)].allocated_bytes, figures[(0, 0)].reserved_bytes) == (3 * 2**20, 4 * 2**20)
    found = own_memory_text(figures, snapshot.chips)
    assert found[(0, 0)].startswith("npu:0 · 3.0 MiB allocated · 4.0 MiB reserved (torch_npu)")
    assert found[(1, 0)].startswith("npu:1 · 0 B allocated")
    share = 4 * 2**20 / (snapshot.chips[0].hbm_used_mib * 2**20)
    assert found[(0, 0)].endswith(f"{share:.0%} of the HBM in use")
    view = build_view(snapshot, History(5), own_memory=found)
    assert view.chips[0].own_memory == found[(0, 0)]
    from npuwatch.widgets.notebook.live_html import chip_html

    assert "npuwatch-own" in chip_html(view.chips[0], "15 min", 5)
    del tensor


def test_visible_devices_map_torch_indexes_to_logic_ids(fake_torch_npu, monkeypatch):
    torch = fake_torch_npu
    torch.npu.init()
    held = torch.empty(2**20, dtype=torch.uint8, device="npu:0")
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "1,0")  # npu:0 is logic 1, npu:1 logic 0
    chips = capture_snapshot("001").chips
    found = torch_memory.own_memory(chips)
    assert (found[(1, 0)].torch_device, found[(1, 0)].allocated_bytes) == (0, 2**20)
    assert (found[(0, 0)].torch_device, found[(0, 0)].allocated_bytes) == (1, 0)
    assert torch_memory.logic_ids(3, {"ASCEND_RT_VISIBLE_DEVICES": "4,6"}) == {0: 4, 1: 6}
    del held


def test_npu_smi_logic_ids_win_over_chip_order(fake_torch_npu):
    fake_torch_npu.npu.init()
    chips = capture_snapshot("001").chips
    # npu-smi -m says NPU 7 is logic 0 (and NPU 0 logic 7): trust it over (NPU, chip) order.
    remapped = tuple(replace(c, identity=replace(c.identity, logic_id=7 - c.identity.npu_id)) for c in chips)
    found = torch_memory.own_memory(remapped)
    assert set(found) == {(7, 0), (6, 0)}


def test_uninitialised_runtime_reports_zero_without_asking_the_allocator(fake_torch_npu):
    npu = fake_torch_npu.npu
    assert not npu.is_initialized()
    figures = torch_memory.read_own_memory(npu)
    assert {i: (f.allocated_bytes, f.reserved_bytes) for i, f in figures.items()} == {0: (0, 0), 1: (0, 0)}


def test_a_broken_runtime_gives_no_figures():
    class Broken:
        def device_count(self) -> int:
            raise RuntimeError("ACL error 507033")

    assert torch_memory.read_own_memory(Broken()) == {}


def test_the_live_view_shows_what_its_reader_finds_and_the_notebook_hands_it_the_probe(
    needs_ipywidgets, hub_factory, snap_910b, monkeypatch
):
    from npuwatch.feeds import FeedOptions
    from npuwatch.model import OwnMemory
    from npuwatch.widgets.notebook.live_view import LiveView
    from tests.notebook.helpers import wait_for

    hub, _ = hub_factory([snap_910b])
    options = FeedOptions(replay="fake.txt", interval_s=0.02)
    reader = lambda chips: {chips[0].identity.key: OwnMemory(0, 2**20, 2**21)}  # noqa: E731
    view = LiveView(options, interval_s=0.02, history_min=1, hub=hub, read_own_memory=reader)
    try:
        assert view.wait_first(30)
        wait_for(lambda: view.state()["chips"][0]["own_memory"] is not None, "the figures")
        assert view.state()["chips"][0]["own_memory"].startswith("npu:0 · 1.0 MiB allocated")
    finally:
        view.stop()
    # The notebook command is what reads the hardware: it gives every live view the probe.
    made = []
    monkeypatch.setattr(LiveView, "__init__", lambda self, *a, **kw: made.append(kw) or None)
    monkeypatch.setattr(LiveView, "wait_first", lambda self, wait_s: True)
    from npuwatch import notebook

    notebook.show(demo="idle", wait_s=0)
    assert made[0]["read_own_memory"] is torch_memory.own_memory
