"""Bulk actions of any size: a selection held by the server, its review, and its chunks.

A selection's jobs are stored in pages of ids (`console_selection_jobs`, migration 0030)
when the operator asks to review them. Starting the action records the reason and, for a
canary, how many of the first jobs to act on before the operator decides. Then the
action runs in chunks: each chunk is one transaction that takes the selection row's lock,
acts on the next `chunk` jobs with the runtime's compare-and-set
(`jobwarden.worker.ops.operations.act_on_selection`: one audit row per job changed, all under the
selection's id as `bulk_id`), records which of them it left alone because they had moved
on, and moves the selection's `next_ord` past them. Progress lives only in the database,
so a console restarted between (or during) chunks carries on from the last committed one.

Who runs the chunks: the requests of the operator's page (console/views/bulk.py), one
chunk per request, never a thread inside the web process.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.errors import QueryCanceled
from sqlalchemy.exc import DBAPIError

from jobwarden.console.data.database import CQ, ConsoleDatabase, Reader
from jobwarden.console.data.queries import flow_params
from jobwarden.console.data.schema import SELECTION_PAGE
from jobwarden.worker.core.sanitize import redact
from jobwarden.worker.core.storable import storable_text
from jobwarden.worker.ops import operations

#: The review's failure-age buckets: key, label, and the bucket's age range in seconds
#: (from, to; None: unbounded), the same ranges as console_selection_create's CASE.
AGE_BUCKETS = (
    ("hour", "in the last hour", 0, 3600),
    ("day", "1 to 24 hours ago", 3600, 86400),
    ("week", "1 to 7 days ago", 86400, 7 * 86400),
    ("older", "over 7 days ago", 7 * 86400, None),
    ("never", "not failed now", None, None),
)
#: The most ids one form may tick (a page shows at most a few hundred: more is forged).
TICKED_MAX = 10_000


@dataclass(frozen=True)
class Breakdown:
    """The review of a selection: how its jobs stood when they were selected."""

    eligible: int  # jobs in a status the action starts from
    by_status: list[dict[str, Any]]  # status, jobs, eligible (bool)
    by_type: list[dict[str, Any]]  # type, jobs, eligible
    by_age: list[dict[str, Any]]  # key, label, jobs, failed_from, failed_to, narrows
    counted_at: datetime


class SelectionTooSlow(Exception):
    """Storing the selection took longer than its time limit: nothing was stored."""


def create_selection(reader: Reader, *, selection_id: str, actor: str, action: str,
                     description: str, job_ids: list[int] | None = None,
                     within: str | None = None, filters: dict[str, Any] | None = None,
                     failed_from: datetime | None = None, failed_to: datetime | None = None,
                     time_limit: float | None = None) -> int:
    """Store the jobs to act on (in `reader`'s transaction): `job_ids`, or the jobs of the
    selection `within`, or (neither given) every job matching `filters` (the jobs list's
    JobFilter.params(), its flow's jobs included, and `statuses`: a list of statuses a
    job must have one of); always narrowed by `filters` and failed_from <= failed_at <
    failed_to. Returns how many jobs it holds; 0 stores
    nothing. Raises SelectionTooSlow (the transaction is then aborted) when a statement
    outlasts `time_limit` seconds."""
    flt = {k: (filters or {}).get(k) for k in ("status", "queue", "type", "error_code",
                                               "search_key", "search_id", "flow", "batch",
                                               "statuses")}
    if time_limit:
        reader.one(CQ.console_selection_time_limit, ms=max(1, round(time_limit * 1000)))
    try:
        flt = flow_params(reader, flt)
        del flt["flow"]
        row = reader.one(CQ.console_selection_create, id=selection_id, actor=actor,
                         action=action, description=description, page=SELECTION_PAGE,
                         job_ids=job_ids, within=within,
                         given=job_ids is not None or within is not None,
                         failed_from=failed_from, failed_to=failed_to, **flt)
    except DBAPIError as error:
        if isinstance(error.orig, QueryCanceled):
            raise SelectionTooSlow(time_limit) from error
        raise
    return row["jobs"] if row else 0


def breakdown(sel: dict[str, Any]) -> Breakdown:
    """The selection's jobs by status, by type and by failure age, as the statement that
    stored them counted them (console_selection_create): the same for any size."""
    allowed = operations.SELECTION_FROM[sel["action"]]
    by_status: dict[str, int] = defaultdict(int)
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    by_age: dict[str, int] = defaultdict(int)
    for r in sel["breakdown"] or ():
        by_status[r["status"]] += r["jobs"]
        counts = by_type[r["type"]]
        counts[0] += r["jobs"]
        counts[1] += r["jobs"] if r["status"] in allowed else 0
        by_age[r["age"]] += r["jobs"]
    counted_at = sel["created_at"]
    ages = []
    for key, label, newest, oldest in AGE_BUCKETS:
        if not by_age.get(key):
            continue
        failed_from = failed_to = None
        if newest is not None:
            failed_from = counted_at - timedelta(seconds=oldest) if oldest is not None else None
            failed_to = counted_at - timedelta(seconds=newest) if newest else None
        ages.append({"key": key, "label": label, "jobs": by_age[key],
                     "failed_from": failed_from, "failed_to": failed_to,
                     "narrows": newest is not None})
    return Breakdown(
        eligible=sum(n for s, n in by_status.items() if s in allowed),
        by_status=[{"status": s, "jobs": n, "eligible": s in allowed}
                   for s, n in sorted(by_status.items(), key=lambda kv: -kv[1])],
        by_type=[{"type": t, "jobs": c[0], "eligible": c[1]}
                 for t, c in sorted(by_type.items(), key=lambda kv: (-kv[1][0], kv[0]))],
        by_age=ages, counted_at=counted_at)


def stored_reason(text: str) -> str:
    """The operator's reason as the action's audit rows will carry it (storable, redacted,
    at most operations.REASON_MAX characters), so the selection never holds more."""
    return redact((storable_text(text) or "").strip())[:operations.REASON_MAX]


def parse_canary(text: str | None, jobs: int) -> int:
    """How many jobs a canary of `text` is: a number of jobs ("100") or a share of the
    selection ("5%", rounded up). Raises ValueError with the operator's explanation."""
    text = (text or "").strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1])
            if not (0 < share < 100) or math.isnan(share):
                raise ValueError
            count = math.ceil(jobs * share / 100)
        else:
            count = int(text)
    except ValueError:
        raise ValueError(f"Give the canary as a number of jobs (e.g. 100) or a share "
                         f"(e.g. 5%), not {text[:40]!r}. Nothing was changed.") from None
    if not 0 < count < jobs:
        raise ValueError(f"A canary is at least 1 and fewer than the {jobs:,} selected "
                         f"jobs (not {count:,}). Nothing was changed.")
    return count


@dataclass(frozen=True)
class Chunk:
    """One chunk done: the jobs at ordinals first_ord <= n < last_ord of the selection."""

    first_ord: int
    last_ord: int
    changed: int
    left_alone: list[int]
    state: str  # the action's state after it ("done" after the last chunk)


def run_chunk(db: ConsoleDatabase, selection_id: str, *, actor: str, role: str,
              chunk: int) -> Chunk | None:
    """Do the next chunk of `actor`'s started action in one transaction; None when there
    is none to do now (the canary is done, the action ended, or another request holds
    the action's lock for its own chunk)."""
    with db.transaction() as tx:
        sel = tx.one(CQ.console_bulk_step_claim, id=selection_id, actor=actor, chunk=chunk)
        if sel is None:
            return None
        lo, hi = sel["next_ord"], sel["last_ord"]
        held = tx.row(CQ.console_selection_range, id=selection_id, lo=lo, hi=hi,
                      page=SELECTION_PAGE)
        ids = held["job_ids"]
        # Each chunk's audit rows carry the start form's request id with the chunk's
        # first ordinal: a chunk replayed against the same rows would be recognised.
        # Each job is acted on only as it stood when selected (the review's promise).
        result = operations.act_on_selection(
            tx.conn, sel["action"], ids, actor=actor, role=role, reason=sel["reason"],
            bulk_id=selection_id, request_id=f"{sel['request_id']}:{lo}",
            selected_statuses=held["statuses"], selected_at=sel["created_at"],
            dependents=sel["dependents"])
        left = tx.row(CQ.console_bulk_left_alone, bulk_id=selection_id,
                      job_ids=ids)["job_ids"]
        done = tx.one(CQ.console_bulk_step_record, id=selection_id, lo=lo, hi=hi,
                      changed=result.jobs, left_alone=left)
        if done is None:  # cannot happen under the row's lock: never record a chunk twice
            raise RuntimeError(f"bulk {selection_id}: chunk at {lo} lost its place")
    return Chunk(lo, hi, result.jobs, left, done["state"])


def range_statuses(reader: Reader, selection_id: str, lo: int, hi: int) -> dict[str, int]:
    """How the selection's jobs at ordinals lo <= n < hi stand now (a canary's outcome),
    per status."""
    ids = reader.row(CQ.console_selection_range, id=selection_id, lo=lo, hi=hi,
                     page=SELECTION_PAGE)["job_ids"]
    if not ids:
        return {}
    return {r["status"]: r["jobs"]
            for r in reader.all(CQ.console_selection_statuses, job_ids=ids)}
