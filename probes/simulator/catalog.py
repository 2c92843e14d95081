"""Provides the demo scenarios (docs/design.md §4): each simulated machine is a few lines of data."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Tuple

from npuwatch.probes.simulator.scenarios import (
    COMPUTE,
    EVALUATION,
    INFERENCE,
    ChipSpec,
    DcmiFault,
    DcmiSpec,
    HealthOverride,
    Layout,
    LoadProfile,
    NpuSmiMode,
    PciSpec,
    Phase,
    ProcessSpec,
    Scenario,
    Throttle,
    ThrottleReason,
    Versions,
)

# --- builders for common machines ------------------------------------------------------------

# Bus-Ids of an Atlas 800T A2 in NPU order (001, 008, 022): BDF order is not NPU order.
_A2_BUSES = ("C1", "C2", "81", "82", "01", "02", "41", "42")
# Atlas A3 (100): chip 0 / chip 1 of NPUs 0-7.
_A3_BUSES = (
    "9D", "9F", "99", "9B", "95", "97", "91", "93", "8D", "8F", "89", "8B", "85", "87", "81", "83",
)  # fmt: skip
DCMI_8005 = (
    "DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)\ndcmi module initialize failed. ret is -8005\n"
)


def _bdf(bus_id: str) -> str:
    return bus_id.lower()


def atlas_a2(
    name: str = "910B3", hbm_total_mib: int = 65536
) -> Tuple[Tuple[ChipSpec, ...], Tuple[PciSpec, ...]]:
    """8 × 910B, one chip per NPU and per PCI function (d802)."""
    baseline = 3402 if hbm_total_mib > 32768 else 2654  # 008 (64 GB) and 022 (32 GB) idle
    chips = tuple(
        ChipSpec(n, 0, n, f"0000:{bus}:00.0", name, hbm_total_mib, 0, baseline, 0, 92.0, 400.0)
        for n, bus in enumerate(_A2_BUSES)
    )
    pci = tuple(PciSpec(_bdf(c.bus_id), 0xD802, 0x3003) for c in chips)  # 079: 0x3003
    return chips, pci


def _a3() -> Tuple[Tuple[ChipSpec, ...], Tuple[PciSpec, ...]]:
    chips = tuple(
        ChipSpec(
            phy // 2, phy % 2, phy, f"0000:{bus}:00.0", "Ascend910", 65536, 0,
            3400 if phy % 2 == 0 else 3204, 0, 175.0, 550.0, power_shown=phy % 2 == 0,
        )
        for phy, bus in enumerate(_A3_BUSES)
    )  # fmt: skip
    return chips, tuple(PciSpec(_bdf(c.bus_id), 0xD803) for c in chips)


def _duo() -> Tuple[Tuple[ChipSpec, ...], Tuple[PciSpec, ...]]:
    # Two Atlas 300I Duo cards with sparse NPU IDs; both chips of a card share a Bus-Id (044).
    chips: List[ChipSpec] = []
    for card, (npu_id, bus) in enumerate(((2, "01"), (5, "82"))):
        for chip in (0, 1):
            total = 44280 if chip == 0 else 43693
            chips.append(
                ChipSpec(npu_id, chip, card * 2 + chip, f"0000:{bus}:00.0", "310P3", 0, total,
                         0, 1820, 0.0, 0.0, power_shown=False, hugepages_total=0)
            )  # fmt: skip
    pci = tuple(
        PciSpec(_bdf(c.bus_id), 0xD500, 0x0110, "16.0 GT/s PCIe", "16.0 GT/s PCIe")
        for c in chips
        if c.chip_id == 0
    )
    return tuple(chips), pci


def _training(chips: Tuple[ChipSpec, ...], skip: Tuple[int, ...] = ()) -> Tuple[ProcessSpec, ...]:
    """One python process per chip owned by one user, plus an eval job that comes and goes."""
    used = [c for c in chips if c.npu_id not in skip]
    hbm = int(used[0].hbm_total_mib * 0.82) - used[0].hbm_baseline_mib
    procs = [
        ProcessSpec(
            48211 + rank * 7, "python3", "alice",
            f"/opt/conda/bin/python3 -u train.py --config configs/llama2_7b.yaml --local_rank={rank}",
            c.npu_id, c.chip_id, hbm, 18_400,
        )
        for rank, c in enumerate(used)
    ]  # fmt: skip
    last = used[-1]
    procs.append(
        ProcessSpec(
            51877, "python3", "bob", f"python3 eval.py --ckpt ckpt/step_2000 --device {last.phy_id}",
            last.npu_id, last.chip_id, 4_096, 6_200, EVALUATION,
            start_s=70.0, duration_s=50.0, period_s=180.0,
        )
    )  # fmt: skip
    return tuple(procs)


def _inference(chips: Tuple[ChipSpec, ...]) -> Tuple[ProcessSpec, ...]:
    return tuple(
        ProcessSpec(
            3277562 + i * 3, "mindie_llm_back", "mindie",
            f"mindie_llm_backend --model qwen2-7b --device {c.phy_id}",
            c.npu_id, c.chip_id, int(c.memory_total_mib * 0.75) - c.memory_baseline_mib, 9_800,
            INFERENCE, start_s=i * 2.0,
        )
        for i, c in enumerate(chips)
    )  # fmt: skip


_LEAD_IN_S = 35.0  # training warm-up is 40 s (scenarios.TRAINING)

#: No driver (or no device nodes): DCMI initialisation fails as npu-smi does (capture 035).
_DCMI_INIT_8005 = DcmiSpec(faults=(DcmiFault("dcmi_init", code=-8005),))
#: A wedged driver hangs DCMI as it hangs npu-smi: the first call that reaches the device.
_DCMI_WEDGED = DcmiSpec(faults=(DcmiFault("dcmi_get_card_list", hang_s=0),))


def _dcmi_scenarios(chips: Tuple[ChipSpec, ...], pci: Tuple[PciSpec, ...]) -> List[Scenario]:
    """8 × 910B3 training nodes whose npu-smi works but whose DCMI library does not."""
    procs = _training(chips)
    cases = (
        (
            "dcmi-hang",
            "8 × 910B3 whose DCMI reads hang (npuwatch must time out and use npu-smi)",
            DcmiSpec(faults=(DcmiFault("dcmi_get_device_temperature", hang_s=0),)),
        ),
        (
            "dcmi-crash",
            "8 × 910B3 whose libdcmi.so segfaults reading power: npu-smi still works",
            DcmiSpec(faults=(DcmiFault("dcmi_get_device_power_info", crash=True),)),
        ),
        (
            "dcmi-permission",
            "8 × 910B3, user not in HwHiAiUser: DCMI init fails -8002, npu-smi works",
            DcmiSpec(faults=(DcmiFault("dcmi_init", code=-8002),)),
        ),
        (
            "dcmi-missing",
            "8 × 910B3 without libdcmi.so (a container without /usr/local/dcmi): npu-smi only",
            DcmiSpec(present=False),
        ),
    )
    return [
        Scenario(name, description, Layout.A2, chips, pci, procs, lead_in_s=_LEAD_IN_S, dcmi=dcmi)
        for name, description, dcmi in cases
    ]  # fmt: skip


# --- what a chip is limited by (issue 17): one condition per scenario, early and recurring ------
#
# Each condition sets in within ~20 s of the demo's start (so ``NPUWATCH_SIM_NOW=40`` shows it)
# and, except the fault, ends after ~2½ min and comes back: a live view sees it clear too.

#: A training step that never stalls: the AI Core stays busy (the throttling demo's job).
_STEADY_TRAINING = LoadProfile(warmup_s=8.0, dip_every_s=0.0, checkpoint_every_s=0.0)
#: LLM decode at small batch: every token streams the weights and KV cache from HBM, the cube
#: units wait on memory; every 200 s a 50 s burst of long prompts (prefill) is compute-bound.
_DECODE = LoadProfile(
    warmup_s=8.0,
    steady=Phase((25.0, 50.0), (40.0, 70.0), hbm_bandwidth_percent=(80.0, 95.0)),
    dip_every_s=200.0,
    dip_s=50.0,
    dip=Phase((80.0, 95.0), (60.0, 90.0), hbm_bandwidth_percent=(45.0, 60.0)),
    checkpoint_every_s=0.0,
)
#: A model fresh from a CUDA port: operators without an AI Core kernel on this SoC (dynamic
#: shapes, int64 indexing) run on the AI CPU; every 200 s a 40 s validation pass runs on the AI Core.
_FALLBACK = LoadProfile(
    warmup_s=6.0,
    steady=Phase((2.0, 8.0), (25.0, 45.0), hbm_bandwidth_percent=(3.0, 10.0), aicpu_percent=(60.0, 90.0)),
    dip_every_s=200.0,
    dip_s=40.0,
    dip=COMPUTE,
    checkpoint_every_s=0.0,
)
#: Training starved by its input pipeline: each rank's python decodes and augments images on
#: the host while the AI Core waits; every 200 s 40 s of steps from the page cache run at speed.
_STARVED = LoadProfile(
    warmup_s=6.0,
    steady=Phase((1.0, 6.0), (300.0, 400.0)),
    dip_every_s=200.0,
    dip_s=40.0,
    dip=COMPUTE,
    checkpoint_every_s=0.0,
)
#: A job that runs at full speed from its first seconds (the leaking job, a serving instance).
_SHORT_WARMUP = LoadProfile(warmup_s=6.0, dip_every_s=0.0, checkpoint_every_s=0.0)


def _ranks(
    chips: Tuple[ChipSpec, ...],
    first_pid: int,
    user: str,
    command: str,
    profile: LoadProfile,
    name: str = "python3",
    rss_mib: int = 18_400,
) -> Tuple[ProcessSpec, ...]:
    """One process per chip (``command`` formatted with ``rank`` and ``phy``), 82 % of HBM each."""
    return tuple(
        ProcessSpec(
            first_pid + rank * 7, name, user, command.format(rank=rank, phy=c.phy_id), c.npu_id, c.chip_id,
            int(c.hbm_total_mib * 0.82) - c.hbm_baseline_mib, rss_mib, profile,
        )
        for rank, c in enumerate(chips)
    )  # fmt: skip


def _limited_by(chips: Tuple[ChipSpec, ...], pci: Tuple[PciSpec, ...]) -> List[Scenario]:
    """The demos of issue 17: throttling, memory-bound, AI CPU fallback, input-bound, leaked HBM,
    an error code with Huawei's handling class."""
    train = "/opt/conda/bin/python3 -u train.py --config configs/llama2_13b.yaml --local_rank={rank}"
    thermal = Throttle(
        ThrottleReason.THERMAL, 87.0, start_s=-10.0, climb_s=30.0, steps_from_s=25.0, release_s=160.0
    )  # a failed fan: 87 °C by 20 s, 1800 → 1300 MHz from 15 s to 35 s, cooled again at 170 s
    power = Throttle(
        ThrottleReason.POWER, 398.5, start_s=5.0, climb_s=8.0, steps_from_s=8.0, release_s=150.0,
        recover_s=10.0, floor_mhz=1500,
    )  # fmt: skip  # at the 400 W cap by 13 s, 1800 → 1500 MHz by 23 s, released at 155 s
    decode = "mindie_llm_backend --model llama3-8b --max-seq-len 32768 --max-batch-size 4 --device {phy}"
    ported = "python3 train_detr.py --amp --device npu:{phy} --local_rank={rank}"
    starved = (
        "/opt/conda/bin/python3 -u train_vit.py --data /mnt/nfs/imagenet --workers 2 --local_rank={rank}"
    )
    finetune = "python3 finetune.py --config configs/qwen2_7b_lora.yaml --local_rank={rank}"
    leaky = tuple(
        replace(p, start_s=0.0, duration_s=18.0, period_s=240.0, holds_hbm_s=150.0 if p.npu_id < 2 else 0.0)
        for p in _ranks(chips[:4], 60_113, "alice", finetune, _SHORT_WARMUP)
    )  # runs 0-18 s; NPUs 0-1 hold its HBM until 168 s (the zombie is reaped), every 4 min
    others = tuple(
        replace(p, start_s=-900.0) for p in _ranks(chips[4:], 58_402, "bob", train, _STEADY_TRAINING)
    )
    serving = _ranks(
        chips, 3_311_020, "mindie", decode.replace("--max-seq-len 32768 --max-batch-size 4 ", ""),
        _SHORT_WARMUP, name="mindie_llm_back", rss_mib=9_800,
    )  # fmt: skip
    # The parity error kills NPU 6's instance; the chip stays in Alarm until it is reset.
    parity = HealthOverride("Alarm", "80E18005", "HBMC CA parity error", start_s=12.0, warmer_c=0.0)
    serving = tuple(replace(p, duration_s=12.0) if p.npu_id == 6 else p for p in serving)
    cases = (
        Scenario(
            "throttling",
            "8 × 910B3 training; NPU 2 hits 87 °C, NPU 5 its 400 W cap: both step their AI Core clock down",
            Layout.A2, chips, pci, _ranks(chips, 40_517, "alice", train, _STEADY_TRAINING), lead_in_s=25.0,
            throttles=(((2, 0), thermal), ((5, 0), power)),
        ),
        Scenario(
            "memory-bound",
            "8 × 910B3 serving LLM decode: HBM bandwidth 80-95 % while AI Core runs 25-50 % (memory-bound)",
            Layout.A2, chips, pci,
            _ranks(chips, 2_870_114, "mindie", decode, _DECODE, name="mindie_llm_back", rss_mib=9_800),
            lead_in_s=20.0,
        ),
        Scenario(
            "aicpu-fallback",
            "8 × 910B3, a model fresh from a CUDA port on NPUs 0-3: operators fall back to the AI CPU",
            Layout.A2, chips, pci, _ranks(chips[:4], 71_206, "carol", ported, _FALLBACK, rss_mib=11_200),
            lead_in_s=20.0,
        ),
        Scenario(
            "input-bound",
            "8 × 910B3 training starved by its data loader: AI Core < 10 %, python at 300-400 % CPU",
            Layout.A2, chips, pci, _ranks(chips, 33_871, "dave", starved, _STARVED, rss_mib=24_600),
            lead_in_s=20.0,
        ),
        Scenario(
            "hbm-leak",
            "8 × 910B3; a job on NPUs 0-3 exits at 18 s, NPUs 0-1 keep its HBM with no process listed",
            Layout.A2, chips, pci, leaky + others, lead_in_s=8.0,
        ),
        Scenario(
            "error-code",
            "8 × 910B3 serving; NPU 6 raises 80E18005 (HBM CA parity error: restart the NPU) at 12 s",
            Layout.A2, chips, pci, serving, lead_in_s=20.0, health=(((6, 0), parity),),
        ),
    )  # fmt: skip
    return list(cases)


def _scenarios() -> Dict[str, Scenario]:
    a2_chips, a2_pci = atlas_a2()
    training = Scenario(
        "910b-training",
        "8 × 910B3 training node: one python process per chip, data-loading dips, an eval job",
        Layout.A2, a2_chips, a2_pci, _training(a2_chips), lead_in_s=_LEAD_IN_S,
    )  # fmt: skip
    a3_chips, a3_pci = _a3()
    duo_chips, duo_pci = _duo()
    b4_chips, b4_pci = atlas_a2("910B4", 32768)
    hbm = 98304
    a5_chips = tuple(
        ChipSpec(n, 0, n, "NA", "Ascend950DT", hbm, 0, 4856, 0, 290.0, 600.0) for n in range(8)
    )  # 037: Bus-Id printed `NA`
    a5_pci = tuple(PciSpec(f"0000:{b.lower()}:00.0", 0xD806) for b in _A2_BUSES)
    degraded = tuple(
        replace(p, current_width=8, current_speed="16.0 GT/s PCIe") if i == 5 else p
        for i, p in enumerate(a2_pci)
    )
    # The multi-bit error that raised the alarm, after a few corrected single-bit ones; the page
    # holding it was isolated.
    alarm = HealthOverride("Alarm", "80E01801", "HBM multi-bit ECC error", 3, 1, 1)
    found = [
        training,
        Scenario(
            "a3", "Atlas A3: 8 NPUs × 2 chips (16 chips, Phy-ID 0-15), chip 1 power `-`",
            Layout.A3, a3_chips, a3_pci, _training(a3_chips), lead_in_s=_LEAD_IN_S,
            versions=Versions("24.1.rc3.3", "24.1.rc3.3", "7.5.0.3.220", "8.0.0", "2.1.0", "2.1.0.post10"),
        ),
        Scenario(
            "310p-duo", "two Atlas 300I Duo cards, NPU IDs 2 and 5, 4 chips serving inference",
            Layout.P310, duo_chips, duo_pci, _inference(duo_chips), lead_in_s=20.0,
            versions=Versions("24.1.0.1", "24.1.0.1", "7.5.0.1.129", "8.0.0", "2.1.0", "2.1.0.post10"),
        ),
        Scenario(
            "no-driver", "PCI functions present but no driver bound, no /dev/davinci nodes",
            Layout.A2, a2_chips, a2_pci, npu_smi_mode=NpuSmiMode.ERROR, error_text=DCMI_8005,
            davinci_ids=(), manager_nodes=False, driver_bound=False, dcmi=_DCMI_INIT_8005,
        ),
        Scenario(
            "container-missing-nodes",
            "container with davinci0-7 but no davinci_manager/devmm_svm/hisi_hdc: DCMI -8005",
            Layout.A2, a2_chips, a2_pci, npu_smi_mode=NpuSmiMode.ERROR, error_text=DCMI_8005,
            manager_nodes=False, container="docker", host_pid_namespace=False, dcmi=_DCMI_INIT_8005,
        ),
        Scenario(
            "npu-smi-hang", "8 × 910B3 whose npu-smi never answers (the product must time out)",
            Layout.A2, a2_chips, a2_pci, npu_smi_mode=NpuSmiMode.HANG, dcmi=_DCMI_WEDGED,
        ),
        Scenario(
            "chip-alarm", "8 × 910B3 training on 7 chips; NPU 3 in Alarm with an error code",
            Layout.A2, a2_chips, a2_pci, _training(a2_chips, skip=(3,)), lead_in_s=_LEAD_IN_S,
            health=(((3, 0), alarm),),
        ),
        Scenario(
            "pcie-degraded", "8 × 910B3 training; NPU 5 trained at x8 Gen4 of an x16 Gen5 link",
            Layout.A2, a2_chips, degraded, _training(a2_chips), lead_in_s=_LEAD_IN_S,
        ),
        Scenario(
            "950", "8 × Ascend 950DT in the 116-column layout (NPU Util, Bus-Id NA)",
            Layout.A5, a5_chips, a5_pci, _training(a5_chips), lead_in_s=_LEAD_IN_S,
            versions=Versions("25.6.0", "25.6.0", "7.8.0.2.212", "8.5.0", "2.8.0", "2.8.0.post2"),
        ),
        Scenario(
            "idle", "8 × 910B4 right after driver install: no processes, ~2.6 GB HBM baseline",
            Layout.A2, b4_chips, b4_pci,
            versions=Versions("25.0.rc1.1", "25.0.rc1.1", "7.7.0.1.231", "8.1.RC1", "2.5.1", "2.5.1"),
        ),
        Scenario(
            "910b-wide", "8 × 910B3 on driver 26.x: 116-column table, `Process id in container`",
            Layout.A2_WIDE, a2_chips, a2_pci, _training(a2_chips), lead_in_s=_LEAD_IN_S,
            versions=Versions("26.1.0", "26.1.0", "7.8.0.6.201", "8.5.0", "2.8.0", "2.8.0.post2"),
        ),
        *_limited_by(a2_chips, a2_pci),
        *_dcmi_scenarios(a2_chips, a2_pci),
    ]  # fmt: skip
    return {s.name: s for s in found}


SCENARIOS: Dict[str, Scenario] = _scenarios()


def list_scenarios() -> List[Tuple[str, str]]:
    """Every scenario as (name, one-line description), the default first."""
    return [(s.name, s.description) for s in SCENARIOS.values()]


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``; ``ValueError`` naming the valid ones otherwise."""
    found = SCENARIOS.get(name)
    if found is None:
        valid = ", ".join(SCENARIOS)
        raise ValueError(f"unknown demo scenario {name!r}; choose one of: {valid}")
    return found
