"""The fake libdcmi.so, loaded with ctypes.CDLL as the product loads a real one, and its Python twin.

Exact answers per scenario (against the simulator's ``machine_state``), the fault injection
(return codes per call and chip, init failure, hang and segfault in a child process, missing
symbols as a build variant), the call counters, re-reading a changed state file, and the proof
that the C library and the pure-Python stand-in answer every call alike, byte for byte.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import pytest

from npuwatch.probes.dcmi import abi
from npuwatch.probes.runner import run
from npuwatch.probes.simulator.catalog import SCENARIOS
from npuwatch.probes.simulator.dcmi_fake import build, standin
from npuwatch.probes.simulator.dcmi_fake.state import STATE_VARIABLE, render
from npuwatch.probes.simulator.dynamics import MachineState, machine_state
from tests.conftest import need

NOW_S = 100.0
SELF_CHECKS = {
    "npuwatch_fake_calls": (ctypes.c_longlong, [ctypes.c_char_p]),
    "npuwatch_fake_calls_on": (ctypes.c_longlong, [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]),
    "npuwatch_fake_reset": (None, []),
}
INVALID_DEVICE_ID = -8007


def _declare(library: ctypes.CDLL) -> ctypes.CDLL:
    """Prototypes as the product's loader sets them (int return, abi.PROTOTYPES arguments)."""
    for name, argtypes in abi.PROTOTYPES.items():
        function = getattr(library, name, None)
        if function is not None:
            function.restype = ctypes.c_int
            function.argtypes = list(argtypes)
    for name, (restype, argtypes) in SELF_CHECKS.items():
        getattr(library, name).restype = restype
        getattr(library, name).argtypes = argtypes
    return library


@pytest.fixture(scope="module")
def library_path() -> Path:
    built = build.build()
    need(built.path is not None, f"the fake libdcmi.so needs a C compiler: {built.reason}")
    assert built.path is not None
    return built.path


@pytest.fixture
def state_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Path]:
    """Write the state file the library reads (a new file each time: write, then rename)."""
    path = tmp_path / "fake-dcmi.state"
    monkeypatch.setenv(STATE_VARIABLE, str(path))

    def write(text: str) -> Path:
        temporary = tmp_path / "next.state"
        temporary.write_text(text)
        os.replace(temporary, path)
        return path

    return write


@pytest.fixture
def lib(library_path: Path, state_file: Callable[[str], Path]) -> Iterator[ctypes.CDLL]:
    library = _declare(ctypes.CDLL(str(library_path)))
    library.npuwatch_fake_reset()
    yield library
    library.npuwatch_fake_reset()


def _scenario_state(name: str, state_file: Callable[[str], Path]) -> MachineState:
    state = machine_state(SCENARIOS[name], NOW_S, 0)
    state_file(render(state))
    return state


def _int(library: object, name: str, *args: object, kind: type = ctypes.c_int) -> Tuple[int, int]:
    out = kind(-12345)
    code = getattr(library, name)(*args, ctypes.pointer(out))
    return code, out.value


def _struct(library: object, name: str, kind: type, *args: object) -> Tuple[int, ctypes.Structure]:
    buffer = abi.output_buffer()
    code = getattr(library, name)(*args, buffer)
    return code, abi.read_struct(buffer, kind)


def _cards(library: object) -> List[int]:
    count, cards = ctypes.c_int(0), (ctypes.c_int * abi.MAX_CARDS)()
    assert library.dcmi_get_card_list(ctypes.pointer(count), cards, abi.MAX_CARDS) == 0  # type: ignore[attr-defined]
    return list(cards[: count.value])


# ---------------------------------------------------------------- answers per scenario


def test_training_machine_answers_the_simulators_values(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    state = _scenario_state("910b-training", state_file)
    assert lib.dcmi_init() == 0
    assert _cards(lib) == list(range(8))
    for logic_id, chip in enumerate(state.chips):
        card, dev = chip.spec.npu_id, chip.spec.chip_id
        assert _int(lib, "dcmi_get_device_logic_id", card, dev)[1] if False else True
        logic = ctypes.c_int(-1)
        assert lib.dcmi_get_device_logic_id(ctypes.pointer(logic), card, dev) == 0 and logic.value == logic_id
        assert _int(lib, "dcmi_get_device_phyid_from_logicid", logic_id, kind=ctypes.c_uint) == (
            0,
            chip.spec.phy_id,
        )
        assert _int(lib, "dcmi_get_device_health", card, dev, kind=ctypes.c_uint) == (0, 0)
        assert _int(lib, "dcmi_get_device_temperature", card, dev) == (0, chip.temperature_c)
        assert chip.power_w is not None
        assert _int(lib, "dcmi_get_device_power_info", card, dev) == (0, round(chip.power_w * 10))
        util = (ctypes.c_uint, abi.UTIL_AICORE)
        assert _int(lib, "dcmi_get_device_utilization_rate", card, dev, util[1], kind=util[0]) == (
            0,
            chip.aicore_percent,
        )
        code, hbm = _struct(lib, "dcmi_get_device_hbm_info", abi.HbmInfo, card, dev)
        assert (code, hbm.memory_size, hbm.memory_usage) == (0, 65536, chip.hbm_used_mib)  # type: ignore[attr-defined]
        assert (hbm.temp, hbm.bandwith_util_rate) == (chip.hbm_temperature_c, chip.hbm_bandwidth_percent)  # type: ignore[attr-defined]
        freq = ctypes.c_uint
        assert _int(lib, "dcmi_get_device_frequency", card, dev, abi.FREQ_AICORE_MAX, kind=freq) == (0, 1800)
        assert _int(lib, "dcmi_get_device_frequency", card, dev, abi.FREQ_AICORE_CURRENT, kind=freq) == (
            0,
            chip.aicore_freq_mhz,
        )
        assert _int(lib, "dcmi_get_device_voltage", card, dev, kind=ctypes.c_uint) == (
            0,
            round(chip.voltage_v * 100),
        )
        code, info = _struct(lib, "dcmi_get_device_chip_info_v2", abi.ChipInfoV2, card, dev)
        assert (code, abi.text_field(info.chip_name), abi.text_field(info.npu_name)) == (
            0,
            "910B3",
            "Ascend 910B3",
        )  # type: ignore[attr-defined]
        code, pcie = _struct(lib, "dcmi_get_device_pcie_info_v2", abi.PcieInfoAll, card, dev)
        bus = f"{pcie.domain:04x}:{pcie.bdf_busid:02x}:{pcie.bdf_deviceid:02x}.{pcie.bdf_funcid:x}"  # type: ignore[attr-defined]
        assert (code, bus, pcie.deviceid) == (0, chip.spec.bus_id.lower(), 0xD802)  # type: ignore[attr-defined]
        code, die = _struct(lib, "dcmi_get_device_die_v2", abi.DieId, card, dev, abi.DIE_VDIE)
        assert code == 0 and die.soc_die[0] == 0x409921D4 + chip.spec.phy_id  # type: ignore[attr-defined]
    procs = (abi.ProcMemInfo * abi.MAX_PROCESSES)()
    count = ctypes.c_int(-1)
    assert lib.dcmi_get_device_resource_info(0, 0, procs, ctypes.pointer(count)) == 0
    wanted = [(p.spec.pid, p.npu_memory_mib * 1024 * 1024) for p in state.processes if p.spec.npu_id == 0]
    assert [(p.proc_id, p.proc_mem_usage) for p in procs[: count.value]] == wanted and wanted


def test_a3_has_two_chips_per_card_and_no_power_on_chip_one(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    state = _scenario_state("a3", state_file)
    assert lib.dcmi_init() == 0
    for card in _cards(lib):
        assert _int(lib, "dcmi_get_device_num_in_card", card) == (0, 2)
        chip0 = next(c for c in state.chips if (c.spec.npu_id, c.spec.chip_id) == (card, 0))
        assert chip0.power_w is not None
        assert _int(lib, "dcmi_get_device_power_info", card, 0) == (0, round(chip0.power_w * 10))
        assert _int(lib, "dcmi_get_device_power_info", card, 1)[0] == abi.NOT_SUPPORT
    assert len(_cards(lib)) == 8


def test_310p_duo_sparse_cards_an_mcu_board_power_and_ddr_not_hbm(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    state = _scenario_state("310p-duo", state_file)
    assert lib.dcmi_init() == 0
    assert _cards(lib) == [2, 5]  # not 0..N-1
    most, mcu, cpu = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    assert (
        lib.dcmi_get_device_id_in_card(2, ctypes.pointer(most), ctypes.pointer(mcu), ctypes.pointer(cpu)) == 0
    )
    assert (most.value, mcu.value, cpu.value) == (2, 2, -1)
    assert _int(lib, "dcmi_get_device_type", 2, 2) == (0, abi.UNIT_MCU)
    assert _int(lib, "dcmi_get_device_type", 2, 1) == (0, abi.UNIT_NPU)
    assert _int(lib, "dcmi_get_device_type", 2, 7)[0] == INVALID_DEVICE_ID
    assert _int(lib, "dcmi_get_device_temperature", 2, 2)[0] == abi.NOT_SUPPORT  # the MCU is no chip
    assert _int(lib, "dcmi_get_device_num_in_card", 3)[0] == INVALID_DEVICE_ID  # no card 3
    board = dict(state.board_power_w)
    assert _int(lib, "dcmi_mcu_get_power_info", 5) == (0, round(board[5] * 10))
    for chip in state.chips:
        card, dev = chip.spec.npu_id, chip.spec.chip_id
        assert _int(lib, "dcmi_get_device_power_info", card, dev)[0] == abi.NOT_SUPPORT
        assert _struct(lib, "dcmi_get_device_hbm_info", abi.HbmInfo, card, dev)[0] == abi.NOT_SUPPORT
        code, memory = _struct(lib, "dcmi_get_device_memory_info_v3", abi.MemoryInfoV3, card, dev)
        used = memory.memory_size - memory.memory_available  # type: ignore[attr-defined]
        assert (code, memory.memory_size, used) == (0, chip.spec.memory_total_mib, chip.memory_used_mib)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "selectors"), [("950", (13, 14)), ("910b-training", (13,)), ("310p-duo", ())]
)
def test_npu_and_cube_utilisation_where_the_chip_has_them(
    lib: ctypes.CDLL, state_file: Callable[[str], Path], name: str, selectors: Sequence[int]
) -> None:
    state = _scenario_state(name, state_file)
    assert lib.dcmi_init() == 0
    chip = state.chips[0]
    card, dev = chip.spec.npu_id, chip.spec.chip_id
    for selector in (abi.UTIL_NPU, abi.UTIL_AICUBE):
        code, value = _int(lib, "dcmi_get_device_utilization_rate", card, dev, selector, kind=ctypes.c_uint)
        if selector in selectors:
            assert (code, value) == (0, chip.aicore_percent)
        else:
            assert code == abi.NOT_SUPPORT


def test_chip_alarm_health_error_code_text_and_ecc(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    _scenario_state("chip-alarm", state_file)
    assert lib.dcmi_init() == 0
    assert _int(lib, "dcmi_get_device_health", 3, 0, kind=ctypes.c_uint) == (0, 2)  # Alarm: major
    count, codes = ctypes.c_int(-1), (ctypes.c_uint * abi.MAX_ERROR_CODES)()
    assert lib.dcmi_get_device_errorcode_v2(3, 0, ctypes.pointer(count), codes, abi.MAX_ERROR_CODES) == 0
    assert list(codes[: count.value]) == [0x80E01801]
    text = ctypes.create_string_buffer(abi.ERROR_TEXT_BYTES)
    assert lib.dcmi_get_device_errorcode_string(3, 0, 0x80E01801, text, abi.ERROR_TEXT_BYTES) == 0
    assert text.value == b"HBM multi-bit ECC error"
    code, ecc = _struct(lib, "dcmi_get_device_ecc_info", abi.EccInfo, 3, 0, abi.ECC_HBM)
    assert (code, ecc.single_bit_error_cnt, ecc.double_bit_error_cnt, ecc.double_bit_isolated_pages_cnt) == (
        0,
        3,
        1,
        1,
    )  # type: ignore[attr-defined]
    assert _struct(lib, "dcmi_get_device_ecc_info", abi.EccInfo, 3, 0, abi.ECC_DDR)[0] == abi.NOT_SUPPORT
    assert lib.dcmi_get_device_errorcode_v2(2, 0, ctypes.pointer(count), codes, abi.MAX_ERROR_CODES) == 0
    assert count.value == 0
    code, ecc = _struct(lib, "dcmi_get_device_ecc_info", abi.EccInfo, 2, 0, abi.ECC_HBM)
    assert (code, ecc.single_bit_error_cnt, ecc.double_bit_error_cnt) == (0, 0, 0)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- faults, counters, state changes

ONE_CARD = "card 4 1 1 1 -1\nchip 4 0 0 9\ni 4 0 temp 51\ni 4 0 power 1234\ns -1 -1 driver_version 25.5.1\n"


def test_a_return_code_per_function_card_and_device(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    state_file(ONE_CARD + "chip 4 1 1 10\ni 4 1 temp 52\nrc dcmi_get_device_temperature 4 1 -8012\n")
    assert lib.dcmi_init() == 0
    assert _int(lib, "dcmi_get_device_temperature", 4, 0) == (0, 51)
    assert _int(lib, "dcmi_get_device_temperature", 4, 1)[0] == abi.NOT_READY
    assert _int(lib, "dcmi_get_device_power_info", 4, 0) == (0, 1234)


def test_init_failure_and_calls_before_init(lib: ctypes.CDLL, state_file: Callable[[str], Path]) -> None:
    state_file(ONE_CARD + "rc dcmi_init -1 -1 -8002\n")
    assert _int(lib, "dcmi_get_device_temperature", 4, 0)[0] == abi.INNER_ERR  # not initialised
    assert lib.dcmi_init() == abi.OPER_NOT_PERMITTED
    assert _int(lib, "dcmi_get_device_temperature", 4, 0)[0] == abi.INNER_ERR
    state_file(ONE_CARD)  # the user joined HwHiAiUser
    assert lib.dcmi_init() == 0
    assert _int(lib, "dcmi_get_device_temperature", 4, 0) == (0, 51)


def test_without_a_state_file_the_library_acts_as_a_machine_without_driver(
    lib: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STATE_VARIABLE)
    assert lib.dcmi_init() == abi.INNER_ERR
    monkeypatch.setenv(STATE_VARIABLE, "/nonexistent/fake-dcmi.state")
    assert lib.dcmi_init() == abi.INNER_ERR


def test_a_changed_state_file_is_read_again_between_two_calls(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    path = state_file(ONE_CARD)
    assert lib.dcmi_init() == 0
    assert _int(lib, "dcmi_get_device_temperature", 4, 0) == (0, 51)
    state_file(ONE_CARD.replace("temp 51", "temp 77"))  # a new file (rename)
    assert _int(lib, "dcmi_get_device_temperature", 4, 0) == (0, 77)
    path.write_text(ONE_CARD.replace("temp 51", "temp 8"))  # rewritten in place, smaller
    assert _int(lib, "dcmi_get_device_temperature", 4, 0) == (0, 8)


def test_counters_count_every_call_per_chip_and_reset(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    state_file(ONE_CARD + "chip 4 1 1 10\n")
    assert lib.dcmi_init() == 0
    for _ in range(3):
        _int(lib, "dcmi_get_device_power_info", 4, 0)
    assert _int(lib, "dcmi_get_device_power_info", 4, 1)[0] == abi.NOT_SUPPORT  # sticky for the reader
    assert lib.npuwatch_fake_calls(b"dcmi_get_device_power_info") == 4
    assert lib.npuwatch_fake_calls_on(b"dcmi_get_device_power_info", 4, 0) == 3
    assert lib.npuwatch_fake_calls_on(b"dcmi_get_device_power_info", 4, 1) == 1
    assert lib.npuwatch_fake_calls_on(b"dcmi_init", -1, -1) == 1
    assert lib.npuwatch_fake_calls(b"dcmi_get_device_voltage") == 0
    assert lib.npuwatch_fake_calls(b"no_such_function") == -1
    lib.npuwatch_fake_reset()
    assert lib.npuwatch_fake_calls(b"dcmi_get_device_power_info") == 0
    assert _int(lib, "dcmi_get_device_power_info", 4, 0)[0] == abi.INNER_ERR  # reset forgets dcmi_init


def test_bad_arguments_are_refused_not_written_through(
    lib: ctypes.CDLL, state_file: Callable[[str], Path]
) -> None:
    state_file(ONE_CARD)
    assert lib.dcmi_init() == 0
    assert lib.dcmi_get_device_temperature(4, 0, None) == abi.INVALID_PARAMETER
    assert lib.dcmi_get_card_list(None, None, 64) == abi.INVALID_PARAMETER
    assert _int(lib, "dcmi_get_device_temperature", 9, 0)[0] == INVALID_DEVICE_ID
    small = ctypes.create_string_buffer(b"\xa5" * 8)
    assert lib.dcmi_get_driver_version(small, 4) == 0
    assert small.raw == b"25.\0" + b"\xa5" * 4 + b"\0"  # truncated, terminated, nothing past len


@pytest.mark.parametrize("omitted", [("dcmi_get_device_chip_info_v2", "dcmi_get_device_hbm_info")])
def test_a_build_variant_lacks_the_omitted_symbols(omitted: Tuple[str, ...], tmp_path: Path) -> None:
    built = build.build(omitted, cache_dir=tmp_path)
    need(built.path is not None, f"the fake libdcmi.so needs a C compiler: {built.reason}")
    library = ctypes.CDLL(str(built.path))
    for name in abi.PROTOTYPES:
        assert hasattr(library, name) is (name not in omitted), name


def test_the_stand_in_lacks_the_state_files_omitted_functions(state_file: Callable[[str], Path]) -> None:
    state_file(ONE_CARD + "omit dcmi_get_device_hbm_info\n")
    handle = standin.load()
    assert not hasattr(handle, "dcmi_get_device_hbm_info")
    assert hasattr(handle, "dcmi_get_device_chip_info_v2")
    assert handle.omitted == ("dcmi_get_device_hbm_info",)


# ---------------------------------------------------------------- hang and crash, in a child

_CHILD = """
import ctypes, sys
which = sys.argv[1]
if which == "python":
    from npuwatch.probes.simulator.dcmi_fake import standin
    lib = standin.load()
else:
    lib = ctypes.CDLL(which)
print("init", lib.dcmi_init(), flush=True)
value = ctypes.c_int(0)
code = getattr(lib, sys.argv[2])(4, 0, ctypes.pointer(value))
print("returned", code, value.value, flush=True)
"""


def _child(which: str, function: str, state: Path, timeout_s: float) -> Tuple[Optional[int], str, bool]:
    env = dict(os.environ, **{STATE_VARIABLE: str(state)})
    result = run([sys.executable, "-c", _CHILD, which, function], timeout_s, env=env)
    return result.exit_code, result.stdout, result.timed_out


@pytest.fixture(params=["c", "python"])
def which(request: pytest.FixtureRequest, library_path: Path) -> str:
    return str(library_path) if request.param == "c" else "python"


def test_a_crash_inside_a_call_is_a_segfault_of_the_caller(
    which: str, state_file: Callable[[str], Path]
) -> None:
    path = state_file(ONE_CARD + "crash dcmi_get_device_power_info -1 -1\n")
    code, out, timed_out = _child(which, "dcmi_get_device_power_info", path, 30.0)
    assert (code, timed_out) == (-signal.SIGSEGV, False)
    assert "init 0" in out and "returned" not in out
    code, out, _ = _child(which, "dcmi_get_device_temperature", path, 30.0)  # other calls answer
    assert code == 0 and "returned 0 51" in out


def test_a_hang_inside_a_call_never_returns_until_killed(
    which: str, state_file: Callable[[str], Path]
) -> None:
    path = state_file(ONE_CARD + "hang dcmi_get_device_temperature 4 0 0\n")
    code, out, timed_out = _child(which, "dcmi_get_device_temperature", path, 2.0)
    assert (code, timed_out) == (None, True)
    assert "init 0" in out and "returned" not in out


def test_a_bounded_hang_answers_afterwards(which: str, state_file: Callable[[str], Path]) -> None:
    path = state_file(ONE_CARD + "hang dcmi_get_device_temperature 4 0 1\n")
    code, out, _ = _child(which, "dcmi_get_device_temperature", path, 30.0)
    assert code == 0 and "returned 0 51" in out


# ---------------------------------------------------------------- C and stand-in answer alike

_FILL = 0xA5


def _buffer(size: int = abi.OUTPUT_BYTES) -> ctypes.Array:  # type: ignore[type-arg]
    return ctypes.create_string_buffer(bytes([_FILL]) * size, size)


def _out(kind: type) -> ctypes._SimpleCData:  # type: ignore[type-arg]
    return kind(-0x5A5A5A5A if kind is ctypes.c_int else 0xA5A5A5A5)


def exercise(library: object, cards: Sequence[int]) -> List[Tuple[object, ...]]:
    """Every function on every card and device (and some that do not exist), every selector, odd
    sizes and NULLs: each call's code and every byte it could have written."""
    lib = library
    seen: List[Tuple[object, ...]] = []

    def record(name: str, code: int, *outputs: object) -> None:
        seen.append((name, code, *(bytes(o) if not isinstance(o, int) else o for o in outputs)))  # type: ignore[call-overload]

    record("dcmi_init", lib.dcmi_init())  # type: ignore[attr-defined]
    for name in ("dcmi_get_dcmi_version", "dcmi_get_driver_version"):
        for size in (0, 1, 5, 64):
            buffer = _buffer(80)
            record(name, getattr(lib, name)(buffer, size), buffer)
    for name in ("dcmi_get_card_list", "dcmi_get_card_num_list"):
        for length in (0, 1, 64):
            count, listed = _out(ctypes.c_int), (ctypes.c_int * 64)(*([-7] * 64))
            record(name, getattr(lib, name)(ctypes.pointer(count), listed, length), count, listed)
        record(name, getattr(lib, name)(None, None, 64))
    for logic in (0, 1, 7, 15, 999):
        phy = _out(ctypes.c_uint)
        record("phy", lib.dcmi_get_device_phyid_from_logicid(logic, ctypes.pointer(phy)), phy)  # type: ignore[attr-defined]
    for card in (*cards, 99):
        number, most, mcu, cpu, board = (_out(ctypes.c_int) for _ in range(5))
        record("num", lib.dcmi_get_device_num_in_card(card, ctypes.pointer(number)), number)  # type: ignore[attr-defined]
        pointers = (ctypes.pointer(most), ctypes.pointer(mcu), ctypes.pointer(cpu))
        record("id_in_card", lib.dcmi_get_device_id_in_card(card, *pointers), most, mcu, cpu)  # type: ignore[attr-defined]
        record("mcu_power", lib.dcmi_mcu_get_power_info(card, ctypes.pointer(board)), board)  # type: ignore[attr-defined]
        for dev in range(4):
            seen.extend(_exercise_device(lib, card, dev))
    return seen


def _exercise_device(lib: object, card: int, dev: int) -> List[Tuple[object, ...]]:
    seen: List[Tuple[object, ...]] = []

    def call(name: str, *args: object) -> None:
        seen.append(
            (
                name,
                card,
                dev,
                getattr(lib, name)(card, dev, *args),
                *(bytes(a) for a in args if not isinstance(a, int)),
            )
        )  # type: ignore[call-overload]

    def pointed(name: str, kind: type, *before: object) -> None:
        value = _out(kind)
        code = getattr(lib, name)(card, dev, *before, ctypes.pointer(value))
        seen.append((name, card, dev, *before, code, bytes(value)))  # type: ignore[call-overload]

    pointed("dcmi_get_device_type", ctypes.c_int)
    logic = _out(ctypes.c_int)
    seen.append(("logic", lib.dcmi_get_device_logic_id(ctypes.pointer(logic), card, dev), bytes(logic)))  # type: ignore[attr-defined, call-overload]
    for name in ("dcmi_get_device_health", "dcmi_get_device_voltage"):
        pointed(name, ctypes.c_uint)
    for name in ("dcmi_get_device_temperature", "dcmi_get_device_power_info"):
        pointed(name, ctypes.c_int)
    for selector in (1, 2, 3, 4, 5, 6, 8, 10, 12, 13, 14, 99):
        pointed("dcmi_get_device_utilization_rate", ctypes.c_uint, selector)
    for selector in (1, 2, 6, 7, 9, 12, 3):
        pointed("dcmi_get_device_frequency", ctypes.c_uint, selector)
    for name in (
        "dcmi_get_device_chip_info",
        "dcmi_get_device_chip_info_v2",
        "dcmi_get_device_pcie_info_v2",
        "dcmi_get_device_board_info",
        "dcmi_get_device_hbm_info",
        "dcmi_get_device_memory_info_v3",
        "dcmi_get_device_memory_info_v2",
    ):
        call(name, _buffer())
    for selector in (0, 1, 2):
        call("dcmi_get_device_die_v2", selector, _buffer())
    for selector in (abi.ECC_DDR, abi.ECC_HBM, 3):
        call("dcmi_get_device_ecc_info", selector, _buffer())
    for size in (0, 3, 64):
        call("dcmi_get_product_type", _buffer(80), size)
    count, codes = _out(ctypes.c_int), (ctypes.c_uint * 130)(*([7] * 130))
    code = lib.dcmi_get_device_errorcode_v2(card, dev, ctypes.pointer(count), codes, 128)  # type: ignore[attr-defined]
    seen.append(("errors", card, dev, code, bytes(count), bytes(codes)))  # type: ignore[call-overload]
    for value in (*codes[: max(0, min(count.value, 128))], 0x12345678):
        for size in (0, 6, 256):
            call("dcmi_get_device_errorcode_string", value, _buffer(300), size)
    procs, number = _buffer(abi.MAX_PROCESSES * 16 + 32), _out(ctypes.c_int)
    code = lib.dcmi_get_device_resource_info(card, dev, procs, ctypes.pointer(number))  # type: ignore[attr-defined]
    seen.append(("procs", card, dev, code, bytes(procs), bytes(number)))  # type: ignore[call-overload]
    seen.append(("null", card, dev, lib.dcmi_get_device_hbm_info(card, dev, None)))  # type: ignore[attr-defined]
    return seen


def _calls(library: object) -> List[int]:
    counts = [library.npuwatch_fake_calls(name.encode()) for name in abi.PROTOTYPES]  # type: ignore[attr-defined]
    return [*counts, library.npuwatch_fake_calls_on(b"dcmi_get_device_temperature", 2, 0)]  # type: ignore[attr-defined]


def _without_hangs_and_crashes(text: str) -> str:
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith(("hang ", "crash "))
    )


ODD_STATE = (
    "# comment\n  \t\n"
    "card 0x2 2 2 2 -1\r\ncard 010 1 1 -1 -1\ncard 2 9 9 9 9\ncard 08 1 1 -1 -1\ncard 5 1 1 1_0 -1\n"
    "chip 2 0 0 4\nchip 2 1 1 5\nchip 8 0 2 6\nchip 2 0 9 9\n"
    "i 2 0 temp 45\ni 2 0 temp 99\ni 2 0 power -5\ni 2 0 voltage 4294967297\ni 2 0 health 0xFFFFFFFF\n"
    "i 2 0 util.2 +7\ni 2 0 util.3 0x\ni 2 0 util.4 12abc\ni 2 1 hbm.total 9223372036854775808\n"
    "i 2 1 hbm.used -1\ni 2 1 a_key_that_is_far_too_long_to_be_kept 1\ni 2 0\ns 2 0 chip_name\n"
    "s 2 1 chip_name " + "N" * 300 + "\ns 2 1 product_type \tAtlas  with  spaces \r\n"
    "s -1 -1 dcmi_version 1.2.3\0ignored\ns -1 -1 driver_version " + "v" * 1200 + "\n"
    "err 2 0 0x80E01801 first\nerr 2 0 -1 negative\nerr 2 0 7\nerr 2 1 0x80E01801 " + "é" * 200 + "\n"
    "proc 2 0 100 1048576\nproc 2 0 101\nproc 2 0 -5 -5\n"
    "rc dcmi_get_device_voltage 2 -1 -8017\nrc dcmi_get_device_power_info -1 1 4294967295\n"
    "rc dcmi_get_device_health 2 1\nhang\ncrash dcmi_init\nunknown record here\n"
    "i 8 0 mem.total 100\ni 8 0 mem.avail 40\ni 8 0 mem.hpsize 2048\ni 8 0 ecc.type 0\ni 8 0 ecc.double 2\n"
    "i 8 0 die.0.0 1\ni 8 0 die.2.4 5\ni 8 0 board.board_id 3\ni 8 0 pci.vendor 0x19e5\ni 8 -1 mcu_power 55\n"
)


@pytest.mark.parametrize("name", [*sorted(SCENARIOS), "odd-state-file"])
def test_c_and_stand_in_answer_every_call_alike(
    name: str, library_path: Path, state_file: Callable[[str], Path]
) -> None:
    if name == "odd-state-file":
        text, cards = ODD_STATE, [2, 8, 5, 0]
    else:
        scenario = SCENARIOS[name]
        text, cards = (
            _without_hangs_and_crashes(render(machine_state(scenario, NOW_S, 0))),
            list(scenario.npu_ids),
        )
    state_file(text)
    c_library = _declare(ctypes.CDLL(str(library_path)))
    python = standin.load()
    answers = []
    for library in (c_library, python):
        library.npuwatch_fake_reset()  # type: ignore[attr-defined]
        answers.append((exercise(library, cards), _calls(library)))
        library.npuwatch_fake_reset()  # type: ignore[attr-defined]
    (c_seen, c_calls), (py_seen, py_calls) = answers
    assert len(c_seen) == len(py_seen)
    for c_row, py_row in zip(c_seen, py_seen):
        assert c_row == py_row
    assert c_calls == py_calls


def test_both_refuse_every_call_without_a_state(library_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATE_VARIABLE, raising=False)
    c_library = _declare(ctypes.CDLL(str(library_path)))
    for library in (c_library, standin.load()):
        library.npuwatch_fake_reset()  # type: ignore[attr-defined]
        seen = exercise(library, [0])
        assert {row[-1] if row[0] == "dcmi_init" else None for row in seen[:1]} == {abi.INNER_ERR}
        library.npuwatch_fake_reset()  # type: ignore[attr-defined]
