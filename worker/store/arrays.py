"""Array parameters as PostgreSQL's array text, built with no Python step per element.

psycopg dumps a list parameter element by element in Python (psycopg/types/array.py,
even with its C implementation): the thirteen arrays of a batch of outcomes cost the
worker about 7 us a job, a seventh of its CPU in a no-op drain, most of it in the
arrays whose elements can never need quoting. For those, the literal is joined here and
sent as text; the statement's cast (`%(job_ids)s::bigint[]`) makes it the array it was.
The server reads the same text psycopg would have sent (`{1,2,3}`), so its cost is the
same. Arrays of free text (messages, JSON) stay lists: psycopg quotes them.

Each function takes only what it can render without quoting: ints, UUIDs, floats,
bools, and words (enum values: letters, digits, `_`).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID


def int_array(values: Sequence[int]) -> str:
    """`{1,2,3}`: whole numbers (never None)."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


def uuid_array(values: Sequence[UUID]) -> str:
    """UUIDs as 32 hex digits each, a form PostgreSQL's uuid input reads (never None).
    The UUID's int in hex: its `str()` and `.hex` are Python-level calls. An id
    given as text is read as a UUID (ValueError if it is none)."""
    try:
        return "{" + ",".join([f"{u.int:032x}" for u in values]) + "}"
    except AttributeError:
        return "{" + ",".join([f"{UUID(str(u)).int:032x}" for u in values]) + "}"


def float_array(values: Sequence[float | None]) -> str:
    """Floats as Python's repr (PostgreSQL reads `inf`, `nan`, `1e-05`); None as NULL."""
    return "{" + ",".join(["NULL" if v is None else repr(float(v)) for v in values]) + "}"


_BOOL = {True: "t", False: "f", None: "NULL"}


def bool_array(values: Sequence[bool | None]) -> str:
    """`{t,f}`; None as NULL."""
    return "{" + ",".join(map(_BOOL.__getitem__, values)) + "}"


def word_array(values: Sequence[str]) -> str:
    """Words that need no quoting in an array literal (an enum's values: letters, digits
    and `_`, never empty, never NULL). The caller vouches for them: see word."""
    return "{" + ",".join(values) + "}"


def word(value: str) -> str:
    """`value`, checked to be a word word_array may join unquoted (for tests and for the
    enums' values, checked once at import by their users)."""
    # NULL (any case) unquoted in an array literal is a null element, not the word.
    if (not value or not value.replace("_", "").isalnum() or not value.isascii()
            or value.upper() == "NULL"):
        raise ValueError(f"not a word an array literal may hold unquoted: {value!r}")
    return value
