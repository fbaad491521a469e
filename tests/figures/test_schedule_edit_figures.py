"""The Schedules page's source of each schedule and its next five runs, checked against
`job_schedules` and the zone database directly, never with the console's own query or
the cron module's preview: the source from `declared` and `edited_by`; each run's
instant in order, the first the row's own next tick when it is ahead, its wall-clock
time in the schedule's zone, and the DST mark exactly on days whose offset changes."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import psycopg

from jobwarden.worker.ops import schedule_edits
from jobwarden.worker.ops.schedule_edits import ScheduleEdit
from tests.console_support import login
from tests.figures.conftest import rows
from tests.figures.html_tree import page
from tests.figures.test_page_figures import scheduled  # noqa: F401  (a fixture)

ADMIN = {"actor": "ada", "role": "admin"}


def edited(url: str) -> None:
    """Beside the code's schedules: one overridden in the console (the last Sunday of March
    and of October in Berlin: every tick on a DST day, whatever day the test runs), one
    added in the console."""
    with psycopg.connect(url) as conn:
        assert schedule_edits.edit_schedule(
            conn, "tidy.hourly", 1, ScheduleEdit("30 2 * 3,10 0L", "Europe/Berlin", False, "{}"),
            reason="figures", **ADMIN).ok
        conn.execute("DELETE FROM job_schedules WHERE type = 'report.yearly'")
        assert schedule_edits.add_schedule(
            conn, "report.yearly", ScheduleEdit("15 9 * * 1-5", "Asia/Kolkata", False, "{}"),
            reason="figures", **ADMIN).ok
        conn.commit()


def source_real(declared, edited_by) -> str:
    return "code" if edited_by is None else "override" if declared is not None else "console"


def offset_changes(day: date, zone: ZoneInfo) -> bool:
    start = datetime.combine(day, time(0), zone).utcoffset()
    return start != datetime.combine(day + timedelta(days=1), time(0), zone).utcoffset()


def test_each_schedules_source_and_next_five_runs(client, scheduled):  # noqa: F811
    edited(scheduled.url)
    assert login(client, "ada").status_code == 303
    before = rows(scheduled.url, "SELECT now()")[0][0]
    doc = page(client, "/schedules")
    real = {t: (source_real(d, e), n, z) for t, d, e, n, z in rows(
        scheduled.url, "SELECT type, declared, edited_by, next_run_at, timezone "
                       "FROM job_schedules")}
    shown = {tr["data-schedule"]: tr for tr in doc.having("data-schedule")}
    assert set(shown) == set(real)
    assert {t: tr.one("schedule-source")["data-source"] for t, tr in shown.items()} \
        == {t: r[0] for t, r in real.items()}
    assert {r[0] for r in real.values()} == {"code", "override", "console"}
    marked = 0
    for type_, tr in shown.items():
        source, next_run, zone_name = real[type_]
        zone = ZoneInfo(zone_name)
        ticks = tr.all("preview-tick")
        assert len(ticks) == 5, type_
        instants = [datetime.fromisoformat(t.one(lambda e: e.tag == "time")["datetime"])
                    for t in ticks]
        assert instants == sorted(set(instants)) and instants[0] > before, type_
        if next_run > before:
            assert instants[0] == next_run, type_
        for tick, at in zip(ticks, instants, strict=True):
            local = at.astimezone(zone)
            # the weekday, then the time as every timestamp is shown (zone, then age)
            assert tick.one(lambda e: e.tag == "time").text() == \
                f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"
            assert tick.text().startswith(f"{local:%a} "), tick.text()
            dst = tick.maybe(lambda e: e.attrs.get("data-testid") == "preview-dst")
            assert (dst is not None) == offset_changes(local.date(), zone), (type_, at)
            marked += dst is not None
    assert marked >= 5  # the overridden schedule's five runs, each on a DST day
