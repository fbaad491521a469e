"""The update trigger's plans stay fit for a batch however many rows its session's first
statement held (migrations 0069 and 0070).

PL/pgSQL plans the trigger's statements once per session, estimating each transition
table by the rows it holds at that first firing. A worker that starts idle claims one job
at a time, and its sessions used to keep a nested loop for the join of the old and new
rows: for a later batch of 200 that compared 200 × 200 rows, and the worker drained a
backlog at less than half the rate of one started on it. A claim's count now reads each
transition table once, with no join (0070); the outcome writes' statement joins them by
hash (0069). Here a session runs one job's statement first, then 200 jobs', and
auto_explain reports the trigger's plans to the client.
"""

from __future__ import annotations

import psycopg

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from tests.helpers import explained

KW = dict(types=["plans.noop"], leases=[30.0], queues=None, worker_id="w")


def test_the_update_trigger_keeps_its_hash_join_setting(conn):
    (config,) = conn.execute("SELECT proconfig FROM pg_proc "
                             "WHERE proname = 'jobwarden_rollup_update'").fetchone()
    assert "enable_nestloop=off" in config and "jit=off" in config, config


def test_a_session_whose_first_claim_took_one_job_counts_a_later_batch_without_a_join(
        explain_db):
    with psycopg.connect(explain_db, autocommit=True) as conn:
        enqueue_many(conn, [JobSpec("plans.noop", {"i": i}) for i in range(201)])
        plans = explained(conn, nested=True)
        assert len(claim(conn, limit=1, **KW)) == 1  # the trigger's statement is planned
        plans.clear()
        assert len(claim(conn, limit=200, **KW)) == 200
    counted = [p for p in plans if "job_count_deltas" in p]
    assert counted, plans
    assert not any("Join" in p or "Nested Loop" in p for p in counted), counted


def test_a_session_whose_first_outcome_ended_one_job_joins_a_later_batch_by_hash(explain_db):
    with psycopg.connect(explain_db, autocommit=True) as conn:
        enqueue_many(conn, [JobSpec("plans.noop", {"i": i}) for i in range(201)])
        jobs = claim(conn, limit=201, **KW)

    def ended(batch):
        return [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                           attempt=j.attempt, lease=30.0, status=JobStatus.COMPLETED,
                           outcome=ExecutionOutcome.COMPLETED) for j in batch]
    with psycopg.connect(explain_db, autocommit=True) as conn:  # an outcome writer's session
        plans = explained(conn, nested=True)
        assert len(write_batch(conn, ended(jobs[:1]))) == 1  # its statements are planned
        plans.clear()
        assert len(write_batch(conn, ended(jobs[1:]))) == 200
    counted = [p for p in plans if "job_count_deltas" in p]
    assert counted, plans
    assert all("Hash Join" in p for p in counted), counted
    assert not any("Nested Loop" in p for p in counted), counted


def test_a_retry_reads_its_executions_outcome_by_its_job_on_a_large_history(explain_db):
    """The history indexes no finished execution's id (migration 0093): the trigger
    finds the outcome of a move back to pending through its job's index, never by
    reading the history, on tables never analyzed."""
    with psycopg.connect(explain_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, "
            "worker_id, scheduled_at, started_at, finished_at, outcome) "
            "SELECT g, gen_random_uuid(), 1, 'default', 'plans.old', 'w', now(), now(), "
            "now(), 'completed' FROM generate_series(1000001, 1020000) g")
        enqueue_many(conn, [JobSpec("plans.noop", {"i": i}) for i in range(50)])
        jobs = claim(conn, limit=50, **KW)
    retried = [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                          attempt=j.attempt, lease=30.0, status=JobStatus.PENDING,
                          outcome=ExecutionOutcome.RETRY, error_code="E", error="e",
                          delay=60.0) for j in jobs]
    with psycopg.connect(explain_db, autocommit=True) as conn:
        plans = explained(conn, nested=True)
        assert len(write_batch(conn, retried)) == 50
        retries = conn.execute(
            "SELECT sum(jobs) FROM job_minute_counts WHERE outcome = 'retried'").fetchone()
    assert retries == (50,)  # each read its recorded outcome: a retry, not a snooze
    counted = [p for p in plans if "job_count_deltas" in p]
    assert counted, plans
    assert not any("Seq Scan on job_executions" in p for p in counted), counted
    assert any("job_id" in p and "Index" in p for p in counted), counted
