"""Periodic jobs: `@job(..., schedule="*/5 * * * *", schedule_tz="Europe/Berlin")`.

Workers publish the schedules their handlers declare to `job_schedules` and, as a duty
(worker/duties.py), call `run_once`: each schedule whose next tick has come is locked
(`FOR UPDATE SKIP LOCKED`), its job enqueued (idempotency key `schedule:<type>:<tick>`,
the tick in UTC; available at the tick) and its `next_run_at` advanced by a
compare-and-set on the tick it read, all in one transaction. However many workers run, a
tick yields one job.

After downtime a schedule enqueues one job, for the latest tick it missed, then goes on
from the next tick; `catch_up=True` enqueues every missed tick instead (at most
`CATCH_UP_LIMIT` per pass; the next pass continues).

Cron expressions are read by cronsim (the evaluator of the Healthchecks project):
maintained, pure Python, no dependencies. croniter, the usual choice, was announced as
becoming unmaintained in late 2024 (later releases come from a continuation); cronsim is
the smaller one with steady releases throughout.

Daylight saving time follows one rule here, not cronsim's (docs/guide/reference.md,
"Schedules and daylight saving time"). cronsim copies Debian cron, which adjusts only
expressions whose minute and hour fields do not start with `*`: `30 2 * * *` ran at 03:00
on the spring-forward day while `*/20 2 * * *` did not run at all, and ran in both
repeated hours in autumn. cronsim is kept for parsing and matching fields, and wrapped:
an expression that names hours is walked in naive wall-clock time and each wall-clock
tick placed by `_instant` (a time in a gap runs at the gap's end, a repeated time at its
first occurrence); one whose hour field names every hour counts elapsed time and is
walked by cronsim on real instants (each hour that passes gets its ticks). Ticks leave
this module in UTC: an aware datetime of a zone compares by wall clock with others of
that zone, blind to the repeated hour, and a tick has one spelling (`tick_key`).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from cronsim import CronSim, CronSimError

from .enqueue import enqueue
from .queries import Q, execute
from .registry import Registry

log = logging.getLogger("jobwarden.scheduler")

CATCH_UP_LIMIT = 100
DUE_LIMIT = 50


def check_schedule(name: str, cron: str, tz: str) -> None:
    """Raise ValueError naming the job type when its cron expression or zone is invalid."""
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"{name}: unknown schedule_tz {tz!r}") from exc
    try:
        CronSim(cron, datetime.now(zone))
    except CronSimError as exc:
        raise ValueError(f"{name}: invalid schedule {cron!r}: {exc}") from exc


def next_tick(cron: str, tz: str, after: datetime) -> datetime:
    """The first tick strictly after `after`, in UTC."""
    zone, after = ZoneInfo(tz), after.astimezone(UTC)
    if _counts_elapsed_time(cron):
        return next(CronSim(_every_hour(cron), after.astimezone(zone))).astimezone(UTC)
    # Wall-clock ticks from `after`'s own wall-clock time on: none earlier can land after
    # it (_instant keeps their order). Some later ones land at or before it (the repeated
    # hour's second pass, several ticks of one gap): they are not new instants, skip them.
    wall = after.astimezone(zone).replace(tzinfo=None)
    for naive in CronSim(cron, wall):
        tick = _instant(naive, zone)
        if tick > after:
            return tick
    raise StopIteration  # as cronsim does when nothing matches within 50 years


def latest_tick(cron: str, tz: str, at: datetime, floor: datetime) -> datetime:
    """The latest tick at or before `at`, and never before `floor` (itself a tick); UTC."""
    zone, at = ZoneInfo(tz), at.astimezone(UTC)
    # cronsim's reverse walk starts strictly before its start: a second on, in UTC
    # (adding to an aware local time would add wall-clock time, not elapsed time)
    start = (at.replace(microsecond=0) + timedelta(seconds=1)).astimezone(zone)
    if _counts_elapsed_time(cron):
        previous = next(CronSim(_every_hour(cron), start, reverse=True)).astimezone(UTC)
    else:
        previous = _instant(next(CronSim(cron, start.replace(tzinfo=None), reverse=True)),
                            zone)
    # From inside the repeated hour's second pass the reverse walk lands on a tick at
    # or before `at` but maybe not the latest: step forward to it.
    while (following := next_tick(cron, tz, previous)) <= at:
        previous = following
    return max(previous, floor.astimezone(UTC))


def tick_key(job_type: str, tick: datetime) -> str:
    """A tick's idempotency key, spelled in UTC: one spelling per instant, whether the
    tick came from cronsim (in the schedule's zone) or back from `next_run_at` (in the
    session's time zone)."""
    return f"schedule:{job_type}:{tick.astimezone(UTC).isoformat()}"


def _counts_elapsed_time(cron: str) -> bool:
    """Whether the hour field names every hour (`*`, `*/1`, `0-23`): such a schedule
    measures elapsed time rather than naming times of day."""
    return CronSim(cron, datetime(2000, 1, 1)).hours == set(range(24))


def _every_hour(cron: str) -> str:
    """The expression with its hour field spelled `*`: cronsim walks real instants only
    for hour (or minute) fields starting with `*`, and `0-23` means the same."""
    fields = cron.split()
    fields[-4] = "*"  # the hour field, with or without a leading seconds field
    return " ".join(fields)


def _instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant a naive wall-clock tick runs at, in UTC: itself when it exists; its
    first occurrence when it exists twice (fold=0 is the earlier); the first instant
    after the gap when it does not exist."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap the two folds give an instant on either side of the jump; the jump is
    # the first whole second whose wall-clock time is past `wall`.
    other = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    before, after = (int(t.timestamp()) for t in sorted((first, other)))
    while after - before > 1:
        middle = (before + after) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) > wall:
            after = middle
        else:
            before = middle
    return datetime.fromtimestamp(after, UTC)


def _db_now(conn: psycopg.Connection) -> datetime:
    now: datetime = execute(conn, "SELECT now()", {})[1][0][0]
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
        execute(conn, Q.schedules_unpublish, {"types": unscheduled,
                                              "published_by": published_by})
    if not rows:
        return 0
    return len(execute(conn, Q.schedules_publish, {"rows": json.dumps(rows)})[1])


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
            columns, rows = execute(conn, Q.schedules_due,
                                    {"now": now, "limit": DUE_LIMIT, "seen": seen})
            before = len(broken)
            for row in rows:
                s = dict(zip(columns, row, strict=True))
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


def schedule_problem(job_type: str, cron: str, tz: str) -> str | None:
    """Why a stored schedule cannot be run here (its zone or cron expression), or None.

    A row is checked where it is read: the worker that published it may have had another
    tzdata or cronsim than this process."""
    try:
        check_schedule(job_type, cron, tz)
    except ValueError as exc:
        return str(exc)
    return None


def _run_schedule(conn: psycopg.Connection, registry: Registry, s: dict[str, Any], now: datetime,
                  enqueued: dict[str, list[int]]) -> str | None:
    """Enqueue one due schedule's ticks and advance it, in a savepoint of its own; the
    reason when its row cannot be run (its enqueues are then undone, the others kept)."""
    try:
        with conn.transaction():
            ticks = _ticks(s, now)
            ids = [enqueue(conn, s["type"], s["payload"], run_at=tick,
                           idempotency_key=tick_key(s["type"], tick), registry=registry)
                   for tick in ticks]
            advanced = execute(conn, Q.schedule_advance, {
                "type": s["type"], "expected": s["next_run_at"],
                "next_run_at": next_tick(s["cron"], s["timezone"], ticks[-1]),
                "last_run_at": ticks[-1], "last_job_id": ids[-1]})[1]
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
