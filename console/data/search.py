"""Search: one box for a job's id, its idempotency key, a payload value at a path, or text
of its last error.

    12345                 the job with that id (also #12345)
    key:welcome:user:52   jobs with that idempotency key
    customer.id=42        jobs whose payload holds 42 (or "42") at customer → id
    error:timed out       jobs whose last error (message or code) contains the text

An id and a key are looked up by index over every job (the primary key;
background_jobs_idempotency_key_idx, migration 0002). A payload value or an error text
has no index (each would cost every enqueue a write, docs/guide/operating.md): it is a
bounded scan of one window of `window` consecutive ids, the newest first, and the page
says which ids it searched and links to the window before them. The scan reads at most
`window` rows whatever the size of the table, so its time does not grow with the table.

Anything else typed in the box is refused with the reason, before any SQL runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from console.data.database import CQ, Reader

#: The longest search text (the box's maxlength).
SEARCH_MAX = 200
#: A payload path's most segments.
PATH_MAX = 10
BIGINT_MAX = 2**63 - 1

_ID = re.compile(r"#?(\d+)")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,29})(?:\.\d{1,30})?(?:[eE][+-]?\d{1,3})?")
_SEGMENT = re.compile(r"[^\s.=]{1,100}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SearchError(ValueError):
    """The search text cannot be read: its message tells the operator why."""


@dataclass(frozen=True)
class Search:
    """What to look for: exactly one of job_id, key, path (with values) or pattern."""

    kind: str  # "id", "key", "payload" or "error"
    text: str
    job_id: int | None = None
    key: str | None = None
    path: list[str] | None = None
    #: JSON texts the value at `path` may equal (42 matches the number and the string).
    values: list[str] = field(default_factory=list)
    pattern: str | None = None  # ILIKE pattern for the error text

    @property
    def bounded(self) -> bool:
        """Whether it scans a window of ids (no index answers it)."""
        return self.kind in ("payload", "error")

    def describe(self) -> str:
        if self.kind == "id":
            return f"job #{self.job_id}"
        if self.kind == "key":
            return f"idempotency key {self.key!r}"
        if self.kind == "payload":
            return f"payload {'.'.join(self.path or [])} = {' or '.join(self.values)}"
        return f"last error containing {self.text.partition(':')[2].strip()!r}"


def parse(text: str | None) -> Search:
    """Read the search box (see the module's docstring); SearchError says what is wrong."""
    text = (text or "").strip()
    if not text:
        raise SearchError("Type what to search for.")
    if len(text) > SEARCH_MAX:
        raise SearchError(f"A search is at most {SEARCH_MAX} characters (this one is "
                          f"{len(text)}).")
    if _CONTROL.search(text):
        raise SearchError("A search cannot hold control characters (tabs, new lines…).")
    if match := _ID.fullmatch(text):
        job_id = int(match.group(1))
        if not 0 < job_id <= BIGINT_MAX:
            raise SearchError(f"No job has the id {match.group(1)[:30]}: ids run from 1 "
                              f"to {BIGINT_MAX}.")
        return Search("id", text, job_id=job_id)
    prefix, colon, rest = text.partition(":")
    if colon and prefix.strip().lower() == "key":
        key = rest.strip()
        if not key:
            raise SearchError("Give the idempotency key after key:")
        return Search("key", text, key=key)
    if colon and prefix.strip().lower() == "error":
        needle = rest.strip()
        if not needle:
            raise SearchError("Give the text to find after error:")
        escaped = re.sub(r"([\\%_])", r"\\\1", needle)
        return Search("error", text, pattern=f"%{escaped}%")
    if "=" in text:
        return _payload(text)
    return Search("key", text, key=text)


def _payload(text: str) -> Search:
    path_text, _, value = text.partition("=")
    path = path_text.strip().split(".")
    if not path_text.strip() or not all(_SEGMENT.fullmatch(p) for p in path):
        raise SearchError("Write a payload path as field names joined by dots, then = and "
                          "the value: customer_id=42, customer.id=42, items.0.sku=A-1.")
    if len(path) > PATH_MAX:
        raise SearchError(f"A payload path has at most {PATH_MAX} parts (this one has "
                          f"{len(path)}).")
    value = value.strip()
    if not value:
        raise SearchError(f"Give the value to find after {path_text.strip()}= (\"\" for "
                          "an empty string).")
    return Search("payload", text, path=path, values=_json_values(value))


def _json_values(value: str) -> list[str]:
    """The JSON values a typed value matches: a number or true/false/null also as the
    string of the same text; a "quoted" string only as itself; anything else a string."""
    as_string = json.dumps(value)
    if _NUMBER.fullmatch(value) or value in ("true", "false", "null"):
        return [value, as_string]
    if value.startswith('"'):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, str):
            raise SearchError("A quoted value must be one JSON string, e.g. \"42\".")
        return [json.dumps(parsed)]
    if value[0] in "[{":
        raise SearchError("Search for one value (a number, a word, true, false or null), "
                          "not a list or an object: name the field inside it instead.")
    return [as_string]


@dataclass(frozen=True)
class Results:
    """One page of matches, newest first."""

    search: Search
    rows: list[dict[str, Any]]
    #: The ids searched: top (exclusive) down to floor (inclusive); None: every job.
    top: int | None = None
    floor: int | None = None
    #: The next page of matches in the same window (its top), if more matched.
    more_before: int | None = None
    #: The window before this one (its top), if older jobs exist.
    older_window: int | None = None


def run(reader: Reader, search: Search, *, window: int, limit: int,
        before: int | None = None, floor: int | None = None) -> Results:
    """The matches of `search`: for a bounded search within ids [floor, before) — the
    newest `window` ids by default, never more than `window` ids — else over every job."""
    params: dict[str, Any] = {"job_id": search.job_id, "key": search.key,
                              "path": search.path, "values": search.values or None,
                              "pattern": search.pattern, "limit": limit + 1,
                              "top": None, "floor": None}
    if search.bounded:
        top = before or reader.one(CQ.console_search_newest)["newest"] + 1
        bottom = max(top - window, 1)
        if floor is not None:
            bottom = min(max(floor, bottom), top)
        params.update(top=top, floor=bottom)
    elif before is not None:
        params["top"] = before
    rows = reader.all(CQ.console_search, **params)
    more = rows[limit - 1]["id"] if len(rows) > limit else None
    if not search.bounded:
        return Results(search, rows[:limit], more_before=more)
    return Results(search, rows[:limit], top=params["top"], floor=params["floor"],
                   more_before=more,
                   older_window=params["floor"] if params["floor"] > 1 else None)
