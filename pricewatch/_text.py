"""Text from shops made safe: normalised once at validation, neutralised on every output.

- :func:`clean_text` (validation): one form for both stores. NFC, and every control,
  surrogate and bidirectional-override character replaced by a space: PostgreSQL refuses
  a NUL that SQLite stores, a lone surrogate cannot be encoded at all, and an escape
  sequence or a right-to-left override rewrites an operator's terminal.
- :func:`visible` (terminal output): whatever is already stored, control characters are
  printed as escapes (``\\x1b``), never sent to the terminal.
- :func:`csv_cell` (CSV output): a cell a spreadsheet would run as a formula (starting
  with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading ``'``, as
  OWASP recommends against CSV injection.
"""

from __future__ import annotations

import re
import unicodedata

# C0 and C1 controls, DEL, surrogates, and the bidirectional embeddings, overrides and
# isolates (U+202A-U+202E, U+2066-U+2069) plus the zero-width marks around them.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def clean_text(text: str) -> str:
    """``text`` in NFC with every unsafe character replaced by a space."""
    return _UNSAFE.sub(" ", unicodedata.normalize("NFC", text))


def _escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every unsafe character written as an escape (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, text)


def csv_cell(text: str | None) -> str | None:
    """``text`` as a CSV cell no spreadsheet runs as a formula."""
    if text and text.startswith(FORMULA_STARTS):
        return "'" + text
    return text
