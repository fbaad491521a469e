"""The execution history in weekly partitions (migration 0066): where rows go, how weeks
are made ahead and dropped when old, and the migration of a filled table.

The tests that drop or make weeks run on a database of their own: the shared test
database must keep its weeks for every other test.
"""

from __future__ import annotations

import uuid
from datetime import UTC, timedelta

import psycopg
import pytest

from jobwarden import Registry, job
from jobwarden.worker.duties import partitions, retention
from jobwarden.worker.store.db import migrate
from tests.helpers import running_worker, wait_for

DAY = 86400.0


def weeks(conn) -> list[tuple[str, bool]]:
    return [(name, is_default) for name, _, _, is_default in conn.execute(
        "SELECT * FROM jobwarden_execution_partitions()")]


@pytest.fixture
def own_db(empty_database):
    migrate(empty_database)
    return empty_database


def test_a_finished_execution_is_written_into_its_weeks_partition(clean_db):
    reg = Registry()

    @job("noop", registry=reg)
    def noop(ctx, payload):
        return None

    with psycopg.connect(clean_db, autocommit=True) as conn:
        job_id = conn.execute("INSERT INTO background_jobs (type, payload) VALUES ('noop', '{}')"
                              " RETURNING id").fetchone()[0]
        with running_worker(reg, clean_db):
            wait_for(lambda: conn.execute("SELECT status FROM background_jobs WHERE id = %s",
                                          (job_id,)).fetchone()[0] == "completed")
        where, week = conn.execute("""
            SELECT e.tableoid::regclass::text,
                   'job_executions_w' || to_char(date_trunc('week', e.finished_at
                                                 AT TIME ZONE 'UTC'), 'YYYYMMDD')
            FROM job_executions e WHERE e.job_id = %s""", (job_id,)).fetchone()
    assert where == week  # this week's partition, not the default


def test_weeks_are_made_ahead_once_and_a_new_database_starts_this_week(own_db):
    with psycopg.connect(own_db, autocommit=True) as conn:
        made = weeks(conn)
        this_week = conn.execute("SELECT 'job_executions_w' || to_char(date_trunc('week', "
                                 "now() AT TIME ZONE 'UTC'), 'YYYYMMDD')").fetchone()[0]
        ranges = [name for name, is_default in made if not is_default]
        assert ranges[0] == this_week and len(ranges) >= 5  # this week and 4 ahead
        assert [name for name, is_default in made if is_default] == ["job_executions_before"]
        assert partitions.ensure(conn) == []  # nothing missing: nothing made
        more = partitions.ensure(conn, weeks=8)
        assert len(more) == 8 - (len(ranges) - 1) and more[0] not in ranges


def test_retention_drops_the_weeks_past_the_historys_age_and_keeps_the_rest(own_db):
    with psycopg.connect(own_db, autocommit=True) as conn:
        # A week ten weeks back (made by hand: the runtime only makes weeks from now on),
        # with one execution in it, and one execution of this week.
        old = conn.execute("SELECT date_trunc('week', (now() - interval '70 days') AT TIME "
                           "ZONE 'UTC') AT TIME ZONE 'UTC'").fetchone()[0]
        name = f"job_executions_w{old.astimezone(UTC):%Y%m%d}"
        conn.execute(f"CREATE TABLE {name} PARTITION OF job_executions FOR VALUES FROM "
                     f"('{old.isoformat()}') TO ('{old.isoformat()}'::timestamptz + "
                     f"interval '7 days')")
        job = conn.execute("INSERT INTO background_jobs (type, payload, status) VALUES "
                           "('noop', '{}', 'completed') RETURNING id").fetchone()[0]
        # The old execution is placed inside the week made above, counted from its
        # Monday: "now() minus so many days" falls in the week after it on some weekdays.
        for finished in (old + timedelta(days=2), conn.execute("SELECT now()").fetchone()[0]):
            conn.execute("""
                INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                    worker_id, scheduled_at, started_at, finished_at, outcome)
                VALUES (%(job)s, %(eid)s, 1, 'default', 'noop', 'w', %(at)s, %(at)s, %(at)s,
                        'completed')""", {"job": job, "eid": uuid.uuid4(), "at": finished})
        assert conn.execute("SELECT count(*) FROM " + name).fetchone()[0] == 1
        before = weeks(conn)
        # History kept 30 days, but the job is unknown: its attempts are the evidence its
        # reconciliation needs, so its week stays.
        conn.execute("UPDATE background_jobs SET status = 'unknown'")
        policy = retention.RetentionPolicy.parse("skipped=30d,cancelled=30d,failed=30d,"
                                                  "executions=30d")
        assert retention.run_once(conn, policy) is not None
        assert weeks(conn) == before
        # Completed today, the job is kept (14 days for completed), and so is every
        # attempt of it: its week too.
        conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now()")
        assert retention.run_once(conn, policy) is not None
        assert weeks(conn) == before
        # Once retention has deleted the job, the old week goes; this week, those ahead
        # and the default partition (the table from before, never dropped) stay.
        conn.execute("UPDATE background_jobs SET completed_at = now() - interval '15 days'")
        assert retention.run_once(conn, policy) is not None
        after = weeks(conn)
        assert {n for n, _ in before} - {n for n, _ in after} == {name}
        assert ("job_executions_before", True) in after
        assert conn.execute("SELECT count(*) FROM job_executions").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0] == 0


def test_the_historys_age_defaults_to_the_longest_job_age():
    assert retention.RetentionPolicy().history_age == 90 * DAY
    assert retention.RetentionPolicy.parse("failed=180d").history_age == 180 * DAY
    assert retention.RetentionPolicy.parse(
        "completed=7d,skipped=7d,cancelled=7d,failed=7d,executions=7d").history_age == 7 * DAY
    with pytest.raises(ValueError, match="executions"):
        retention.RetentionPolicy.parse("history=7d")


def test_migrating_a_filled_history_keeps_every_row_and_its_ids_go_on(empty_database):
    migrate(empty_database, "0065")
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("""
            INSERT INTO background_jobs (type, payload, status)
            SELECT 'noop', '{}', 'completed' FROM generate_series(1, 1000)""")
        conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                worker_id, scheduled_at, started_at, finished_at, outcome)
            SELECT j.id, gen_random_uuid(), 1, 'default', 'noop', 'w',
                   now() - make_interval(days => (j.id % 60)::int), now() - make_interval(days =>
                   (j.id % 60)::int), now() - make_interval(days => (j.id % 60)::int), 'completed'
            FROM background_jobs j""")
        # An execution an older runtime opened at its claim, still running.
        open_id = uuid.uuid4()
        conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                worker_id, scheduled_at, started_at)
            VALUES ((SELECT min(id) FROM background_jobs), %s, 2, 'default', 'noop', 'w',
                    now(), now())""", (open_id,))
        before = conn.execute("SELECT count(*), max(id), sum(job_id) FROM job_executions"
                              ).fetchone()
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        assert conn.execute("SELECT count(*), max(id), sum(job_id) FROM job_executions"
                            ).fetchone() == before
        kind, default = conn.execute("""
            SELECT c.relkind, pg_get_expr(d.relpartbound, d.oid)
            FROM pg_class c, pg_class d
            WHERE c.relname = 'job_executions' AND d.relname = 'job_executions_before'
        """).fetchone()
        assert (kind, default) == ("p", "DEFAULT")
        # A filled table's weeks start next week at the earliest: this week's rows go on
        # into the default while the migration's first step ran.
        first = conn.execute("SELECT min(week_start) > now() FROM "
                             "jobwarden_execution_partitions()").fetchone()[0]
        assert first
        # The ids go on from the old table's, never repeating one.
        new_id = conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                worker_id, scheduled_at, started_at, finished_at, outcome)
            VALUES ((SELECT min(id) FROM background_jobs), gen_random_uuid(), 3, 'default',
                    'noop', 'w', now(), now(), now() + interval '8 days', 'completed')
            RETURNING id, tableoid::regclass::text""").fetchone()
        assert new_id[0] > before[1] and new_id[1].startswith("job_executions_w")
        # The open row closes where it is found (the default partition) and stays one row.
        conn.execute("UPDATE job_executions SET finished_at = now(), outcome = 'completed' "
                     "WHERE execution_id = %s AND finished_at IS NULL", (open_id,))
        assert conn.execute("SELECT count(*) FROM job_executions WHERE execution_id = %s",
                            (open_id,)).fetchone()[0] == 1
        # The job page's view still shows the old history.
        assert conn.execute("SELECT count(*) FROM job_executions_all").fetchone()[0] == \
            before[0] + 1


# -- which weeks retention may drop ----------------------------------------------------------

def make_week(conn, days_ago: float):
    """The partition of the UTC week holding `days_ago` days before now (made by hand:
    the runtime only makes weeks from now on); returns (name, week_start, week_end)."""
    start = conn.execute("SELECT date_trunc('week', (now() - make_interval(secs => %s)) AT "
                         "TIME ZONE 'UTC') AT TIME ZONE 'UTC'", [days_ago * DAY]).fetchone()[0]
    name = f"job_executions_w{start.astimezone(UTC):%Y%m%d}"
    conn.execute(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF job_executions FOR VALUES "
                 f"FROM ('{start.isoformat()}') TO ('{start.isoformat()}'::timestamptz + "
                 f"interval '7 days')")
    return name, start, start + timedelta(days=7)


def add_execution(conn, job_id: int, finished, attempt: int = 1,
                  outcome: str = "failed") -> None:
    conn.execute("""
        INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
            scheduled_at, started_at, finished_at, outcome)
        VALUES (%(job)s, %(eid)s, %(attempt)s, 'default', 'noop', 'w', %(at)s, %(at)s, %(at)s,
                %(outcome)s)""", {"job": job_id, "eid": uuid.uuid4(), "attempt": attempt,
                                  "at": finished, "outcome": outcome})


def ago(conn, days: float):
    return conn.execute("SELECT now() - make_interval(secs => %s)", [days * DAY]).fetchone()[0]


def attempts(conn, job_id: int) -> list[int]:
    return [a for (a,) in conn.execute("SELECT attempt FROM job_executions WHERE job_id = %s "
                                       "ORDER BY attempt", [job_id])]


def test_a_job_that_retention_keeps_keeps_every_attempt_however_old_its_week(own_db):
    """The issue's two jobs, retried by an operator weeks after failing: one failed again
    80 days ago (kept 10 more days), one completed 5 days ago. Their first attempts are in
    weeks past the history's 90 days; a week holding only a deleted job's history goes."""
    with psycopg.connect(own_db, autocommit=True) as conn:
        week_a, start_a, _ = make_week(conn, 126)
        week_b, start_b, _ = make_week(conn, 112)
        week_c, start_c, _ = make_week(conn, 98)

        def job(status: str, column: str, days: float) -> int:
            return conn.execute(
                f"INSERT INTO background_jobs (type, payload, status, created_at, {column}) "
                f"VALUES ('noop', '{{}}', %s, now() - interval '130 days', "
                f"now() - make_interval(secs => %s)) RETURNING id",
                [status, days * DAY]).fetchone()[0]

        failed_again = job("failed", "failed_at", 80)
        completed = job("completed", "completed_at", 5)
        gone = job("completed", "completed_at", 100)  # retention deletes it (14 days)
        add_execution(conn, failed_again, start_a + timedelta(days=2))
        add_execution(conn, failed_again, ago(conn, 80), attempt=2)
        add_execution(conn, completed, start_b + timedelta(days=2))
        add_execution(conn, completed, ago(conn, 5), attempt=2, outcome="completed")
        add_execution(conn, gone, start_a + timedelta(days=3), outcome="completed")
        add_execution(conn, gone, start_c + timedelta(days=3), attempt=2, outcome="completed")

        assert retention.run_once(conn, retention.RetentionPolicy()) is not None
        names = {n for n, _ in weeks(conn)}
        assert week_a in names and week_b in names and week_c not in names
        assert attempts(conn, failed_again) == [1, 2]
        assert attempts(conn, completed) == [1, 2]
        # The deleted job's row in a kept week stays with the week (until it goes).
        assert attempts(conn, gone) == [1]
        # Once those jobs are gone too, their weeks follow at the next pass.
        conn.execute("DELETE FROM background_jobs")
        assert sorted(partitions.drop_expired(conn, 90 * DAY)) == sorted([week_a, week_b])


def test_a_week_goes_once_its_end_passes_the_historys_age_not_its_start(own_db):
    """Rows of deleted jobs on both sides of the bound: the week ending just past 30 days
    goes; the week straddling it (its start older, some rows younger) stays."""
    with psycopg.connect(own_db, autocommit=True) as conn:
        bound = ago(conn, 30)
        straddling, start, end = make_week(conn, 30)
        older, older_start, older_end = make_week(conn, 37)
        assert older_end == start and start <= bound < end
        add_execution(conn, 10_000_001, older_end - timedelta(seconds=1))  # older than 30 days
        add_execution(conn, 10_000_002, start + timedelta(seconds=1))  # older than 30 days
        add_execution(conn, 10_000_003, bound + (end - bound) / 2)  # younger than 30 days
        policy = retention.RetentionPolicy.parse("skipped=30d,cancelled=30d,failed=30d,"
                                                  "executions=30d")
        assert retention.run_once(conn, policy) is not None
        names = {n for n, _ in weeks(conn)}
        assert older not in names and straddling in names
        assert conn.execute("SELECT count(*) FROM " + straddling).fetchone()[0] == 2


def test_whether_a_kept_job_holds_a_week_is_read_through_indexes_not_a_scan_of_it(own_db):
    """20,000 rows in an old week and 2,000 live jobs whose ids fall among its jobs' ids:
    the check probes the week's job index per live job, and never reads it whole."""
    with psycopg.connect(own_db, autocommit=True) as conn:
        week, start, _ = make_week(conn, 120)
        conn.execute("""
            INSERT INTO background_jobs (id, type, payload, status, completed_at)
            SELECT g, 'noop', '{}', 'completed', now() FROM generate_series(1, 40000, 20) g""")
        conn.execute("""
            INSERT INTO background_jobs (id, type, payload, status, completed_at)
            SELECT g, 'noop', '{}', 'completed', now()
            FROM generate_series(100001, 140000) g""")
        conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                scheduled_at, started_at, finished_at, outcome)
            SELECT g, gen_random_uuid(), 1, 'default', 'noop', 'w', %(at)s, %(at)s, %(at)s,
                   'completed'
            FROM generate_series(2, 40000, 2) g""", {"at": start + timedelta(days=1)})
        # One live job's attempt, at the top of the range: the probes meet it last.
        add_execution(conn, 39981, start + timedelta(days=2))
        conn.execute(f"ANALYZE background_jobs, {week}")
    # A new session: its counts of scans so far are the check's alone.
    with psycopg.connect(own_db) as conn:
        dropped = [n for (n,) in conn.execute(
            "SELECT * FROM jobwarden_drop_execution_partitions(interval '90 days')")]
        seq, idx = conn.execute("SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables "
                                "WHERE relname = %s", [week]).fetchone()
    assert week not in dropped
    assert seq == 0 and idx > 0
