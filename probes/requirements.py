"""Provides Requirement: a package's ``Requires-Dist`` line (PEP 508) and whether a version meets it.

Enough of PEP 440 for the doctor's comparisons, without the ``packaging`` dependency: clauses
``<``, ``<=``, ``>``, ``>=``, ``==`` (with a trailing ``.*``), ``!=`` and ``~=`` over release
numbers.  Environment markers (``; python_version < '3.9'``) are kept as text, not evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*\(?([^;)]*)\)?\s*(?:;(.*))?$")
_CLAUSE = re.compile(r"^\s*(~=|==|!=|<=|>=|<|>|===)\s*([A-Za-z0-9.*+!_-]+)\s*$")
_RELEASE = re.compile(r"^\s*v?(?:\d+!)?(\d+(?:\.\d+)*)")
#: A pre-release or development build after the release (``.devN``, ``rcN``, ``aN``, ``bN``).
_PRE = re.compile(r"^\.?(dev|rc|c|a|b|alpha|beta|pre|preview)\.?\d*", re.IGNORECASE)
#: At most this many clauses are read from one line (a hostile METADATA file).
_MAX_CLAUSES = 16


@dataclass(frozen=True)
class Requirement:
    """``numpy<2,>=1.17``: a distribution name and its version clauses."""

    name: str
    clauses: Tuple[Tuple[str, str], ...]  # (operator, version)
    marker: str = ""

    @property
    def specifier(self) -> str:
        """``<2,>=1.17`` as written (clauses joined by commas)."""
        return ",".join(op + version for op, version in self.clauses)

    def allows(self, version: str) -> Optional[bool]:
        """Whether ``version`` meets every clause; ``None`` when a clause cannot be read."""
        have = release(version)
        if not have:
            return None
        for op, wanted in self.clauses:
            verdict = _meets(have, op, wanted, version)
            if verdict is None:
                return None
            if not verdict:
                return False
        return True


def parse_requirement(line: str) -> Optional[Requirement]:
    """A ``Requires-Dist`` value (``numpy (<2.0,>=1.19) ; python_version >= "3.8"``), or ``None``."""
    found = _NAME.match(line[:500])
    if found is None:
        return None
    clauses = []
    for part in [p for p in found.group(2).split(",") if p.strip()][:_MAX_CLAUSES]:
        clause = _CLAUSE.match(part)
        if clause is None:
            return None
        clauses.append((clause.group(1), clause.group(2)))
    return Requirement(found.group(1), tuple(clauses), (found.group(3) or "").strip())


def release(version: str) -> Tuple[int, ...]:
    """``(2, 0, 2)`` of ``2.0.2``, ``2.0.2rc1`` or ``2.0.2+local``; ``()`` when there is none."""
    found = _RELEASE.match(version)
    return tuple(int(part) for part in found.group(1).split(".")) if found else ()


def release_part(version: str) -> str:
    """``2.7.1`` of any build of it (``.postN``, ``.devN``, ``rcN``, ``+cpu``): what torch and
    torch_npu are compared by (runtime-and-doctor.md §8.1); the text without its local tag when
    it has no release numbers."""
    found = _RELEASE.match(version)
    return found.group(1) if found else version.split("+", 1)[0].strip()


def prerelease(version: str) -> bool:
    """Whether ``version`` is a development or release-candidate build (``2.7.1.dev20250724``,
    ``2.7.1rc1``), never a published release."""
    found = _RELEASE.match(version)
    rest = version.split("+", 1)[0][found.end() :] if found else ""
    return bool(_PRE.match(rest))


def _padded(first: Tuple[int, ...], second: Tuple[int, ...]) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    size = max(len(first), len(second))
    return first + (0,) * (size - len(first)), second + (0,) * (size - len(second))


def _meets(have: Tuple[int, ...], op: str, wanted: str, text: str) -> Optional[bool]:
    if op == "===":
        return text.strip() == wanted
    if wanted.endswith(".*"):
        prefix = release(wanted[:-2])
        if op not in ("==", "!=") or not prefix:
            return None
        same = have[: len(prefix)] == prefix
        return same if op == "==" else not same
    want = release(wanted)
    if not want:
        return None
    if op in ("==", "!=") and release_part(wanted) != wanted.strip():  # ==2.7.1.dev20250724: that build
        local = "+" in wanted
        same = (text if local else text.split("+", 1)[0]).strip().lower() == wanted.strip().lower()
        return same if op == "==" else not same
    mine, theirs = _padded(have, want)
    if op == "~=":
        if len(want) < 2:
            return None
        return mine >= theirs and have[: len(want) - 1] == want[:-1]
    return {
        "==": mine == theirs,
        "!=": mine != theirs,
        "<": mine < theirs,
        "<=": mine <= theirs,
        ">": mine > theirs,
        ">=": mine >= theirs,
    }[op]
