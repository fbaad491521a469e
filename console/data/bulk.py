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

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.errors import QueryCanceled
from sqlalchemy.exc import DBAPIError

from jobwarden.console.data.database import CQ, ConsoleDatabase, Reader
from jobwarden.console.data.queries import flow_params, time_params
from jobwarden.console.data.schema import SELECTION_PAGE
from jobwarden.worker.core.sanitize import redact
from jobwarden.worker.core.storable import storable_text
from jobwarden.worker.ops import operations
from jobwarden.worker.store.schema import JOB_STATUSES

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
    JobFilter.params(), its flow's jobs and its range of creation times included,
    `statuses`: a list of statuses a job must have one of, and a group of unknown jobs'
    `verdict`, `no_verdict` and `no_code`: review.Group.params()); always narrowed by `filters`
    and failed_from <= failed_at < failed_to. Returns how many jobs it holds; 0 stores
    nothing. Raises SelectionTooSlow (the transaction is then aborted) when a statement
    outlasts `time_limit` seconds."""
    flt = {k: (filters or {}).get(k) for k in ("status", "queue", "type", "error_code",
                                               "search_key", "search_id", "flow", "batch",
                                               "created_from", "created_to", "statuses",
                                               "verdict")}
    # A group of Needs review (console/data/review.py): no code, no verdict.
    flt.update(no_code=bool((filters or {}).get("no_code")),
               no_verdict=bool((filters or {}).get("no_verdict")))
    if time_limit:
        reader.one(CQ.console_selection_time_limit, ms=max(1, round(time_limit * 1000)))
    try:
        flt = time_params(reader, flow_params(reader, flt))
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


#: A retry's canary has failed when at least this many of the jobs it retried have failed
#: again (their status is `failed` now): one. A canary is small, and a job failing again is
#: evidence that the cause is not gone for every job; a share (say 10% of 100) would wave
#: through 9 failures that become 2,000 of a 25,000-job group. Steering to Stop costs the
#: operator who knows better one tick. A job still pending or running has not failed (the
#: panel says how many have not ended), nor has one that ended `unknown` (its handler's
#: outcome is not known; it is listed by code beside the failures).
CANARY_FAILED_JOBS = 1
#: The statuses of a job not ended yet after a retry (waiting for, or running, its attempt).
NOT_ENDED = ("pending", "running", "waiting")


@dataclass(frozen=True)
class Part:
    """How the jobs of one part of a bulk action (its canary, the rest, the whole set)
    that the action changed stand now: per status, and per error code of those that ended
    failed or unknown."""

    jobs: int
    by_status: dict[str, int]
    by_code: list[dict[str, Any]]  # status, error_code (None: no code), jobs; most first

    @property
    def failed(self) -> int:
        return self.by_status.get("failed", 0)

    @property
    def not_ended(self) -> int:
        return sum(self.by_status.get(s, 0) for s in NOT_ENDED)


@dataclass(frozen=True)
class Outcome:
    """A started bulk action's outcome so far (console_bulk_outcome)."""

    canary: Part | None  # None: no canary
    rest: Part
    whole: Part
    #: The canary failed (CANARY_FAILED_JOBS): a retry whose canary's jobs failed again.
    canary_failed: bool

    def table(self) -> list[dict[str, Any]]:
        """The set's outcome as the page lists it: a row per status (in JOB_STATUSES'
        order), each failed or unknown one followed by a row per error code, with the
        canary's, the rest's and the whole set's jobs."""
        parts = {"canary": self.canary or _part([]), "rest": self.rest, "whole": self.whole}
        rows: list[dict[str, Any]] = []
        for status in JOB_STATUSES:
            if not self.whole.by_status.get(status):
                continue
            rows.append({"status": status, "code": False, "error_code": None,
                         **{k: p.by_status.get(status, 0) for k, p in parts.items()}})
            for r in self.whole.by_code:
                if r["status"] == status:
                    rows.append({"status": status, "code": True, "error_code": r["error_code"],
                                 **{k: _code_jobs(p, status, r["error_code"])
                                    for k, p in parts.items()}})
        return rows

    def verdict(self) -> dict[str, Any]:
        """What a decision after the canary records of it (the audit row's details)."""
        canary = self.canary or _part([])
        return {"canary_failed": self.canary_failed, "canary_changed": canary.jobs,
                "failed_again": canary.failed, "not_ended": canary.not_ended,
                "failed_by_code": {r["error_code"] or "": r["jobs"] for r in canary.by_code
                                   if r["status"] == "failed"}}


def outcome(reader: Reader, sel: dict[str, Any], whole: bool = True) -> Outcome | None:
    """How the jobs a started action changed stand now, its canary apart (with `whole`
    False, the canary's alone: what a page asking for chunk after chunk can afford, not
    a count of every job dealt with so far at each one); None when its ids are no longer
    held (console_selection_prune lets them go a week after it ended)."""
    if not sel["held"]:
        return None
    canary = sel["canary"] or 0
    hi = sel["next_ord"] if whole else min(sel["next_ord"], canary)
    rows = reader.all(CQ.console_bulk_outcome, id=sel["id"], canary=canary,
                      hi=hi, page=SELECTION_PAGE) if hi > 0 else []
    first = _part([r for r in rows if r["canary"]])
    failed = (sel["action"] == "retry" and canary > 0
              and first.failed >= CANARY_FAILED_JOBS)
    return Outcome(canary=first if canary else None,
                   rest=_part([r for r in rows if not r["canary"]]),
                   whole=_part(rows), canary_failed=failed)


def _part(rows: list[dict[str, Any]]) -> Part:
    by_status: dict[str, int] = defaultdict(int)
    by_code: dict[tuple[str, str | None], int] = defaultdict(int)
    for r in rows:
        by_status[r["status"]] += r["jobs"]
        if r["status"] in ("failed", "unknown"):
            by_code[(r["status"], r["error_code"])] += r["jobs"]
    return Part(
        jobs=sum(by_status.values()), by_status=dict(by_status),
        by_code=[{"status": s, "error_code": c, "jobs": n} for (s, c), n in sorted(
            by_code.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1] or ""))])


def _code_jobs(part: Part, status: str, code: str | None) -> int:
    return sum(r["jobs"] for r in part.by_code
               if r["status"] == status and r["error_code"] == code)


class CanaryFailed(Exception):
    """The operator asked to continue past a failed canary without saying they mean it:
    nothing was changed. Carries the canary's outcome for the refusal."""

    def __init__(self, result: Outcome) -> None:
        super().__init__("the canary failed")
        self.outcome = result


def continue_after_canary(db: ConsoleDatabase, selection_id: str, *, actor: str, role: str,
                          despite_failed_canary: bool) -> Outcome | None:
    """Go on with the rest of `actor`'s action waiting at its canary, audited with how the
    canary stood (`continue_bulk`). The canary's outcome is read under the selection row's
    lock, in the transaction that moves it on: what the operator saw when the page loaded
    may be older (a canary job can fail meanwhile), this is what they continue past.
    Returns None when the action is not waiting at its canary; raises CanaryFailed when
    its canary failed and `despite_failed_canary` is not given."""
    with db.transaction() as tx:
        sel = tx.one(CQ.console_bulk_canary_lock, id=selection_id, actor=actor)
        if sel is None:
            return None
        result = outcome(tx, sel, whole=False)
        if result is None:  # its ids are let go only once it ended: cannot happen here
            return None
        if result.canary_failed and not despite_failed_canary:
            raise CanaryFailed(result)
        verdict = {**result.verdict(),
                   "despite_failed_canary": result.canary_failed}
        if tx.one(CQ.console_bulk_continue, id=selection_id, actor=actor, role=role,
                  verdict=json.dumps(verdict)) is None:  # cannot happen under the lock
            raise RuntimeError(f"bulk {selection_id}: continue lost its place")
    return result
