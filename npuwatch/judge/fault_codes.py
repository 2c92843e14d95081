"""Provides what to do with a chip's error code: Huawei's handling class for it, as data.

The classes and their codes are the Ascend device plugin's fault-code classification
(``component/ascend-device-plugin/build/faultCode.json`` in ``Ascend/mind-cluster``, commit
018a2e0d5a7213b9902057f01ae93182daea0a5c): the device plugin reads a chip's current codes
(``dcmi_get_device_errorcode_v2``) and handles the chip by the most severe class among them.
Normal, NotHandle and SubHealth codes leave the chip healthy; FreeRestartNPU and PreSeparateNPU
are tolerated while a job uses the chip; every other class makes the plugin take the chip out
of scheduling.  A code in no list is not classified here (``handling_of`` returns ``None``).
"""

from __future__ import annotations

import enum
from typing import Dict, Iterable, Optional, Tuple

from npuwatch.model import Level

#: Where the table comes from (README and ``doctor`` cite it).
SOURCE = "Ascend device plugin faultCode.json (Ascend/mind-cluster 018a2e0d)"


class FaultHandling(enum.Enum):
    """The device plugin's handling class of a fault code, least severe first."""

    NOT_HANDLED = "not-handled"
    SUB_HEALTH = "sub-health"
    RESTART_REQUEST = "restart-request"
    RESTART_BUSINESS = "restart-business"
    FREE_RESTART_NPU = "free-restart-npu"
    RESTART_NPU = "restart-npu"
    PRE_SEPARATE_NPU = "pre-separate-npu"
    SEPARATE_NPU = "separate-npu"

    @property
    def rank(self) -> int:
        """0 for not-handled … 7 for separate-npu: the plugin handles a chip by its highest."""
        return _ORDER.index(self)

    @property
    def level(self) -> Level:
        """The chip level this class calls for: the plugin keeps a chip in service on a
        not-handled or sub-health code (a warning worth reading), restarts the job or the chip on
        the restart classes (warning: it recovers), and isolates it on the separate classes."""
        return _LEVELS[self]

    @property
    def action(self) -> str:
        """What to do, in one clause."""
        return _ACTIONS[self]


_ORDER: Tuple[FaultHandling, ...] = tuple(FaultHandling)
_LEVELS = {
    FaultHandling.NOT_HANDLED: Level.OK,
    FaultHandling.SUB_HEALTH: Level.WARNING,
    FaultHandling.RESTART_REQUEST: Level.WARNING,
    FaultHandling.RESTART_BUSINESS: Level.WARNING,
    FaultHandling.FREE_RESTART_NPU: Level.WARNING,
    FaultHandling.RESTART_NPU: Level.CRITICAL,
    FaultHandling.PRE_SEPARATE_NPU: Level.CRITICAL,
    FaultHandling.SEPARATE_NPU: Level.CRITICAL,
}
_ACTIONS = {
    FaultHandling.NOT_HANDLED: "no action needed: the chip keeps working (Huawei: not handled)",
    FaultHandling.SUB_HEALTH: (
        "keep the job but watch the chip: it is sub-healthy, and new jobs may be placed elsewhere"
    ),
    FaultHandling.RESTART_REQUEST: "retry the failed request or step: the fault is transient",
    FaultHandling.RESTART_BUSINESS: (
        "restart the job (from its last checkpoint): the chip itself stays in service"
    ),
    FaultHandling.FREE_RESTART_NPU: (
        "reset the chip when it is free (`npu-smi set -t reset` once no job uses it)"
    ),
    FaultHandling.RESTART_NPU: (
        "stop the jobs on it and reset the chip (`npu-smi set -t reset`), or reboot the node"
    ),
    FaultHandling.PRE_SEPARATE_NPU: (
        "move jobs off the chip when they finish, then have it repaired: it is about to be isolated"
    ),
    FaultHandling.SEPARATE_NPU: "take the chip out of service and have it repaired or replaced",
}

# The lists of faultCode.json, as printed there (a code listed twice keeps its most severe class).
_NOT_HANDLED = """
80E21007 80E38003 80F78006 80C98006 80CB8006 81318006 80A18006 80A18005 80FB8000 8C1F8609
80CD8006 80CD8003 80A38006 80A38003 80A58006 80A58003 80DE1805 80F18006 80F18003 80DF8006
80E01805 80E18400 80E01809 80E18401 80E00209 80F38006 80F38003 80E18006 80D38009 819B800D
80DD8008 80DD8007 80B98006 80BD8006 819B8006 80DE1803 819D8000 81998006 81978006 81978004
815F8006 815F8004 81338006 81338004 817F8006 817F8004 816F8006 816F8004 814F8006 814F8004
81938006 81938004 81478006 81478004 813B8006 813B8004 81578006 81578004 81958006 81958004
81078603 8C2FA009 A4025021 A60250C1 A4025081 A214000D A414000D A4028801 A4025101 A2140007
A4140007 A2140008 A4140008 A40250E1 A214000A A414000A A4025061 A4025041 A214000B A414000B
A414000C A2140009 A4140009 A4303002 80B78006 80B78005 80E1800F 80DE0200 814D8006 8C1F860B
8C1F8608 4C1F8608 819B8003 80DF8401 80DF8400 80818200 80818201 80818202 80818203 80818204
80818205 80F38009
"""
_RESTART_REQUEST = """
80C98008 80C98002 80C98003 80C98009 80CB8002 80CB8008 80CB8009 80CF8003 81318008 80D58000
80D58009 80D98008 80DB800A 80DB8000 80DD8000 80DD8003 80C98000 81AB800D 81AB8003 80BD8000
80BB8009 80BD8003 80BD8009 80BB8000 80BB8003 80BB8008 80BB800A 81AB8008 80C9800A 80CB800A
"""
_RESTART_BUSINESS = """
8C204E00 A8028802 A4302003 A4302004 A4302005 A4302006 A4302009 A430200A A6301002 B4060011
B406009C B4060008 B4060009 B406000E A60250A1 A2301001 A2301002 A2303001 B4060006 B4060007
B406000D B4060014 B4060010 B4060011 80E01801 81B38009 81B38004
"""
_FREE_RESTART_NPU = """
8C0E4E00 8C104E00 8C0C4E00 8C044E00 8C064E00 8C17A005 8C1DA005 8C19A005 8C0A4E00 8C084E00
A4193217 A4193218 A42A0000 A42F3917 A42F3918 8C464E00 8C124E00
"""
_RESTART_NPU = """
8C03A000 8C1FA006 40F84E00 80E24E00 80E21E01 80E38008 80E3A202 80E3A203 80E39200 819B800A
80E2120D 80E78000 80E78008 80FA4E00 812E4E00 80C78008 80F78009 80F78008 80F78003 80E18404
80FB8005 80A18008 80CD8008 80A38008 80A58008 80DE1801 80F18008 80F18000 80F1800A 80CF8000
80DF8000 80DF8009 80DF8008 80DF800A 80F38008 80F2180D 80E18005 80E18008 80E1800A 812F8000
80B98000 80B98008 80BD8008 80CB8001 81998009 81998008 81978008 815F8008 81338008 817F8008
81478008 813B8008 81578008 81958008 A2141004 A2141006 A2142004 A2142006 A2145004 A4183200
A6023001 A6023002 A6023003 A6023004 A6060000 A6060001 A6060002 A6060003 A6060004 A6060005
A606000A A606000B A606000C A606000F A606009D A6060FFF A607FFFF A6140001 A6140002 A6140003
A6140004 A6140005 A6140006 A6141003 A6142003 A6143003 A6144003 A6145003 A6192D15 A6193206
A6193215 A6193248 A62F3905 A62FFFFF A6303003 A6303004 A6360000 A6361000 A6362000 A8021004
A8060FFF A807FFFF A82A0000 80B78000 80B58000 81498004 80F78C02 80F78C03 80F78C04 81B38008
80E18000 80E21008 80C98001 80E58005 80E58009 80E58E02 80E58E03 816F8008 814F8008 81938008
80E44E00 80CF8009 80CF8008 813B8002 81338002 81578002 81958002 81938002 81478002 81978002
815F8002 81C9800A 81C7800A 81C5800A 813F800A 8139800A 8145800A 8C4BA00C 80E3A207
"""
_SEPARATE_NPU = """
80E3A201 80E18402 80E0020B 817F8002 816F8002 814F8002 9419321B A2301000 A2301001 A2302001
A4192C1A A4193216 A419321B A419321C A42F390F A42F3916 A42F391A A6183207 A62F3934 A8028801
A819320F A8193234 A8193235 80818c00 80818C05 80DF8402 80818C00 4C4BA00C
"""
_PRE_SEPARATE_NPU = ""  # empty in this version of the file
_SUB_HEALTH = """
81A3880C 81AD8605 80E20207 81078605 80DE0207 8C2FA001 819B8605 80818C06 8C1F860A 80E18405
"""

_LISTS: Tuple[Tuple[FaultHandling, str], ...] = (
    (FaultHandling.NOT_HANDLED, _NOT_HANDLED),
    (FaultHandling.SUB_HEALTH, _SUB_HEALTH),
    (FaultHandling.RESTART_REQUEST, _RESTART_REQUEST),
    (FaultHandling.RESTART_BUSINESS, _RESTART_BUSINESS),
    (FaultHandling.FREE_RESTART_NPU, _FREE_RESTART_NPU),
    (FaultHandling.RESTART_NPU, _RESTART_NPU),
    (FaultHandling.PRE_SEPARATE_NPU, _PRE_SEPARATE_NPU),
    (FaultHandling.SEPARATE_NPU, _SEPARATE_NPU),
)


def _table() -> Dict[str, FaultHandling]:
    table: Dict[str, FaultHandling] = {}
    for handling, codes in _LISTS:  # least severe first: a later list wins
        for code in codes.split():
            table[code.upper()] = handling
    return table


TABLE: Dict[str, FaultHandling] = _table()


def normalise(code: str) -> str:
    """``0x80e01801`` / ``80e01801`` → ``80E01801`` (the table's spelling)."""
    text = code.strip().upper()
    return text[2:] if text.startswith("0X") else text


def handling_of(code: str) -> Optional[FaultHandling]:
    """Huawei's handling class of ``code`` (hex, as npu-smi prints it), or ``None`` when unlisted."""
    return TABLE.get(normalise(code))


def worst_handling(codes: Iterable[str]) -> Optional[FaultHandling]:
    """The most severe class among ``codes``: the one the device plugin acts on."""
    found = [h for h in (handling_of(c) for c in codes) if h is not None]
    return max(found, key=lambda h: h.rank) if found else None
