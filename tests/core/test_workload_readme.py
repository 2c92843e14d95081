"""The README's "What is my NPU limited by?" tables are the code's: the classes and the thresholds."""

from __future__ import annotations

from pathlib import Path

from npuwatch.judge.limits import workload_table
from npuwatch.judge.workload import class_table

README = Path(__file__).resolve().parents[2] / "README.md"


def between(marker: str) -> str:
    text = README.read_text(encoding="utf-8")
    return (
        text.split(f"<!-- {marker}:", 1)[1].split("-->", 1)[1].split(f"<!-- end {marker} -->", 1)[0].strip()
    )


def test_the_class_table_is_the_judge_s():
    assert between("workload-classes") == class_table()


def test_the_threshold_table_is_the_judge_s():
    assert between("workload-table") == workload_table()
