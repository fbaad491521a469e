"""Recovery takes only expired leases: the boundary, on the database's clock.

Each job is claimed for real, then its lease is set relative to `now()` inside one
transaction, and recovery runs in that same transaction: `now()` is the transaction's
start time, so the lease ending exactly now, a microsecond either side and half a second
either side are all judged against one fixed instant, with no sleeping and no race
against the wall clock. A lease that has not yet ended, even by a microsecond, belongs to
a live execution.
"""

from __future__ import annotations

import psycopg
import pytest

from jobwarden import JobSpec, Registry, RetryPolicy, enqueue, enqueue_many, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completion, finish_params, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.store.queries import Q

#: The lease's end relative to the database's now(), and whether recovery may take it.
LEASE_ENDS = {"in half a second": ("0.5 seconds", False),
              "in a microsecond": ("1 microsecond", False),
              "exactly now": ("0 seconds", False),
              "a microsecond ago": ("-1 microsecond", True),
              "half a second ago": ("-0.5 seconds", True)}


@pytest.fixture
def leases(conn):
    """{description: (job id, execution id)} of running jobs whose leases end as named,
    set in the transaction left open on `conn`; and the registry their type is in."""
    reg = Registry()
    job("lease.boundary", lease=30, backoff=RetryPolicy(base=0, cap=0, jitter=0),
        registry=reg)(lambda ctx, payload: None)
    for _ in LEASE_ENDS:
        enqueue(conn, "lease.boundary", {}, registry=reg)
    claimed = claim(conn, types=["lease.boundary"], leases=[30.0], queues=None,
                    limit=len(LEASE_ENDS), worker_id="w-boundary")
    conn.commit()
    jobs = {name: (c.id, c.execution_id) for name, c in zip(LEASE_ENDS, claimed, strict=True)}
    for name, (offset, _) in LEASE_ENDS.items():
        conn.execute("UPDATE background_jobs SET lease_expires_at = now() + %s::interval "
                     "WHERE id = %s", [offset, jobs[name][0]])
    return jobs, reg


def expired(jobs: dict) -> set[int]:
    return {jobs[name][0] for name, (_, gone) in LEASE_ENDS.items() if gone}


def test_recovery_takes_a_lease_only_once_it_has_ended(conn, leases):
    jobs, reg = leases
    assert recover_stale_running(conn, reg) == {"pending": 2}
    rows = dict(conn.execute("SELECT id, status FROM background_jobs").fetchall())
    assert {i for i, status in rows.items() if status == "pending"} == expired(jobs)
    assert {i for i, status in rows.items() if status == "running"} == (
        {i for i, _ in jobs.values()} - expired(jobs))


def test_the_stale_lock_selects_only_ended_leases(conn, leases):
    jobs, _ = leases
    locked = {r[0] for r in conn.execute(Q.lock_stale_running, {"limit": 100})}
    assert locked == expired(jobs)


def test_a_recovery_decision_about_a_live_lease_is_refused(conn, leases):
    # Decided on a stale read (or by a lock step that took too much): the update itself
    # re-checks the lease, so only the ended ones move.
    jobs, _ = leases
    decided = [{"job_id": i, "execution_id": e, "status": "pending",
                "outcome": "worker_lost", "error_code": "WORKER_LOST", "error": "lost",
                "delay": 0.0, "progress": None, "checkpoint": None, "lapsed_only": True}
               for i, e in jobs.values()]
    moved = {r[0] for r in conn.execute(Q.finish_executions, finish_params(decided))}
    assert moved == expired(jobs)


def test_a_lost_execution_is_recorded_as_running_until_its_last_heartbeat(conn, leases):
    """Its `duration_ms` runs from its start to its last heartbeat, as far as anyone
    knows it ran, not to the recovery that found it lost. Seeded on the same fixed
    instant: one silent for 50 s after 10 s of beats, one silent for 5 s after 55 s."""
    jobs, reg = leases
    quiet_long, quiet_short = (jobs[name] for name in ("a microsecond ago",
                                                       "half a second ago"))
    for (job_id, _), beat in ((quiet_long, "50 seconds"), (quiet_short, "5 seconds")):
        conn.execute("UPDATE background_jobs SET started_at = now() - interval '60 s', "
                     "heartbeat_at = now() - %s::interval WHERE id = %s", [beat, job_id])
    assert recover_stale_running(conn, reg) == {"pending": 2}
    durations = dict(conn.execute(
        "SELECT execution_id, duration_ms FROM job_executions WHERE outcome = 'worker_lost'"
    ).fetchall())
    assert durations == {quiet_long[1]: 10_000.0, quiet_short[1]: 55_000.0}


def test_an_execution_lost_with_its_worker_spends_its_attempt_even_for_a_job_that_snoozes(
        clean_db):
    """Decided (docs/faults.md, "Heartbeat, claims and recovery"): a snooze gives its
    attempt back only once its outcome is written. An execution lost with its worker,
    killed before or after its handler snoozed, spends its attempt like any lost one:
    nobody knows what it did, and a job that kills its worker on every run must still end
    `failed` after max_attempts, however often it snoozed before."""
    reg = Registry()
    job("lease.snoozing", lease=30, max_attempts=2,
        backoff=RetryPolicy(base=0, cap=0, jitter=0), registry=reg)(lambda ctx, payload: None)
    with psycopg.connect(clean_db, autocommit=True) as db:
        job_id = enqueue(db, "lease.snoozing", {}, registry=reg)

        def run() -> object:
            (c,) = claim(db, types=["lease.snoozing"], leases=[30.0], queues=None, limit=1,
                         worker_id="w-snooze")
            return c

        def lose(c) -> None:
            db.execute("UPDATE background_jobs SET lease_expires_at = now() - "
                       "interval '1 s' WHERE id = %s", [c.id])
            assert sum(recover_stale_running(db, reg).values()) == 1

        def state() -> tuple:
            return db.execute("SELECT status, attempts, snoozes, last_error_code FROM "
                              "background_jobs WHERE id = %s", [job_id]).fetchone()

        snoozed = run()  # its snooze is written: the attempt comes back
        assert write_batch(db, [Completion(
            job_id=job_id, execution_id=snoozed.execution_id, type="lease.snoozing",
            attempt=snoozed.attempt, lease=30.0, status=S.PENDING,
            outcome=O.SNOOZED)]) == {snoozed.execution_id: "pending"}
        assert state() == ("pending", 0, 1, None)
        lose(run())  # lost with its worker: spent
        assert state() == ("pending", 1, 1, "WORKER_LOST")
        lose(run())  # and the last one
        assert state() == ("failed", 2, 1, "WORKER_LOST")


def lost_worker(db: psycopg.Connection, jobs: int) -> Registry:
    """`jobs` claimed by a worker that is gone: every lease ended a second ago."""
    reg = Registry()
    job("lease.buffered", lease=30, backoff=RetryPolicy(base=0, cap=0, jitter=0),
        registry=reg)(lambda ctx, payload: None)
    enqueue_many(db, [JobSpec("lease.buffered", {"n": n}) for n in range(jobs)], registry=reg)
    claimed = claim(db, types=["lease.buffered"], leases=[30.0], queues=None, limit=jobs,
                    worker_id="w-gone")
    assert len(claimed) == jobs
    db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s'")
    return reg


def test_one_recovery_takes_a_lost_workers_whole_buffer(clean_db):
    """A worker holds up to --buffer claimed jobs (2,000 by default), more than one
    recovery transaction moves: one recovery takes them all, a batch a transaction,
    instead of one batch per recovery interval."""
    with psycopg.connect(clean_db, autocommit=True) as db:
        reg = lost_worker(db, 1_200)
        assert recover_stale_running(db, reg) == {"pending": 1_200}
        assert db.execute("SELECT count(*) FILTER (WHERE status = 'pending'), "
                          "count(*) FILTER (WHERE last_error_code = 'WORKER_LOST') "
                          "FROM background_jobs").fetchone() == (1_200, 1_200)
        assert db.execute("SELECT count(*) FROM job_executions_all "
                          "WHERE outcome = 'worker_lost'").fetchone() == (1_200,)


def test_one_recovery_moves_at_most_its_batches(clean_db):
    """Bounded: 2 batches of 5 take 10 of 12 expired leases; the next recovery the rest."""
    with psycopg.connect(clean_db, autocommit=True) as db:
        reg = lost_worker(db, 12)
        assert recover_stale_running(db, reg, limit=5, max_batches=2) == {"pending": 10}
        assert recover_stale_running(db, reg, limit=5, max_batches=2) == {"pending": 2}
        assert recover_stale_running(db, reg, limit=5, max_batches=2) == {}
