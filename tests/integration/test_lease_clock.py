"""The worker's lease clock (worker/core/lease.py), against the real database.

A claimed job starts at once only while the clock vouches for its lease: two thirds of
the lease since `granted_at`, the moment just before the statement that granted it was
sent. Past that, `Executor.begin` asks the database, and a job recovered meanwhile never
starts (docs/faults.md, "Starting buffered work").

`granted_at` is read before the statement goes out, never after it returns: a statement
that waited (a lock, a slow server) granted a lease that began while it waited, and a
later reading would credit the worker with time it does not have. Each statement is
held on a lock here until the test has read the clock, so the order is certain.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jobwarden import Registry, RetryPolicy, enqueue, job
from jobwarden.worker.core import lease
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer
from jobwarden.worker.engine.executor import UNDECIDED, Execution, Executor
from jobwarden.worker.engine.heartbeat import Heartbeat
from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.engine.producer import ClaimedJob, ClaimSpec, JobBuffer, Producer, claim
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import wait_for

LEASE = 30.0
TYPE = "clock.work"


@pytest.fixture
def registry():
    reg = Registry()

    @job(TYPE, lease=LEASE, max_attempts=5, backoff=RetryPolicy(base=0, cap=0, jitter=0),
         registry=reg)
    def work(ctx, payload):
        raise AssertionError("the steps are driven by the test, not by a worker")

    return reg


@pytest.fixture
def db(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        yield conn


@pytest.fixture
def pool(clean_db):
    with ConnectionPool(clean_db, min_size=1, max_size=3) as p:
        yield p


def claimed(db: psycopg.Connection, registry: Registry, n: int) -> list[ClaimedJob]:
    for i in range(n):
        enqueue(db, TYPE, {"n": i}, registry=registry)
    return sorted(claim(db, types=[TYPE], leases=[LEASE], queues=None, limit=n,
                        worker_id="w-clock"), key=lambda j: j.id)


def executor(registry: Registry, pool: ConnectionPool, buffer: JobBuffer) -> Executor:
    return Executor(registry=registry, pool=pool, buffer=buffer, completer=None,
                    concurrency=4, on_slot_free=lambda job: None, on_abandoned=lambda: None)


def zombie_leases(db: psycopg.Connection) -> int:
    row = db.execute("SELECT sum(total) FROM job_event_totals "
                     "WHERE event = 'zombie_lease'").fetchone()
    return int(row[0] or 0)


#: How long ago the worker's clock says each job's lease was granted (None: never known).
PAST_THE_CLOCK = LEASE * (1 - lease.MARGIN) + 1.0


def test_begin_asks_the_database_about_a_lease_the_clock_no_longer_vouches_for(
        db, pool, registry):
    fresh, old_held, old_recovered, unknown_recovered = claimed(db, registry, 4)
    now = lease.now()
    fresh.granted_at = now - 1.0  # well inside the clock's window
    old_held.granted_at = now - PAST_THE_CLOCK  # past it; the database still says ours
    old_recovered.granted_at = now - PAST_THE_CLOCK  # past it; recovered meanwhile
    unknown_recovered.granted_at = None  # never known to be held; recovered meanwhile
    gone = [old_recovered.id, unknown_recovered.id]
    db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
               "WHERE id = ANY(%s)", [gone])
    assert recover_stale_running(db, registry) == {"pending": 2}
    ex = executor(registry, pool, JobBuffer())

    assert isinstance(ex.begin(fresh), Execution)
    asked_at = lease.now()
    assert isinstance(ex.begin(old_held), Execution)
    # The database renewed it: the clock counts again from that statement.
    assert old_held.granted_at is not None and old_held.granted_at >= asked_at
    for lapsed in (old_recovered, unknown_recovered):
        assert ex.begin(lapsed) is None
        assert lapsed.lost
    assert {e.job.id for e in ex.running()} == {fresh.id, old_held.id}
    assert zombie_leases(db) == 2
    status = dict(db.execute("SELECT id, status FROM background_jobs").fetchall())
    assert status == {fresh.id: "running", old_held.id: "running",
                      old_recovered.id: "pending", unknown_recovered.id: "pending"}


def test_begin_keeps_a_job_whose_lease_the_database_cannot_confirm(registry, clean_db):
    # Nothing listens on this pool's server: begin() can neither start nor drop the job.
    with ConnectionPool("postgresql://postgres@127.0.0.1:1/none", min_size=0, max_size=1,
                        timeout=0.5, kwargs={"connect_timeout": 1}) as dead:
        job = ClaimedJob(id=1, queue="default", type=TYPE, version=1, payload={},
                         priority=0, attempt=1, max_attempts=5,
                         execution_id=uuid.uuid4(), checkpoint=None,
                         idempotency_key=None, snoozes=0,
                         granted_at=lease.now() - PAST_THE_CLOCK)
        assert executor(registry, dead, JobBuffer()).begin(job) is UNDECIDED
        assert not job.lost


def held_on_lock(db: psycopg.Connection, lock_sql: str, params: Any,
                 statement: Callable[[], object]) -> tuple[float, float]:
    """Run `statement` on a thread while `lock_sql` holds what it needs; returns the clock
    read before it began and once the server showed it waiting for the lock."""
    other = psycopg.connect(db.info.dsn)
    other.execute(lock_sql, params)  # its transaction stays open: the lock is held
    failure: list[BaseException] = []

    def run() -> None:
        try:
            statement()
        except BaseException as exc:  # shown by the test, not lost on the thread
            failure.append(exc)

    before = lease.now()
    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for(lambda: db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'").fetchone()[0] >= 1,
            message="the statement to wait for the lock")
        waiting = lease.now()
    finally:
        other.commit()
        other.close()
        thread.join(30)
    assert not failure, failure
    return before, waiting


def test_a_claims_lease_is_dated_from_before_the_claim_was_sent(db, registry, clean_db):
    for i in range(2):
        enqueue(db, TYPE, {"n": i}, registry=registry)
    producer = Producer(conn=DedicatedConnection(clean_db),
                        claims=ClaimSpec(types=[TYPE], leases=[LEASE], worker_id="w-clock"),
                        buffer=JobBuffer(), concurrency=2, running=lambda: 0,
                        job_seconds=lambda: None, wake=Wakeup(), stop=threading.Event())
    assert len(producer._claim(1)) == 1  # connected and prepared: the next claim only waits
    got: list[ClaimedJob] = []
    before, waiting = held_on_lock(db, "LOCK TABLE background_jobs IN ACCESS EXCLUSIVE MODE",
                                   None, lambda: got.extend(producer._claim(1)))
    (job,) = got
    assert job.granted_at is not None and before <= job.granted_at < waiting


def test_a_heartbeats_renewal_is_dated_from_before_it_was_sent(db, pool, registry, clean_db):
    (waiting_job,) = claimed(db, registry, 1)
    buffer = JobBuffer()
    buffer.put([waiting_job])
    beat = Heartbeat(conn=DedicatedConnection(clean_db), worker_id="w-clock",
                     executors=[executor(registry, pool, buffer)],
                     completer=Completer(DedicatedConnection(clean_db)), interval=1.0,
                     recovery_interval=60.0,
                     recover=lambda conn: recover_stale_running(conn, registry),
                     draining=lambda: False, on_recovered=lambda: None)
    beat.beat()  # connected: the next beat only waits for the row
    before, waiting = held_on_lock(db, "SELECT 1 FROM background_jobs WHERE id = %s "
                                       "FOR UPDATE", [waiting_job.id], beat.beat)
    assert waiting_job.granted_at is not None and before <= waiting_job.granted_at < waiting


def test_a_lease_confirmed_before_a_start_is_dated_from_before_the_question(
        db, pool, registry):
    (old,) = claimed(db, registry, 1)
    old.granted_at = lease.now() - PAST_THE_CLOCK
    ex = executor(registry, pool, JobBuffer())
    pool.wait()
    before, waiting = held_on_lock(db, "SELECT 1 FROM background_jobs WHERE id = %s "
                                       "FOR UPDATE", [old.id], lambda: ex.begin(old))
    assert old.granted_at is not None and before <= old.granted_at < waiting
