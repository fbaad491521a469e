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

from tests.helpers import running_worker, wait_for
from worker import Registry, job
from worker.duties import partitions, retention
from worker.store.db import migrate

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
        policy = retention.RetentionPolicy.parse("executions=30d")
        assert retention.run_once(conn, policy) is not None
        assert weeks(conn) == before
        # Once the job has finished, the old week goes; this week, those ahead and the
        # default partition (the table from before, never dropped) stay.
        conn.execute("UPDATE background_jobs SET status = 'completed'")
        assert retention.run_once(conn, policy) is not None
        after = weeks(conn)
        assert {n for n, _ in before} - {n for n, _ in after} == {name}
        assert ("job_executions_before", True) in after
        assert conn.execute("SELECT count(*) FROM job_executions").fetchone()[0] == 1
        # The job itself is retention's by its own age (14 days for completed): still here.
        assert conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0] == 1


def test_the_historys_age_defaults_to_the_longest_job_age():
    assert retention.RetentionPolicy().history_age == 90 * DAY
    assert retention.RetentionPolicy.parse("failed=180d").history_age == 180 * DAY
    assert retention.RetentionPolicy.parse("executions=7d").history_age == 7 * DAY
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
