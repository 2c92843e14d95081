"""Provides the chip a third-party op package was built for, read from its ``_build_info.py``.

Packages that compile Ascend C operators record the SoC their build targeted in a generated
module: vllm-ascend's ``setup.py`` writes ``vllm_ascend/_build_info.py`` with
``__soc_version__ = 'ascend910b1'`` (older releases) or ``__device_type__ = 'A2'`` (newer ones,
from ``SOC_VERSION``); LMCache-Ascend writes ``lmcache_ascend/_build_info.py`` with
``__soc_version__``.  Their operators fail at run time on another chip ("the socversion … of bin
package does not match").  The file is read as text, never imported (a tree is data), and at
most ``MAX_BYTES`` of it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

from npuwatch.probes.python_env import PythonEnv
from npuwatch.probes.sysroot import read_regular

#: A generated build-info file is a few lines; anything larger is not one.
MAX_BYTES = 64 * 1024
_ASSIGNMENT = re.compile(
    r"""^__(soc_version|device_type)__\s*=\s*(['"])([A-Za-z0-9_.-]{1,64})\2\s*(?:#.*)?$""", re.MULTILINE
)


@dataclass(frozen=True)
class KnownPackage:
    """A package that records its build's chip: its distribution and its import package."""

    distribution: str  # ``vllm-ascend``
    module: str  # ``vllm_ascend``: the file is ``<module>/_build_info.py``


KNOWN_PACKAGES: Tuple[KnownPackage, ...] = (
    KnownPackage("vllm-ascend", "vllm_ascend"),
    KnownPackage("lmcache-ascend", "lmcache_ascend"),
)


@dataclass(frozen=True)
class BuildInfo:
    """What one package's build-info file says, or why it could not be read."""

    package: str  # the distribution name
    path: str  # the file, as the machine sees it
    version: Optional[str] = None  # the distribution's version, when installed with metadata
    soc_version: Optional[str] = None  # ``ascend910b1``
    device_type: Optional[str] = None  # ``A2``
    problem: Optional[str] = None  # why nothing could be read (``larger than 64 KiB`` …)


def read_build_infos(env: PythonEnv) -> Tuple[BuildInfo, ...]:
    """The build info of each known package importable in ``env`` that has a build-info file."""
    found = []
    for package in KNOWN_PACKAGES:
        init = env.find_module(package.module)
        if init is None or init.name != "__init__.py":
            continue
        info = _read(package, init.parent / "_build_info.py", env)
        if info is not None:
            found.append(info)
    return tuple(found)


def _read(package: KnownPackage, path: Path, env: PythonEnv) -> Optional[BuildInfo]:
    shown = env.display(path)
    version = env.distribution_version(package.distribution)
    if not os.path.lexists(path):
        return None  # a build without the file (or a source checkout): nothing to compare
    data = read_regular(path, MAX_BYTES + 1)  # a FIFO there must not block
    if data is None:
        return BuildInfo(package.distribution, shown, version, problem="not a readable regular file")
    if len(data) > MAX_BYTES:
        return BuildInfo(package.distribution, shown, version, problem=f"larger than {MAX_BYTES // 1024} KiB")
    values = {name: value for name, _, value in _ASSIGNMENT.findall(data.decode("utf-8", errors="replace"))}
    soc, device = values.get("soc_version"), values.get("device_type")
    if soc is None and device is None:
        return BuildInfo(
            package.distribution, shown, version, problem="no __soc_version__ or __device_type__ in it"
        )
    return BuildInfo(package.distribution, shown, version, soc_version=soc, device_type=device)
