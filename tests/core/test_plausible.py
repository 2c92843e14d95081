"""plausible(): impossible values set aside with their raw value in the reason; good chips untouched."""

from __future__ import annotations

from npuwatch.model import ChipIdentity, ChipSample, MetricStatus
from npuwatch.plausible import plausible


def _chip(**values: object) -> ChipSample:
    return ChipSample(identity=ChipIdentity(npu_id=0, chip_id=0), **values)  # type: ignore[arg-type]


def test_a_good_chip_is_returned_as_it_is() -> None:
    chip = _chip(power_w=95.5, temperature_c=41, aicore_percent=77, hbm_used_mib=100, hbm_total_mib=65536)
    assert plausible(chip) == (chip, ())
    assert plausible(chip)[0] is chip


def test_an_integer_out_of_range_is_set_aside_with_its_value_as_printed() -> None:
    checked, warnings = plausible(_chip(temperature_c=-273000, aicore_percent=999, power_w=-363.5))
    assert (checked.temperature_c, checked.aicore_percent, checked.power_w) == (None, None, None)
    assert checked.notes["temperature_c"].status is MetricStatus.IMPLAUSIBLE
    assert checked.notes["temperature_c"].reason.startswith("implausible value -273000 °C")
    assert "implausible value 999 %" in checked.notes["aicore_percent"].reason
    assert "implausible value -363.5 W" in checked.notes["power_w"].reason
    assert checked.notes["temperature_c"].reason == (
        "implausible value -273000 °C (outside -60 to 150 °C): not a real reading"
    )
    assert warnings == (
        "NPU 0: implausible power_w -363.5, temperature_c -273000, aicore_percent 999: "
        "not shown or graphed (a broken sensor or a garbled table)",
    )


def test_more_used_than_the_total_is_set_aside() -> None:
    checked, warnings = plausible(_chip(hbm_used_mib=70000, hbm_total_mib=65536))
    assert checked.hbm_used_mib is None and checked.hbm_total_mib == 65536
    assert checked.notes["hbm_used_mib"].reason == (
        "implausible value 70000 MiB (more than the 65536 MiB total): not a real reading"
    )
    assert warnings == (
        "NPU 0: implausible hbm_used_mib 70000: not shown or graphed (a broken sensor or a garbled table)",
    )


def test_memory_no_chip_has_is_set_aside_whatever_the_source() -> None:
    # DCMI's unsigned 64-bit sizes read as 0x7FFF… / 0xFFFF… (docs/plausible-ranges.md).
    checked, warnings = plausible(
        _chip(
            hbm_total_mib=2**63 - 1, hbm_used_mib=2**64 - 1, memory_total_mib=2**32 - 1, hugepages_total=2**40
        )
    )
    assert (checked.hbm_total_mib, checked.hbm_used_mib, checked.memory_total_mib) == (None, None, None)
    assert checked.hugepages_total is None
    assert checked.notes["hbm_total_mib"].reason == (
        "implausible value 9.22337e+18 MiB (outside 0 to 1048576 MiB): not a real reading"
    )
    assert len(warnings) == 1 and "hbm_total_mib 9.22337e+18" in warnings[0]
    # The largest chip there is (the 950PR's 128 GiB, capture 082) stays a reading.
    good = _chip(hbm_total_mib=131072, hbm_used_mib=5239)
    assert plausible(good) == (good, ())
