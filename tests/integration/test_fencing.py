"""Fencing: a stale execution cannot finish, extend or annotate a job that a newer
execution holds and is still running.

The scene, statement by statement on the database's clock: execution A claims a job,
its lease runs out (moved into the past), the real recovery pass moves the job on, and
execution B claims it and is still working. Then one of A's late writes runs. It must
match zero rows and leave B's job, its history and the effects ledger exactly as they
were; B then completes normally.

Only the execution token tells A from B here: both see `status = 'running'`. Each late
write is one small function named for what A tries to do, so a new statement that writes
outcomes is proven by adding one function to a list below.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from uuid import UUID

import psycopg
import pytest
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from jobwarden import (
    AsyncEffect,
    Effect,
    JobContext,
    LeaseLost,
    Registry,
    RetryPolicy,
    enqueue,
    job,
)
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer, finish_params
from jobwarden.worker.engine.context import ExecutionControl
from jobwarden.worker.engine.producer import claim_params
from jobwarden.worker.engine.runner import (
    Outcome,
    complete_in_transaction,
    complete_in_transaction_async,
    completion,
)
from jobwarden.worker.store.db import DedicatedConnection
from jobwarden.worker.store.queries import Q, batch_params
from tests.helpers import run_async, wait_for

EFFECT_KEY = "fenced:charge"
FRESH_KEY = "fenced:receipt"  # a key nobody has reserved yet
#: What fencing protects on B's job row (everything an outcome or a beat could touch).
JOB_COLUMNS = (
    "status", "execution_id", "worker_id", "attempts", "lease_expires_at", "heartbeat_at",
    "checkpoint", "progress", "available_at", "started_at", "last_error_code", "last_error",
    "completed_at", "failed_at", "cancelled_at", "skipped_at", "cancel_requested_at",
)


@pytest.fixture
def fenced_registry():
    reg = Registry()

    # No backoff: the recovered job may be claimed by B at once.
    @job("fenced.charge", queue="fenced", lease=30, max_attempts=5,
         backoff=RetryPolicy(base=0, cap=0, jitter=0), registry=reg)
    def charge(ctx, payload):
        raise AssertionError("the statements are driven by the test, not by a worker")

    return reg


@dataclass
class Takeover:
    """A job whose stale execution A lost it to execution B, which is still running."""

    db: psycopg.Connection  # autocommit: each statement commits, as a worker's would
    url: str
    job_id: int
    a: UUID
    b: UUID
    run_a: ExecutionControl  # A's worker side, for completing in its transaction
    run_b: ExecutionControl
    effect_a: Effect  # reserved by A while it owned the job, since taken over by B

    @property
    def ctx_a(self) -> JobContext:  # A's handler's view, for the Python-layer writes
        return self.run_a.ctx

    @property
    def ctx_b(self) -> JobContext:
        return self.run_b.ctx

    def job(self) -> dict:
        cur = self.db.cursor(row_factory=dict_row)
        row = cur.execute("SELECT * FROM background_jobs WHERE id = %s", [self.job_id]).fetchone()
        return {column: row[column] for column in JOB_COLUMNS}

    def history(self) -> list[dict]:
        cur = self.db.cursor(row_factory=dict_row)
        return cur.execute("SELECT * FROM job_executions_all WHERE job_id = %s "
                           "ORDER BY attempt, id NULLS LAST",
                           [self.job_id]).fetchall()

    def ledger(self) -> list[dict]:
        cur = self.db.cursor(row_factory=dict_row)
        return cur.execute("SELECT * FROM processed_effects ORDER BY key").fetchall()

    def orders(self) -> list[UUID]:
        return [r[0] for r in self.db.execute(
            "SELECT execution_id FROM fenced_orders WHERE job_id = %s ORDER BY id",
            [self.job_id]).fetchall()]

    def snapshot(self) -> tuple:
        return self.job(), self.history(), self.ledger(), self.orders()


def claim(db, registry: Registry, worker_id: str) -> tuple:
    types = list(registry)
    (row,) = db.execute(Q.claim_jobs, claim_params(
        types=[t.name for t in types], leases=[t.lease for t in types],
        limits=[t.concurrency_limit for t in types], type_queues=[t.queue for t in types],
        type_max_attempts=[t.max_attempts for t in types], queues=None, limit=1,
        worker_id=worker_id)).fetchall()
    return row


def context(pool, row) -> JobContext:
    return execution(pool, row).ctx


def execution(pool, row) -> ExecutionControl:
    (job_id, queue, type_name, version, _payload, _prio, attempts, max_attempts,
     execution_id, checkpoint, idempotency_key, _snoozes, _key, _batch, *_) = row
    return ExecutionControl(pool=pool, job_id=job_id, execution_id=execution_id,
                            attempt=attempts, max_attempts=max_attempts, type=type_name,
                            queue=queue, version=version, checkpoint=checkpoint,
                            job_idempotency_key=idempotency_key, timeout=None)


@pytest.fixture
def takeover(clean_db, fenced_registry):
    with psycopg.connect(clean_db, autocommit=True) as db, \
            ConnectionPool(clean_db, min_size=1, max_size=4, open=True) as pool:
        db.execute("CREATE TABLE fenced_orders (id bigserial PRIMARY KEY, job_id bigint, "
                   "execution_id uuid)")
        try:
            yield _take_over(db, clean_db, pool, fenced_registry)
        finally:
            db.execute("DROP TABLE fenced_orders")


def _take_over(db, url: str, pool, registry: Registry) -> Takeover:
    job_id = enqueue(db, "fenced.charge", {"amount": 100}, registry=registry)
    run_a = execution(pool, claim(db, registry, "worker-a"))
    # A reserves its effect while it owns the job, then goes silent.
    effect_a = run_a.ctx.effect(EFFECT_KEY)
    db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' "
               "WHERE id = %s", [job_id])
    assert recover_stale_running(db, registry) == {"pending": 1}

    run_b = execution(pool, claim(db, registry, "worker-b"))
    # B takes over A's reservation (the provider dedupes by key), reports progress and a
    # checkpoint of its own, and keeps working.
    run_b.ctx.effect(EFFECT_KEY, provider_idempotent=True)
    assert db.execute(Q.save_progress, {
        "job_id": job_id, "execution_id": run_b.execution_id,
        "progress": json.dumps({"processed": 7, "total": 10}),
        "checkpoint": json.dumps({"page": 7})}).fetchone() == (False,)
    t = Takeover(db, url, job_id, run_a.execution_id, run_b.execution_id, run_a, run_b, effect_a)

    now = t.job()
    assert (now["status"], now["execution_id"], now["attempts"]) == ("running", t.b, 2)
    assert [(e["execution_id"], e["outcome"]) for e in t.history()] == [
        (t.a, "worker_lost"), (t.b, None)]
    return t


# -- A's late writes, one function per kind (each returns the rows it changed) -----------

def _finish(t: Takeover, status: str, outcome: str, error_code=None, error=None, *,
            execution_id=None, lapsed_only: bool = False) -> list:
    """An end of A's execution through the one statement every way out of running takes
    (finish_executions, a batch of one)."""
    return t.db.execute(Q.finish_executions, finish_params([{
        "job_id": t.job_id, "execution_id": execution_id or t.a, "status": status,
        "outcome": outcome, "error_code": error_code, "error": error, "delay": 0.0,
        "progress": json.dumps({"processed": 10, "total": 10}),
        "checkpoint": json.dumps({"page": "done by A"}),
        "lapsed_only": lapsed_only}])).fetchall()


def a_completes(t: Takeover) -> list:
    return _finish(t, "completed", "completed")


def a_fails(t: Takeover) -> list:
    return _finish(t, "failed", "failed", "PAYLOAD_INVALID", "A gives up")


def a_schedules_a_retry(t: Takeover) -> list:
    return _finish(t, "pending", "retry", "PROVIDER_5XX", "A saw a 503")


def a_skips(t: Takeover) -> list:
    return _finish(t, "skipped", "skipped")


def a_acknowledges_a_cancel(t: Takeover) -> list:
    """A's handler saw a cancel request (or raised JobCancelled) and stopped."""
    return _finish(t, "cancelled", "cancelled", "CANCELLED", "cancelled at operator request")


def a_reports_an_unknown_outcome(t: Takeover) -> list:
    """A's provider call timed out after sending: A cannot tell whether it happened."""
    return _finish(t, "unknown", "unknown", "PROVIDER_TIMEOUT", "A sent, no answer")


def a_heartbeats(t: Takeover) -> list:
    return t.db.execute(Q.heartbeat_executions, batch_params([
        {"id": t.job_id, "execution_id": str(t.a), "progress": None, "checkpoint": None},
    ], id_key="id")).fetchall()


def a_heartbeats_with_progress_and_checkpoint(t: Takeover) -> list:
    return t.db.execute(Q.heartbeat_executions, batch_params([
        {"id": t.job_id, "execution_id": str(t.a), "progress": {"processed": 3},
         "checkpoint": {"page": 3}},
    ], id_key="id")).fetchall()


def a_saves_progress(t: Takeover) -> list:
    return t.db.execute(Q.save_progress, {
        "job_id": t.job_id, "execution_id": t.a,
        "progress": json.dumps({"processed": 3}), "checkpoint": None}).fetchall()


def a_saves_a_checkpoint(t: Takeover) -> list:
    return t.db.execute(Q.save_progress, {
        "job_id": t.job_id, "execution_id": t.a,
        "progress": None, "checkpoint": json.dumps({"page": 3})}).fetchall()


def a_hands_the_job_back_at_shutdown(t: Takeover) -> list:
    return _finish(t, "pending", "handed_back")


def a_records_its_effect_as_done(t: Takeover) -> list:
    return t.db.execute(Q.complete_effect, {
        "key": EFFECT_KEY, "execution_id": t.a, "result": json.dumps({"by": "A"})}).fetchall()


def a_reserves_a_fresh_key(t: Takeover) -> list:
    """Left in the ledger, A's reservation would send B to unknown when B reaches it."""
    return t.db.execute(Q.reserve_effect, {
        "key": FRESH_KEY, "job_id": t.job_id, "execution_id": t.a}).fetchall()


def a_takes_back_the_reservation_b_took_over(t: Takeover) -> list:
    return t.db.execute(Q.take_over_effect, {
        "key": EFFECT_KEY, "job_id": t.job_id, "execution_id": t.a}).fetchall()


def a_releases_its_effect(t: Takeover) -> list:
    cur = t.db.execute(Q.release_effect, {"key": EFFECT_KEY, "execution_id": t.a})
    return [None] * cur.rowcount  # a DELETE with no RETURNING: one entry per row deleted


def recovery_replays_its_decision_about_a(t: Takeover) -> list:
    """A second recovery pass that read the job while A held it, deciding late."""
    return _finish(t, "pending", "worker_lost", "WORKER_LOST", "lease expired",
                   lapsed_only=True)


def recovery_decides_about_b_on_a_stale_read(t: Takeover) -> list:
    """A recovery decision about B, whose lease is in fact alive."""
    return _finish(t, "pending", "worker_lost", "WORKER_LOST", "lease expired",
                   execution_id=t.b, lapsed_only=True)


LATE_STATEMENTS = [
    a_completes, a_fails, a_schedules_a_retry, a_skips,
    a_acknowledges_a_cancel, a_reports_an_unknown_outcome,
    a_heartbeats, a_heartbeats_with_progress_and_checkpoint,
    a_saves_progress, a_saves_a_checkpoint,
    a_hands_the_job_back_at_shutdown,
    a_reserves_a_fresh_key, a_takes_back_the_reservation_b_took_over,
    a_records_its_effect_as_done, a_releases_its_effect,
    recovery_replays_its_decision_about_a, recovery_decides_about_b_on_a_stale_read,
]


# -- the same writes through the Python layer (each returns what A was told) -------------

def a_handler_completes_with_a_business_write(t: Takeover):
    with t.ctx_a.transaction() as tx:
        tx.execute("INSERT INTO fenced_orders (job_id, execution_id) VALUES (%s, %s)",
                   [t.job_id, t.a])
    return complete_in_transaction(t.run_a, Outcome(S.COMPLETED, O.COMPLETED), lease=30)


def _through_the_completer(t: Takeover, outcome: Outcome) -> bool:
    """What the worker does with an outcome: buffer it, then flush it (a batch of one);
    True if it was written."""
    completer = Completer(DedicatedConnection(t.url), interval=3600)
    completer.submit(completion(t.run_a, outcome, lease=30))
    completer.flush()
    return completer.written == 1


def a_handler_completes(t: Takeover):
    return _through_the_completer(t, Outcome(S.COMPLETED, O.COMPLETED))


def a_handler_fails(t: Takeover):
    return _through_the_completer(t, Outcome(S.FAILED, O.FAILED, error_code="PAYLOAD_INVALID",
                                             error="A gives up"))


def a_handler_schedules_a_retry(t: Takeover):
    return _through_the_completer(t, Outcome(S.PENDING, O.RETRY, error_code="PROVIDER_5XX",
                                             error="A saw a 503", delay=0.0))


def a_handler_acknowledges_a_cancel(t: Takeover):
    return _through_the_completer(t, Outcome(S.CANCELLED, O.CANCELLED, error_code="CANCELLED",
                                             error="cancelled at operator request"))


def a_handler_reports_an_unknown_outcome(t: Takeover):
    return _through_the_completer(t, Outcome(S.UNKNOWN, O.UNKNOWN, error_code="PROVIDER_TIMEOUT",
                                             error="A sent, no answer"))


def a_handler_heartbeats(t: Takeover):
    return _lease_lost(t.ctx_a.heartbeat)


def a_handler_reports_progress(t: Takeover):
    return _lease_lost(lambda: t.ctx_a.progress(processed=3, total=10))


def a_handler_saves_a_checkpoint(t: Takeover):
    return _lease_lost(lambda: t.ctx_a.save_checkpoint({"page": 3}))


def a_handler_records_its_effect(t: Takeover):
    return _lease_lost(lambda: t.effect_a.complete({"by": "A"}))


def a_handler_reserves_a_fresh_key(t: Takeover):
    return _lease_lost(lambda: t.ctx_a.effect(FRESH_KEY))


def a_handler_takes_back_the_reservation_b_took_over(t: Takeover):
    # The provider dedupes by key, so a live execution would take the reservation over.
    return _lease_lost(lambda: t.ctx_a.effect(EFFECT_KEY, provider_idempotent=True))


def a_handler_reaches_the_reservation_b_took_over(t: Takeover):
    # A live execution would be told AmbiguousOutcome (unknown); A is told it lost the job.
    return _lease_lost(lambda: t.ctx_a.effect(EFFECT_KEY))


def _lease_lost(write) -> str:
    try:
        write()
    except LeaseLost:
        return "lease lost"
    return "accepted"


LATE_HANDLER_WRITES = [
    pytest.param(write, told, id=write.__name__) for write, told in [
        (a_handler_completes_with_a_business_write, False),
        (a_handler_completes, False),
        (a_handler_fails, False),
        (a_handler_schedules_a_retry, False),
        (a_handler_acknowledges_a_cancel, False),
        (a_handler_reports_an_unknown_outcome, False),
        (a_handler_heartbeats, "lease lost"),
        (a_handler_reports_progress, "lease lost"),
        (a_handler_saves_a_checkpoint, "lease lost"),
        (a_handler_records_its_effect, "lease lost"),
        (a_handler_reserves_a_fresh_key, "lease lost"),
        (a_handler_takes_back_the_reservation_b_took_over, "lease lost"),
        (a_handler_reaches_the_reservation_b_took_over, "lease lost"),
    ]
]


# -- the same writes by a stale coroutine handler (AsyncJobContext) ---------------------

def as_coroutine(write):
    """A stale coroutine handler's write: `write(t, ctx)` given A's AsyncJobContext (on
    an async pool of its own, as a lane loop has), run to its end; what A was told."""
    async def scene(t: Takeover):
        async with AsyncConnectionPool(t.url, min_size=1, max_size=2, open=False) as apool:
            async def pool():
                return apool
            a = t.run_a
            run = ExecutionControl(pool=a.pool, job_id=a.job_id, execution_id=a.execution_id,
                                   attempt=a.attempt, max_attempts=a.max_attempts,
                                   type=a.type, queue=a.queue, version=a.version,
                                   timeout=None, async_pool=pool)
            return await write(t, run)

    def late_write(t: Takeover):
        return run_async(scene(t))
    late_write.__name__ = write.__name__
    return late_write


async def _lease_lost_async(write) -> str:
    try:
        await write()
    except LeaseLost:
        return "lease lost"
    return "accepted"


async def a_coroutine_completes_with_a_business_write(t: Takeover, run: ExecutionControl):
    async with run.ctx.transaction() as tx:
        await tx.execute("INSERT INTO fenced_orders (job_id, execution_id) VALUES (%s, %s)",
                         [t.job_id, t.a])
    return await complete_in_transaction_async(run, Outcome(S.COMPLETED, O.COMPLETED),
                                               lease=30)


async def a_coroutine_heartbeats(t: Takeover, run: ExecutionControl):
    return await _lease_lost_async(run.ctx.heartbeat)


async def a_coroutine_reports_progress(t: Takeover, run: ExecutionControl):
    return await _lease_lost_async(lambda: run.ctx.progress(processed=3, total=10))


async def a_coroutine_saves_a_checkpoint(t: Takeover, run: ExecutionControl):
    return await _lease_lost_async(lambda: run.ctx.save_checkpoint({"page": 3}))


async def a_coroutine_records_its_effect(t: Takeover, run: ExecutionControl):
    return await _lease_lost_async(lambda: AsyncEffect(t.effect_a).complete({"by": "A"}))


async def a_coroutine_reserves_a_fresh_key(t: Takeover, run: ExecutionControl):
    return await _lease_lost_async(lambda: run.ctx.effect(FRESH_KEY))


async def a_coroutine_takes_back_the_reservation_b_took_over(t: Takeover,
                                                              run: ExecutionControl):
    return await _lease_lost_async(lambda: run.ctx.effect(EFFECT_KEY,
                                                          provider_idempotent=True))


LATE_HANDLER_WRITES += [
    pytest.param(as_coroutine(write), told, id=write.__name__) for write, told in [
        (a_coroutine_completes_with_a_business_write, False),
        (a_coroutine_heartbeats, "lease lost"),
        (a_coroutine_reports_progress, "lease lost"),
        (a_coroutine_saves_a_checkpoint, "lease lost"),
        (a_coroutine_records_its_effect, "lease lost"),
        (a_coroutine_reserves_a_fresh_key, "lease lost"),
        (a_coroutine_takes_back_the_reservation_b_took_over, "lease lost"),
    ]
]


def b_completes_normally(t: Takeover) -> None:
    t.ctx_b.effect(EFFECT_KEY).complete({"by": "B"})
    with t.ctx_b.transaction() as tx:
        tx.execute("INSERT INTO fenced_orders (job_id, execution_id) VALUES (%s, %s)",
                   [t.job_id, t.b])
    assert complete_in_transaction(t.run_b, Outcome(S.COMPLETED, O.COMPLETED), lease=30)
    done = t.job()
    assert (done["status"], done["execution_id"], done["attempts"]) == ("completed", t.b, 2)
    assert done["checkpoint"] == {"page": 7} and done["progress"] == {"processed": 7, "total": 10}
    assert [(e["execution_id"], e["outcome"]) for e in t.history()] == [
        (t.a, "worker_lost"), (t.b, "completed")]
    (effect,) = t.ledger()
    assert (effect["state"], effect["execution_id"], effect["result"]) == ("done", t.b, {"by": "B"})
    assert t.orders() == [t.b]


@pytest.mark.parametrize("late_write", LATE_STATEMENTS, ids=lambda f: f.__name__)
def test_a_late_write_of_the_stale_execution_matches_no_row_while_the_new_one_runs(
        takeover, late_write):
    before = takeover.snapshot()
    assert late_write(takeover) == []
    assert takeover.snapshot() == before
    b_completes_normally(takeover)


@pytest.mark.parametrize(("late_write", "told"), LATE_HANDLER_WRITES)
def test_a_stale_handler_is_refused_and_the_new_execution_keeps_its_job(
        takeover, late_write, told):
    before = takeover.snapshot()
    assert late_write(takeover) == told
    assert takeover.snapshot() == before  # the business write rolled back with the outcome
    b_completes_normally(takeover)


def test_recovery_running_again_leaves_the_new_execution_alone(takeover, fenced_registry):
    before = takeover.snapshot()
    assert recover_stale_running(takeover.db, fenced_registry) == {}
    assert takeover.snapshot() == before
    b_completes_normally(takeover)


def test_the_stale_execution_is_recorded_as_lost_with_the_reason(takeover):
    lost, _running = takeover.history()
    assert (lost["outcome"], lost["error_code"]) == ("worker_lost", "WORKER_LOST")
    assert lost["finished_at"] is not None and "worker-a" in lost["error"]


def test_a_recovery_decision_about_the_stale_execution_never_applies_to_the_new_one(
        takeover, fenced_registry):
    # Even once B's lease has run out too: B's fate is decided from B's own attempt.
    takeover.db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval "
                        "'1 second' WHERE id = %s", [takeover.job_id])
    before = takeover.snapshot()
    assert recovery_replays_its_decision_about_a(takeover) == []
    assert takeover.snapshot() == before
    assert recover_stale_running(takeover.db, fenced_registry) == {"pending": 1}
    assert [(e["execution_id"], e["outcome"]) for e in takeover.history()] == [
        (takeover.a, "worker_lost"), (takeover.b, "worker_lost")]


def _a_reserves_a_fresh_key_in_the_race(pool, ctx_a):
    return _lease_lost(lambda: ctx_a.effect(FRESH_KEY))


def _a_takes_over_a_lost_reservation_in_the_race(pool, ctx_a):
    with pool.connection() as conn:
        return conn.execute(Q.take_over_effect, {"key": FRESH_KEY, "job_id": ctx_a.job_id,
                                                 "execution_id": ctx_a.execution_id}).fetchall()


@pytest.mark.parametrize(("a_write", "told", "ledger"), [
    (_a_reserves_a_fresh_key_in_the_race, "lease lost", "empty"),
    # The provider dedupes by key; an earlier, lost execution left the reservation.
    (_a_takes_over_a_lost_reservation_in_the_race, [], "reserved by an earlier execution"),
], ids=["reserve", "take_over"])
def test_recovery_cannot_slip_between_the_ownership_check_and_the_reservation(
        clean_db, fenced_registry, a_write, told, ledger):
    """A's reservation races the recovery pass that takes its job away: the job row's lock
    makes A wait for the pass and then see B as the owner, so the ledger is left as it was
    and B finds the key as if A had never asked (fresh, or reserved by the earlier
    execution), instead of reserved by A, which would mean unknown."""
    with psycopg.connect(clean_db, autocommit=True) as db, \
            psycopg.connect(clean_db) as recovery, \
            ConnectionPool(clean_db, min_size=1, max_size=4, open=True) as pool, \
            ThreadPoolExecutor(max_workers=1) as a_thread:
        job_id = enqueue(db, "fenced.charge", {"amount": 100}, registry=fenced_registry)
        ctx_a = context(pool, claim(db, fenced_registry, "worker-a"))
        if ledger != "empty":
            db.execute("INSERT INTO processed_effects (key, job_id, execution_id) "
                       "VALUES (%s, %s, gen_random_uuid())", [FRESH_KEY, job_id])
        before = db.execute("SELECT * FROM processed_effects").fetchall()
        db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' "
                   "WHERE id = %s", [job_id])
        with recovery.transaction():
            # The pass has moved the job on but not committed when A asks for its effect.
            assert recover_stale_running(recovery, fenced_registry) == {"pending": 1}
            a_told = a_thread.submit(a_write, pool, ctx_a)
            wait_for(lambda: db.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE '%%processed_effects%%'").fetchone(),
                message="A's statement to wait for the job row")
            ctx_b = context(pool, claim(recovery, fenced_registry, "worker-b"))
        assert a_told.result(timeout=20) == told
        assert db.execute("SELECT * FROM processed_effects").fetchall() == before
        ctx_b.effect(FRESH_KEY, provider_idempotent=ledger != "empty").complete({"by": "B"})
        assert db.execute("SELECT state, execution_id FROM processed_effects").fetchall() == [
            ("done", ctx_b.execution_id)]


def test_a_stale_execution_reserves_nothing_while_its_job_waits_to_be_claimed_again(
        clean_db, fenced_registry):
    """Between recovery and the next claim the row still names A's execution: only its
    status says A no longer owns the job."""
    with psycopg.connect(clean_db, autocommit=True) as db, \
            ConnectionPool(clean_db, min_size=1, max_size=4, open=True) as pool:
        job_id = enqueue(db, "fenced.charge", {"amount": 100}, registry=fenced_registry)
        ctx_a = context(pool, claim(db, fenced_registry, "worker-a"))
        db.execute("INSERT INTO processed_effects (key, job_id, execution_id) "
                   "VALUES (%s, %s, gen_random_uuid())", [EFFECT_KEY, job_id])
        db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' "
                   "WHERE id = %s", [job_id])
        assert recover_stale_running(db, fenced_registry) == {"pending": 1}
        assert db.execute("SELECT status, execution_id FROM background_jobs WHERE id = %s",
                          [job_id]).fetchone() == ("pending", ctx_a.execution_id)
        before = db.execute("SELECT * FROM processed_effects").fetchall()
        assert _lease_lost(lambda: ctx_a.effect(FRESH_KEY)) == "lease lost"
        assert db.execute(Q.take_over_effect, {"key": EFFECT_KEY, "job_id": job_id,
                                               "execution_id": ctx_a.execution_id}).fetchall() == []
        assert db.execute("SELECT * FROM processed_effects").fetchall() == before
