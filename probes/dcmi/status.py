"""Provides the one mapping of DCMI return codes to what they mean for a metric: its status and reason.

driver-interfaces.md §6.6 and §9.1 rule 3: ``-8255``/``-8013`` and a function the library lacks
mean *not supported* (sticky: asking again changes nothing), ``-8002`` *permission* (not root and
not in ``HwHiAiUser``), ``-8006``/``-8012``/``-8017`` *transient* (asked again after a back-off),
``-8005``/``-8008``/``-8010``/``-8011`` a *device* error.  Every DCMI code's meaning and fix is
``npuwatch.probes.dcmi_codes``' (reused here, never restated).  The classes (``CodeClass``) are
standard library only, so the reader in the worker process can ask them without the model.
"""

from __future__ import annotations

import enum
import functools
from typing import TYPE_CHECKING, Dict, Optional

from npuwatch.probes.dcmi.records import INVALID_VALUE, SYMBOL_MISSING
from npuwatch.probes.dcmi_codes import describe

if TYPE_CHECKING:
    from npuwatch.model import MetricNote, MetricStatus


class CodeClass(enum.Enum):
    """What a failed call's code says about asking again."""

    UNSUPPORTED = "unsupported"  # never ask this chip for this metric again
    PERMISSION = "permission"  # not root and not in HwHiAiUser: the same for every call
    TRANSIENT = "transient"  # ask again after a back-off
    DEVICE = "device"  # the device is unreachable or gone
    OTHER = "other"  # any other failure: asked again next tick


UNSUPPORTED_CODES = frozenset({-8255, -8013, SYMBOL_MISSING})
PERMISSION_CODES = frozenset({-8002})
TRANSIENT_CODES = frozenset({-8006, -8012, -8017})
DEVICE_CODES = frozenset({-8005, -8008, -8010, -8011})

#: The device is not there (any more): the chip is re-enumerated.
GONE_CODES = frozenset({-8007, -8008})

#: The hint of the permission failure (``dcmi_codes``' own, for -8002).
PERMISSION_HINT = "run as root or add the user to the HwHiAiUser group: `sudo usermod -aG HwHiAiUser $USER`"


def classify(code: int) -> CodeClass:
    """The class of a DCMI return code (or ``SYMBOL_MISSING`` / ``INVALID_VALUE``)."""
    if code in UNSUPPORTED_CODES:
        return CodeClass.UNSUPPORTED
    if code in PERMISSION_CODES:
        return CodeClass.PERMISSION
    if code in TRANSIENT_CODES:
        return CodeClass.TRANSIENT
    if code in DEVICE_CODES:
        return CodeClass.DEVICE
    return CodeClass.OTHER


def code_text(code: int) -> str:
    """``DCMI -8255`` for a library code; our own pseudo-codes in words."""
    if code == SYMBOL_MISSING:
        return "function missing from this libdcmi"
    if code == INVALID_VALUE:
        return "impossible value"
    return f"DCMI {code}"


def meaning(code: int) -> str:
    """What the code means, in ``dcmi_codes``' words (``DCMI error -8xxx`` when it knows none)."""
    known = describe(code)
    return known.meaning if known is not None else f"DCMI error {code}"


def reason(code: int) -> str:
    """Why a metric has no value, in words a user can act on, naming the code."""
    klass = classify(code)
    if code == SYMBOL_MISSING:
        return "not supported by this DCMI library (the function is missing from libdcmi)"
    if code == INVALID_VALUE:
        return "the DCMI library gave an impossible value (not shown)"
    if code == -8013:
        return f"not supported inside a container ({code_text(code)})"
    if klass is CodeClass.UNSUPPORTED:
        return f"not supported on this chip ({code_text(code)})"
    if klass is CodeClass.PERMISSION:
        return f"not root and not in the HwHiAiUser group ({code_text(code)})"
    if klass is CodeClass.TRANSIENT:
        return f"{meaning(code)} ({code_text(code)}); retrying"
    if klass is CodeClass.DEVICE:
        return f"device error: {meaning(code)} ({code_text(code)})"
    return f"{meaning(code)} ({code_text(code)})"


def hint(code: int) -> str:
    """What to do about the code (``dcmi_codes``' fix), or ``""``."""
    known = describe(code)
    return known.hint if known is not None else ""


_STATUS_NAMES: Dict[CodeClass, str] = {
    CodeClass.UNSUPPORTED: "unsupported",
    CodeClass.PERMISSION: "permission",
    CodeClass.TRANSIENT: "error",
    CodeClass.DEVICE: "error",
    CodeClass.OTHER: "error",
}


def status(code: int) -> MetricStatus:
    """The metric status of a code: unsupported, permission, timeout (``-8006``) or error."""
    from npuwatch.model import MetricStatus

    if code == -8006:
        return MetricStatus.TIMEOUT
    return MetricStatus(_STATUS_NAMES[classify(code)])


@functools.lru_cache(maxsize=256)
def note(code: int) -> MetricNote:
    """The note a metric gets when the library answered ``code`` for it (one shared frozen note per code)."""
    from npuwatch.model import MetricNote

    return MetricNote(status(code), reason(code))


def error_code_text(code: Optional[int]) -> str:
    """An error code as npu-smi prints it: ``80E01801`` (eight upper-case hex digits)."""
    return "" if code is None else f"{code & 0xFFFFFFFF:08X}"
