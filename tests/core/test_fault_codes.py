"""Huawei's handling class of an error code (the device plugin's faultCode.json), and what the
judge says with it."""

from __future__ import annotations

from collections import Counter

import pytest

from npuwatch.judge.fault_codes import TABLE, FaultHandling, handling_of, worst_handling
from npuwatch.judge.rules import judge_chip
from npuwatch.model import ChipError, ChipIdentity, ChipSample, Health, Level


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("80E01801", FaultHandling.RESTART_BUSINESS),  # HBM multi-bit ECC (the chip-alarm demo)
        ("0x80e01801", FaultHandling.RESTART_BUSINESS),
        ("80E21007", FaultHandling.NOT_HANDLED),
        ("81A3880C", FaultHandling.SUB_HEALTH),
        ("80C98008", FaultHandling.RESTART_REQUEST),
        ("8C0E4E00", FaultHandling.FREE_RESTART_NPU),
        ("40F84E00", FaultHandling.RESTART_NPU),  # card drop (ascend-common constants.go)
        ("80E3A201", FaultHandling.SEPARATE_NPU),
        ("80818c00", FaultHandling.SEPARATE_NPU),  # written in lower case in the file
        ("A2301001", FaultHandling.SEPARATE_NPU),  # listed as restart-business and separate-npu
        ("12345678", None),
    ],
)
def test_each_code_has_the_device_plugin_s_class(code, expected):
    assert handling_of(code) is expected


def test_the_table_holds_every_list_of_the_file():
    found = Counter(TABLE.values())
    counts = {handling: found[handling] for handling in FaultHandling}
    assert counts == {
        FaultHandling.NOT_HANDLED: 102,
        FaultHandling.SUB_HEALTH: 10,
        FaultHandling.RESTART_REQUEST: 30,
        FaultHandling.RESTART_BUSINESS: 25,
        FaultHandling.FREE_RESTART_NPU: 17,
        FaultHandling.RESTART_NPU: 139,
        FaultHandling.PRE_SEPARATE_NPU: 0,
        FaultHandling.SEPARATE_NPU: 27,
    }


def test_the_worst_class_among_codes_is_the_one_acted_on():
    assert worst_handling(["80E21007", "80E01801", "80C98008"]) is FaultHandling.RESTART_BUSINESS
    assert worst_handling(["12345678"]) is None


def chip(health: Health, *codes: str) -> ChipSample:
    errors = tuple(ChipError(code) for code in codes)
    return ChipSample(ChipIdentity(2, 0, name="910B3"), health=health, errors=errors)


def test_a_chip_with_a_restart_npu_code_is_critical_and_says_what_to_do():
    judged = judge_chip(chip(Health.WARNING, "40F84E00"))
    assert judged.level is Level.CRITICAL
    assert judged.texts == ("Warning 40F84E00 → restart-npu",)
    assert (
        "Huawei's handling of it is restart-npu: stop the jobs on it and reset the chip"
        in judged.reasons[0].detail
    )


def test_a_not_handled_code_keeps_the_health_s_level():
    assert judge_chip(chip(Health.WARNING, "80E21007")).level is Level.WARNING
    assert judge_chip(chip(Health.OK, "80E21007")).level is Level.OK


def test_a_separate_code_on_a_chip_that_says_ok_still_makes_it_critical():
    judged = judge_chip(chip(Health.OK, "80E3A201"))
    assert judged.level is Level.CRITICAL
    assert judged.texts == ("OK 80E3A201 → separate-npu",)
