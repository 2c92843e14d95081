"""Property tests for the text parsers: random and mutated input never raises (docs/design.md §7).

One table of parser groups (the ``npu-smi info -t`` key/value reports, the ``-l``/``-m``/``watch``
lists, the install files), each with the captures it is fed and the characters its grammar uses;
every test runs over every group.  ``parse_info`` has its own table-specific mutations and a
metric contract in ``test_npu_smi_table_props.py``.
"""

from __future__ import annotations

import functools
import inspect
import random
from types import ModuleType
from typing import Callable, NamedTuple, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuwatch.probes import install_files
from npuwatch.probes.npu_smi import kv as npu_smi_kv
from npuwatch.probes.npu_smi import lists as npu_smi_lists
from npuwatch.probes.npu_smi import memory_reports as npu_smi_memory_reports
from npuwatch.probes.npu_smi import reports as npu_smi_reports
from tests.conftest import capture_text
from tests.probes.test_install_files import INSTALL_INFO, VERSION_CFG
from tests.probes.test_npu_smi_kv import ECC_910B, MEMORY_310B, MEMORY_910B

Parser = Callable[[str], object]


def public_parsers(*modules: ModuleType) -> Tuple[Parser, ...]:
    """Every public ``parse_*`` function defined in ``modules`` (not the ones they import)."""
    return tuple(
        function
        for module in modules
        for name, function in sorted(vars(module).items())
        if name.startswith("parse_")
        and inspect.isfunction(function)
        and function.__module__ == module.__name__
    )


class ParserGroup(NamedTuple):
    """Parsers fuzzed together, the texts they are fed and the characters their grammar uses."""

    name: str
    parsers: Tuple[Parser, ...]
    captures: Tuple[str, ...]  # capture numbers in tests/data/npu_smi
    samples: Tuple[Tuple[str, str], ...]  # (name, text): hand-built, for formats with no capture
    #: Sources whose every prefix is parsed: one parse per character, so a few short ones; the
    #: mutation test cuts every source at random offsets.
    prefixed: Tuple[str, ...]
    alphabet: str
    max_size: int

    @property
    def sources(self) -> Tuple[str, ...]:
        return self.captures + tuple(name for name, _ in self.samples)

    def text(self, source: str) -> str:
        samples = dict(self.samples)
        return samples[source] if source in samples else _capture(source)

    def run(self, text: str) -> None:
        for parser in self.parsers:
            parser(text)


@functools.cache
def _capture(number: str) -> str:
    return capture_text(number)


KV_CAPTURES = (
    "010", "011", "012", "013", "017", "030", "031", "046", "061", "063", "065", "079", "080", "081",
)  # fmt: skip

GROUPS = (
    ParserGroup(
        name="key-value",
        parsers=public_parsers(npu_smi_kv, npu_smi_reports, npu_smi_memory_reports),
        captures=KV_CAPTURES,
        samples=(("memory-910b", MEMORY_910B), ("memory-310b", MEMORY_310B), ("ecc-910b", ECC_910B)),
        prefixed=("012", "013", "031", "046", "080", "081", "memory-910b", "memory-310b"),
        alphabet=" \t\n:0123456789ABCDxNAChipIDMCUmcuProcess id name()%.-",
        max_size=400,
    ),
    ParserGroup(
        name="lists",
        parsers=public_parsers(npu_smi_lists),
        captures=("023", "024", "045", "054", "055", "059"),
        samples=(),
        prefixed=("024", "045", "055", "059"),
        alphabet=" \t\n:0123456789.-NAMcuNPU IDChip LogicNpuID(Idx)Pwr(W)%",
        max_size=400,
    ),
    ParserGroup(
        name="install-files",
        parsers=public_parsers(install_files),
        captures=("018", "019", "020", "048"),
        samples=(("ascend-install-info", INSTALL_INFO), ("version-cfg", VERSION_CFG)),
        prefixed=("018", "019", "020", "048", "ascend-install-info", "version-cfg"),
        alphabet="=[],:.\n _0123456789abcVRCversion#\"'",
        max_size=300,
    ),
)

#: Every parser fuzzed before the groups were shared; the table must keep fuzzing them all.
FUZZED = {
    "parse_key_values", "parse_board", "parse_usages", "parse_common", "parse_health",
    "parse_temp", "parse_power", "parse_memory", "parse_ecc", "parse_proc_mem",
    "parse_list", "parse_mapping", "parse_watch",
    "parse_key_value_file", "parse_driver_version_info", "parse_firmware_version_info",
    "parse_ascend_install_info", "parse_toolkit_install_info", "parse_version_cfg",
}  # fmt: skip

PROPS = settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
MUTATIONS = ("delete", "duplicate", "shuffle", "cut")

each_group = pytest.mark.parametrize("group", GROUPS, ids=[group.name for group in GROUPS])


def mutate_lines(text: str, rng: random.Random, how: str) -> str:
    """``text`` with one line deleted or duplicated, its lines shuffled, or cut at a random offset."""
    lines = text.splitlines(keepends=True)
    if how == "delete" and lines:
        del lines[rng.randrange(len(lines))]
    elif how == "duplicate" and lines:
        index = rng.randrange(len(lines))
        lines.insert(index, lines[index])
    elif how == "shuffle":
        rng.shuffle(lines)
    elif how == "cut":
        return text[: rng.randrange(len(text) + 1)]
    return "".join(lines)


def test_groups_fuzz_every_parser():
    fuzzed = {parser.__name__ for group in GROUPS for parser in group.parsers}
    assert fuzzed >= FUZZED
    assert all(group.parsers and group.captures for group in GROUPS)
    assert all(set(group.prefixed) <= set(group.sources) for group in GROUPS)


@each_group
@PROPS
@given(text=st.text())
def test_random_text_never_raises(group, text):
    group.run(text)


@each_group
@PROPS
@given(data=st.data())
def test_grammar_alphabet_never_raises(group, data):
    group.run(data.draw(st.text(alphabet=group.alphabet, max_size=group.max_size)))


@each_group
@PROPS
@given(data=st.data(), rng=st.randoms(use_true_random=False), how=st.sampled_from(MUTATIONS))
def test_mutated_captures_never_raise(group, data, rng, how):
    text = group.text(data.draw(st.sampled_from(group.sources)))
    group.run(mutate_lines(text, rng, how))


@each_group
@PROPS
@given(data=st.data(), noise=st.binary(max_size=40))
def test_random_bytes_spliced_never_raise(group, data, noise):
    text = group.text(data.draw(st.sampled_from(group.sources)))
    at = data.draw(st.integers(0, len(text)))
    group.run(text[:at] + noise.decode("latin-1") + text[at:])


@pytest.mark.parametrize(
    ("group", "source"),
    [(group, source) for group in GROUPS for source in group.prefixed],
    ids=[f"{group.name}-{source}" for group in GROUPS for source in group.prefixed],
)
def test_every_prefix_parses(group, source):
    text = group.text(source)
    for cut in range(len(text) + 1):
        group.run(text[:cut])
