"""A completer with two writers writes one batch while another waits on the server.

In a drain one writer is busy all the time, about two thirds of it waiting for its
statement (bench/README.md@eb7c2f0, "Two writers"). With two, the next batch is written beside
the one the server is still working on. The scene: a test transaction holds one job's
row lock, so the writer whose batch holds that job waits in its UPDATE; a second batch
of other jobs must still be written meanwhile, and the waiting batch's outcomes must
stay in `pending()` (the heartbeat renews their leases) until they are written.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from jobwarden import Registry, enqueue_many, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.engine.completer import Completer, Completion
from jobwarden.worker.engine.producer import ClaimedJob, claim
from jobwarden.worker.jobs.job_spec import JobSpec
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import wait_for

LEASE = 30.0
TYPE = "writers.noop"


@pytest.fixture
def registry():
    reg = Registry()

    @job(TYPE, lease=LEASE, registry=reg)
    def noop(ctx, payload):
        raise AssertionError("the statements are driven by the test, not by a worker")

    return reg


@pytest.fixture
def db(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        yield conn


def claimed(db, registry, n: int) -> list[ClaimedJob]:
    enqueue_many(db, [JobSpec(TYPE, {"i": i}) for i in range(n)], registry=registry)
    return claim(db, types=[TYPE], leases=[LEASE], queues=None, limit=n, worker_id="w")


def done(job: ClaimedJob) -> Completion:
    return Completion(job_id=job.id, execution_id=job.execution_id, type=job.type,
                      attempt=job.attempt, lease=LEASE, status=S.COMPLETED,
                      outcome=O.COMPLETED)


def statuses(db, jobs: list[ClaimedJob]) -> list[str]:
    return [r[0] for r in db.execute(
        "SELECT status FROM background_jobs WHERE id = ANY(%s) ORDER BY id",
        [[j.id for j in jobs]]).fetchall()]


def lock_waiters(db) -> int:
    return db.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                      "AND datname = current_database() "
                      "AND query LIKE '%%finish_executions%%'").fetchone()[0]


@pytest.mark.parametrize("writers", [1, 2])
def test_a_batch_is_written_while_another_waits_on_a_row_lock(db, clean_db, registry,
                                                              writers):
    jobs = claimed(db, registry, 6)
    first, second = jobs[:3], jobs[3:]
    completer = Completer([DedicatedConnection(clean_db) for _ in range(writers)],
                          interval=0, batch_size=3)
    threads = [threading.Thread(target=completer.run, args=(i,), daemon=True)
               for i in range(completer.writers)]
    for t in threads:
        t.start()
    with psycopg.connect(clean_db) as holder:
        holder.execute("SELECT 1 FROM background_jobs WHERE id = %s FOR UPDATE",
                       [first[0].id])
        for j in first:
            completer.submit(done(j))
        wait_for(lambda: lock_waiters(db) == 1, message="the first batch to wait on the lock")
        for j in second:
            completer.submit(done(j))
        if writers == 2:
            # The other writer takes the second batch while the first one waits.
            wait_for(lambda: statuses(db, second) == ["completed"] * 3,
                     message="the other writer to write the second batch")
        else:
            time.sleep(0.5)
            assert statuses(db, second) == ["running"] * 3
        assert statuses(db, first) == ["running"] * 3
        # Outcomes in flight are still this worker's to keep alive.
        assert {c.job_id for c in completer.pending()} >= {j.id for j in first}
        holder.rollback()
    wait_for(lambda: statuses(db, jobs) == ["completed"] * 6, message="every outcome")
    completer.close()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert (completer.written, completer.refused, len(completer)) == (6, 0, 0)


def test_close_lets_every_writer_return_after_writing_what_waits(db, clean_db, registry):
    jobs = claimed(db, registry, 5)
    completer = Completer([DedicatedConnection(clean_db) for _ in range(2)],
                          interval=3600, batch_size=1000)
    threads = [threading.Thread(target=completer.run, args=(i,), daemon=True)
               for i in range(2)]
    for t in threads:
        t.start()
    for j in jobs:
        completer.submit(done(j))
    completer.close()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert statuses(db, jobs) == ["completed"] * 5
    assert completer.written == 5
