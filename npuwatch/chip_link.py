"""Provides ChipLink and LinkState (one link of a chip as one record) and PcieLink (sysfs's reading).

A chip source reads the chip; the link enrichers (``npuwatch.links``) add what is known of each
link the chip has, kind by kind, on their own cadence.  The record says what the reading shows
(a link at its maximum, below its maximum speed, on fewer lanes, down, gone); what that means for
the chip — a slow link on an idle chip is power saving — is the judge's (``npuwatch.judge.links``),
and every view renders the judge's verdict, never the record's state alone.

This module is in the model layer: it imports only the standard library.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

#: The kind of the PCIe link between the host and a chip's PCI function (Linux PCI sysfs).
KIND_PCIE = "pcie"


class LinkState(enum.Enum):
    """A link's state.  A record's state is what was read; the judge's verdict may say more
    (``POWER_SAVING``: below its maximum speed only while the chip is idle)."""

    UP = "up"  # at its maximum speed and width
    POWER_SAVING = "power-saving"  # slow while its chip is idle: link power management (the judge's)
    SLOW = "slow"  # below its maximum speed at full width
    NARROW = "narrow"  # trained at fewer lanes than it can (maybe slow too)
    DOWN = "down"  # there but carrying no traffic (a port down)
    ABSENT = "absent"  # gone (the PCI config space reads ff ff: off the bus)
    UNKNOWN = "unknown"  # the reading did not say


@dataclass(frozen=True)
class ChipLink:
    """One link of a chip as read: ``kind`` (``pcie``), whether its far end is ``present`` and
    the link ``up``, its ``state``, ``reason`` (the part below its maximum, ``x8 of x16``; empty
    when up), ``detail`` (current against maximum, ``Gen4 x8 of Gen5 x16``) and ``hint``.
    ``shared_by`` names what chips sharing one link have in common (a 310P Duo's two chips: one
    PCI function), so a view and an alert say it once.  Everything a view or the judge says of
    a kind comes from its records, so a new kind touches no file but its enricher's."""

    kind: str
    state: LinkState
    present: bool = True
    up: bool = True
    reason: str = ""
    detail: str = ""
    shared_by: Optional[str] = None
    #: What to check when the judge finds the link wanting (the enricher's kind knows): ``reseat
    #: the card, check the slot …``.
    hint: str = ""
    #: How sentences name the kind (``PCIe``, ``RoCE``); the kind itself when empty.
    title: str = ""

    def __post_init__(self) -> None:
        if not self.title:
            object.__setattr__(self, "title", self.kind)


#: PCIe generation by its transfer rate per lane (GT/s), as sysfs reports ``current_link_speed``.
PCIE_GENERATIONS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def pcie_speed_label(speed_gt_s: float) -> str:
    """``16.0`` GT/s → ``Gen4``; a rate that is no generation's stays in GT/s."""
    generation = PCIE_GENERATIONS.get(speed_gt_s)
    return f"Gen{generation}" if generation else f"{speed_gt_s:g} GT/s"


@dataclass(frozen=True)
class PcieLink:
    """The PCIe link of one function as Linux PCI sysfs reports it."""

    current_speed_gt_s: Optional[float] = None
    max_speed_gt_s: Optional[float] = None
    current_width: Optional[int] = None
    max_width: Optional[int] = None
    numa_node: Optional[int] = None
    aer_correctable_total: Optional[int] = None
    aer_nonfatal_total: Optional[int] = None
    aer_fatal_total: Optional[int] = None
    present: bool = True  # False when the config space reads ff ff (fell off the bus)

    @property
    def narrow(self) -> bool:
        """True when the link trained at fewer lanes than it can (x8 of x16)."""
        return (
            self.current_width is not None
            and self.max_width is not None
            and self.current_width < self.max_width
        )

    @property
    def slow(self) -> bool:
        """True when the link runs below its maximum speed (also link power saving at idle)."""
        return (
            self.current_speed_gt_s is not None
            and self.max_speed_gt_s is not None
            and self.current_speed_gt_s < self.max_speed_gt_s
        )

    @property
    def degraded(self) -> bool:
        """True when the link trained below its maximum speed or width."""
        return self.slow or self.narrow

    def describe(self) -> str:
        """``x8 of x16, 16 GT/s of 32 GT/s``: only the parts below their maximum."""
        parts = []
        if self.narrow:
            parts.append(f"x{self.current_width} of x{self.max_width}")
        if self.slow:
            parts.append(f"{self.current_speed_gt_s:g} of {self.max_speed_gt_s:g} GT/s")
        return ", ".join(parts)


def pcie_record(link: PcieLink, bdf: Optional[str] = None) -> ChipLink:
    """The record of a sysfs PCIe reading of the function at ``bdf`` (``0000:c1:00.0``: what
    chips sharing one function have in common)."""
    shared = bdf.lower() if bdf else None
    hint = _HINT + (f" (`lspci -vv -s {shared}`)" if shared else "")
    if not link.present:
        detail = "the PCI config space reads ff ff: off the bus"
        return ChipLink(
            KIND_PCIE, LinkState.ABSENT, False, False, "off the bus", detail, shared, hint, "PCIe"
        )
    if link.current_speed_gt_s is None and link.current_width is None:
        detail = "link speed and width not read"
        return ChipLink(KIND_PCIE, LinkState.UNKNOWN, True, True, "", detail, shared, hint, "PCIe")
    state = LinkState.NARROW if link.narrow else LinkState.SLOW if link.slow else LinkState.UP
    return ChipLink(KIND_PCIE, state, True, True, _below(link), pcie_against_max(link), shared, hint, "PCIe")


_HINT = "reseat the card, check the slot or riser and the BIOS link settings"


def pcie_against_max(link: PcieLink) -> str:
    """The link against its maximum: ``Gen4 x8 of Gen5 x16`` (``n/a``/``x?``: not in sysfs)."""

    def speed(gt_s: Optional[float]) -> str:
        return "n/a" if gt_s is None else pcie_speed_label(gt_s)

    def width(lanes: Optional[int]) -> str:
        return "x?" if lanes is None else f"x{lanes}"

    current = f"{speed(link.current_speed_gt_s)} {width(link.current_width)}"
    return f"{current} of {speed(link.max_speed_gt_s)} {width(link.max_width)}"


def _below(link: PcieLink) -> str:
    """The parts below their maximum: ``x8 of x16, Gen1 of Gen5``; empty at the maximum."""
    parts = []
    if link.narrow:
        parts.append(f"x{link.current_width} of x{link.max_width}")
    current, most = link.current_speed_gt_s, link.max_speed_gt_s
    if link.slow and current is not None and most is not None:
        parts.append(f"{pcie_speed_label(current)} of {pcie_speed_label(most)}")
    return ", ".join(parts)
