"""The heartbeat counts a zombie lease only for an execution that really lost its job.

One beat reads the claimed jobs waiting in the buffer, then renews them in one
statement. A slot may take one of them in between, run it and have its outcome written:
the statement then no longer finds it running, and it is no zombie, it is done
(issue 35: 691 "zombies" in a drain of 1 ms jobs with no fault at all). The race is made
certain here, in-process against the real database: the buffer runs the slot's steps
right after the heartbeat has read it. Beside it waits a job that another worker's
recovery really took, which is counted.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jobwarden import Registry, RetryPolicy, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer, Completion, write_batch
from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.heartbeat import Heartbeat
from jobwarden.worker.engine.producer import ClaimedJob, JobBuffer, Slots, claim
from jobwarden.worker.store.db import DedicatedConnection

LEASE = 30.0
TYPE = "beat.short"


class RacingBuffer(JobBuffer):
    """A buffer that runs `after_read` once, right after the heartbeat has read it."""

    def __init__(self) -> None:
        super().__init__()
        self.after_read: Callable[[], None] | None = None

    def snapshot(self) -> list[ClaimedJob]:
        jobs = super().snapshot()
        step, self.after_read = self.after_read, None
        if step is not None:
            step()
        return jobs


@pytest.fixture
def registry():
    reg = Registry()

    @job(TYPE, lease=LEASE, max_attempts=5, backoff=RetryPolicy(base=0, cap=0, jitter=0),
         registry=reg)
    def short(ctx, payload):
        raise AssertionError("the steps are driven by the test, not by a worker")

    return reg


def heartbeat(url: str, executor: Executor, registry: Registry, worker_id: str) -> Heartbeat:
    return Heartbeat(conn=DedicatedConnection(url), worker_id=worker_id,
                     executors=[executor], completer=Completer(DedicatedConnection(url)),
                     interval=1.0, recovery_interval=60.0,
                     recover=lambda conn: recover_stale_running(conn, registry),
                     draining=lambda: False, on_recovered=lambda: None)


def zombie_leases(db: psycopg.Connection) -> dict[str, int]:
    return dict(db.execute("SELECT type, total FROM job_event_totals "
                           "WHERE event = 'zombie_lease'").fetchall())


def test_a_buffered_job_that_finished_between_the_read_and_the_renewal_is_no_zombie(
        clean_db, registry):
    with psycopg.connect(clean_db, autocommit=True) as db, \
            ConnectionPool(clean_db, min_size=1, max_size=3) as pool:
        for n in range(3):
            enqueue(db, TYPE, {"n": n}, registry=registry)
        finished, recovered, held = sorted(
            claim(db, types=[TYPE], leases=[LEASE], queues=None, limit=3,
                  worker_id="w-beat"), key=lambda j: j.id)
        # A real zombie: its lease ran out and another worker's recovery took the job.
        db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                   "WHERE id = %s", [recovered.id])
        assert recover_stale_running(db, registry) == {"pending": 1}

        buffer = RacingBuffer()
        buffer.put([finished, recovered, held])

        def slot_runs_the_first() -> None:
            # A slot takes it, runs it and the completer writes its outcome, all before
            # the heartbeat's statement.
            taken = buffer.take_next_if(lambda j: j is finished)
            assert taken is finished
            assert write_batch(db, [Completion(
                job_id=taken.id, execution_id=taken.execution_id, type=TYPE,
                attempt=taken.attempt, lease=LEASE, status=S.COMPLETED,
                outcome=O.COMPLETED)]) == {taken.execution_id: "completed"}

        buffer.after_read = slot_runs_the_first
        executor = Executor(registry=registry, pool=pool, buffer=buffer, completer=None,
                            concurrency=1, on_slot_free=lambda job: None,
                            on_abandoned=lambda: None)
        beat = heartbeat(clean_db, executor, registry, "w-beat")
        beat.beat()
        assert buffer.after_read is None, "the slot's steps ran inside the beat"

        assert zombie_leases(db) == {TYPE: 1}  # the recovered one alone
        assert recovered.lost and not held.lost
        status = dict(db.execute("SELECT id, status FROM background_jobs").fetchall())
        assert status == {finished.id: "completed", recovered.id: "pending",
                          held.id: "running"}
        # A second beat finds nothing new to count.
        beat.beat()
        assert zombie_leases(db) == {TYPE: 1}


def test_a_zombie_found_by_the_beat_is_not_counted_again_when_a_slot_takes_it(
        clean_db, registry):
    """The beat marks the recovered job lost while it still waits: the slot that takes it
    afterwards drops it unstarted and counts nothing more."""
    with psycopg.connect(clean_db, autocommit=True) as db, \
            ConnectionPool(clean_db, min_size=1, max_size=3) as pool:
        enqueue(db, TYPE, {"n": 0}, registry=registry)
        (gone,) = claim(db, types=[TYPE], leases=[LEASE], queues=None, limit=1,
                        worker_id="w-beat")
        db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                   "WHERE id = %s", [gone.id])
        assert recover_stale_running(db, registry) == {"pending": 1}
        buffer = JobBuffer()
        buffer.put([gone])
        executor = Executor(registry=registry, pool=pool, buffer=buffer, completer=None,
                            concurrency=1, on_slot_free=lambda job: None,
                            on_abandoned=lambda: None)
        heartbeat(clean_db, executor, registry, "w-beat").beat()
        assert zombie_leases(db) == {TYPE: 1}
        taken = buffer.take_with_slot(Slots(1), timeout=0)
        assert taken is gone
        assert executor.begin(taken) is None
        assert zombie_leases(db) == {TYPE: 1}
