"""Stored text made safe to print on an operator's terminal: one function, `printable`.

Job errors, codes, names and actors come from handlers, producers and other people. A
raw ESC sequence in them could clear the screen, retitle the terminal or hide lines, and a
bidi override could reorder what the operator reads; a secret must not be printed either.
"""

from __future__ import annotations

import re

from .sanitize import redact

# C0 controls (newline and tab included: one record, one line), DEL, C1 controls, and the
# bidi embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(value: object) -> str:
    """`value` as text for a terminal: secrets redacted, control and direction-changing
    characters shown as escapes (`\\x1b`, `\\u202e`) instead of being obeyed."""
    return _UNSAFE.sub(_escape, redact("" if value is None else str(value)))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
