"""Stored text made safe to show an operator: `printable` for a terminal, and
`visible_controls` for a web page (the console's every output goes through it).

Job errors, codes, names and actors come from handlers, producers and other people. A
raw ESC sequence in them could clear the screen, retitle the terminal or hide lines, and a
bidi override could reorder what the operator reads; a secret must not be printed either.
"""

from __future__ import annotations

import re

from jobwarden.worker.core.sanitize import redact

# The bidi embeddings, overrides and isolates, and the marks that steer neutral characters.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 controls (newline and tab included: one record, one line), DEL, C1 controls, bidi.
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
# On a page, newline, tab and carriage return are layout (a traceback in <pre>): kept.
_UNSAFE_ON_PAGE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}]")


def printable(value: object) -> str:
    """`value` as text for a terminal: secrets redacted, control and direction-changing
    characters shown as escapes (`\\x1b`, `\\u202e`) instead of being obeyed."""
    return _UNSAFE.sub(_escape, redact("" if value is None else str(value)))


def visible_controls(text: str) -> str:
    """`text` for a web page: control and direction-changing characters shown as the same
    escapes as on a terminal (`\\u202e`), newlines and tabs kept. Redaction is the
    caller's (the console redacts every value it prints)."""
    return _UNSAFE_ON_PAGE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
