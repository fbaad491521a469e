"""Periodic jobs: `@job(..., schedule="*/5 * * * *", schedule_tz="Europe/Berlin")`.

Workers publish the schedules their handlers declare to `job_schedules` and, as a duty
(worker/duties/periodic.py), call `run_once`: each schedule whose next tick has come is locked
(`FOR UPDATE SKIP LOCKED`), its job enqueued (idempotency key `schedule:<type>:<tick>`,
the tick in UTC; available at the tick) and its `next_run_at` advanced by a
compare-and-set on the tick it read, all in one transaction. However many workers run, a
tick yields one job.

After downtime a schedule enqueues one job, for the latest tick it missed, then goes on
from the next tick; `catch_up=True` enqueues every missed tick instead (at most
`CATCH_UP_LIMIT` per pass; the next pass continues).

Cron maths (parsing, ticks, daylight saving time) is worker/jobs/cron.py's.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import psycopg

from jobwarden.worker.jobs.cron import latest_tick, next_tick, schedule_problem, tick_key
from jobwarden.worker.jobs.enqueue import enqueue
from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

log = logging.getLogger("jobwarden.scheduler")

CATCH_UP_LIMIT = 100
DUE_LIMIT = 50


def _db_now(conn: psycopg.Connection) -> datetime:
    now: datetime = JobStore(conn).one(Q.db_now)[0]
    return now


def publish(conn: psycopg.Connection, registry: Registry, published_by: str,
            now: datetime | None = None) -> int:
    """Publish this registry's schedules (after its job types); drop schedules its types no
    longer declare. Runs in the caller's transaction. Returns how many were written."""
    now = now or _db_now(conn)
    rows = [{"type": t.name, "cron": t.schedule, "timezone": t.schedule_tz,
             "catch_up": t.catch_up, "payload": t.schedule_payload,
             "next_run_at": next_tick(t.schedule, t.schedule_tz, now).isoformat(),
             "published_by": published_by}
            for t in registry if t.schedule]
    unscheduled = [t.name for t in registry if not t.schedule]
    if unscheduled:
        JobStore(conn).rows(Q.schedules_unpublish, {"types": unscheduled,
                                                    "published_by": published_by})
    if not rows:
        return 0
    return len(JobStore(conn).rows(Q.schedules_publish, {"rows": json.dumps(rows)}))


def run_once(conn: psycopg.Connection, registry: Registry,
             now: datetime | None = None) -> dict[str, list[int]]:
    """Enqueue the jobs of every schedule whose tick has come; one transaction.

    `conn` is a psycopg connection; `now` defaults to the database clock. Returns the
    enqueued job ids per type. Each schedule stands on its own: one this worker cannot
    read (a zone its tzdata lacks, a cron cronsim refuses) is skipped, left as it is,
    and named in one warning per pass; the others run.
    """
    enqueued: dict[str, list[int]] = {}
    broken: dict[str, str] = {}
    with conn.transaction():
        now = now or _db_now(conn)
        seen: list[str] = []
        while True:
            rows = JobStore(conn).dicts(Q.schedules_due,
                                        {"now": now, "limit": DUE_LIMIT, "seen": seen})
            before = len(broken)
            for s in rows:
                seen.append(s["type"])
                problem = schedule_problem(s["type"], s["cron"], s["timezone"])
                if problem is None:
                    problem = _run_schedule(conn, registry, s, now, enqueued)
                if problem is not None:
                    broken[s["type"]] = problem
            # Skipped rows stay due and first in line: a batch they filled is read again
            # past them, so however many are broken the good ones are reached.
            if len(rows) < DUE_LIMIT or len(broken) == before:
                break
    if broken:
        log.warning("%d schedule(s) skipped, this worker cannot read them: %s", len(broken),
                    "; ".join(broken[t] for t in sorted(broken)),
                    extra={"action": "schedules_broken", "count": len(broken),
                           "schedules": sorted(broken)})
    return enqueued


def _run_schedule(conn: psycopg.Connection, registry: Registry, s: dict[str, Any], now: datetime,
                  enqueued: dict[str, list[int]]) -> str | None:
    """Enqueue one due schedule's ticks and advance it, in a savepoint of its own; the
    reason when its row cannot be run (its enqueues are then undone, the others kept)."""
    try:
        with conn.transaction():
            ticks = _ticks(s, now)
            ids: list[int] = [enqueue(conn, s["type"], s["payload"], run_at=tick,
                           idempotency_key=tick_key(s["type"], tick), registry=registry)
                   for tick in ticks]
            advanced = JobStore(conn).rows(Q.schedule_advance, {
                "type": s["type"], "expected": s["next_run_at"],
                "next_run_at": next_tick(s["cron"], s["timezone"], ticks[-1]),
                "last_run_at": ticks[-1], "last_job_id": ids[-1]})
            # The row is locked: the compare-and-set cannot miss. If it ever did, the
            # exception rolls the enqueues back with it.
            if not advanced:
                raise RuntimeError(f"schedule {s['type']} moved while locked")
    except (ValueError, TypeError, StopIteration) as exc:
        # What a row can hold that the declaration checks missed: a payload the handler
        # refuses, a cron that never matches (cronsim stops after 50 years)
        return f"{s['type']}: {type(exc).__name__}: {exc}"
    enqueued[s["type"]] = ids
    log.info("schedule %s: enqueued %d job(s) for %s", s["type"], len(ids),
             ticks[-1].astimezone(UTC).isoformat(),
             extra={"action": "schedule_enqueued", "job_type": s["type"], "job_id": ids[-1]})
    return None


def _ticks(schedule: dict[str, Any], now: datetime) -> list[datetime]:
    """The ticks to enqueue now: every missed one with catch_up, else only the latest."""
    cron, tz, first = schedule["cron"], schedule["timezone"], schedule["next_run_at"]
    if not schedule["catch_up"]:
        return [latest_tick(cron, tz, now, first)]
    ticks = [first]
    while len(ticks) < CATCH_UP_LIMIT:
        following = next_tick(cron, tz, ticks[-1])
        if following > now:
            break
        ticks.append(following)
    return ticks
