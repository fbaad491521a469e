"""Make text storable in PostgreSQL before it is written: one function for every path.

PostgreSQL refuses a NUL character in `text` and `\\u0000` in `jsonb`, and psycopg cannot
encode a lone UTF-16 surrogate (`"\\ud800"`) to UTF-8. Handlers hand us such text in errors,
codes, progress, checkpoints and ledger results; an operator may type it into a reason. A
refused write must never cost a job its outcome, so every write path passes its text
through `storable_text` (or `storable_json` for JSON values) first, and a JSON value
is written as `storable_json_text` gives it.
"""

from __future__ import annotations

import json
from typing import Any

#: What a NUL character becomes: visible and unambiguous in the console and the CLI.
NUL_ESCAPE = "\\x00"


def storable_text(text: str | None) -> str | None:
    """`text` with NUL characters escaped as `\\x00` and lone surrogates replaced by U+FFFD
    (a valid surrogate pair becomes the character it encodes)."""
    if text is None:
        return None
    text = str(text)
    if "\x00" in text:
        text = text.replace("\x00", NUL_ESCAPE)
    if _has_surrogate(text):
        # Round-tripping through UTF-16 joins valid pairs and replaces the lone halves.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_json(value: Any, _depth: int = 0) -> Any:
    """A copy of a JSON value whose keys and strings are all storable_text."""
    if _depth > 200:  # json.dumps refuses far shallower values than Python recurses into
        raise ValueError("JSON value is nested more than 200 levels deep")
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(k) if isinstance(k, str) else k: storable_json(v, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v, _depth + 1) for v in value]
    return value


#: JSON as PostgreSQL reads it: no NaN or Infinity (json.dumps writes them by default, and
#: jsonb refuses them), compact, and text left as text (its surrogates already replaced).
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def storable_json_text(value: Any) -> str:
    """`value` as the JSON text we store (storable_json's copy, encoded), or ValueError
    in one line saying why it cannot be: a NaN or infinite number, a value JSON does not
    have (a datetime, a set), keys that are not text, or nesting deeper than 200 levels.
    The text is a snapshot: changing `value` afterwards changes nothing stored."""
    try:
        return _ENCODER.encode(storable_json(value))
    except (TypeError, ValueError, RecursionError) as exc:
        reason = str(exc)
        if reason.startswith("Out of range float values"):
            reason = "it holds a NaN or an infinite number, which JSON has not"
        raise ValueError(reason) from None


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)
