"""The outcome rollups' shards (migration 0092): two writers of outcomes never wait for
each other on a rollup row, the fold gathers past minutes into shard 0, and a downgrade
gathers every shard back into one row a key."""

from __future__ import annotations

import psycopg
import pytest

from jobwarden.worker.store.db import downgrade, migrate

# A wait the old rows made certain (the first writer never commits while the second
# runs): a lock wait is reported as an error, not timed.
NO_WAIT = "SET lock_timeout = '3s'"


def _running_job(conn, job_type: str) -> int:
    return conn.execute(
        "INSERT INTO background_jobs (queue, type, payload, status, attempts, execution_id, "
        "worker_id, started_at) VALUES ('q', %s, '{}', 'running', 1, gen_random_uuid(), "
        "'w', now()) RETURNING id", (job_type,)).fetchone()[0]


def _finish(conn, job_id: int) -> None:
    """What a finish writes into both rollups: the job to completed (job_minute_counts)
    and its execution's history row (job_timings)."""
    conn.execute(
        "WITH job AS (UPDATE background_jobs SET status = 'completed', completed_at = now() "
        "             WHERE id = %s AND status = 'running' RETURNING *) "
        "INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id, "
        "                            scheduled_at, started_at, finished_at, outcome, "
        "                            duration_ms) "
        "SELECT id, execution_id, attempts, queue, type, worker_id, available_at, "
        "       started_at, now(), 'completed', 1.5 FROM job", (job_id,))


def test_two_writers_of_one_type_and_minute_never_wait_for_each_other(conn, clean_db):
    first, second = _running_job(conn, "t"), _running_job(conn, "t")
    conn.commit()
    _finish(conn, first)  # left open: its rollup rows stay locked until it commits
    with psycopg.connect(clean_db) as other:
        other.execute(NO_WAIT)
        _finish(other, second)  # LockNotAvailable when both add to one row
        other.commit()
    conn.commit()
    assert conn.execute("SELECT sum(jobs) FROM job_minute_counts "
                        "WHERE type = 't' AND outcome = 'completed'").fetchone()[0] == 2
    assert conn.execute("SELECT count(DISTINCT shard) FROM job_minute_counts").fetchone()[0] == 2
    assert conn.execute("SELECT sum(executions) FROM job_timings "
                        "WHERE type = 't' AND measure = 'run'").fetchone()[0] == 2
    # One transaction's two triggers share its shard.
    assert conn.execute("SELECT count(*) FROM (SELECT shard FROM job_minute_counts "
                        "EXCEPT SELECT shard FROM job_timings) x").fetchone()[0] == 0


def test_open_transactions_hold_distinct_shards_and_a_seventeenth_shares(clean_db):
    conns = [psycopg.connect(clean_db) for _ in range(17)]
    try:
        shards = [c.execute("SELECT jobwarden_rollup_shard()").fetchone()[0] for c in conns]
        assert sorted(shards[:16]) == list(range(1, 17))
        again = [c.execute("SELECT jobwarden_rollup_shard()").fetchone()[0] for c in conns[:16]]
        assert again == shards[:16]
        # All 16 held: the pid's own shard, whose rows it then waits for.
        pid = conns[16].info.backend_pid
        assert shards[16] == 1 + pid % 16
        conns[0].commit()  # a shard freed is taken again
        assert conns[0].execute("SELECT jobwarden_rollup_shard()").fetchone()[0] in range(1, 17)
    finally:
        for c in conns:
            c.close()


def _minute_rows(conn) -> list[tuple]:
    return conn.execute(
        "SELECT (date_trunc('minute', now()) - minute)::text, shard, jobs "
        "FROM job_minute_counts ORDER BY minute, shard").fetchall()


def test_the_fold_gathers_the_last_hours_past_minutes_into_shard_zero(conn, clean_db):
    # One transaction: its now() is the fold's, whatever minute the clock turns.
    for ago, shard, jobs in [("02:00:00", 3, 1),    # older than the hour: left
                             ("00:10:00", 0, 1),    # gathered: 1 + 2 + 4
                             ("00:10:00", 3, 2),
                             ("00:10:00", 7, 4),
                             ("00:02:00", 5, 8),    # the earliest minute gathered
                             ("00:01:00", 5, 16),   # the last minute: its writer may add
                             ("00:00:00", 6, 32)]:  # the current minute
        conn.execute("INSERT INTO job_minute_counts (minute, queue, type, outcome, jobs, shard) "
                     "VALUES (date_trunc('minute', now()) - %s::interval, 'q', 't', "
                     "'completed', %s, %s)", (ago, jobs, shard))
    for ago, shard, executions, raised, max_ms in [
            ("00:15:00", 2, 1, 0, 5.0),   # gathered
            ("00:15:00", 4, 2, 1, 9.0),
            ("00:10:00", 4, 1, 1, 3.0),   # the earliest period gathered
            ("00:05:00", 4, 1, 0, 2.0),   # the period before the current: left
            ("00:00:00", 4, 1, 0, 1.0)]:  # the current period
        conn.execute("INSERT INTO job_timings (period, queue, type, measure, bucket, "
                     "executions, raised, max_ms, shard) VALUES ("
                     "jobwarden_timing_period(now()) - %s::interval, 'q', 't', 'run', 3, "
                     "%s, %s, %s, %s)", (ago, executions, raised, max_ms, shard))
    conn.execute("SELECT jobwarden_rollup_fold()")
    assert _minute_rows(conn) == [("02:00:00", 3, 1), ("00:10:00", 0, 7), ("00:02:00", 0, 8),
                                  ("00:01:00", 5, 16), ("00:00:00", 6, 32)]
    timings = conn.execute(
        "SELECT (jobwarden_timing_period(now()) - period)::text, shard, executions, raised, "
        "max_ms FROM job_timings ORDER BY period, shard").fetchall()
    assert timings == [("00:15:00", 0, 3, 1, 9.0), ("00:10:00", 0, 1, 1, 3.0),
                       ("00:05:00", 4, 1, 0, 2.0), ("00:00:00", 4, 1, 0, 1.0)]
    conn.commit()


@pytest.mark.parametrize("table", ["job_minute_counts", "job_timings"])
def test_a_downgrade_gathers_the_shards_into_one_row_a_key(empty_database, table):
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        for shard, n, ms in [(0, 1, 4.0), (3, 2, 8.0), (9, 4, 2.0)]:
            conn.execute("INSERT INTO job_minute_counts (minute, queue, type, outcome, jobs, "
                         "shard) VALUES ('2026-12-07 10:00+00', 'q', 't', 'completed', %s, %s)",
                         (n, shard))
            conn.execute("INSERT INTO job_timings (period, queue, type, measure, bucket, "
                         "executions, raised, max_ms, shard) VALUES ('2026-12-07 10:00+00', "
                         "'q', 't', 'run', 3, %s, %s, %s, %s)", (n, n - 1, ms, shard))
    downgrade(empty_database, "0091")
    with psycopg.connect(empty_database) as conn:
        if table == "job_minute_counts":
            assert conn.execute("SELECT jobs FROM job_minute_counts").fetchall() == [(7,)]
        else:
            assert conn.execute("SELECT executions, raised, max_ms FROM job_timings"
                                ).fetchall() == [(7, 4, 8.0)]
    migrate(empty_database)
