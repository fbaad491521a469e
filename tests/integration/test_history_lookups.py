"""A finished execution is found by its job, never by reading the history (migration
0093: the history indexes only open rows' execution ids). Each statement runs as the
runtime runs it, seven times so that the server may settle on a generic plan, against a
history of 20,000 rows never analyzed; auto_explain reports every plan."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q
from tests.helpers import explained

OLD_JOBS = range(1_000_001, 1_020_001)


@pytest.fixture
def history(explain_db):
    """The plan database with 20,000 finished executions, a day old, and the log lines
    of two of them: one still in the history, one whose row is gone."""
    kept, gone = uuid.uuid4(), uuid.uuid4()
    with psycopg.connect(explain_db, autocommit=True) as conn:
        conn.execute("TRUNCATE job_executions, job_execution_logs")
        conn.execute(
            "INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, "
            "worker_id, scheduled_at, started_at, finished_at, outcome) "
            "SELECT g, CASE WHEN g = %s THEN %s ELSE gen_random_uuid() END, 1, 'default', "
            "'t', 'w', now(), now(), now() - interval '1 day', 'completed' "
            "FROM generate_series(%s, %s) g",
            (OLD_JOBS[0], kept, OLD_JOBS[0], OLD_JOBS[-1]))
        conn.execute(
            "INSERT INTO job_execution_logs (execution_id, job_id, finished_at, lines) "
            "SELECT e.execution_id, e.job_id, e.finished_at, '[]'::jsonb FROM job_executions e "
            "WHERE e.execution_id = %s UNION ALL "
            "SELECT %s, 1, now() - interval '1 day', '[]'", (kept, gone))
    yield explain_db, kept, gone
    with psycopg.connect(explain_db, autocommit=True) as conn:
        conn.execute("TRUNCATE job_executions, job_execution_logs")


def _no_history_scan(plans: list[str]) -> None:
    read = [p for p in plans if "job_executions" in p]
    assert len(read) >= 7, plans
    assert not any("Seq Scan on job_executions" in p for p in read), read


def test_a_refused_outcome_reads_how_its_execution_ended_by_its_job(history):
    url, kept, _ = history
    with psycopg.connect(url, autocommit=True) as conn:
        plans = explained(conn)
        for _ in range(7):
            got = dict(JobStore(conn).rows(Q.execution_outcomes, {
                "job_ids": [OLD_JOBS[0], 5], "execution_ids": [kept, uuid.uuid4()]}))
            assert got == {kept: "completed"}
    _no_history_scan(plans)


def test_log_lines_retention_finds_their_executions_by_their_jobs(history):
    url, kept, gone = history
    with psycopg.connect(url, autocommit=True) as conn:
        plans = explained(conn)
        dropped = [JobStore(conn).one(Q.drop_execution_logs, {"older_than": 3600})[0]
                   for _ in range(7)]
        left = [r[0] for r in conn.execute("SELECT execution_id FROM job_execution_logs")]
    assert dropped == [1, 0, 0, 0, 0, 0, 0]  # the lines whose execution is gone
    assert left == [kept]
    _no_history_scan(plans)
