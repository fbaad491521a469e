"""A schedule's ticks on the days its time zone changes clock (Europe/Berlin, 2026).

Spring forward, 29 March: at 01:00 UTC the clock jumps from 02:00 CET to 03:00 CEST, so
02:00-02:59 does not exist. Fall back, 25 October: at 01:00 UTC it goes from 03:00 CEST
back to 02:00 CET, so 02:00-02:59 happens twice (first CEST, then CET).

The rule (docs/guide/reference.md, "Schedules and daylight saving time"): a tick whose
wall-clock time does not exist runs once, at the first instant after the gap; one that
exists twice runs once, at its first occurrence. Expressions whose hour field names every
hour (`0 * * * *`, `*/15 * * * *`) measure elapsed time instead: each hour that really
passes gets its ticks, so the repeated hour runs twice and the missing one not at all.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from jobwarden.worker.jobs.cron import latest_tick, next_tick

BERLIN = ZoneInfo("Europe/Berlin")
# from local midnight to 05:00 on each transition day
SPRING = (datetime(2026, 3, 28, 23, 0, tzinfo=UTC), datetime(2026, 3, 29, 3, 0, tzinfo=UTC))
FALL = (datetime(2026, 10, 24, 22, 0, tzinfo=UTC), datetime(2026, 10, 25, 4, 0, tzinfo=UTC))


def ticks(cron: str, window: tuple[datetime, datetime], tz: str = "Europe/Berlin") -> list:
    """Every tick after the window's start up to its end, one after the other, in UTC:
    two aware datetimes of one zone compare by wall clock, blind to the repeated hour."""
    start, end = window
    found = [next_tick(cron, tz, start).astimezone(UTC)]
    while (following := next_tick(cron, tz, found[-1]).astimezone(UTC)) <= end:
        found.append(following)
    return [t for t in found if t <= end]


def local(instants) -> list[str]:
    return [t.astimezone(BERLIN).strftime("%H:%M %Z") for t in instants]


def every(minutes: int, start: str, end: str, zone: str) -> list[str]:
    """The wall-clock times from start to end (HH:MM) every `minutes`, in one zone."""
    t, stop, out = datetime.strptime(start, "%H:%M"), datetime.strptime(end, "%H:%M"), []
    while t <= stop:
        out.append(f"{t:%H:%M} {zone}")
        t += timedelta(minutes=minutes)
    return out


def test_ticks_in_the_missing_hour_run_once_at_the_first_instant_after_it():
    assert local(ticks("*/20 2 * * *", SPRING)) == ["03:00 CEST"]
    assert local(ticks("30 2 * * *", SPRING)) == ["03:00 CEST"]
    assert local(ticks("0,30 2 * * *", SPRING)) == ["03:00 CEST"]


def test_a_missing_tick_and_a_real_one_at_the_end_of_the_gap_are_one_run():
    assert local(ticks("0 2-3 * * *", SPRING)) == ["03:00 CEST"]
    assert local(ticks("*/20 1-3 * * *", SPRING)) == [
        "01:00 CET", "01:20 CET", "01:40 CET", "03:00 CEST", "03:20 CEST", "03:40 CEST"]


def test_ticks_in_the_repeated_hour_run_once_at_their_first_occurrence():
    assert local(ticks("*/20 2 * * *", FALL)) == ["02:00 CEST", "02:20 CEST", "02:40 CEST"]
    assert local(ticks("30 2 * * *", FALL)) == ["02:30 CEST"]
    assert local(ticks("*/20 1-3 * * *", FALL)) == [
        "01:00 CEST", "01:20 CEST", "01:40 CEST", "02:00 CEST", "02:20 CEST", "02:40 CEST",
        "03:00 CET", "03:20 CET", "03:40 CET"]


def test_hourly_schedules_skip_the_missing_hour_and_keep_their_interval():
    assert local(ticks("0 * * * *", SPRING)) == [
        "01:00 CET", "03:00 CEST", "04:00 CEST", "05:00 CEST"]
    assert local(ticks("*/15 * * * *", SPRING)) == (
        every(15, "00:15", "01:45", "CET") + every(15, "03:00", "05:00", "CEST"))


def test_hourly_schedules_run_in_both_repeated_hours():
    assert local(ticks("0 * * * *", FALL)) == [
        "01:00 CEST", "02:00 CEST", "02:00 CET", "03:00 CET", "04:00 CET", "05:00 CET"]
    assert local(ticks("*/15 * * * *", FALL)) == (
        every(15, "00:15", "02:45", "CEST") + every(15, "02:00", "05:00", "CET"))


def test_elapsed_time_schedules_tick_at_equal_intervals_across_both_transitions():
    for window in (SPRING, FALL):
        found = ticks("*/15 * * * *", window)
        assert {b - a for a, b in pairwise(found)} == {timedelta(minutes=15)}


@pytest.mark.parametrize("hours", ["*", "*/1", "0-23"])
def test_an_hour_field_naming_every_hour_is_an_elapsed_time_schedule(hours):
    assert local(ticks(f"0 {hours} * * *", FALL)) == local(ticks("0 * * * *", FALL))
    assert local(ticks(f"0 {hours} * * *", SPRING)) == local(ticks("0 * * * *", SPRING))


def test_a_step_over_the_hours_names_hours_and_keeps_to_the_wall_clock():
    assert local(ticks("0 */2 * * *", SPRING)) == ["03:00 CEST", "04:00 CEST"]
    assert local(ticks("0 */2 * * *", FALL)) == ["02:00 CEST", "04:00 CET"]


def test_where_the_clock_moves_half_an_hour_an_hourly_tick_in_the_gap_is_skipped():
    # Lord Howe Island, 4 October 2026: 02:00 (+10:30) becomes 02:30 (+11)
    howe = ZoneInfo("Australia/Lord_Howe")
    night = (datetime(2026, 10, 3, 13, 0, tzinfo=UTC), datetime(2026, 10, 3, 18, 0, tzinfo=UTC))
    found = ticks("0 * * * *", night, tz="Australia/Lord_Howe")
    assert [t.astimezone(howe).strftime("%H:%M") for t in found] == [
        "00:00", "01:00", "03:00", "04:00", "05:00"]
    assert found[2] - found[1] == timedelta(minutes=90)


CRONS = ["*/20 2 * * *", "30 2 * * *", "0 * * * *", "*/15 * * * *", "0 2-3 * * *",
         "*/20 1-3 * * *", "0 0-23 * * *", "15 3 * * *"]


@pytest.mark.parametrize("window", [SPRING, FALL], ids=["spring", "fall"])
@pytest.mark.parametrize("cron", CRONS)
def test_latest_tick_is_the_last_of_the_enumerated_ticks_at_every_minute(cron, window):
    start, end = window
    known = ticks(cron, (start - timedelta(days=2), end))
    floor = start - timedelta(days=3)
    minute = start
    while minute <= end:
        for at in (minute, minute + timedelta(seconds=7)):  # on a tick, and just after
            want = max(t for t in known if t <= at)
            assert latest_tick(cron, "Europe/Berlin", at, floor) == want, at
        minute += timedelta(minutes=1)


@pytest.mark.parametrize("window", [SPRING, FALL], ids=["spring", "fall"])
@pytest.mark.parametrize("cron", CRONS)
def test_next_tick_from_any_instant_is_the_first_enumerated_tick_after_it(cron, window):
    start, end = window
    known = ticks(cron, (start - timedelta(days=1), end + timedelta(days=2)))
    at = start
    while at <= end:
        assert next_tick(cron, "Europe/Berlin", at) == min(t for t in known if t > at), at
        at += timedelta(minutes=5)


def test_every_tick_is_an_instant_of_its_own_across_a_whole_year():
    year = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    for cron, per_day in (("*/20 2 * * *", 3), ("30 2 * * *", 1)):
        found = ticks(cron, year)
        assert len(found) == len(set(found)) == 365 * per_day - (per_day - 1)


def test_a_zone_without_daylight_saving_is_plain_cron():
    assert [t.strftime("%H:%M") for t in ticks("*/20 2 * * *", SPRING, tz="UTC")] == [
        "02:00", "02:20", "02:40"]
