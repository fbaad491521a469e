"""Search: one box for a job's id, its idempotency key, a payload value at a path, or text
of its last error.

    12345                 the job with that id (also #12345)
    key:welcome:user:52   jobs with that idempotency key
    customer.id=42        jobs whose payload holds 42 (or "42") at customer → id
    error:timed out       jobs whose last error (message or code) has these words
    flow:12345            the jobs connected to job 12345 by their dependencies
    batch:17              the members of batch 17

An id and a key are looked up by index over every job (the primary key;
background_jobs_idempotency_key_idx, migration 0002), a flow by its bounded walk
(console/data/flows.py), a batch's members by background_jobs_batch_idx (migration
0074). A payload value or an error text has no index (each would cost every enqueue a
write, docs/guide/operating.md): it is a bounded scan of one window of `window`
consecutive ids, the newest first, and the page says which ids it searched and links to
the window before them. The scan reads at most
`window` rows whatever the size of the table, so its time does not grow with the table.

An error text is matched by whole words, case-insensitively: `error:job 57` finds "job 57
failed" and "Job  57." but not "job 5707" nor "myjob 57" (see `error_words`); a `*` at
its end lets the last word go on (`error:time*` finds "timed out" and "timeout").

Anything else typed in the box is refused with the reason, before any SQL runs.

A search answers only about what the console shows (every page shows values through
jobwarden.worker.core.sanitize.redact, for every role): a path through a secret's name
(`customer.cvv`, `auth.user`), a key, value or error text the redactor would change, is
refused before any SQL runs; and an error text must match the error as redacted, not
only as stored (a row written before the redactor knew a shape holds it unredacted).
Otherwise a right and a wrong guess at a secret would get different answers
(tests/integration/test_console_search_secrets.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from psycopg.errors import QueryCanceled
from sqlalchemy.exc import DBAPIError

from jobwarden.console.data import find
from jobwarden.console.data.database import CQ, Reader
from jobwarden.console.data.flows import member_ids
from jobwarden.worker.core.sanitize import REDACTED, is_secret_key, redact

#: The longest search text (the box's maxlength).
SEARCH_MAX = 200
#: A payload path's most segments.
PATH_MAX = 10
BIGINT_MAX = 2**63 - 1

_ID = re.compile(r"#?(\d+)")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,29})(?:\.\d{1,30})?(?:[eE][+-]?\d{1,3})?")
_SEGMENT = re.compile(r"[^\s.=]{1,100}")
#: What a jsonb string (a key or a value) cannot hold: PostgreSQL refuses a NUL (22P05)
#: and a lone surrogate (22P02), so searching for one would be a database error.
_NOT_IN_JSONB = re.compile(r"[\x00\ud800-\udfff]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The longest text a matched value or error shows in the results.
MATCHED_MAX = 200


class SearchError(ValueError):
    """The search text cannot be read: its message tells the operator why."""


class SearchTooSlow(Exception):
    """A statement of the search outlasted its time limit: its message says so."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"This search took longer than {seconds:g} s and was stopped, "
                         "without an answer: search again when the database is less busy.")


@dataclass(frozen=True)
class Search:
    """What to look for: exactly one of job_id, key, path (with values) or pattern."""

    kind: str  # "id", "key", "payload", "error", "flow" or "batch"
    text: str
    job_id: int | None = None
    flow: int | None = None
    batch: int | None = None
    key: str | None = None
    path: list[str] | None = None
    #: JSON texts the value at `path` may equal (42 matches the number and the string).
    values: list[str] = field(default_factory=list)
    pattern: str | None = None  # ILIKE pattern for the error text (a superset of `words`)
    #: The error text's words, as the redacted error or code must hold them (error_words).
    words: re.Pattern[str] | None = None

    @property
    def bounded(self) -> bool:
        """Whether it scans a window of ids (no index answers it)."""
        return self.kind in ("payload", "error")

    def describe(self) -> str:
        if self.kind == "id":
            return f"job #{self.job_id}"
        if self.kind == "key":
            return f"idempotency key {self.key!r}"
        if self.kind == "flow":
            return f"the flow of job #{self.flow}"
        if self.kind == "batch":
            return f"the members of batch #{self.batch}"
        if self.kind == "payload":
            return f"payload {'.'.join(self.path or [])} = {' or '.join(self.values)}"
        return f"the words {self.text.partition(':')[2].strip()!r} in the last error"


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
        return Search("key", text, key=_shown(key, "idempotency key"))
    if colon and prefix.strip().lower() == "flow":
        wanted = rest.strip().removeprefix("#")
        flow = int(wanted) if wanted.isascii() and wanted.isdigit() else 0
        if not 0 < flow <= BIGINT_MAX:
            # Said the same whatever was typed: a secret typed here is never compared.
            raise SearchError(f"Give a job id after flow: (a whole number from 1 to "
                              f"{BIGINT_MAX}).")
        return Search("flow", text, flow=flow)
    if colon and prefix.strip().lower() == "batch":
        wanted = rest.strip().removeprefix("#")
        batch = int(wanted) if wanted.isascii() and wanted.isdigit() else 0
        if not 0 < batch <= BIGINT_MAX:
            # Said the same whatever was typed, as for flow:.
            raise SearchError(f"Give a batch id after batch: (a whole number from 1 to "
                              f"{BIGINT_MAX}).")
        return Search("batch", text, batch=batch)
    if colon and prefix.strip().lower() == "error":
        needle = rest.strip()
        if not needle:
            raise SearchError("Give the text to find after error:")
        _shown(needle, "error text")
        pattern, words = error_words(needle)
        return Search("error", text, pattern=pattern, words=words)
    if "=" in text:
        return _payload(text)
    return Search("key", text, key=_shown(text, "idempotency key"))


#: A word's characters: letters, digits and the underscore, as in codes (AUTH_FAILED).
_WORD = re.compile(r"\w")


def error_words(needle: str) -> tuple[str, re.Pattern[str]]:
    """An error-text search's two tests: an ILIKE pattern, a cheap superset the database
    applies (the words in order, anything between them; LIKE's wildcards escaped), and the
    exact one applied to the error as redacted: the words in order, separated by white
    space, the first not preceded and the last not followed by a word's character
    (`_WORD`): never the middle of a longer word. Both case-insensitive. A word starting
    or ending with a sign (`100%`, `(57)`) matches there as typed. A trailing `*` lets
    the last word go on: `time*` finds "timeout". Everything typed is literal: no regular
    expression reaches either test."""
    prefix = needle.endswith("*")
    body = needle[:-1].rstrip() if prefix else needle
    words = body.split()
    if not words:
        raise SearchError("Give at least one word before the * of error:")
    exact = r"\s+".join(re.escape(w) for w in words)
    if _WORD.match(body[0]):
        exact = r"(?<!\w)" + exact
    if not prefix and _WORD.match(body[-1]):
        exact += r"(?!\w)"
    like = "%".join(re.sub(r"([\\%_])", r"\\\1", w) for w in words)
    return f"%{like}%", re.compile(exact, re.IGNORECASE)


def _shown(text: str, what: str) -> str:
    """`text`, if the console shows it as it is; else SearchError: a match would tell
    whether a guess at something shown as [REDACTED] is right."""
    if redact(text) != text:
        raise SearchError(f"The console shows this {what} as {REDACTED}, so it cannot "
                          "search for it: search by the job's id or by what the page shows.")
    return text


def _payload(text: str) -> Search:
    path_text, _, value = text.partition("=")
    path = path_text.strip().split(".")
    if not path_text.strip() or not all(_SEGMENT.fullmatch(p) for p in path):
        raise SearchError("Write a payload path as field names joined by dots, then = and "
                          "the value: customer_id=42, customer.id=42, items.0.sku=A-1.")
    if len(path) > PATH_MAX:
        raise SearchError(f"A payload path has at most {PATH_MAX} parts (this one has "
                          f"{len(path)}).")
    for part in path:
        _storable(part, "field name")
    hidden = [p for p in path if is_secret_key(p) or redact(p) != p]
    if hidden:
        raise SearchError(f"The console shows what {hidden[0]!r} holds as {REDACTED} (a "
                          "secret's name), so it cannot search by its value.")
    value = value.strip()
    if not value:
        raise SearchError(f"Give the value to find after {path_text.strip()}= (\"\" for "
                          "an empty string).")
    values = _json_values(value)
    for json_text in values:
        if isinstance(decoded := json.loads(json_text), str):
            _storable(decoded, "value")
            _shown(decoded, "value")
    return Search("payload", text, path=path, values=values)


def _storable(text: str, what: str) -> str:
    """`text`, if a jsonb key or value can hold it (read after JSON's escapes, so
    `"\\u0000"` is a NUL); else SearchError, before any SQL runs."""
    if found := _NOT_IN_JSONB.search(text):
        kind = "a NUL" if found.group() == "\x00" else "a lone surrogate"
        raise SearchError(f"This {what} holds {kind} (\\u{ord(found.group()):04x}), which a "
                          "payload cannot hold: no job can match it.")
    return text


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
        before: int | None = None, floor: int | None = None,
        time_limit: float | None = None, created: find.Created | None = None) -> Results:
    """The matches of `search` among the jobs `created` in a range (console/data/find.py):
    for a bounded search within ids [floor, before) — the newest `window` ids of the
    range by default, never more than `window` ids — else over every job. Each statement
    may run `time_limit` seconds (in `reader`'s transaction), else SearchTooSlow."""
    if time_limit:
        reader.one(CQ.console_search_time_limit, ms=max(1, round(time_limit * 1000)))
    try:
        return _run(reader, search, window=window, limit=limit, before=before, floor=floor,
                    created=created or find.Created())
    except DBAPIError as error:
        if time_limit and isinstance(error.orig, QueryCanceled):
            raise SearchTooSlow(time_limit) from error
        raise


def _run(reader: Reader, search: Search, *, window: int, limit: int,
         before: int | None, floor: int | None, created: find.Created) -> Results:
    from_id, to_id = find.id_bounds(reader, created) if created.given else (None, None)
    params: dict[str, Any] = {"job_id": search.job_id, "key": search.key,
                              "path": search.path, "values": search.values or None,
                              "pattern": search.pattern, "limit": limit + 1,
                              "top": None, "floor": None, "flow_ids": None,
                              "batch": search.batch, "created_from": created.start,
                              "created_to": created.end, "from_id": from_id, "to_id": to_id}
    if search.flow is not None:
        params["flow_ids"] = member_ids(reader, search.flow)
    lowest = from_id or 1  # the range's first id: no window starts below it
    if search.bounded:
        top = before or reader.row(CQ.console_search_newest)["newest"] + 1
        if to_id is not None:
            # The range's newest window first: one request, however many jobs are newer.
            top = min(top, to_id)
        bottom = max(top - window, lowest)
        if floor is not None:
            bottom = min(max(floor, bottom), top)
        params.update(top=top, floor=bottom)
    elif before is not None:
        params["top"] = before
    rows = _shown_matches(reader, search, params)
    more = rows[limit - 1]["id"] if len(rows) > limit else None
    if not search.bounded:
        return Results(search, rows[:limit], more_before=more)
    return Results(search, rows[:limit], top=params["top"], floor=params["floor"],
                   more_before=more,
                   older_window=params["floor"] if params["floor"] > lowest else None)


def _shown_matches(reader: Reader, search: Search, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Up to params["limit"] matching rows, newest first. An error text's words must be
    found in the error or code as the page shows them (redacted), not only as stored (nor
    only inside longer words, as the database's ILIKE would take them): rows matching
    only in a part shown as [REDACTED] are dropped, and the scan goes on below them (the
    window still bounds it)."""
    if search.kind != "error":
        return reader.all(CQ.console_search, **params)
    words = search.words
    assert words is not None, "parse gives an error search its words"
    found: list[dict[str, Any]] = []
    page = dict(params)
    while True:
        rows = reader.all(CQ.console_search, **page)
        for row in rows:
            error, code = redact(row["matched"] or ""), redact(row["last_error_code"] or "")
            if words.search(error) or words.search(code):
                # Redacted first, then cut: a cut could leave a secret the redactor no
                # longer knows.
                found.append({**row, "matched": error[:MATCHED_MAX]})
        if len(found) >= params["limit"] or len(rows) < page["limit"]:
            return found[:params["limit"]]
        page["top"] = rows[-1]["id"]
