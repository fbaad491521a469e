"""Cron maths of periodic jobs: checking an expression, the next and latest tick, a
tick's idempotency key. Stored schedules are run by worker/duties/scheduler.py.

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

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError


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


def schedule_problem(job_type: str, cron: str, tz: str) -> str | None:
    """Why a stored schedule cannot be run here (its zone or cron expression), or None.

    A row is checked where it is read: the worker that published it may have had another
    tzdata or cronsim than this process."""
    try:
        check_schedule(job_type, cron, tz)
    except ValueError as exc:
        return str(exc)
    return None


#: How many ticks a schedule's preview shows (the console's Schedules page).
PREVIEW_TICKS = 5


def check_edit(name: str, cron: str, tz: str, now: datetime) -> None:
    """Raise ValueError (one line) for a schedule an admin may not set in the console: one
    `check_schedule` refuses (the worker's own check: its parser, its zones), one that
    fires more than once a minute (a seconds field naming more than one second), or one
    that never fires."""
    check_schedule(name, cron, tz)
    parsed = CronSim(cron, datetime(2000, 1, 1))
    if len(cron.split()) == 6 and len(parsed.seconds) > 1:
        raise ValueError(f"{name}: {cron!r} fires more than once a minute; a seconds "
                         "field may name one second only")
    try:
        next_tick(cron, tz, now)
    except StopIteration:
        raise ValueError(f"{name}: {cron!r} never fires") from None


@dataclass(frozen=True)
class Tick:
    """One tick of a preview: the instant (UTC), its wall-clock time in the schedule's
    zone, and the offset change on that local day, if any ("UTC+01:00 → UTC+02:00")."""
    at: datetime
    local: datetime
    dst_change: str | None


def preview(cron: str, tz: str, after: datetime, count: int = PREVIEW_TICKS) -> list[Tick]:
    """The next `count` ticks after `after`, as the worker computes them (next_tick), each
    marked when its local day is one whose UTC offset changes (a daylight saving time
    day). Raises as next_tick does: check the schedule first."""
    zone, ticks, at = ZoneInfo(tz), [], after
    for _ in range(count):
        try:
            at = next_tick(cron, tz, at)
        except StopIteration:
            break
        local = at.astimezone(zone)
        ticks.append(Tick(at, local, _offset_change(local.date(), zone)))
    return ticks


def _offset_change(day: date, zone: ZoneInfo) -> str | None:
    """How the zone's UTC offset changes from the start of `day` to the start of the next
    day, or None when it does not."""
    start = datetime.combine(day, time(0), zone).utcoffset()
    end = datetime.combine(day + timedelta(days=1), time(0), zone).utcoffset()
    if start == end or start is None or end is None:
        return None
    return f"UTC{_spell(start)} → UTC{_spell(end)}"


def _spell(offset: timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
