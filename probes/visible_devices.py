"""Provides parse_rt_visible() and parse_docker_visible(): the device-selection variables as read.

``ASCEND_RT_VISIBLE_DEVICES`` (logical IDs, read by the CANN runtime) and
``ASCEND_VISIBLE_DEVICES`` (physical IDs, read by the Ascend Docker Runtime at container start).
Pure parsers of environment text, never raising: the doctor's visible-devices and container checks
judge the values; the notebook's torch_npu figures map torch devices to chips with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Tuple

RT_VISIBLE = "ASCEND_RT_VISIBLE_DEVICES"
DOCKER_VISIBLE = "ASCEND_VISIBLE_DEVICES"
DEVICE_ID = "ASCEND_DEVICE_ID"

#: What CANN reads: IDs joined by commas, up to the first other character (envref_07_0028:
#: "1, 2,3" reads only 1, the space stops it).
_RT_READ = re.compile(r"[0-9]+(?:,[0-9]+)*")
_NUMBER = re.compile(r"[0-9]+")
#: What a user may have meant: IDs and ranges (``0-3``, Ascend Docker Runtime style), not ``-1``.
_MEANT = re.compile(r"(-?)([0-9]+)(?:-([0-9]+))?")
#: One item of ASCEND_VISIBLE_DEVICES: ``3``, ``0-2``, or a device plugin name ``Ascend910-3``.
_DOCKER_ITEM = re.compile(r"^(?:Ascend[0-9A-Za-z]*-)?([0-9]{1,6})(?:-([0-9]{1,6}))?$")
#: A range wider than this is a typo, not a machine (A3 racks have 16 chips per host).
_MAX_RANGE = 1024


@dataclass(frozen=True)
class RtVisible:
    """``ASCEND_RT_VISIBLE_DEVICES`` as the runtime reads it, and what the user meant."""

    read: Tuple[int, ...]  # the IDs before the first character other than digits and commas
    ignored: str  # the text from that character on ("" when everything was read)
    intended: Tuple[int, ...]  # every ID and range in the value, in order

    @property
    def stop(self) -> str:
        """The character at which reading stopped (after the comma that led to it)."""
        rest = self.ignored[1:] if self.ignored.startswith(",") and len(self.ignored) > 1 else self.ignored
        return rest[:1]

    @property
    def drops_devices(self) -> bool:
        """Whether IDs were written after the point where reading stops."""
        return bool(_NUMBER.search(self.ignored))


def parse_rt_visible(value: str) -> RtVisible:
    """Read the value the way CANN does; never raises."""
    match = _RT_READ.match(value)
    text = match.group(0) if match else ""
    return RtVisible(
        read=tuple(int(item) for item in text.split(",") if item),
        ignored=value[len(text) :],
        intended=_meant(value),
    )


def _meant(value: str) -> Tuple[int, ...]:
    found: List[int] = []
    for match in _MEANT.finditer(value):
        if match.group(1):  # "-1" hides devices on purpose (the CUDA idiom), it names none
            continue
        first = int(match.group(2))
        last = int(match.group(3)) if match.group(3) else first
        if last < first or last - first > _MAX_RANGE:
            last = first
        found.extend(range(first, last + 1))
    return tuple(found)


def parse_docker_visible(value: str) -> Tuple[Tuple[int, ...], Tuple[str, ...]]:
    """``0-2,4`` → ((0, 1, 2, 4), ()); items it cannot read come back second."""
    ids: List[int] = []
    bad: List[str] = []
    for item in value.split(","):
        match = _DOCKER_ITEM.match(item.strip())
        if match is None:
            bad.append(item)
            continue
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) else first
        if last < first or last - first > _MAX_RANGE:
            bad.append(item)
            continue
        ids.extend(n for n in range(first, last + 1) if n not in ids)
    return tuple(ids), tuple(bad)
