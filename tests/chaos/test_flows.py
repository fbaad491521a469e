"""Flows under kill -9: real worker processes killed again and again while a graph runs.

The graph: a fan-out of steps joined by one job, and chains of steps one after another.
The worker is killed with SIGKILL at moments that fall inside claims, handlers and the
finish statements that release dependents (and between a finish and the release that
follows it, on the completer's autocommit connection); each time a new one takes over.
The oracle (tests/apps/flow_app.py records every execution's start): no dependent ever
started before every parent had completed, and at the end every job completed: none is
left waiting after its parents completed. The join read every parent's result.

PostgreSQL restarted (a private cluster: `pg_ctl restart -m fast`, `-m immediate`, then a
crash that outlasts the leases) while the parents of a fan-in finish, some of them lost
in the crash or failing an attempt, and run again; the parents are the members of a
batch with callbacks. The same oracle, and each callback enqueued once, with the
batch's counts equal to a count over its members.

And two parents on two queues, each served by a worker process of its own, that finish
at the same moment: their finish statements, in two processes, reach their dependent's
row together, and it is released once and runs once.
"""

from __future__ import annotations

import time

import psycopg
import pytest

from jobwarden import At, JobSpec, enqueue_many, open_batch
from tests.apps import batch_app
from tests.apps.flow_app import create_tables
from tests.chaos.conftest import deadline_passed
from tests.helpers import status_counts, wait_for

pytestmark = pytest.mark.chaos

FAN = 60
CHAINS, CHAIN_LENGTH = 6, 8
#: The restart's fan-in: parents (a batch's members), each dependent after OVERLAP of them
#: (every parent has OVERLAP // STRIDE dependents), and a join after every dependent.
PARENTS, OVERLAP, STRIDE = 240, 40, 20
#: Every FLAKY-th parent fails its first attempt: back to pending, it must hold its
#: dependents as a parent lost in the crash does.
FLAKY = 24
#: When (the share of the parents completed) and how PostgreSQL restarts, and for how
#: long it stays down (seconds; past the parents' 2 s lease: their executions are lost).
RESTARTS = ((0.2, "fast", 0.0), (0.4, "immediate", 0.0), (0.6, "immediate", 2.5))
#: Pairs of parents, one on each queue, each pair with one dependent.
PAIRS = 40


def graph() -> list[JobSpec]:
    specs = [JobSpec("flow.step", {}) for _ in range(FAN)]
    specs.append(JobSpec("flow.join", {}, after=[At(i) for i in range(FAN)]))
    for _ in range(CHAINS):
        first = len(specs)
        specs.append(JobSpec("flow.step", {"sleep": 0.05}))
        for i in range(1, CHAIN_LENGTH):
            specs.append(JobSpec("flow.step", {"sleep": 0.05}, after=[At(first + i - 1)]))
    return specs


def all_completed(url: str, jobs: int, timeout: float) -> None:
    """Wait until all `jobs` have completed; at the deadline, fail with the count of each
    status (how many were left waiting)."""
    deadline = time.monotonic() + timeout
    while (counts := status_counts(url)) != {"completed": jobs}:
        assert time.monotonic() < deadline, f"after {timeout:.0f}s, jobs by status: {counts}"
        time.sleep(0.2)


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


def test_two_parents_on_two_queues_finishing_at_once_release_their_dependent_once(
        workers, chaos_db):
    with psycopg.connect(chaos_db) as conn:
        create_tables(conn)
        specs = []
        for n in range(PAIRS):  # a pair's parents next to each other: claimed together
            specs += [JobSpec("flow.pair", {"pair": n}, queue="left"),
                      JobSpec("flow.pair", {"pair": n}, queue="right"),
                      JobSpec("flow.step", {}, queue=("left", "right")[n % 2],
                              after=[At(3 * n), At(3 * n + 1)])]
        ids = enqueue_many(conn, specs)
        conn.commit()
    dependents = ids[2::3]
    for queue in ("left", "right"):
        workers.start("tests.apps.flow_app", concurrency=4, poll_interval=0.05,
                      options=("--queues", queue))

    all_completed(chaos_db, len(ids), timeout=60)

    with psycopg.connect(chaos_db) as conn:
        # Each pair's parents ran at once, on two workers (both had started before either
        # returned), and finished within this many milliseconds of each other:
        apart = conn.execute("""
            SELECT count(DISTINCT p.worker_id) = 2 AS two_workers,
                   extract(epoch FROM max(p.completed_at) - min(p.completed_at)) * 1000
            FROM job_dependencies e JOIN background_jobs p ON p.id = e.parent_id
            WHERE e.job_id = ANY(%s) GROUP BY e.job_id
        """, [dependents]).fetchall()
        assert all(two for two, _ in apart), "a pair ran on one worker"
        gaps = sorted(ms for _, ms in apart)
        print(f"{PAIRS} pairs: their finishes {gaps[len(gaps) // 2]:.1f} ms apart (median), "
              f"{gaps[-1]:.1f} ms at most")
        # Each dependent: released once (its count at zero, both edges released) and run
        # once (one attempt, one start), after both its parents completed.
        rows = conn.execute("""
            SELECT d.id, d.waiting_on, d.attempts,
                   (SELECT count(*) FROM flow_starts s WHERE s.job_id = d.id),
                   (SELECT count(*) FROM job_dependencies e
                    WHERE e.job_id = d.id AND e.released_at IS NOT NULL),
                   (SELECT min(s.at) FROM flow_starts s WHERE s.job_id = d.id)
                   >= (SELECT max(p.completed_at) FROM job_dependencies e
                       JOIN background_jobs p ON p.id = e.parent_id WHERE e.job_id = d.id)
            FROM background_jobs d WHERE d.id = ANY(%s) ORDER BY d.id
        """, [dependents]).fetchall()
        assert rows == [(d, 0, 1, 1, 2, True) for d in dependents]


def restart_graph(conn) -> tuple[int, list[int], list[int], int]:
    """The batch's id, its members (the parents), the dependents and the join."""
    callbacks = {f"on_{event}": JobSpec("batch.callback", {})
                 for event in ("complete", "success", "failure")}
    with open_batch(conn, description="parents", **callbacks) as batch:
        parents = batch.enqueue_many([JobSpec("flow.step", {"sleep": 0.05,
                                                            "fail_first": n % FLAKY == 0})
                                      for n in range(PARENTS)])
    later = [JobSpec("flow.step", {}, after=[parents[(k + i) % PARENTS]
                                             for i in range(OVERLAP)])
             for k in range(0, PARENTS, STRIDE)]
    later.append(JobSpec("flow.join", {}, after=[At(i) for i in range(len(later))]))
    *dependents, join = enqueue_many(conn, later)
    return batch.id, parents, dependents, join


def test_a_postgresql_restart_while_parents_finish_starts_no_dependent_early(
        workers, private_cluster, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_DUTY_INTERVAL", "0.5")  # recovery and repair, quickly
    url = private_cluster.url
    with psycopg.connect(url) as conn:
        create_tables(conn)
        batch_app.create_tables(conn)
        batch, parents, dependents, join = restart_graph(conn)
        conn.commit()
    started = time.monotonic()
    pool = [workers.start("tests.apps.flow_app", concurrency=4, poll_interval=0.05, url=url)
            for _ in range(2)]

    def parents_completed(share: float):
        def check() -> bool:
            with psycopg.connect(url) as c:
                return c.execute("SELECT count(*) FROM background_jobs WHERE id = ANY(%s) "
                                 "AND status = 'completed'", [parents]).fetchone()[0] \
                    >= share * PARENTS
        return check
    restarts = []
    for share, mode, down in RESTARTS:
        wait_for(parents_completed(share), timeout=30, interval=0.02,
                 message=f"{share:.0%} of the parents to complete")
        with psycopg.connect(url) as c:
            restarts.append(c.execute("SELECT count(*) FILTER (WHERE status = 'completed'), "
                                      "count(*) FILTER (WHERE status = 'running') "
                                      "FROM background_jobs WHERE id = ANY(%s)",
                                      [parents]).fetchone())
        if not down:
            private_cluster.restart(mode)
            continue
        private_cluster.stop(mode)
        wait_for(deadline_passed(down), timeout=10, message="the outage to outlast a lease")
        private_cluster.start()
    all_completed(url, PARENTS + len(dependents) + 1 + 2, timeout=60)  # and two callbacks
    assert all(w.alive() for w in pool), "a worker died with the database"

    with psycopg.connect(url) as conn:
        lost, retried = conn.execute(
            "SELECT count(*) FILTER (WHERE outcome = 'worker_lost'), "
            "count(*) FILTER (WHERE outcome <> 'completed') FROM job_executions").fetchone()
        print(f"restarted with (completed, running) parents {restarts}; all done "
              f"{time.monotonic() - started:.1f}s after the workers started; {lost} "
              f"executions lost, {retried} not completed")
        # No dependent started before every one of its parents had completed,
        early = conn.execute("""
            SELECT e.job_id, e.parent_id FROM job_dependencies e
            JOIN background_jobs p ON p.id = e.parent_id
            WHERE (SELECT min(s.at) FROM flow_starts s WHERE s.job_id = e.job_id)
                  < p.completed_at
        """).fetchall()
        assert early == []
        # none is left with an edge unreleased, and the join read every dependent's result.
        assert conn.execute("SELECT count(*) FROM job_dependencies WHERE released_at IS NULL"
                            ).fetchone()[0] == 0
        results = conn.execute("SELECT results FROM flow_joins WHERE job_id = %s",
                               [join]).fetchone()[0]
        assert sorted(results) == sorted(str(d) for d in dependents)
        # Each callback due enqueued once (no failure: none is due), and each ran.
        callbacks = conn.execute(
            "SELECT payload #>> '{batch,event}', count(*) FROM background_jobs "
            "WHERE type = 'batch.callback' GROUP BY 1 ORDER BY 1").fetchall()
        assert callbacks == [("complete", 1), ("success", 1)]
        assert conn.execute("SELECT count(DISTINCT job_id) FROM batch_callback_runs"
                            ).fetchone()[0] == 2
        # The batch's counts, and those its callbacks carried, are a count over its members.
        truth = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'completed'), "
            "count(*) FILTER (WHERE status = 'failed') FROM background_jobs "
            "WHERE batch_id = %s", [batch]).fetchone()
        assert truth == (PARENTS, PARENTS, 0)
        assert conn.execute("SELECT members, completed, failed FROM job_batches WHERE id = %s",
                            [batch]).fetchone() == truth
        carried = conn.execute(
            "SELECT DISTINCT payload #> '{batch,members}', payload #> '{batch,completed}', "
            "payload #> '{batch,failed}' FROM batch_callback_runs").fetchall()
        assert carried == [truth]
