"""An execution's history row is written once, when it ends (migration 0061).

The claim and the heartbeats write only the job row; `finish_executions` inserts the
history row with its outcome; `job_executions_all` shows the running execution from its
job row. An execution claimed by an older runtime (its row opened at the claim) is closed,
never recorded twice.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row

from jobwarden import Registry, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import ClaimedJob, claim
from jobwarden.worker.store.queries import Q, batch_params

LEASE = 30.0


@pytest.fixture
def registry():
    reg = Registry()

    @job("history.noop", lease=LEASE, registry=reg)
    def noop(ctx, payload):
        raise AssertionError("the statements are driven by the test, not by a worker")

    return reg


@pytest.fixture
def db(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        yield conn


def take(db) -> ClaimedJob:
    (claimed,) = claim(db, types=["history.noop"], leases=[LEASE], queues=None, limit=1,
                       worker_id="worker-a")
    return claimed


def finish(db, claimed: ClaimedJob) -> dict:
    return write_batch(db, [Completion(
        job_id=claimed.id, execution_id=claimed.execution_id, type=claimed.type,
        attempt=claimed.attempt, lease=LEASE, status=S.COMPLETED, outcome=O.COMPLETED)])


def stored(db, job_id: int) -> list[dict]:
    return db.cursor(row_factory=dict_row).execute(
        "SELECT * FROM job_executions WHERE job_id = %s", [job_id]).fetchall()


def shown(db, job_id: int) -> list[dict]:
    return db.cursor(row_factory=dict_row).execute(
        "SELECT * FROM job_executions_all WHERE job_id = %s ORDER BY attempt, id NULLS LAST",
        [job_id]).fetchall()


def test_the_claim_and_heartbeats_write_no_history_and_the_end_writes_it_once(db, registry):
    job_id = enqueue(db, "history.noop", {}, registry=registry)
    claimed = take(db)
    assert db.execute(Q.heartbeat_executions, batch_params([
        {"id": job_id, "execution_id": str(claimed.execution_id), "progress": None,
         "checkpoint": None}], id_key="id")).fetchall() != []
    assert stored(db, job_id) == []
    # The running execution, as the pages see it: its job row.
    (running,) = shown(db, job_id)
    job_row = db.cursor(row_factory=dict_row).execute(
        "SELECT * FROM background_jobs WHERE id = %s", [job_id]).fetchone()
    assert (running["execution_id"], running["attempt"], running["worker_id"],
            running["started_at"], running["heartbeat_at"], running["scheduled_at"],
            running["outcome"], running["id"]) == (
        claimed.execution_id, 1, "worker-a", job_row["started_at"], job_row["heartbeat_at"],
        job_row["available_at"], None, None)

    assert finish(db, claimed) == {claimed.execution_id: "completed"}
    (row,) = stored(db, job_id)
    assert (row["execution_id"], row["attempt"], row["outcome"], row["worker_id"],
            row["started_at"], row["scheduled_at"]) == (
        claimed.execution_id, 1, "completed", "worker-a", job_row["started_at"],
        job_row["available_at"])
    assert row["finished_at"] >= row["started_at"] and row["duration_ms"] >= 0
    assert [r["outcome"] for r in shown(db, job_id)] == ["completed"]
    # A late second write of the same execution is refused and records nothing more.
    assert finish(db, claimed) == {}
    assert len(stored(db, job_id)) == 1


def test_an_execution_an_older_runtime_opened_at_its_claim_is_closed_not_recorded_twice(
        db, registry):
    job_id = enqueue(db, "history.noop", {}, registry=registry)
    claimed = take(db)
    # The row a claim of a runtime before migration 0061 inserted.
    db.execute("""
        INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                    scheduled_at, started_at, heartbeat_at)
        SELECT id, execution_id, attempts, queue, type, worker_id, available_at, started_at,
               heartbeat_at FROM background_jobs WHERE id = %s""", [job_id])
    (open_row,) = shown(db, job_id)  # shown once while it runs
    assert open_row["outcome"] is None
    assert finish(db, claimed) == {claimed.execution_id: "completed"}
    (row,) = stored(db, job_id)
    assert (row["execution_id"], row["outcome"]) == (claimed.execution_id, "completed")
    assert row["finished_at"] is not None
    assert [r["outcome"] for r in shown(db, job_id)] == ["completed"]


@pytest.mark.parametrize("status, outcome, attempts_after", [
    (S.PENDING, O.RETRY, 1),          # a retry moves available_at on, and keeps the attempt
    (S.PENDING, O.SNOOZED, 0),        # a snooze moves it on and gives the attempt back
    (S.PENDING, O.HANDED_BACK, 0),    # a hand-back makes it available now
    (S.COMPLETED, O.COMPLETED, 1),    # an end leaves it where it was
])
def test_the_history_row_says_when_its_execution_had_become_available_and_its_attempt(
        db, registry, status, outcome, attempts_after):
    """The statement that moves the job also rewrites its available_at (to the retry's
    or the snooze's time): the history row keeps the one the execution was claimed at,
    and the attempt's number as the claim counted it, whatever the move gives back."""
    job_id = enqueue(db, "history.noop", {}, registry=registry)
    db.execute("UPDATE background_jobs SET available_at = now() - interval '1 hour' "
               "WHERE id = %s", [job_id])
    (was,) = db.execute("SELECT available_at FROM background_jobs WHERE id = %s",
                        [job_id]).fetchone()
    claimed = take(db)
    delay = 600.0 if outcome in (O.RETRY, O.SNOOZED) else 0.0
    moved = write_batch(db, [Completion(
        job_id=claimed.id, execution_id=claimed.execution_id, type=claimed.type,
        attempt=claimed.attempt, lease=LEASE, status=status, outcome=outcome, delay=delay,
        error_code="E" if outcome == O.RETRY else None)])
    assert moved == {claimed.execution_id: status.value}
    (row,) = stored(db, job_id)
    job = db.execute("SELECT available_at, attempts FROM background_jobs WHERE id = %s",
                     [job_id]).fetchone()
    assert (row["scheduled_at"], row["attempt"]) == (was, 1)
    assert job[1] == attempts_after
    if status == S.PENDING:
        assert job[0] > was  # the job row moved on; its history did not
