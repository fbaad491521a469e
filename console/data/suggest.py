"""What the filters offer as you type (a `<datalist>` beside each box): job types, queues,
error codes, and payload field paths for the search box.

Each list is bounded (LIMIT values) and read from the catalogue and the rollups, never
from a scan of background_jobs (console_suggest_*):

- types and queues: the published job types (job_types), the (queue, type) pairs that
  have jobs now (the rollup the overview reads), paused queues;
- error codes: those of failed jobs now (a skip over the failed jobs' code index, one
  probe per code) and those the per-minute rollup saw in its 8 days;
- payload paths: the fields (up to PATH_DEPTH names deep, objects only) of the newest
  PAYLOAD_SAMPLE jobs' payloads of at most PAYLOAD_MAX_BYTES: what recent jobs hold. A
  type nobody enqueued lately offers none; `customer.id=42` still searches it.

Only what the pages show and the filters take is offered: a value the redactor would
change (a filter refuses it, queries.JobFilter.hidden), a path through a secret's name
(the search refuses it, search.parse) is left out. The same for every role: a viewer
reads the same pages, payload keys included, as an operator (docs/security-pages.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from psycopg.errors import QueryCanceled
from sqlalchemy.exc import DBAPIError

from jobwarden.console.data.database import CQ, Reader, ReadingDatabase
from jobwarden.worker.core.sanitize import is_secret_key, redact

#: The most values of each list (a datalist of a few hundred options stays small).
LIMIT = 200
#: The newest jobs whose payloads the search box's paths come from.
PAYLOAD_SAMPLE = 500
#: A payload larger than this (as stored) is not read for its paths.
PAYLOAD_MAX_BYTES = 8192
#: The deepest path offered (customer.address.city).
PATH_DEPTH = 3
#: The longest value offered (a filter box takes 200 characters).
VALUE_MAX = 200
#: How long the suggestions may take to read, per statement: past it the page has none.
SECONDS = 1.0

T = TypeVar("T")


@dataclass(frozen=True)
class Filters:
    """The jobs list's lists: types, queues, error codes, in order."""

    types: list[str]
    queues: list[str]
    codes: list[str]


NONE = Filters([], [], [])


def read(db: ReadingDatabase, lists: Callable[[Reader], T]) -> T | None:
    """`lists(reader)` in a transaction of its own whose statements may each run SECONDS;
    None when one runs longer (the page is not held up for its suggestions)."""
    try:
        with db.reading() as reader:
            reader.one(CQ.console_suggest_time_limit, ms=round(SECONDS * 1000))
            return lists(reader)
    except DBAPIError as error:
        if isinstance(error.orig, QueryCanceled):
            return None
        raise


def filters(reader: Reader) -> Filters:
    names = reader.all(CQ.console_suggest_names, limit=LIMIT)
    codes = [r["code"] for r in reader.all(CQ.console_suggest_codes, limit=LIMIT)]
    return Filters(types=_shown(r["value"] for r in names if r["kind"] == "type"),
                   queues=_shown(r["value"] for r in names if r["kind"] == "queue"),
                   codes=_shown(codes))


def payload_paths(reader: Reader) -> list[str]:
    """Field paths of recent payloads the search can look a value up at (`a.b`), the most
    common first."""
    rows = reader.all(CQ.console_suggest_payload_paths, sample=PAYLOAD_SAMPLE,
                      max_bytes=PAYLOAD_MAX_BYTES, depth=PATH_DEPTH, limit=LIMIT)
    paths = []
    for row in rows:
        parts = row["path"]
        # What search.parse takes: names without dots, spaces or `=`, none a secret's.
        if all(p and not any(c in p for c in ". =") and not is_secret_key(p)
               and redact(p) == p and len(p) <= 100 for p in parts):
            paths.append(".".join(parts))
    return paths


def search_box(reader: Reader) -> list[str]:
    """The search box's suggestions: `path=` for recent payload fields, `error:CODE` for
    error codes."""
    codes = [f"error:{c}" for c in _shown(
        r["code"] for r in reader.all(CQ.console_suggest_codes, limit=LIMIT))]
    return [f"{p}=" for p in payload_paths(reader)] + codes


def _shown(values: Iterable[str]) -> list[str]:
    """The values as given, but those the pages do not show as they are, or too long."""
    return [v for v in values if v and len(v) <= VALUE_MAX and redact(v) == v]
