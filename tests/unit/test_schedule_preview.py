"""A schedule's preview (the console's next five runs) and the console's stricter check of
an edited schedule (worker/jobs/cron.py): the ticks the worker would run, DST days marked;
what the worker refuses refused, plus more than one tick a minute and never a tick."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobwarden.worker.jobs.cron import check_edit, next_tick, preview

SPRING = datetime(2026, 3, 27, tzinfo=UTC)  # two days before Berlin springs forward


def test_the_preview_is_the_workers_ticks_with_the_dst_day_marked():
    ticks = preview("30 2 * * *", "Europe/Berlin", SPRING)
    assert [t.local.strftime("%m-%d %H:%M %Z") for t in ticks] == [
        "03-27 02:30 CET", "03-28 02:30 CET", "03-29 03:00 CEST", "03-30 02:30 CEST",
        "03-31 02:30 CEST"]
    assert [t.dst_change for t in ticks] == [None, None, "UTC+01:00 → UTC+02:00", None, None]
    following = SPRING
    for tick in ticks:  # the same instants the scheduler enqueues
        following = next_tick("30 2 * * *", "Europe/Berlin", following)
        assert tick.at == following


def test_a_fall_back_day_and_a_zone_west_of_utc():
    ticks = preview("0 12 * * *", "America/New_York", datetime(2026, 10, 31, tzinfo=UTC), 3)
    assert [t.dst_change for t in ticks] == [None, "UTC-04:00 → UTC-05:00", None]
    assert preview("0 12 * * *", "UTC", SPRING)[0].dst_change is None


@pytest.mark.parametrize(("cron", "tz", "said"), [
    ("* * * * * *", "UTC", "fires more than once a minute"),
    ("0,30 * * * * *", "UTC", "fires more than once a minute"),
    ("0 0 30 2 *", "UTC", "invalid schedule"),
    ("0 3 * * *", "../../etc", "unknown schedule_tz '../../etc'"),
    ("0 3 * * *", "Europe/../../../etc/passwd", "unknown schedule_tz"),
])
def test_the_console_refuses_what_the_worker_refuses_and_more(cron, tz, said):
    with pytest.raises(ValueError, match="^report: ") as refused:
        check_edit("report", cron, tz, SPRING)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_seconds_field_naming_one_second_is_once_a_minute():
    check_edit("report", "30 * * * * *", "UTC", SPRING)
    check_edit("report", "*/5 * * * *", "Asia/Kolkata", SPRING)
