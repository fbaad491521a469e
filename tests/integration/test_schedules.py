"""Periodic jobs: one job per tick however many workers look, no burst after downtime."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import psycopg
import pytest

from jobwarden import Registry, job
from jobwarden.worker.duties.scheduler import publish, run_once
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops import operations
from tests.helpers import scalar, start_process, stop_processes, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
T0 = datetime(2026, 3, 28, 22, 2, 30, tzinfo=UTC)  # the night before Berlin's DST start


def scheduled(cron="*/5 * * * *", tz="UTC", **options) -> Registry:
    reg = Registry()
    job("report", schedule=cron, schedule_tz=tz, registry=reg, **options)(lambda c, p: None)
    return reg


def published(conn, reg: Registry, now: datetime = T0) -> None:
    publish_job_types(conn, list(reg), published_by="w1")
    publish(conn, reg, "w1", now=now)
    conn.commit()


def jobs(url: str) -> list[tuple]:
    with psycopg.connect(url) as c:
        return c.execute("SELECT available_at, idempotency_key FROM background_jobs "
                         "ORDER BY available_at").fetchall()


def test_a_tick_enqueues_one_job_available_at_the_tick(conn, clean_db):
    published(conn, scheduled())
    assert run_once(conn, scheduled(), now=T0 + timedelta(minutes=1)) == {}  # 22:05 not yet
    ran = run_once(conn, scheduled(), now=T0 + timedelta(minutes=3))
    assert list(ran) == ["report"] and len(ran["report"]) == 1
    assert run_once(conn, scheduled(), now=T0 + timedelta(minutes=4)) == {}  # tick done
    tick = datetime(2026, 3, 28, 22, 5, tzinfo=UTC)
    assert jobs(clean_db) == [(tick, f"schedule:report:{tick.isoformat()}")]
    with psycopg.connect(clean_db) as c:
        row = c.execute("SELECT next_run_at, last_run_at, last_job_id FROM job_schedules").fetchone()
    assert row == (tick + timedelta(minutes=5), tick, ran["report"][0])


def test_after_downtime_one_job_for_the_latest_tick_not_a_burst(conn, clean_db):
    published(conn, scheduled())
    run_once(conn, scheduled(), now=T0 + timedelta(hours=2))
    assert [k for _, k in jobs(clean_db)] == ["schedule:report:2026-03-29T00:00:00+00:00"]


def test_catch_up_enqueues_every_missed_tick(conn, clean_db):
    reg = scheduled(catch_up=True)
    published(conn, reg)
    ran = run_once(conn, reg, now=T0 + timedelta(hours=1))
    assert len(ran["report"]) == 12  # 22:05 ... 23:00
    assert len(jobs(clean_db)) == 12


def test_workers_racing_for_a_tick_enqueue_it_once(conn, clean_db):
    reg = scheduled()
    published(conn, reg)
    for minutes in (3, 8, 13):
        barrier = threading.Barrier(8)

        def race(now=T0 + timedelta(minutes=minutes), barrier=barrier):
            with psycopg.connect(clean_db) as own:
                barrier.wait()
                run_once(own, reg, now=now)

        threads = [threading.Thread(target=race) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert [k[-14:-6] for _, k in jobs(clean_db)] == ["22:05:00", "22:10:00", "22:15:00"]


#: Holds back one session's inserts into background_jobs (by application_name) until the
#: test lets go of an advisory lock: a scheduler stalled between reading a due schedule
#: and enqueueing its tick, as a preempted or paused process would be.
STALL = """
CREATE FUNCTION test_stall_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = 'stalled-scheduler' THEN
        PERFORM pg_advisory_xact_lock_shared(1919);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER test_stall_insert BEFORE INSERT ON background_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION test_stall_insert();
"""


def complete_every_job(url: str) -> None:
    """The tick's job runs and completes, freeing its idempotency key."""
    with psycopg.connect(url) as c:
        c.execute("UPDATE background_jobs SET status = 'completed', completed_at = now()")


def test_a_tick_stays_one_job_when_a_stalled_scheduler_wakes_after_it_completed(
        conn, clean_db):
    # The key dedupes only while its job is live: once the tick's job completed, only the
    # schedule's row lock and its compare-and-set keep a late scheduler from a second job.
    reg = scheduled()
    published(conn, reg)
    now = T0 + timedelta(minutes=3)
    conn.execute(STALL)
    conn.execute("SELECT pg_advisory_lock(1919)")
    conn.commit()
    try:
        with psycopg.connect(clean_db, application_name="stalled-scheduler") as late, \
                ThreadPoolExecutor(max_workers=1) as thread:
            stalled = thread.submit(run_once, late, reg, now=now)
            try:
                wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM pg_stat_activity WHERE "
                                        "application_name = 'stalled-scheduler' AND "
                                        "wait_event = 'advisory'"),
                         message="the late scheduler to stall before its enqueue")
                with psycopg.connect(clean_db) as first:
                    run_once(first, reg, now=now)
                complete_every_job(clean_db)
            finally:
                # Let the late scheduler go whatever happened above: leaving the `with`
                # waits for its thread, which waits for this lock.
                conn.rollback()
                conn.execute("SELECT pg_advisory_unlock(1919)")
                conn.commit()
            outcome = stalled.exception(timeout=30) or stalled.result()
    finally:
        conn.rollback()
        conn.execute("DROP TRIGGER test_stall_insert ON background_jobs; "
                     "DROP FUNCTION test_stall_insert()")
        conn.commit()
    tick = datetime(2026, 3, 28, 22, 5, tzinfo=UTC)
    assert jobs(clean_db) == [(tick, f"schedule:report:{tick.isoformat()}")], outcome
    with psycopg.connect(clean_db) as c:
        assert c.execute("SELECT next_run_at FROM job_schedules").fetchone() == (
            tick + timedelta(minutes=5),)


def test_cron_ticks_follow_the_schedule_time_zone_across_dst(conn, clean_db):
    # 02:30 Berlin does not exist on 2026-03-29: the 01:30 tick is followed by 03:30 local
    reg = scheduled(cron="30 * * * *", tz="Europe/Berlin", catch_up=True)
    published(conn, reg)
    run_once(conn, reg, now=datetime(2026, 3, 29, 1, 45, tzinfo=UTC))
    berlin = ZoneInfo("Europe/Berlin")
    local = [a.astimezone(berlin).strftime("%H:%M %Z") for a, _ in jobs(clean_db)]
    assert local == ["23:30 CET", "00:30 CET", "01:30 CET", "03:30 CEST"]


BERLIN = ZoneInfo("Europe/Berlin")
SPRING_EVE = datetime(2026, 3, 28, 22, 2, 30, tzinfo=UTC)  # 23:02 CET; 02:00-02:59 is lost
FALL_EVE = datetime(2026, 10, 24, 21, 2, 30, tzinfo=UTC)  # 23:02 CEST; 02:00-02:59 twice


def local_jobs(url: str) -> list[str]:
    return [a.astimezone(BERLIN).strftime("%H:%M %Z") for a, _ in jobs(url)]


@pytest.mark.parametrize("catch_up", [False, True])
@pytest.mark.parametrize("cron", ["*/20 2 * * *", "30 2 * * *"])
def test_ticks_of_the_missing_hour_run_once_just_after_it(conn, clean_db, cron, catch_up):
    reg = scheduled(cron=cron, tz="Europe/Berlin", catch_up=catch_up)
    published(conn, reg, now=SPRING_EVE)
    run_once(conn, reg, now=datetime(2026, 3, 29, 1, 30, tzinfo=UTC))  # 03:30 CEST
    assert local_jobs(clean_db) == ["03:00 CEST"]
    with psycopg.connect(clean_db) as c:  # and the next one is tomorrow's
        assert c.execute("SELECT next_run_at FROM job_schedules").fetchone()[0] == \
            datetime(2026, 3, 30, 2, 0 if cron.startswith("*") else 30, tzinfo=BERLIN)


@pytest.mark.parametrize("cron, want", [
    ("*/20 2 * * *", ["02:00 CEST", "02:20 CEST", "02:40 CEST"]),
    ("30 2 * * *", ["02:30 CEST"]),
])
def test_ticks_of_the_repeated_hour_run_once_at_their_first_occurrence(conn, clean_db,
                                                                        cron, want):
    reg = scheduled(cron=cron, tz="Europe/Berlin", catch_up=True)
    published(conn, reg, now=FALL_EVE)
    for minutes in range(0, 5 * 60, 10):  # a worker's passes through the night
        run_once(conn, reg, now=FALL_EVE + timedelta(minutes=minutes))
    assert local_jobs(clean_db) == want


def test_an_every_quarter_hour_schedule_runs_through_both_repeated_hours(conn, clean_db):
    reg = scheduled(cron="*/15 * * * *", tz="Europe/Berlin")
    published(conn, reg, now=datetime(2026, 10, 24, 23, 50, tzinfo=UTC))  # 01:50 CEST
    for minutes in range(0, 140, 5):
        run_once(conn, reg, now=datetime(2026, 10, 24, 23, 50, tzinfo=UTC)
                 + timedelta(minutes=minutes))
    assert local_jobs(clean_db) == [
        "02:00 CEST", "02:15 CEST", "02:30 CEST", "02:45 CEST",
        "02:00 CET", "02:15 CET", "02:30 CET", "02:45 CET", "03:00 CET"]


def test_a_ticks_idempotency_key_is_spelled_in_utc_whatever_the_zone(conn, clean_db):
    # the first tick comes back from next_run_at, the others from the cron expression
    reg = scheduled(cron="0 * * * *", tz="Europe/Berlin", catch_up=True)
    published(conn, reg, now=SPRING_EVE)
    conn.execute("SET TIME ZONE 'America/New_York'")  # what next_run_at comes back in
    conn.commit()
    run_once(conn, reg, now=datetime(2026, 3, 29, 2, 30, tzinfo=UTC))
    assert [k for _, k in jobs(clean_db)] == [
        f"schedule:report:2026-03-{day}T{hour}:00:00+00:00"
        for day, hour in (("28", "23"), ("29", "00"), ("29", "01"), ("29", "02"))]


def test_a_tick_enqueued_twice_is_one_job_whatever_zone_each_session_reads_it_in(
        conn, clean_db):
    # The key is the last guard of a tick (behind the row lock and the compare-and-set):
    # the tick read back from next_run_at by sessions in two time zones must dedupe.
    reg = scheduled(catch_up=True)  # catch-up's first tick is next_run_at as read
    published(conn, reg)
    now = T0 + timedelta(minutes=3)
    conn.execute("SET TIME ZONE 'America/New_York'")
    conn.commit()
    first = run_once(conn, reg, now=now)["report"]
    # As if the advance had been lost: the schedule is back at the tick just enqueued.
    conn.execute("UPDATE job_schedules SET next_run_at = %s",
                 [datetime(2026, 3, 28, 22, 5, tzinfo=UTC)])
    conn.commit()
    with psycopg.connect(clean_db) as tokyo:
        tokyo.execute("SET TIME ZONE 'Asia/Tokyo'")
        again = run_once(tokyo, reg, now=now)["report"]
    assert again == first and len(jobs(clean_db)) == 1


def test_a_paused_schedule_enqueues_nothing_and_resumes_without_a_burst(conn, clean_db):
    reg = scheduled()
    published(conn, reg)
    who = {"actor": "ann", "role": "operator", "reason": "provider maintenance"}
    assert operations.pause_schedule(conn, "report", **who).ok
    conn.commit()
    assert run_once(conn, reg, now=T0 + timedelta(hours=3)) == {}
    assert not operations.pause_schedule(conn, "report", **who).ok  # already paused
    assert operations.resume_schedule(conn, "report", **who).ok
    conn.commit()
    assert scalar(clean_db, "SELECT array_agg(action ORDER BY id) FROM job_audit") == \
        ["pause_schedule", "resume_schedule"]
    # resumed at the database's now: its next tick lies ahead, nothing is due at once
    assert scalar(clean_db, "SELECT next_run_at > now() FROM job_schedules") is True


@pytest.mark.parametrize("options, error", [
    ({"cron": "every minute"}, "report: invalid schedule 'every minute'"),
    ({"cron": "61 * * * *"}, "report: invalid schedule"),
    ({"tz": "Mars/Olympus"}, "report: unknown schedule_tz 'Mars/Olympus'"),
])
def test_a_bad_schedule_is_refused_when_declared(options, error):
    with pytest.raises(ValueError, match=error):
        scheduled(**options)


def test_several_worker_processes_run_a_due_tick_once(conn, clean_db):
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_DUTY_INTERVAL": "0.2"}
    procs = [start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker", "--app",
         "tests.apps.schedule_app", "--poll-interval", "0.2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(3)]
    try:
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_schedules") == 1,
                 timeout=60, message="the schedule to be published")
        # make a tick due now instead of waiting for New Year
        with psycopg.connect(clean_db) as c:
            c.execute("UPDATE job_schedules SET next_run_at = now() - interval '1 second'")
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                          "WHERE status = 'completed'") == 1
                 and scalar(clean_db, "SELECT next_run_at > now() FROM job_schedules"),
                 timeout=60, message="the tick's job to run")
        # one more look, as a fourth worker would: the tick is taken, nothing is due
        assert run_once(conn, Registry()) == {}
        # Registered, so each handles the SIGTERM below: on a busy machine the tick can run
        # before the last one has started, and a stop that came sooner killed it.
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_workers") >= 3,
                 timeout=60, message="the three workers to register")
    finally:
        errors = [err.decode()[-2000:] for _, err in stop_processes(procs, signal.SIGTERM)]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 1


def break_schedule(url: str, job_type: str, *, cron: str = "0 3 * * *", tz: str = "UTC",
                   due: datetime | None = None) -> None:
    """A row no worker can read (another tzdata, a newer cron dialect), due a day ago."""
    with psycopg.connect(url) as c:
        c.execute("INSERT INTO job_schedules (type, cron, timezone, next_run_at, published_by) "
                  "VALUES (%s, %s, %s, coalesce(%s, now()) - interval '1 day', 'w0')",
                  (job_type, cron, tz, due))


def test_a_broken_schedule_is_logged_once_per_pass_and_the_good_one_still_fires(
        conn, clean_db, caplog):
    reg = scheduled()
    published(conn, reg)
    break_schedule(clean_db, "on_mars", tz="Mars/Olympus", due=T0)
    break_schedule(clean_db, "bad_cron", cron="61 * * * *", due=T0)
    with caplog.at_level("WARNING", logger="jobwarden.scheduler"):
        ran = run_once(conn, reg, now=T0 + timedelta(minutes=3))
        run_once(conn, reg, now=T0 + timedelta(minutes=4))  # a second pass: one line more
    assert list(ran) == ["report"] and len(jobs(clean_db)) == 1
    broken = [r for r in caplog.records if getattr(r, "action", None) == "schedules_broken"]
    assert len(broken) == 2, [r.getMessage() for r in caplog.records]
    assert broken[0].count == 2 and sorted(broken[0].schedules) == ["bad_cron", "on_mars"]
    assert "Mars/Olympus" in broken[0].getMessage() and "61 * * * *" in broken[0].getMessage()
    # skipped, not advanced: fixed (a tzdata update, a republish), it runs again
    assert scalar(clean_db, "SELECT count(*) FROM job_schedules WHERE next_run_at < %s",
                  (T0,)) == 2


def test_broken_schedules_filling_a_whole_batch_do_not_starve_a_good_one(conn, clean_db):
    reg = scheduled()
    published(conn, reg)
    with psycopg.connect(clean_db) as c:
        c.execute("INSERT INTO job_schedules (type, cron, timezone, next_run_at, published_by) "
                  "SELECT 'broken_' || i, '0 3 * * *', 'Mars/Olympus', "
                  "%s::timestamptz - interval '1 day', 'w0' FROM generate_series(1, 60) i", (T0,))
    ran = run_once(conn, reg, now=T0 + timedelta(minutes=3))
    assert list(ran) == ["report"]


def test_a_worker_process_keeps_firing_good_schedules_beside_a_broken_row(conn, clean_db):
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_DUTY_INTERVAL": "0.2"}
    proc = start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-format", "json", "--log-level", "WARNING",
         "worker", "--app", "tests.apps.schedule_app", "--poll-interval", "0.2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_schedules") == 1,
                 timeout=60, message="the schedule to be published")
        break_schedule(clean_db, "on_mars", tz="Mars/Olympus")
        with psycopg.connect(clean_db) as c:
            c.execute("UPDATE job_schedules SET next_run_at = now() - interval '1 second' "
                      "WHERE type = 'tick'")
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                          "WHERE status = 'completed'") == 1,
                 timeout=60, message="the good schedule's job to run")
    finally:
        ((_, err),) = stop_processes([proc], signal.SIGTERM)
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    broken = [line for line in lines if line.get("action") == "schedules_broken"]
    assert broken and broken[0]["schedules"] == ["on_mars"], lines[-5:]
    assert not [line for line in lines if line.get("action") == "duty_failed"]
