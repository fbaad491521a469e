"""The batched completer never completes a job whose execution changed while its outcome
waited for a flush.

Each scene buffers an execution's outcome in a completer whose flush interval never
comes, changes the job underneath on the database's clock (the lease expires and
recovery runs; an operator cancels; another execution claims the job and keeps
running), then flushes by hand. The flush must leave the job, its history and the new
execution exactly as they were, row by row within one batch statement.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row

from jobwarden import Registry, RetryPolicy, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer, Completion
from jobwarden.worker.engine.producer import ClaimedJob, claim
from jobwarden.worker.ops.operations import cancel_job
from jobwarden.worker.store.db import DedicatedConnection
from jobwarden.worker.store.queries import Q

LEASE = 30.0


@pytest.fixture
def registry():
    reg = Registry()

    # No backoff: a recovered job may be claimed again at once.
    @job("batched.noop", lease=LEASE, max_attempts=5,
         backoff=RetryPolicy(base=0, cap=0, jitter=0), registry=reg)
    def noop(ctx, payload):
        raise AssertionError("the statements are driven by the test, not by a worker")

    return reg


@pytest.fixture
def db(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        yield conn


@pytest.fixture
def completer(clean_db):
    """A completer that only writes when the test flushes it."""
    return Completer(DedicatedConnection(clean_db), interval=3600, batch_size=1000)


def take(db, worker_id: str, limit: int = 1) -> list[ClaimedJob]:
    return claim(db, types=["batched.noop"], leases=[LEASE], queues=None, limit=limit,
                 worker_id=worker_id)


def outcome_of(job: ClaimedJob, status=S.COMPLETED, outcome=O.COMPLETED,
               error_code=None) -> Completion:
    return Completion(job_id=job.id, execution_id=job.execution_id, type=job.type,
                      attempt=job.attempt, lease=LEASE, status=status, outcome=outcome,
                      error_code=error_code, error=None if error_code is None else "late")


def expire_and_recover(db, registry, job_id: int) -> None:
    db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' "
               "WHERE id = %s", [job_id])
    assert recover_stale_running(db, registry) == {"pending": 1}


def buffered_then_recovered(db, registry, completer) -> tuple[int, ClaimedJob]:
    """Execution A claims a job and returns; its completion waits in the completer while
    A's lease runs out and recovery moves the job back to pending."""
    job_id = enqueue(db, "batched.noop", {}, registry=registry)
    (a,) = take(db, "worker-a")
    completer.submit(outcome_of(a))
    expire_and_recover(db, registry, job_id)
    return job_id, a


def row(db, job_id: int) -> dict:
    return db.cursor(row_factory=dict_row).execute(
        "SELECT * FROM background_jobs WHERE id = %s", [job_id]).fetchone()


def history(db, job_id: int) -> list[dict]:
    return db.cursor(row_factory=dict_row).execute(
        "SELECT * FROM job_executions_all WHERE job_id = %s ORDER BY attempt", [job_id]).fetchall()


def event_totals(db) -> dict[tuple[str, str], int]:
    return {(e, t): n for e, t, n in db.execute(
        "SELECT event, type, total FROM job_event_totals").fetchall()}


def test_a_buffered_outcome_is_not_written_before_its_flush(db, registry, completer):
    job_id = enqueue(db, "batched.noop", {}, registry=registry)
    (a,) = take(db, "worker-a")
    completer.submit(outcome_of(a))
    assert row(db, job_id)["status"] == "running"
    assert len(completer) == 1
    completer.flush()
    assert (row(db, job_id)["status"], completer.written, len(completer)) == ("completed", 1, 0)
    assert [e["outcome"] for e in history(db, job_id)] == ["completed"]


def test_a_buffered_completion_of_a_recovered_execution_is_refused(db, registry, completer):
    job_id, a = buffered_then_recovered(db, registry, completer)
    before = row(db, job_id), history(db, job_id)

    assert event_totals(db) == {("recovered", "batched.noop"): 1}
    completer.flush()
    assert (completer.written, completer.refused) == (0, 1)
    assert (row(db, job_id), history(db, job_id)) == before
    assert (before[0]["status"], before[0]["completed_at"]) == ("pending", None)
    assert [e["outcome"] for e in before[1]] == ["worker_lost"]
    # The refusal is counted for /metrics: the zombie left no row of its own.
    assert event_totals(db) == {("recovered", "batched.noop"): 1,
                                ("zombie_outcome", "batched.noop"): 1}


def test_a_buffered_completion_of_a_recovered_then_cancelled_job_is_refused(
        db, registry, completer):
    job_id, a = buffered_then_recovered(db, registry, completer)
    assert cancel_job(db, job_id, actor="op", role="operator", reason="operator",
                      expected_status="pending").ok
    before = row(db, job_id), history(db, job_id)

    completer.flush()
    assert (completer.written, completer.refused) == (0, 1)
    assert (row(db, job_id), history(db, job_id)) == before
    assert before[0]["status"] == "cancelled"


def test_an_outcome_buffered_by_a_is_flushed_while_b_runs_the_job_to_no_effect(
        db, registry, completer):
    job_id, a = buffered_then_recovered(db, registry, completer)
    (b,) = take(db, "worker-b")
    assert (b.id, b.attempt) == (job_id, 2)
    db.execute(Q.save_progress, {"job_id": job_id, "execution_id": b.execution_id,
                                 "progress": '{"processed": 7}', "checkpoint": '{"page": 7}'})
    before = row(db, job_id), history(db, job_id)
    assert (before[0]["status"], before[0]["execution_id"]) == ("running", b.execution_id)

    completer.flush()  # A's completion, while both A and B "are running"
    assert (completer.written, completer.refused) == (0, 1)
    assert (row(db, job_id), history(db, job_id)) == before

    # B finishes normally afterwards, through the same kind of batch.
    completer.submit(outcome_of(b))
    completer.flush()
    done = row(db, job_id)
    assert (done["status"], done["execution_id"], done["attempts"]) == (
        "completed", b.execution_id, 2)
    assert done["checkpoint"] == {"page": 7} and done["progress"] == {"processed": 7}
    assert [(e["execution_id"], e["outcome"]) for e in history(db, job_id)] == [
        (a.execution_id, "worker_lost"), (b.execution_id, "completed")]


def test_one_batch_writes_the_executions_that_own_their_jobs_and_refuses_the_rest(
        db, registry, completer):
    kept_id = enqueue(db, "batched.noop", {"n": 1}, registry=registry)
    lost_id = enqueue(db, "batched.noop", {"n": 2}, registry=registry)
    a1, a2 = take(db, "worker-a", limit=2)
    completer.submit(outcome_of(a1))
    completer.submit(outcome_of(a2, S.PENDING, O.RETRY, "PROVIDER_5XX"))
    expire_and_recover(db, registry, lost_id)
    (b2,) = take(db, "worker-b")
    before = row(db, lost_id), history(db, lost_id)

    completer.flush()
    assert (completer.written, completer.refused) == (1, 1)
    assert event_totals(db)[("zombie_outcome", "batched.noop")] == 1  # the refused one only
    assert row(db, kept_id)["status"] == "completed"
    assert (row(db, lost_id), history(db, lost_id)) == before
    assert before[0]["execution_id"] == b2.execution_id


def test_a_retry_buffered_while_cancellation_was_requested_ends_cancelled(
        db, registry, completer):
    job_id = enqueue(db, "batched.noop", {}, registry=registry)
    (a,) = take(db, "worker-a")
    completer.submit(outcome_of(a, S.PENDING, O.RETRY, "PROVIDER_5XX"))
    assert cancel_job(db, job_id, actor="op", role="operator", reason="operator",
                      expected_status="running").ok

    completer.flush()
    done = row(db, job_id)
    assert (done["status"], done["last_error_code"]) == ("cancelled", "CANCELLED")
    assert [e["outcome"] for e in history(db, job_id)] == ["cancelled"]
