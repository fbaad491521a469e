"""Flows under kill -9: real worker processes killed again and again while a graph runs.

The graph: a fan-out of steps joined by one job, and chains of steps one after another.
The worker is killed with SIGKILL at moments that fall inside claims, handlers and the
finish statements that release dependents (and between a finish and the release that
follows it, on the completer's autocommit connection); each time a new one takes over.
The oracle (tests/apps/flow_app.py records every execution's start): no dependent ever
started before every parent had completed, and at the end every job completed: none is
left waiting after its parents completed. The join read every parent's result.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from jobwarden import At, JobSpec, enqueue_many
from tests.apps.flow_app import create_tables
from tests.helpers import wait_for

pytestmark = pytest.mark.chaos

FAN = 60
CHAINS, CHAIN_LENGTH = 6, 8


def graph() -> list[JobSpec]:
    specs = [JobSpec("flow.step", {}) for _ in range(FAN)]
    specs.append(JobSpec("flow.join", {}, after=[At(i) for i in range(FAN)]))
    for _ in range(CHAINS):
        first = len(specs)
        specs.append(JobSpec("flow.step", {"sleep": 0.05}))
        for i in range(1, CHAIN_LENGTH):
            specs.append(JobSpec("flow.step", {"sleep": 0.05}, after=[At(first + i - 1)]))
    return specs


def test_no_dependent_starts_early_and_none_is_left_waiting_under_kill_9(
        workers, chaos_db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_DUTY_INTERVAL", "0.5")  # recovery and repair, quickly
    with psycopg.connect(chaos_db) as conn:
        create_tables(conn)
        ids = enqueue_many(conn, graph())
        conn.commit()
    join_id = ids[FAN]
    for kill in range(8):
        worker = workers.start("tests.apps.flow_app", concurrency=4, poll_interval=0.05)
        time.sleep(0.4 + 0.15 * (kill % 3))
        worker.kill()
    workers.start("tests.apps.flow_app", concurrency=4, poll_interval=0.05)

    def settled() -> bool:
        with psycopg.connect(chaos_db) as c:
            return c.execute("SELECT bool_and(status = 'completed') FROM background_jobs"
                             ).fetchone()[0]
    wait_for(settled, timeout=120, message="every job of the graph to complete")

    with psycopg.connect(chaos_db) as conn:
        early = conn.execute("""
            SELECT e.job_id, e.parent_id FROM job_dependencies e
            JOIN background_jobs p ON p.id = e.parent_id
            WHERE (SELECT min(s.at) FROM flow_starts s WHERE s.job_id = e.job_id)
                  < p.completed_at
        """).fetchall()
        assert early == []
        assert conn.execute("SELECT count(*) FROM job_dependencies WHERE released_at IS NULL"
                            ).fetchone()[0] == 0
        results = conn.execute("SELECT results FROM flow_joins WHERE job_id = %s",
                               [join_id]).fetchone()[0]
        assert results == {str(i): {"step": i} for i in ids[:FAN]}
