"""The update trigger's join of a statement's old and new rows is a hash join however
many rows its session's first statement held (migration 0069).

PL/pgSQL plans the trigger's statement once per session, estimating each transition
table by the rows it holds at that first firing. A worker that starts idle claims one job
at a time, and its sessions used to keep a nested loop for the join: for a later batch
of 200 that compared 200 × 200 rows, and the worker drained a backlog at less than half
the rate of one started on it. Here a session claims one job first, then 200, and
auto_explain reports the trigger's plans to the client.
"""

from __future__ import annotations

import psycopg

from tests.helpers import explained
from worker import JobSpec, enqueue_many
from worker.engine.producer import claim


def test_the_update_trigger_keeps_its_hash_join_setting(conn):
    (config,) = conn.execute("SELECT proconfig FROM pg_proc "
                             "WHERE proname = 'jobwarden_rollup_update'").fetchone()
    assert "enable_nestloop=off" in config and "jit=off" in config, config


def test_a_session_whose_first_claim_took_one_job_joins_a_later_batch_by_hash(clean_db):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        enqueue_many(conn, [JobSpec("plans.noop", {"i": i}) for i in range(201)])
        kw = dict(types=["plans.noop"], leases=[30.0], queues=None, worker_id="w")
        plans = explained(conn, nested=True)
        assert len(claim(conn, limit=1, **kw)) == 1  # the trigger's statement is planned
        plans.clear()
        assert len(claim(conn, limit=200, **kw)) == 200
    counted = [p for p in plans if "job_count_deltas" in p]
    assert counted, plans
    assert all("Hash Join" in p for p in counted), counted
    assert not any("Nested Loop" in p for p in counted), counted
