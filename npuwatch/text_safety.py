"""Provides inert() and guard_streams(): machine text printed safely, on any terminal and encoding.

Process names and command lines belong to whoever runs a job; npu-smi's output, DCMI's strings and
recordings come from outside too.  Every text surface passes such strings through ``inert`` so
an ``ESC[2J`` or an ``ESC]0;…BEL`` in them is shown, never obeyed.  ``guard_streams`` makes stdout
and stderr print ASCII stand-ins (``OK`` for ✔, ``->`` for →) where they cannot encode a glyph,
instead of failing with ``UnicodeEncodeError``.  Standard library only: every module may import it.
"""

from __future__ import annotations

import codecs
import re
import sys
import unicodedata
from typing import Optional, TextIO, Tuple

#: What a terminal may obey rather than show: C0 controls and DEL, C1 controls (U+0080-U+009F,
#: 8-bit CSI and OSC), bidirectional overrides and marks (text that reads backwards), line and
#: paragraph separators, and lone surrogates (undecodable bytes, which no stream can encode).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def inert(text: str) -> str:
    """``text`` with every control character shown escaped: ``ESC[2J`` → ``\\x1b[2J``, U+202E → ``\\u202e``.

    For one-line fields (names, command lines, messages); a newline is escaped too.  Printable
    text, whatever its script, is unchanged; so is an already inert string.
    """
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_escaped, text)


def inert_lines(text: str) -> str:
    """Multi-line ``text`` made inert line by line: its newlines stay, every other control is escaped."""
    return "\n".join(inert(line) for line in text.split("\n"))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: ASCII stand-ins for the glyphs npuwatch prints, for a stream that cannot encode them.
ASCII_MARKS = {
    "✔": "OK",
    "✘": "x",
    "✖": "x",
    "▲": "!",
    "⚠": "!",
    "‼": "!!",
    "⏸": "||",
    "⏳": "...",
    "▶": ">",
    "■": "#",
    "▼": "v",
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "↑": "^",
    "↓": "v",
    "°": "",  # "37 °C" → "37 C"
    "·": "-",
    "—": "-",
    "–": "-",
    "−": "-",
    "…": "...",
    "×": "x",
    "≥": ">=",
    "≤": "<=",
    "≈": "~",
    "≠": "!=",
    "“": '"',
    "”": '"',
    "‘": "'",
    "’": "'",
    "§": "S",
    "µ": "u",
    "└": "`-",
    "█": "#",
}

ERROR_HANDLER = "npuwatch-ascii"


def _stand_in(char: str) -> str:
    """An ASCII stand-in for one character: its mark, its letters without accents, else its escape."""
    mark = ASCII_MARKS.get(char)
    if mark is not None:
        return mark
    if "\u2581" <= char <= "\u258f":  # bar and sparkline eighths
        return "#"
    plain = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode("ascii")
    if plain.strip():
        return plain
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _stand_ins(error: UnicodeError) -> Tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    shown = "".join(_stand_in(char) for char in error.object[error.start : error.end])
    return shown, error.end


codecs.register_error(ERROR_HANDLER, _stand_ins)


def can_encode(stream: Optional[TextIO], sample: str = "✔→°·—…") -> bool:
    """Whether ``stream`` prints npuwatch's glyphs as they are (a UTF-8 or similar encoding)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        sample.encode(encoding)
    except (UnicodeError, LookupError):
        return False
    return True


def guard_streams() -> None:
    """Make stdout and stderr print an ASCII stand-in for what their encoding cannot hold.

    ``PYTHONIOENCODING=ascii`` or the C locale without UTF-8 mode give an ASCII stdout, on which a
    ``✔`` or a ``°`` would raise ``UnicodeEncodeError``; a lone surrogate fails even on UTF-8.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        try:
            reconfigure(errors=ERROR_HANDLER)
        except (ValueError, OSError):  # a closed or detached stream: nothing will be printed on it
            continue


#: Characters json.dumps(ensure_ascii=False) writes raw that a terminal may obey: C1 controls,
#: bidi controls, separators and lone surrogates (json.dumps escapes C0 itself).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def inert_json(document: str) -> str:
    """A JSON text with those characters written as ``\\uXXXX`` escapes: the same values, inert.

    They can only occur inside JSON strings (the syntax is ASCII), where the escape is exact.
    """
    if not _JSON_UNSAFE.search(document):
        return document
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", document)


def shorten(text: str, width: int) -> str:
    """``text`` on one line (each run of whitespace one space), cut to ``width`` with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def first_clause(text: str, width: int) -> str:
    """A failure message short enough for one line: whole when it fits in ``width``, else the
    clause before its first colon (DCMI messages read "npu-smi failed with DCMI error -8005
    (INNER_ERR): <a long meaning>") when that clause says enough, else cut with an ellipsis."""
    text = " ".join(text.split())
    head = text.split(": ", 1)[0]
    return shorten(head if len(text) > width and len(head) >= 20 else text, width)
