"""Statements that lock several running jobs lock them in job-id order, whatever the
plan: two of them (a worker's heartbeat and its completer's batch, or its hand-back)
then wait for each other instead of deadlocking (40P01).

Each test holds the lowest job's row lock in one transaction, starts the statement under
test on the jobs given highest id first, waits until it blocks, and then checks that the
higher job's row is still free. A statement that had locked the higher row first (in the
input's order, or in the heap's: the lower job's row was rewritten, so it now lies after
the other) would hold it while waiting: the pattern of a deadlock.
"""

from __future__ import annotations

import threading

import psycopg
import pytest

from tests.helpers import wait_for
from worker import Registry, enqueue, job
from worker.engine.completer import finish_params
from worker.engine.producer import claim
from worker.store.queries import Q, batch_params

LEASE = 30.0
FILLER = 20_000  # other workers' running jobs


@pytest.fixture
def running(clean_db):
    """Two running jobs, (lower id, higher id) as (id, execution_id); the lower one's row
    rewritten so that the heap holds it after the higher one."""
    reg = Registry()

    @job("locks.noop", lease=LEASE, registry=reg)
    def noop(ctx, payload):
        raise AssertionError("driven by the test")

    with psycopg.connect(clean_db, autocommit=True) as conn:
        # A table of a realistic size (and never analyzed): the planner then scans the
        # running jobs in heap order and hashes the statement's rows. On a tiny table it
        # walks the rows in the order given, and the test would prove nothing.
        conn.execute("INSERT INTO background_jobs (queue, type, payload, status, execution_id, "
                     "lease_seconds, lease_expires_at) "
                     "SELECT 'filler', 'locks.filler', '{}', 'running', gen_random_uuid(), "
                     "3600, now() + interval '1 hour' FROM generate_series(1, %s)", [FILLER])
        for _ in range(2):
            enqueue(conn, "locks.noop", {})
        jobs = claim(conn, types=["locks.noop"], leases=[LEASE], queues=None, limit=2,
                     worker_id="worker-a")
        low, high = sorted((j.id, j.execution_id) for j in jobs)
        conn.execute("UPDATE background_jobs SET lease_expires_at = lease_expires_at + interval '1 s' "
                     "WHERE id = %s", [low[0]])
        order = [r[0] for r in conn.execute(
            "SELECT id FROM background_jobs WHERE type = 'locks.noop' ORDER BY ctid")]
        assert order == [high[0], low[0]]
    return low, high


def assert_waits_holding_nothing_higher(url: str, low, high, statement, params) -> None:
    with psycopg.connect(url) as holder, psycopg.connect(url) as tested, \
            psycopg.connect(url, autocommit=True) as probe:
        holder.execute("SELECT 1 FROM background_jobs WHERE id = %s FOR UPDATE", [low[0]])
        pid = tested.info.backend_pid
        errors = []

        def run():
            try:
                tested.execute(statement, params)
                tested.rollback()
            except Exception as exc:  # noqa: BLE001 - reported by the test below
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            wait_for(lambda: probe.execute(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                [pid]).fetchone()[0], message="the statement to wait for the lower job")
            try:
                probe.execute("SELECT 1 FROM background_jobs WHERE id = %s FOR UPDATE NOWAIT",
                              [high[0]])
            except psycopg.errors.LockNotAvailable:
                pytest.fail("the statement locked a higher job before the lowest one")
        finally:
            holder.rollback()
            thread.join(timeout=10)
        assert errors == []


def test_a_heartbeat_locks_its_jobs_in_id_order(clean_db, running):
    low, high = running
    rows = [{"id": j, "execution_id": str(e), "progress": None, "checkpoint": None}
            for j, e in (high, low)]
    assert_waits_holding_nothing_higher(clean_db, low, high, Q.heartbeat_executions,
                                        batch_params(rows, id_key="id"))


def test_a_batch_of_outcomes_locks_its_jobs_in_id_order(clean_db, running):
    low, high = running
    rows = [{"job_id": j, "execution_id": e, "status": "completed", "outcome": "completed",
             "error_code": None, "error": None, "delay": 0.0, "progress": None,
             "checkpoint": None} for j, e in (high, low)]
    assert_waits_holding_nothing_higher(clean_db, low, high, Q.finish_executions,
                                        finish_params(rows))


def test_a_hand_back_locks_its_jobs_in_id_order(clean_db, running):
    """A hand-back takes the same statement as a batch of outcomes, with its own rows."""
    low, high = running
    rows = [{"job_id": j, "execution_id": e, "status": "pending", "outcome": "handed_back",
             "error_code": None, "error": None, "delay": 0.0, "progress": '{"done": 1}',
             "checkpoint": None} for j, e in (high, low)]
    assert_waits_holding_nothing_higher(clean_db, low, high, Q.finish_executions,
                                        finish_params(rows))
